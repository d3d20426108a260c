/**
 * The router's front door: what happens to an agent request before any handler reads its body.
 * {@link decideAtDoor} is pure (no clock, no I/O): the wiring in `server.ts` gathers the inputs,
 * sends the refusal it returns, counts and records it. The order is the contract's:
 *
 * 1. no complete policy view yet: `policy_not_loaded` (fail closed);
 * 2. the surface's policy was refused with nothing earlier to enforce: `policy_rejected`, or
 *    `guardrail_misconfigured` for a refused guardrail stage (fail closed);
 * 3. the view is older than `--max-staleness`: `policy_stale` under `--on-stale closed`; under
 *    `open` the request passes, marked stale.
 *
 * Bounded resources (the admission gate) come after, in the wiring: they hold state.
 */
import { policyNotLoaded, policyRejected, policyStale, type InferenceRefusal } from './inference/errors.js';
import type { PolicySnapshot } from './snapshot.js';

/** What the door knows of one request. */
export interface DoorInput {
  /** The router has completed a first load. */
  loaded: boolean;
  /** The snapshot the request will be decided under. */
  snapshot: PolicySnapshot;
  /** The request is for an MCP gateway (the ToolPolicy surface), else inference. */
  mcp: boolean;
  /**
   * Milliseconds since the view was last confirmed current (Infinity: never). Read only when a
   * bound is set, so a router without `--max-staleness` pays nothing for it per request.
   */
  viewAgeMs: () => number;
  /** `--max-staleness` in ms; undefined: no bound. */
  maxStalenessMs: number | undefined;
  /** `--on-stale`. */
  onStale: 'closed' | 'open';
}

/** Over `--max-staleness`: the `--on-stale` mode applied, and the view's age that was over. */
export interface StaleView {
  mode: 'closed' | 'open';
  ageMs: number;
}

/** The door's decision; `stale` is set when the view was over the bound. */
export type DoorDecision = { kind: 'refuse'; refusal: InferenceRefusal; stale?: StaleView } | { kind: 'pass'; stale?: StaleView };

/** Decide one request at the door. Pure. */
export function decideAtDoor(i: DoorInput): DoorDecision {
  if (!i.loaded) return { kind: 'refuse', refusal: policyNotLoaded() };
  const refused = refusedFor(i.snapshot, i.mcp);
  if (refused) return { kind: 'refuse', refusal: policyRejected(refused.code, refused.message) };
  if (i.maxStalenessMs === undefined) return { kind: 'pass' };
  const ageMs = i.viewAgeMs();
  if (ageMs <= i.maxStalenessMs) return { kind: 'pass' };
  const stale = { mode: i.onStale, ageMs };
  return i.onStale === 'closed' ? { kind: 'refuse', refusal: policyStale(ageMs, i.maxStalenessMs), stale } : { kind: 'pass', stale };
}

/**
 * The 503 for a surface whose policy was refused with no earlier one to fall back on. A refused
 * guardrail stage answers the contract's `guardrail_misconfigured`; anything else `policy_rejected`.
 */
export function refusedFor(
  snap: PolicySnapshot,
  mcp: boolean,
): { code: 'policy_rejected' | 'guardrail_misconfigured'; message: string } | undefined {
  const reason = mcp ? snap.refused.tools : snap.refused.inference;
  if (reason === undefined) return undefined;
  const kind = mcp ? 'ToolPolicy' : 'InferencePolicy';
  const code = !mcp && reason.startsWith('guardrails[') ? 'guardrail_misconfigured' : 'policy_rejected';
  return { code, message: `this router cannot enforce its ${kind} and has no earlier one to enforce, so it fails closed: ${reason}` };
}
