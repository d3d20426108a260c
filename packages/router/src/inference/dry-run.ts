/**
 * Dry-run InferencePolicies (issue 21 item 4, ADR 0050). Each dry-run policy of the snapshot
 * decides the request as if it were enforced: the pipeline's {@link decideRequest} with its rules,
 * then its own token ledger (a reservation held while the request runs and settled on what the
 * request really used). Its would-be decision is recorded and counted. The request itself is never
 * touched: the judge only reads the bytes the enforced path already read, and nothing here can
 * refuse, delay or change it.
 *
 * What a dry-run policy decides: every refusal of the request side (action, token limits and
 * per-request cap, the budget, provider and model, guardrail configuration and what a stage can
 * judge, provider tools) and, when it has an input guardrail stage, the moderation verdict: the
 * backend is asked off the request path, after the request is over.
 *
 * Caveats: a dry-run policy holds no answer-side field (a content-safety floor, an output stage):
 * the compiler and the router view refuse them (policy-api `dryRunUnrecordedField`), since judging
 * an answer the enforced policy streams would mean holding it back. A request the
 * router refused before reading its body (method, sandbox header, size) is not judged: no policy
 * changes those refusals.
 */
import type { DryRunPolicies } from '../snapshot.js';
import type { DecisionTokens, DecisionVerdict } from '../decisions/record.js';
import type { TokenBudgetTracker, Reservation } from './budget.js';
import { moderate, type GuardrailBackend } from './guardrails.js';
import type { UpstreamClient } from '../http/upstream.js';
import { decideRequest, type PipelineContext } from './pipeline.js';
import { budgetExceeded, guardrailFlagged, guardrailMisconfigured, guardrailUnavailable, type InferenceRefusal } from './errors.js';
import type { ApiRoute } from './routes.js';

type DryRunPolicy = DryRunPolicies['inference'][number];

// The codes the enforced path would refuse with, from the same builders.
const BUDGET_EXCEEDED = codeOf(budgetExceeded(''));
const FLAGGED = codeOf(guardrailFlagged('input', []));
const UNAVAILABLE = codeOf(guardrailUnavailable(''));
const MISCONFIGURED = codeOf(guardrailMisconfigured('openai-moderation'));

/** A refusal's reason code, as the enforced record names it (its `error.code`, else its `error.type`). */
function codeOf(r: InferenceRefusal): string {
  return r.body.error.code ?? r.body.error.type;
}

/** One dry-run policy's would-be decision, pending the request's end (its usage, and any moderation). */
export interface PendingDryRun {
  policy: DryRunPolicy;
  decision: DecisionVerdict;
  reason: string;
  /** The would-be reservation on the policy's own ledger; settled when the request ends. */
  reservation: Reservation | undefined;
  /** Texts its input stage must clear (judged after the request); undefined when none applies. */
  moderate: string[] | undefined;
}

/** The ledger key of a dry-run policy's budget: apart from the sandbox's real one. */
export function dryRunBudgetKey(sandbox: string, policy: string): string {
  return `${sandbox}\u0000dry-run:${policy}`;
}

/**
 * Decide the request under each dry-run policy (before the enforced path goes on). A policy that
 * would forward takes a reservation on its own ledger, so parallel requests see each other as
 * they would under enforcement.
 */
export function judgeDryRun(
  policies: DryRunPolicies['inference'],
  raw: Buffer,
  route: ApiRoute,
  ctx: PipelineContext,
  budget: TokenBudgetTracker,
  sandbox: string,
): PendingDryRun[] {
  return policies.map((policy): PendingDryRun => {
    const d = decideRequest(raw, route, policy.rules, ctx);
    if (d.kind === 'reject') return { policy, decision: 'deny', reason: codeOf(d.refusal), reservation: undefined, moderate: undefined };
    const verdict: DecisionVerdict = d.capped ? 'cap' : 'allow';
    const reason = d.capped ? 'completion_limit_set' : 'allowed';
    if (d.reserve === undefined) return { policy, decision: verdict, reason, reservation: undefined, moderate: d.moderateInput };
    const r = budget.reserve(dryRunBudgetKey(sandbox, policyName(policy)), d.reserve.caps, d.reserve.tokens);
    if (!r.ok) return { policy, decision: 'deny', reason: BUDGET_EXCEEDED, reservation: undefined, moderate: undefined };
    return { policy, decision: verdict, reason, reservation: r.reservation, moderate: d.moderateInput };
  });
}

function policyName(p: DryRunPolicy): string {
  return p.refs[0]?.name ?? '';
}

/** What {@link finishDryRun} reports for each dry-run policy. */
export interface DryRunOutcome {
  policy: DryRunPolicy;
  decision: DecisionVerdict;
  reason: string;
  tokens: DecisionTokens | null;
}

/**
 * Dry-run moderations in flight at most, per handler. They run after the request, outside the
 * admission gate's bound, so without this an agent's stream of cheap requests could hold any number
 * of calls to the moderation backend open (each up to its timeout).
 */
export const MAX_DRY_RUN_MODERATIONS = 8;

/** The reason of a dry-run record whose input stage was not judged because {@link MAX_DRY_RUN_MODERATIONS} were in flight. */
export const NOT_JUDGED = 'guardrail_not_judged';

/** Counts the dry-run moderations in flight (one per inference handler). */
export class DryRunModerations {
  #inFlight = 0;
  constructor(private readonly max = MAX_DRY_RUN_MODERATIONS) {}
  /** Take a slot, or false when all are in use. */
  take(): boolean {
    if (this.#inFlight >= this.max) return false;
    this.#inFlight++;
    return true;
  }
  release(): void {
    this.#inFlight--;
  }
  get inFlight(): number {
    return this.#inFlight;
  }
}

/**
 * Settle each pending decision once the request is over: a reservation is settled on `charged`
 * (what the request used; 0 when the enforced path never sent it), and an input stage's texts are
 * moderated. `report` gets each outcome; it runs after the request, never before it.
 */
export function finishDryRun(
  pending: readonly PendingDryRun[],
  charged: number,
  guardrail: { backend: GuardrailBackend; client: UpstreamClient; slots: DryRunModerations } | undefined,
  report: (o: DryRunOutcome) => void,
): void {
  for (const p of pending) {
    let tokens: DecisionTokens | null = null;
    if (p.reservation !== undefined) {
      tokens = { reserved: p.reservation.amount, charged };
      p.reservation.settle(charged);
    }
    const done = (decision: DecisionVerdict, reason: string): void => report({ policy: p.policy, decision, reason, tokens });
    if (p.decision === 'deny' || p.moderate === undefined) done(p.decision, p.reason);
    else if (guardrail === undefined) done('deny', MISCONFIGURED);
    // Every slot taken: the record says the stage was not judged, never a verdict it did not reach.
    else if (!guardrail.slots.take()) done(p.decision, NOT_JUDGED);
    else
      void moderate(guardrail.backend, p.moderate, guardrail.client)
        .then(
          (m) => (m.kind === 'clean' ? done(p.decision, p.reason) : done('deny', m.kind === 'flagged' ? FLAGGED : UNAVAILABLE)),
          () => done('deny', UNAVAILABLE),
        )
        .finally(() => guardrail.slots.release());
  }
}
