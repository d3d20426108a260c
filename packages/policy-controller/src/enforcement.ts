import type { Condition, EchoKind, RouterEcho } from '@kars/policy-api';
import { contestedDetail, isLive } from '@kars/policy-api';

/** What one referencing sandbox's routers say about one digest. */
export interface SandboxEcho {
  sandbox: string;
  /** Live routers of that sandbox (leases still valid). */
  routers: RouterEcho[];
}

/** The enforcement state of a policy, as the status reports it (contract §3.3). */
export type EnforcementState =
  | { kind: 'Degraded'; reason: string; message: string }
  | { kind: 'NotApplicable' }
  /** `dryRun`: a DryRun policy whose `appliesTo` selects no sandbox (ADR 0050). */
  | { kind: 'NoSandboxesReferencing'; dryRun?: boolean }
  /** `dryRun`: the routers record (never enforce) the digest: a DryRun policy (ADR 0050). */
  | { kind: 'Confirmed'; total: number; dryRun?: boolean }
  /** A live router refused (NACKed) exactly the compiled digest: it cannot enforce some field. */
  | { kind: 'Rejected'; details: string[] }
  | { kind: 'Awaiting'; confirmed: number; total: number; details: string[] };

/** One digest routers must echo for one kind. */
export interface ExpectedEcho {
  kind: EchoKind;
  digest: string;
  /** A DryRun policy's slot (`<Kind>/<name>`, ADR 0050): read from the echo's dry-run annotation, not its enforced kinds. */
  dryRunSlot?: string;
}

/** What one router echoes for one expectation: the enforced kind's entries, or the dry-run slot's. */
function echoed(
  r: RouterEcho,
  e: ExpectedEcho,
): { got: string | null | undefined; err: string | undefined; rejected: string | undefined; what: string } {
  if (e.dryRunSlot === undefined) return { got: r.digests[e.kind], err: r.errors[e.kind], rejected: r.rejected?.[e.kind], what: e.kind };
  const d = r.dryRun;
  return {
    got: d?.digests[e.dryRunSlot],
    err: d?.errors[e.dryRunSlot],
    rejected: d?.rejected[e.dryRunSlot],
    what: `DryRun ${e.dryRunSlot}`,
  };
}

/**
 * Decide whether every router of every referencing sandbox enforces `digest` for `kind`.
 * A sandbox with no live router counts as not confirmed ("router unreachable"). Pure.
 */
export function decideEnforcement(digest: string, kind: EchoKind, sandboxes: SandboxEcho[], nowMs: number): EnforcementState {
  return decideEnforcementOf([{ kind, digest }], sandboxes, nowMs);
}

/**
 * Decide whether every live router of every referencing sandbox echoes every expected digest.
 * A router that refused exactly an expected digest (its `rejected[kind]`) makes the policy
 * `Rejected`, naming the sandbox, the router instance, the kind and the router's error: the
 * compiled policy cannot become Ready on that router until the policy or the router changes. Pure.
 */
export function decideEnforcementOf(expect: readonly ExpectedEcho[], sandboxes: SandboxEcho[], nowMs: number): EnforcementState {
  if (sandboxes.length === 0)
    return expect.some((e) => e.dryRunSlot !== undefined)
      ? { kind: 'NoSandboxesReferencing', dryRun: true }
      : { kind: 'NoSandboxesReferencing' };
  let confirmed = 0;
  let total = 0;
  const details: string[] = [];
  const rejections: string[] = [];
  for (const sb of sandboxes) {
    // Two processes write this lease (ADR 0024): what it says is not what one router enforces.
    const contested = sb.routers.filter(
      (r) => r.contestedUntilMs !== undefined && r.contestedUntilMs > nowMs && r.renewedAtMs + r.leaseDurationSeconds * 1000 > nowMs,
    );
    for (const r of contested) {
      total++;
      details.push(contestedDetail(sb.sandbox, r.instance, r.contested ?? 'lease written by two processes'));
    }
    const live = sb.routers.filter((r) => isLive(r, nowMs));
    if (live.length === 0 && contested.length === 0) {
      total++;
      details.push(`${sb.sandbox}: router unreachable (no live router lease)`);
      continue;
    }
    for (const r of live) {
      total++;
      let ok = true;
      for (const e of expect) {
        const { digest } = e;
        const { got, err, rejected, what } = echoed(r, e);
        if (got === digest) continue;
        ok = false;
        if (rejected === digest)
          rejections.push(`router ${r.instance} of sandbox ${sb.sandbox} refused ${what} ${digest}: ${err ?? 'no reason given'}`);
        else if (got === undefined || got === null)
          details.push(`${sb.sandbox}: router has not yet loaded ${what}${err ? ` (last_error: ${err})` : ''}`);
        else details.push(`${sb.sandbox}: router echoed digest mismatch (${got} != ${digest})${err ? ` (last_error: ${err})` : ''}`);
        break;
      }
      if (ok) confirmed++;
    }
  }
  if (rejections.length > 0) return { kind: 'Rejected', details: rejections };
  if (confirmed !== total) return { kind: 'Awaiting', confirmed, total, details };
  return expect.some((e) => e.dryRunSlot !== undefined) ? { kind: 'Confirmed', total, dryRun: true } : { kind: 'Confirmed', total };
}

/** The Awaiting message: `"m/n sandbox routers confirmed digest; <first 3 details>; (+k more)"`. */
export function awaitingMessage(s: Extract<EnforcementState, { kind: 'Awaiting' }>): string {
  const shown = s.details.slice(0, 3).join('; ');
  const more = s.details.length > 3 ? `; (+${s.details.length - 3} more)` : '';
  return `${s.confirmed}/${s.total} sandbox routers confirmed digest${shown ? `; ${shown}` : ''}${more}`;
}

interface CondSpec {
  type: 'Ready' | 'Progressing' | 'Degraded';
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/** The three conditions for a state (contract §3.3 truth table). */
export function conditionsFor(state: EnforcementState): CondSpec[] {
  switch (state.kind) {
    case 'Degraded':
      return [
        { type: 'Ready', status: 'False', reason: state.reason, message: state.message },
        { type: 'Progressing', status: 'False', reason: 'Failed', message: 'compile failed' },
        { type: 'Degraded', status: 'True', reason: state.reason, message: state.message },
      ];
    case 'NotApplicable':
      return [
        { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'no router-enforced artifact' },
        { type: 'Progressing', status: 'False', reason: 'Reconciled', message: 'reconciled' },
        { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'reconciled' },
      ];
    case 'Confirmed':
      return [
        state.dryRun === true
          ? {
              type: 'Ready',
              status: 'True',
              reason: 'RouterRecording',
              message: `all ${state.total} selected sandbox router(s) record the compiled digest (DryRun: recorded, not enforced)`,
            }
          : {
              type: 'Ready',
              status: 'True',
              reason: 'RouterEnforcing',
              message: `all ${state.total} referencing sandbox router(s) confirmed the compiled digest`,
            },
        { type: 'Progressing', status: 'False', reason: 'Reconciled', message: 'reconciled' },
        { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'reconciled' },
      ];
    case 'Rejected': {
      const more = state.details.length > 3 ? `; (+${state.details.length - 3} more)` : '';
      const message = `${state.details.slice(0, 3).join('; ')}${more}`;
      return [
        { type: 'Ready', status: 'False', reason: 'RouterRejected', message },
        {
          type: 'Progressing',
          status: 'False',
          reason: 'RouterRejected',
          message: 'a router refused the compiled policy; change the policy or give the router the capability it lacks',
        },
        { type: 'Degraded', status: 'True', reason: 'RouterRejected', message },
      ];
    }
    case 'NoSandboxesReferencing': {
      const message = state.dryRun === true ? 'appliesTo selects no sandbox (DryRun)' : 'no sandbox references this policy';
      return [
        { type: 'Ready', status: 'False', reason: 'NoSandboxesReferencing', message },
        { type: 'Progressing', status: 'True', reason: 'NoSandboxesReferencing', message },
        { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'reconciled' },
      ];
    }
    case 'Awaiting': {
      const message = awaitingMessage(state);
      return [
        { type: 'Ready', status: 'False', reason: 'AwaitingRouterEnforcement', message },
        { type: 'Progressing', status: 'True', reason: 'AwaitingRouterEnforcement', message },
        { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'reconciled' },
      ];
    }
  }
}

/**
 * Stamp conditions with observedGeneration and lastTransitionTime, keeping the previous
 * transition time unless the status value flips.
 */
export function withTransitions(next: CondSpec[], previous: Condition[] | undefined, generation: number, now: string): Condition[] {
  return next.map((c) => {
    const prev = previous?.find((p) => p.type === c.type);
    const lastTransitionTime = prev && prev.status === c.status ? prev.lastTransitionTime : now;
    return { type: c.type, status: c.status, observedGeneration: generation, lastTransitionTime, reason: c.reason, message: c.message };
  });
}

/** The phase a state maps to. */
export function phaseFor(state: EnforcementState): 'Compiled' | 'Ready' | 'Degraded' {
  if (state.kind === 'Degraded' || state.kind === 'Rejected') return 'Degraded';
  if (state.kind === 'Confirmed' || state.kind === 'NotApplicable') return 'Ready';
  return 'Compiled';
}

/** Only Awaiting (and not degraded) publishes the PolicyNotEnforced warning; orphan policies never do. */
export function shouldWarn(state: EnforcementState): boolean {
  return state.kind === 'Awaiting';
}
