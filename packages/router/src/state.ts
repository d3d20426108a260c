import {
  EchoLedger,
  EGRESS_APPROVAL_KIND,
  INFERENCE_POLICY_KIND,
  TOOL_ECHO_KINDS,
  TOOL_POLICY_KIND,
  toolDigestOf,
} from '@kars/policy-compiler/runtime';
import type {
  EchoState,
  EgressParts,
  InferenceRules,
  LoadOutcome,
  PolicyStatusEntry,
  RouterView,
  ToolLoad,
  DryRunOutcomes,
  ToolOutcome,
  ToolRules,
} from '@kars/policy-compiler/runtime';
import type { DryRunPolicies, PolicySnapshot, SnapshotPolicies } from './snapshot.js';
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
  /** The generations the bound policies' ConfigMaps were compiled from, when the source knows them. */
  private inferenceGeneration: number | null = null;
  private toolsGeneration: number | null = null;
  /** The dry-run policies recorded (ADR 0050), by name: the last good rules of each, with its digests. */
  private dryInference = new Map<string, { rules: InferenceRules; digest: string | null; generation: number | null }>();
  private dryTools = new Map<string, { load: ToolLoad; generation: number | null }>();
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
    if (o.kind !== 'error') this.inferenceGeneration = o.kind === 'loaded' ? (o.generation ?? null) : null;
    this.inferenceRefused = refusalWithoutFallback(o, this.inference);
    this.done(this.ledger.applyProfile(INFERENCE_POLICY_KIND, o));
  }

  setTools(o: ToolOutcome): void {
    if (o.kind !== 'error') this.tools = o.kind === 'loaded' ? o.value.rules : undefined;
    if (o.kind !== 'error') this.toolsGeneration = o.kind === 'loaded' ? (o.generation ?? null) : null;
    this.toolsRefused = refusalWithoutFallback(o, this.tools);
    this.done(this.ledger.applyProfile(TOOL_POLICY_KIND, o));
  }

  setEgress(o: LoadOutcome<EgressParts>): void {
    if (o.kind !== 'error') this.egress = o.kind === 'loaded' ? o.value : { baseline: [], approvals: [] };
    this.done(this.ledger.apply(EGRESS_APPROVAL_KIND.echoKinds[0], o));
  }

  /** Load a whole view (all kinds) and swap the snapshot once. */
  setView(view: RouterView): void {
    if (view.inference.kind !== 'error') this.inference = view.inference.kind === 'loaded' ? view.inference.value : undefined;
    if (view.inference.kind !== 'error') this.inferenceName = view.inference.kind === 'loaded' ? (view.inference.name ?? null) : null;
    if (view.inference.kind !== 'error')
      this.inferenceGeneration = view.inference.kind === 'loaded' ? (view.inference.generation ?? null) : null;
    if (view.tools.kind !== 'error') this.tools = view.tools.kind === 'loaded' ? (view.tools.value as ToolLoad).rules : undefined;
    if (view.tools.kind !== 'error') this.toolsGeneration = view.tools.kind === 'loaded' ? (view.tools.generation ?? null) : null;
    this.takeDryRun(view.dryRun);
    this.inferenceRefused = refusalWithoutFallback(view.inference, this.inference);
    this.toolsRefused = refusalWithoutFallback(view.tools, this.tools);
    if (view.egress.kind !== 'error') this.egress = view.egress.kind === 'loaded' ? view.egress.value : { baseline: [], approvals: [] };
    this.done(this.ledger.applyView(view));
  }

  /**
   * Keep each dry-run policy's last good rules (a refused edit keeps the previous ones, as for an
   * enforced kind); a policy no longer in the view, or cleared, is dropped.
   */
  private takeDryRun(dry: DryRunOutcomes): void {
    const inference = new Map<string, { rules: InferenceRules; digest: string | null; generation: number | null }>();
    for (const { name, outcome } of dry.inference) {
      const prev = this.dryInference.get(name);
      if (outcome.kind === 'loaded')
        inference.set(name, { rules: outcome.value, digest: outcome.digest, generation: outcome.generation ?? null });
      else if (outcome.kind === 'error' && prev !== undefined) inference.set(name, prev);
    }
    const tools = new Map<string, { load: ToolLoad; generation: number | null }>();
    for (const { name, outcome } of dry.tools) {
      const prev = this.dryTools.get(name);
      if (outcome.kind === 'loaded') tools.set(name, { load: outcome.value, generation: outcome.generation ?? null });
      else if (outcome.kind === 'error' && prev !== undefined) tools.set(name, prev);
    }
    this.dryInference = inference;
    this.dryTools = tools;
  }

  /** The dry-run policies of the snapshot, each with the refs its records name. */
  private dryRun(): DryRunPolicies | undefined {
    if (this.dryInference.size === 0 && this.dryTools.size === 0) return undefined;
    const ref = (kind: PolicyRef['kind'], name: string, generation: number | null, digest: string | null): PolicyRef =>
      Object.freeze({ kind, name, generation, digest });
    return Object.freeze({
      inference: Object.freeze(
        [...this.dryInference].map(([name, p]) =>
          Object.freeze({
            rules: p.rules,
            refs: Object.freeze(INFERENCE_POLICY_KIND.echoKinds.map((k) => ref(k, name, p.generation, p.digest))),
          }),
        ),
      ),
      tools: Object.freeze(
        [...this.dryTools].map(([name, p]) =>
          Object.freeze({
            rules: p.load.rules,
            refs: Object.freeze(TOOL_ECHO_KINDS.map((k) => ref(k, name, p.generation, toolDigestOf(k, p.load.digests)))),
          }),
        ),
      ),
    });
  }

  /** The policies in force per surface, from the ledger's digests (the ones echoed), with their names and generations. */
  private policies(): SnapshotPolicies {
    const d = this.ledger.echo().digests;
    const ref = (kind: PolicyRef['kind'], name: string | null, generation: number | null): PolicyRef =>
      Object.freeze({
        kind,
        name: d[kind] == null ? null : name,
        generation: d[kind] == null ? null : generation,
        digest: d[kind] ?? null,
      });
    const inference = Object.freeze(INFERENCE_POLICY_KIND.echoKinds.map((k) => ref(k, this.inferenceName, this.inferenceGeneration)));
    const toolName = this.tools?.name ?? null;
    const tools = Object.freeze(TOOL_POLICY_KIND.echoKinds.map((k) => ref(k, toolName, this.toolsGeneration)));
    const egress = Object.freeze(EGRESS_APPROVAL_KIND.echoKinds.map((k) => ref(k, null, null)));
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
    const dryRun = this.dryRun();
    this.snap = Object.freeze({
      policies: this.policies(),
      ...(dryRun !== undefined ? { dryRun } : {}),
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
