import { EchoLedger } from '@kars/policy-compiler/runtime';
import type {
  EchoState,
  EgressParts,
  InferenceRules,
  LoadOutcome,
  PolicyStatusEntry,
  RouterView,
  ToolLoad,
  ToolOutcome,
  ToolRules,
} from '@kars/policy-compiler/runtime';
import type { PolicySnapshot, SnapshotPolicies } from './snapshot.js';
import { digestHeaderValue, type PolicyRef } from './decisions/record.js';

export type { EgressParts, PolicyStatusEntry } from '@kars/policy-compiler/runtime';

/**
 * The router's loaded policy: the current snapshot (swapped atomically on every change) and the
 * echo state (`EchoLedger`, from the wire contract in `@kars/policy-compiler`): per kind, the digest
 * it enforces, the last load error and the last refused digest. Load semantics follow the kars
 * router and Envoy xDS: a load replaces; "none" clears (egress then admits nothing); an error keeps
 * the last good policy and records the error (a NACK).
 */
export class PolicyState {
  private snap: PolicySnapshot = { inference: undefined, tools: [], egress: [], loadedAtMs: 0, refused: {} };
  private inference: InferenceRules | undefined;
  private tools: ToolRules | undefined;
  private egress: EgressParts = { baseline: [], approvals: [] };
  /** A refusal with no earlier good policy of that kind to fall back on (see PolicySnapshot.refused). */
  private inferenceRefused: string | undefined;
  private toolsRefused: string | undefined;
  /** The bound InferencePolicy's name, when the source knows it (the API source does; a mounted directory does not). */
  private inferenceName: string | null = null;
  private readonly ledger: EchoLedger;
  private readonly listeners = new Set<() => void>();

  /** `now`: epoch ms for the echo's load stamps; the router passes its clock's `wallNow` (ADR 0016). */
  constructor(private readonly now: () => number) {
    this.ledger = new EchoLedger(now);
  }

  /** The snapshot to use for one request. */
  current(): PolicySnapshot {
    return this.snap;
  }

  /** Be told after every change of what is echoed (including a new error). */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private done(changed: boolean): void {
    this.rebuild();
    if (changed) for (const fn of this.listeners) fn();
  }

  setInference(o: LoadOutcome<InferenceRules>): void {
    if (o.kind !== 'error') this.inference = o.kind === 'loaded' ? o.value : undefined;
    if (o.kind !== 'error') this.inferenceName = o.kind === 'loaded' ? (o.name ?? null) : null;
    this.inferenceRefused = refusalWithoutFallback(o, this.inference);
    this.done(this.ledger.apply('InferencePolicy', o));
  }

  setTools(o: ToolOutcome): void {
    if (o.kind !== 'error') this.tools = o.kind === 'loaded' ? o.value.rules : undefined;
    this.toolsRefused = refusalWithoutFallback(o, this.tools);
    this.done(this.ledger.applyTools(o));
  }

  setEgress(o: LoadOutcome<EgressParts>): void {
    if (o.kind !== 'error') this.egress = o.kind === 'loaded' ? o.value : { baseline: [], approvals: [] };
    this.done(this.ledger.apply('EgressApproval', o));
  }

  /** Load a whole view (all kinds) and swap the snapshot once. */
  setView(view: RouterView): void {
    if (view.inference.kind !== 'error') this.inference = view.inference.kind === 'loaded' ? view.inference.value : undefined;
    if (view.inference.kind !== 'error') this.inferenceName = view.inference.kind === 'loaded' ? (view.inference.name ?? null) : null;
    if (view.tools.kind !== 'error') this.tools = view.tools.kind === 'loaded' ? (view.tools.value as ToolLoad).rules : undefined;
    this.inferenceRefused = refusalWithoutFallback(view.inference, this.inference);
    this.toolsRefused = refusalWithoutFallback(view.tools, this.tools);
    if (view.egress.kind !== 'error') this.egress = view.egress.kind === 'loaded' ? view.egress.value : { baseline: [], approvals: [] };
    this.done(this.ledger.applyView(view));
  }

  /** The policies in force per surface, from the ledger's digests (the ones echoed), with their names. */
  private policies(): SnapshotPolicies {
    const d = this.ledger.echo().digests;
    const ref = (kind: PolicyRef['kind'], name: string | null): PolicyRef =>
      Object.freeze({ kind, name: d[kind] == null ? null : name, generation: null, digest: d[kind] ?? null });
    const inference = Object.freeze([ref('InferencePolicy', this.inferenceName)]);
    const tools = Object.freeze([ref('ToolPolicy', this.tools?.name ?? null), ref('AgtProfile', this.tools?.name ?? null)]);
    const egress = Object.freeze([ref('EgressApproval', null)]);
    return Object.freeze({
      inference,
      tools,
      egress,
      header: Object.freeze({
        inference: digestHeaderValue(inference),
        tools: digestHeaderValue(tools),
        egress: digestHeaderValue(egress),
      }),
    });
  }

  private rebuild(): void {
    this.snap = Object.freeze({
      policies: this.policies(),
      inference: this.inference,
      tools: this.tools ? [this.tools] : [],
      egress: [...this.egress.baseline, ...this.egress.approvals],
      loadedAtMs: this.now(),
      refused: Object.freeze({
        ...(this.inferenceRefused !== undefined ? { inference: this.inferenceRefused } : {}),
        ...(this.toolsRefused !== undefined ? { tools: this.toolsRefused } : {}),
      }),
    });
  }

  /** What to publish in the echo lease: digests, last errors and refused digests per kind. */
  echo(): EchoState {
    return this.ledger.echo();
  }

  /** Digest per kind, for the echo lease. */
  digests(): EchoState['digests'] {
    return this.ledger.echo().digests;
  }

  /** Last error per kind, for the echo lease. */
  errors(): EchoState['errors'] {
    return this.ledger.echo().errors;
  }

  /** The `/internal/policy-status` entries. */
  statusEntries(): PolicyStatusEntry[] {
    return this.ledger.statusEntries();
  }
}

/**
 * The refusal to fail closed on: an error outcome while nothing earlier of that kind is enforced.
 * With an earlier good policy the router keeps enforcing it (a NACK keeps the last good policy).
 */
function refusalWithoutFallback(o: { kind: string; error?: string }, current: unknown): string | undefined {
  return o.kind === 'error' && current === undefined ? (o.error ?? 'refused') : undefined;
}
