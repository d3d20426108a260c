/**
 * The one place a decision becomes a {@link DecisionRecord}: the recorder fills in what every
 * record shares (time, sandbox, router instance, the policies of the snapshot) so each call site
 * states only what it decided. It also holds the per-request scope the router's front door binds
 * to each agent request (`bindRequest`): the request id and the one snapshot the request is decided
 * under, so the `x-kars-policy-digest` header and the record name the same digests.
 *
 * Guarantees: `record()` never throws and, without a sink (`--decision-log` off), does nothing.
 */
import type { IncomingMessage } from 'node:http';
import type { Clock } from '@kars/kube-core';
import type { EchoKind } from '@kars/policy-api';
import { EGRESS_APPROVAL_KIND, INFERENCE_POLICY_KIND, TOOL_POLICY_KIND } from '@kars/policy-compiler/runtime';
import type { PolicySnapshot } from '../snapshot.js';
import type { DecisionSink } from './log.js';
import type {
  DecisionKind,
  DecisionRecord,
  DecisionTokens,
  DecisionVerdict,
  EgressTarget,
  InferenceTarget,
  PolicyRef,
  ToolTarget,
} from './record.js';

/** What a call site says about one decision. */
export type DecisionInput = {
  requestId: string;
  /** The snapshot that decided. */
  snapshot: PolicySnapshot;
  decision: DecisionVerdict;
  reason: string;
} & (
  | { kind: 'inference'; target: InferenceTarget; tokens: DecisionTokens | null }
  | { kind: 'tool'; target: ToolTarget }
  | { kind: 'egress'; target: EgressTarget }
);

/** The scope of one agent request: its id and the snapshot it is decided under. */
export interface RequestScope {
  requestId: string;
  snapshot: PolicySnapshot;
}

const scopes = new WeakMap<IncomingMessage, RequestScope>();

/** Bind a request's scope (the router's front door, once per agent request). */
export function bindRequest(req: IncomingMessage, scope: RequestScope): void {
  scopes.set(req, scope);
}

/** The scope bound to `req`, if the front door bound one (handlers used on their own have none). */
export function scopeOf(req: IncomingMessage): RequestScope | undefined {
  return scopes.get(req);
}

/** Each echo kind of `kinds` with no policy bound. */
function unbound(kinds: readonly EchoKind[]): readonly PolicyRef[] {
  return Object.freeze(kinds.map((kind) => Object.freeze({ kind, name: null, generation: null, digest: null })));
}

/** The policy refs of each surface when nothing is bound: one per echo kind of the surface's policy kind (its descriptor's). */
export const UNBOUND: Readonly<Record<'inference' | 'tools' | 'egress', readonly PolicyRef[]>> = Object.freeze({
  inference: unbound(INFERENCE_POLICY_KIND.echoKinds),
  tools: unbound(TOOL_POLICY_KIND.echoKinds),
  egress: unbound(EGRESS_APPROVAL_KIND.echoKinds),
});

/** The surface of a decision kind in {@link PolicySnapshot.policies}. */
export function surfaceOf(kind: DecisionKind): 'inference' | 'tools' | 'egress' {
  return kind === 'tool' ? 'tools' : kind;
}

/** The policies of `snap` that decide `kind`. */
export function policiesFor(snap: PolicySnapshot, kind: DecisionKind): readonly PolicyRef[] {
  const s = surfaceOf(kind);
  return snap.policies?.[s] ?? UNBOUND[s];
}

/** A would-be decision of one dry-run policy (ADR 0050), as a metric counts it. */
export interface DryRunCount {
  kind: DecisionKind;
  /** The dry-run policy's name. */
  policy: string;
  decision: DecisionVerdict;
  reason: string;
}

/** Builds records and hands them to the sink. */
export class DecisionRecorder {
  readonly #sandbox: string;
  readonly #instance: string;
  readonly #clock: Pick<Clock, 'wallNow'>;
  readonly #sink: DecisionSink | undefined;
  readonly #onDryRun: ((c: DryRunCount) => void) | undefined;
  readonly #idPrefix: string;
  #n = 0;

  constructor(opts: {
    sandbox: string;
    instance: string;
    clock: Pick<Clock, 'wallNow'>;
    sink?: DecisionSink | undefined;
    /** Counts every would-be decision of a dry-run policy, with or without a sink (the router's metric). */
    onDryRun?: (c: DryRunCount) => void;
  }) {
    this.#sandbox = opts.sandbox;
    this.#instance = opts.instance;
    this.#clock = opts.clock;
    this.#sink = opts.sink;
    this.#onDryRun = opts.onDryRun;
    // Unique across restarts of one instance: the start time (base 36 ms) and a counter.
    this.#idPrefix = `${opts.instance}-${opts.clock.wallNow().toString(36)}-`;
  }

  /** Whether records go anywhere. */
  get enabled(): boolean {
    return this.#sink !== undefined;
  }

  /** A new request id. */
  nextRequestId(): string {
    return `${this.#idPrefix}${(++this.#n).toString(36)}`;
  }

  /** Record one decision (a no-op without a sink). */
  record(d: DecisionInput): void {
    this.#write(d, policiesFor(d.snapshot, d.kind), false);
  }

  /**
   * Record what the dry-run policy `refs` (its refs in {@link PolicySnapshot.dryRun}) would have
   * decided: counted always, written with `mode: DryRun` when there is a sink.
   */
  recordDryRun(d: DecisionInput, refs: readonly PolicyRef[]): void {
    try {
      this.#onDryRun?.({ kind: d.kind, policy: refs[0]?.name ?? '', decision: d.decision, reason: d.reason });
    } catch {
      // a metric must not break the request
    }
    this.#write(d, refs, true);
  }

  #write(d: DecisionInput, policies: readonly PolicyRef[], dryRun: boolean): void {
    const sink = this.#sink;
    if (sink === undefined) return;
    const r: DecisionRecord = {
      type: 'decision',
      time: new Date(this.#clock.wallNow()).toISOString(),
      sandbox: this.#sandbox,
      instance: this.#instance,
      requestId: d.requestId,
      kind: d.kind,
      target: d.target,
      decision: d.decision,
      reason: d.reason,
      tokens: d.kind === 'inference' ? d.tokens : null,
      policies,
      ...(dryRun ? { mode: 'DryRun' as const } : {}),
    };
    try {
      sink.write(r);
    } catch {
      // the sink must not break the request
    }
  }
}
