/**
 * The status of an InferencePolicy or ToolPolicy, decided from what one reconcile read (issue 22
 * item 8): the spec's validity and compile result, the routers' echoes, the previous status and
 * the clock. Pure: `reconcile-policy.ts` reads the caches, calls these, and does the writes.
 *
 * Guarantees:
 * - `loadedDigest` is the compiled digest only when the state is Confirmed (Ready means enforced);
 *   an invalid spec sets it to null and leaves `compiledDigest` (the last good one) as it was.
 * - `lastCompiledAt` moves only when the compiled digest changes (absent and null are the same
 *   digest), so an unchanged policy's status is not rewritten.
 * - `propagation.maxMs` never decreases.
 */
import type { Condition, Propagation } from '@kars/policy-api';
import { decideEnforcementOf } from './enforcement.js';
import type { EnforcementState, ExpectedEcho, SandboxEcho } from './enforcement.js';
import { rfc3339 } from './status.js';
import { nextLeaseExpiryMs } from './context.js';

/** Requeue periods (contract §8), in milliseconds. */
export const REQUEUE = { degraded: 60_000, awaiting: 15_000, confirmed: 300_000 } as const;

/** The status fields both policy kinds share, as the controller writes them. */
export interface PolicyStatusFields {
  observedGeneration?: number;
  conditions?: Condition[];
  compiledDigest?: string | null;
  loadedDigest?: string | null;
  lastCompiledAt?: string;
  propagation?: Propagation;
}

/** A status as written: the shared fields and the kind-specific ones (`versionHash`, `agtProfileDigest`, …). */
export type WrittenStatus = PolicyStatusFields & Record<string, unknown>;

/** What one reconcile learnt about the spec. */
export type CompileOutcome =
  | { ok: false; reason: string; message: string }
  | {
      ok: true;
      /** `status.compiledDigest` (undefined: the policy has none). */
      digest: string | undefined;
      /** Every digest the routers must echo before it is Ready (none: NotApplicable). */
      expect: readonly ExpectedEcho[];
      /** Kind-specific status fields. */
      extra: Record<string, unknown>;
      /** What each referencing sandbox's routers echo. */
      echoes: readonly SandboxEcho[];
    };

/** The enforcement state of a compile outcome (the Degraded state of an invalid spec). */
export function enforcementOf(outcome: CompileOutcome, nowMs: number): EnforcementState {
  if (!outcome.ok) return { kind: 'Degraded', reason: outcome.reason, message: outcome.message };
  if (outcome.expect.length === 0) return { kind: 'NotApplicable' };
  return decideEnforcementOf(outcome.expect, [...outcome.echoes], nowMs);
}

/** Whether a state counts as Ready (the propagation tracker then records edit → enforced). */
export function isReadyState(state: EnforcementState): boolean {
  return state.kind === 'Confirmed' || state.kind === 'NotApplicable';
}

/** Everything {@link decidePolicyStatus} reads. */
export interface PolicyStatusInput {
  prev: PolicyStatusFields | undefined;
  generation: number;
  nowMs: number;
  outcome: CompileOutcome;
  /** {@link enforcementOf} the outcome. */
  state: EnforcementState;
  /** Compile-and-write time the propagation tracker measured for this generation, if any. */
  compileMs: number | undefined;
  /** Edit → every router echoing, when the state is Ready and the tracker measured it. */
  enforcedMs: number | undefined;
  /** Requeue period when no sandbox refers to the policy. */
  noReferrersRequeueMs: number;
}

/** The status to apply (phase and conditions are added when it is written) and when to look again. */
export interface PolicyStatusDecision {
  status: WrittenStatus;
  requeueMs: number;
}

/** Decide the policy's status fields and requeue period. Pure. */
export function decidePolicyStatus(i: PolicyStatusInput): PolicyStatusDecision {
  const status: WrittenStatus = { ...(i.prev ?? {}), observedGeneration: i.generation };
  if (!i.outcome.ok) {
    status.loadedDigest = null;
    return { status, requeueMs: REQUEUE.degraded };
  }
  const { digest, extra, echoes } = i.outcome;
  // A null digest is never stored (server-side apply removes null members): absent and null are the same digest,
  // or every reconcile of a policy without one (a ToolPolicy with no AGT profile) would rewrite lastCompiledAt.
  if ((i.prev?.compiledDigest ?? null) !== (digest ?? null) || !i.prev?.lastCompiledAt) status.lastCompiledAt = rfc3339(i.nowMs);
  Object.assign(status, extra, { compiledDigest: digest ?? null });
  status.loadedDigest = i.state.kind === 'Confirmed' ? (digest ?? null) : null;
  const propagation: Propagation = { ...(i.prev?.propagation ?? {}) };
  if (i.compileMs !== undefined) propagation.lastCompileMs = i.compileMs;
  if (isReadyState(i.state) && i.enforcedMs !== undefined) {
    propagation.lastMs = i.enforcedMs;
    propagation.maxMs = Math.max(propagation.maxMs ?? 0, i.enforcedMs);
  }
  status.propagation = propagation;
  return { status, requeueMs: requeueFor(i.state, i.noReferrersRequeueMs, echoes, i.nowMs) };
}

/** The requeue period of a state, brought forward to just after the soonest router lease expiry. */
function requeueFor(state: EnforcementState, noReferrersMs: number, echoes: readonly SandboxEcho[], nowMs: number): number {
  let ms: number =
    state.kind === 'Rejected' || state.kind === 'Degraded'
      ? REQUEUE.degraded
      : state.kind === 'Awaiting'
        ? REQUEUE.awaiting
        : state.kind === 'NoSandboxesReferencing'
          ? noReferrersMs
          : REQUEUE.confirmed;
  const expiry = nextLeaseExpiryMs(
    echoes.flatMap((e) => e.routers),
    nowMs,
  );
  if (expiry !== undefined) ms = Math.min(ms, Math.max(50, expiry - nowMs + 50));
  return ms;
}
