/**
 * The policy a router enforces, as one immutable snapshot. Every request takes the current
 * snapshot once and uses it to the end (a stream in flight keeps the snapshot it started with);
 * a reload swaps in a whole new snapshot atomically.
 */

export type Severity = 'Safe' | 'Low' | 'Medium' | 'High';

/** The compiled InferencePolicy (`inference-policy.json`), parsed liberally: wrong types read as null. */
export interface InferenceRules {
  tokenBudget: { perRequestTokens: number | null; dailyTokens: number | null; monthlyTokens: number | null } | null;
  contentSafety: { hate: Severity | null; selfHarm: Severity | null; sexual: Severity | null; violence: Severity | null; requirePromptShields: boolean | null } | null;
  modelPreference: { primary: { provider: string; deployment: string }; fallback: Array<{ provider: string; deployment: string }> } | null;
  provider: string | null;
  displayName: string | null;
}

/** One AGT rule of the documented subset: allow or deny tool names matching a glob (`*`, `?`). */
export interface AgtRule {
  effect: 'allow' | 'deny';
  /** Glob over `<tool>` or `<mcpServer>/<tool>`. */
  pattern: string;
  reason?: string;
}

/** The compiled ToolPolicy (`profile.json` + `agt-profile.yaml`). */
export interface ToolRules {
  name: string;
  appliesTo: { tool: string | null; mcpServer: string | null };
  rateLimit: { rps: number | null; burst: number | null } | null;
  approval: { mode: 'never' | 'always' | 'aboveThreshold' | null } | null;
  /** AGT rules in order (first match wins) and the default when nothing matches. */
  agt: { rules: AgtRule[]; defaultEffect: 'allow' | 'deny' } | null;
}

/** One allowed egress endpoint, with the approval that granted it (if any) and its expiry. */
export interface EgressEntry {
  host: string;
  port: number;
  /** Undefined for the baseline; the approval name otherwise. */
  approval?: string;
  /** Epoch ms; undefined for the baseline. The router checks it itself, as defence in depth. */
  expiresAtMs?: number;
}

/** Everything a router enforces for its sandbox at one moment. */
export interface PolicySnapshot {
  /** undefined: no InferencePolicy bound (requests pass with router defaults). */
  inference: InferenceRules | undefined;
  /** Tool policies that may apply; the most specific matching one is used per call. */
  tools: ToolRules[];
  /** Baseline ∪ active approvals. Empty means no egress at all (fail closed). */
  egress: EgressEntry[];
  /** When this snapshot was built (epoch ms). */
  loadedAtMs: number;
}

/** An empty snapshot: no inference rules, no tool rules, no egress. */
export const EMPTY_SNAPSHOT: PolicySnapshot = Object.freeze({ inference: undefined, tools: [], egress: [], loadedAtMs: 0 }) as PolicySnapshot;

/** Gives handlers the snapshot to use for one request. */
export type SnapshotSource = () => PolicySnapshot;
