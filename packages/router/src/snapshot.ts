/**
 * The policy a router enforces, as one immutable snapshot. Every request takes the current
 * snapshot once and uses it to the end (a stream in flight keeps the snapshot it started with);
 * a reload swaps in a whole new snapshot atomically.
 */

import type { EgressEntry, InferenceRules, ToolRules } from '@kars/policy-compiler/runtime';
import type { PolicyRef } from './decisions/record.js';

/** The rule types are the wire contract's (`@kars/policy-compiler` router-view), re-exported here. */
export type { AgtRule, EgressEntry, GuardrailStage, InferenceRules, Severity, ToolRules } from '@kars/policy-compiler/runtime';

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
  /**
   * Kinds whose bound policy this router refused (a NACK) while it had no earlier good one to keep
   * enforcing, with the refusal. Requests on such a surface fail closed: the agent never runs
   * unpoliced because its policy could not be enforced.
   */
  refused: Readonly<{ inference?: string; tools?: string }>;
  /**
   * The policies this snapshot enforces, per surface, with their digests (what a decision record
   * names, and the `x-kars-policy-digest` header says). Absent on hand-made snapshots (tests): the
   * surface then reads as having no policy bound.
   */
  policies?: SnapshotPolicies;
  /**
   * The dry-run policies this router records for its sandbox (ADR 0050): decided on every request
   * as if enforced, their would-be decisions recorded, never enforced. Absent: none.
   */
  dryRun?: DryRunPolicies;
}

/** The dry-run policies of a snapshot, each with its rules and the refs its records name. */
export interface DryRunPolicies {
  inference: ReadonlyArray<{ rules: InferenceRules; refs: readonly PolicyRef[] }>;
  tools: ReadonlyArray<{ rules: ToolRules; refs: readonly PolicyRef[] }>;
}

/** The policies of a snapshot per surface, and the `x-kars-policy-digest` value of each (built once per snapshot). */
export interface SnapshotPolicies {
  inference: readonly PolicyRef[];
  tools: readonly PolicyRef[];
  egress: readonly PolicyRef[];
  header: Readonly<{ inference: string; tools: string; egress: string }>;
}

/** An empty snapshot: no inference rules, no tool rules, no egress. */
export const EMPTY_SNAPSHOT: PolicySnapshot = Object.freeze({
  inference: undefined,
  tools: [],
  egress: [],
  loadedAtMs: 0,
  refused: {},
}) as PolicySnapshot;

/** Gives handlers the snapshot to use for one request. */
export type SnapshotSource = () => PolicySnapshot;
