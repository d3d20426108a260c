import { toolPolicyNameOf } from '@kars/policy-api';
import type { KarsSandbox } from '@kars/policy-api';
import { canonicalDigest, egressApprovalsConfigMapName, inferencePolicyConfigMapName, mergedAllowlist, toolPolicyConfigMapName } from '@kars/policy-compiler';
import { parseApprovals, parseInferencePolicy, parseToolPolicy } from '../load.js';
import type { LoadOutcome } from '../load.js';
import type { InferenceRules, ToolRules } from '../snapshot.js';
import type { EgressParts, PolicyState } from '../state.js';

/** Reads a ConfigMap's data by name (from a watch cache or a mounted directory). */
export type DataReader = (configMapName: string) => Record<string, string> | undefined;

/**
 * Recompute everything this sandbox's router enforces from the sandbox and its compiled
 * ConfigMaps, and load it into `state`. Digests are computed over the exact bytes, with the same
 * canonical function as the controller. Returns when the next approval expires (epoch ms), so the
 * caller can recompute then.
 */
export function loadFromConfigMaps(state: PolicyState, sandbox: KarsSandbox | undefined, read: DataReader, sourcePrefix: string): number | undefined {
  if (!sandbox) {
    state.setInference({ kind: 'none' });
    state.setTools({ kind: 'none' });
    state.setEgress({ kind: 'none' });
    return undefined;
  }
  // InferencePolicy
  const ip = sandbox.spec?.inferenceRef?.name;
  let inference: LoadOutcome<InferenceRules> = { kind: 'none' };
  if (ip) {
    const cm = inferencePolicyConfigMapName(ip);
    const body = read(cm)?.['inference-policy.json'];
    const source = `${sourcePrefix}${cm}/inference-policy.json`;
    if (body === undefined) inference = { kind: 'none' };
    else {
      const parsed = parseInferencePolicy(body);
      inference = parsed.ok ? { kind: 'loaded', value: parsed.rules, digest: canonicalDigest('inference-policy.json', body), source } : { kind: 'error', error: parsed.error, source };
    }
  }
  state.setInference(inference);
  // ToolPolicy (AgtProfile echo)
  const tp = toolPolicyNameOf(sandbox);
  let tools: LoadOutcome<ToolRules> = { kind: 'none' };
  if (tp) {
    const cm = toolPolicyConfigMapName(tp);
    const data = read(cm);
    const source = `${sourcePrefix}${cm}/agt-profile.yaml`;
    const profile = data?.['profile.json'];
    if (profile !== undefined) {
      const agt = data?.['agt-profile.yaml'];
      const parsed = parseToolPolicy(tp, profile, agt);
      if (!parsed.ok) tools = { kind: 'error', error: parsed.error, source };
      // A ToolPolicy without an AGT profile is enforced, but echoes no AgtProfile digest.
      else tools = { kind: 'loaded', value: parsed.rules, digest: agt === undefined ? null : canonicalDigest('agt-profile.yaml', agt), source };
    }
  }
  state.setTools(tools);
  // Egress: baseline from the sandbox ∪ active approvals; echoed even when empty, so expiries converge.
  const cm = egressApprovalsConfigMapName(sandbox.metadata.name ?? '');
  const approvals = parseApprovals(read(cm) ?? {});
  const now = Date.now();
  const baseline = (sandbox.spec?.networkPolicy?.allowedEndpoints ?? []).map((e) => ({ host: e.host.toLowerCase(), port: e.port ?? 443 }));
  const active = approvals.entries.filter((e) => (e.expiresAtMs ?? Infinity) > now);
  const merged = mergedAllowlist(baseline, [active.map((e) => ({ host: e.host, port: e.port }))]);
  const parts: EgressParts = { baseline, approvals: active };
  // Unparseable approval files are skipped (not fatal) and reported as the last error.
  state.setEgress({ kind: 'loaded', value: parts, digest: merged.digest, source: `${sourcePrefix}${cm}`, ...(approvals.errors.length > 0 ? { warning: approvals.errors.join('; ') } : {}) });
  const future = approvals.entries.map((e) => e.expiresAtMs ?? Infinity).filter((t) => t > now);
  return future.length > 0 ? Math.min(...future) : undefined;
}
