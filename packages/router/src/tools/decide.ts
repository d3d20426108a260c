/**
 * The decision for one tool, as plain functions over a snapshot: {@link decideToolCall} for a
 * `tools/call`, {@link isToolListed} for an entry of a `tools/list` result.
 *
 * Order for a call, first refusal wins: the selected policy's AGT rules (`tool_denied`), its pins
 * (`tool_definition_changed`, `tool_definition_unseen`, `tool_not_pinned`; `pins.ts`, ADR 0043), its
 * `approval.mode: always` (`approval_required`), its `rateLimit` (`rate_limited`). A refused call
 * takes no rate-limit token. With no policy selected the call is allowed.
 *
 * Caveats: `approval.mode: aboveThreshold` concerns AP2 spend amounts, which this gateway does not
 * evaluate; such calls pass here.
 */
import type { ToolRules } from '../snapshot.js';
import { evaluateAgt, type AgtVerdict } from './agt.js';
import { toolKey } from './names.js';
import type { ToolRateLimiter } from './ratelimit.js';
import { selectToolPolicy } from './select.js';
import { callVerdict, listVerdict, type ListedTool, type PinRefusalCode, type SeenEntry } from './pins.js';

/** Stable JSON-RPC error codes of the gateway (documented in AGT-SUBSET.md). */
export const TOOL_ERROR_CODES = {
  tool_denied: -32001,
  approval_required: -32002,
  rate_limited: -32003,
  upstream_unavailable: -32004,
  tool_definition_changed: -32005,
  tool_not_pinned: -32006,
  tool_definition_unseen: -32007,
} as const;

export type ToolRefusalCode = 'tool_denied' | 'approval_required' | 'rate_limited' | PinRefusalCode;

export type ToolCallDecision =
  | { allowed: true; policy: ToolRules | undefined }
  | { allowed: false; code: ToolRefusalCode; policy: ToolRules; message: string; data: Record<string, unknown> };

function denyReason(verdict: AgtVerdict): string {
  if (verdict.rule === undefined) return 'no rule allows it (default: deny)';
  if (verdict.rule.reason !== undefined && verdict.rule.reason !== '') return verdict.rule.reason;
  return `rule ${verdict.index ?? 0} (deny "${verdict.rule.pattern}")`;
}

/**
 * Whether a `tools/list` entry stays visible: hidden when AGT denies it (`tool_denied`) or, given
 * the listed definition, when its policy's pins do not admit it (`pins.ts`). Approval and rate
 * limits do not hide. `conflicted`: the page lists the name twice with different definitions.
 */
export function isToolListed(
  tools: readonly ToolRules[],
  server: string | undefined,
  tool: string,
  listed?: { entry: ListedTool; conflicted: boolean },
): { listed: true } | { listed: false; policy: ToolRules; reason: string; code: 'tool_denied' | PinRefusalCode } {
  const key = toolKey(tool);
  const policy = selectToolPolicy(tools, server, key);
  if (policy === undefined) return { listed: true };
  if (policy.agt !== null) {
    const verdict = evaluateAgt(policy.agt, server, key);
    if (verdict.effect !== 'allow') return { listed: false, policy, reason: denyReason(verdict), code: 'tool_denied' };
  }
  if (listed !== undefined) {
    const v = listVerdict(policy, server, listed.entry, listed.conflicted);
    if (!v.ok) return { listed: false, policy, reason: v.reason, code: v.code };
  }
  return { listed: true };
}

/**
 * Decide one `tools/call` of a name that passed `checkToolName`. Selection, rules and rate-limit
 * buckets use the lower-cased name, so case variants share one decision (pins excepted: a pinned
 * tool must be called by its pinned spelling). `seen`: what the session last saw listed under the
 * name (`SeenDefinitions.get`); pins refuse a pinned tool without it. Takes a rate-limit token
 * only when the call is allowed.
 */
export function decideToolCall(
  tools: readonly ToolRules[],
  call: { sandbox: string; server: string | undefined; tool: string; seen?: SeenEntry | undefined },
  limiter: ToolRateLimiter,
): ToolCallDecision {
  const { sandbox, server, tool } = call;
  const key = toolKey(tool);
  const policy = selectToolPolicy(tools, server, key);
  if (policy === undefined) return { allowed: true, policy };

  if (policy.agt !== null) {
    const verdict = evaluateAgt(policy.agt, server, key);
    if (verdict.effect === 'deny') {
      const reason = denyReason(verdict);
      return {
        allowed: false,
        code: 'tool_denied',
        policy,
        message: `tool_denied: ${tool} is denied by ToolPolicy ${policy.name}: ${reason}`,
        data: {
          code: 'tool_denied',
          policy: policy.name,
          tool,
          reason,
          ...(verdict.rule === undefined
            ? { rule: null }
            : { rule: { effect: verdict.rule.effect, pattern: verdict.rule.pattern, index: verdict.index ?? 0 } }),
        },
      };
    }
  }

  const pinned = callVerdict(policy, server, tool, call.seen);
  if (!pinned.ok) return { allowed: false, code: pinned.code, policy, message: pinned.message, data: pinned.data };

  if (policy.approval?.mode === 'always') {
    const how =
      `a human must approve each call of ${tool} under ToolPolicy ${policy.name} (approval.mode=always), and this gateway has no approval channel to ask; ` +
      `to let the sandbox call it, an operator changes the policy, e.g. kars toolpolicy apply ${policy.name} --approval-mode never`;
    return {
      allowed: false,
      code: 'approval_required',
      policy,
      message: `approval_required: ${tool} requires approval under ToolPolicy ${policy.name}`,
      data: { code: 'approval_required', policy: policy.name, tool, approvalMode: 'always', howToGetApproval: how },
    };
  }

  if (policy.rateLimit !== null) {
    const taken = limiter.take({ sandbox, policy: policy.name, tool: key }, policy.rateLimit);
    if (!taken.ok) {
      const retry = taken.retryAfterMs === null ? 'the limit does not refill (rps 0)' : `retry after ${taken.retryAfterMs} ms`;
      return {
        allowed: false,
        code: 'rate_limited',
        policy,
        message: `rate_limited: ${tool} exceeded the rate limit of ToolPolicy ${policy.name} (rps ${policy.rateLimit.rps ?? 'unset'}, burst ${policy.rateLimit.burst ?? 'default'}); ${retry}`,
        data: {
          code: 'rate_limited',
          policy: policy.name,
          tool,
          retryAfterMs: taken.retryAfterMs,
          rps: policy.rateLimit.rps,
          burst: policy.rateLimit.burst,
        },
      };
    }
  }
  return { allowed: true, policy };
}
