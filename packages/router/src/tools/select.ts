/**
 * Which ToolPolicy governs one tool call: the most specific policy whose `appliesTo` matches.
 *
 * Matching: `appliesTo.tool` matches when it equals the tool name ignoring case (callers pass the
 * lower-cased name, see `names.ts`), is `"*"`, or is null (any).
 * `appliesTo.mcpServer` matches when it equals the server name, or is `"*"` or null (any); a
 * named server never matches a call whose server is unknown.
 *
 * Specificity, highest first: tool exact and server exact, then tool exact, then server exact,
 * then wildcards. Ties go to the policy that comes first in the list (the loader's order).
 * Only the selected policy applies; less specific ones are not consulted.
 */
import type { ToolRules } from '../snapshot.js';

function isAny(v: string | null): boolean {
  return v === null || v === '*';
}

/** Specificity of `policy` for this call, or -1 when it does not apply. */
export function specificity(policy: ToolRules, server: string | undefined, tool: string): number {
  const { tool: t, mcpServer: s } = policy.appliesTo;
  const toolExact = t !== null && t !== '*' && t.toLowerCase() === tool.toLowerCase();
  const serverExact = !isAny(s) && server !== undefined && s === server;
  if (!isAny(t) && !toolExact) return -1;
  if (!isAny(s) && !serverExact) return -1;
  return (toolExact ? 2 : 0) + (serverExact ? 1 : 0);
}

/** The policy that governs `tool` on `server`, or undefined when none applies. Pure. */
export function selectToolPolicy(tools: readonly ToolRules[], server: string | undefined, tool: string): ToolRules | undefined {
  let best: ToolRules | undefined;
  let bestScore = -1;
  for (const policy of tools) {
    const score = specificity(policy, server, tool);
    if (score > bestScore) {
      best = policy;
      bestScore = score;
    }
  }
  return best;
}
