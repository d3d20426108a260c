import type { EchoKind } from '@kars/policy-api';
import type { LoadOutcome } from './load.js';
import type { EgressEntry, InferenceRules, PolicySnapshot, ToolRules } from './snapshot.js';

/** One entry of `/internal/policy-status` (schema_version 1, snake_case as the contract spells it). */
export interface PolicyStatusEntry {
  kind: EchoKind;
  digest: string | null;
  source_path: string;
  loaded_at: string | null;
  last_error: string | null;
}

interface KindState {
  digest: string | null;
  source: string;
  loadedAtMs: number | undefined;
  error: string | undefined;
}

/** What the egress loader produces: baseline and approval entries; the digest is the merged one. */
export interface EgressParts {
  baseline: EgressEntry[];
  approvals: EgressEntry[];
}

/**
 * The router's loaded policy: the current snapshot (swapped atomically on every change) and, per
 * kind, the digest it enforces and the last load error. Load semantics follow the kars router and
 * Envoy xDS: a load replaces; "none" clears (egress then admits nothing); an error keeps the last
 * good policy and records the error (a NACK).
 */
export class PolicyState {
  private snap: PolicySnapshot = { inference: undefined, tools: [], egress: [], loadedAtMs: 0 };
  private inference: InferenceRules | undefined;
  private tools: ToolRules | undefined;
  private egress: EgressParts = { baseline: [], approvals: [] };
  private readonly kinds = new Map<EchoKind, KindState>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The snapshot to use for one request. */
  current(): PolicySnapshot {
    return this.snap;
  }

  /** Be told after every change of what is loaded (including a new error). */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private apply<T>(kind: EchoKind, outcome: LoadOutcome<T>, set: (v: T | undefined) => void): void {
    const prev = this.kinds.get(kind);
    let next: KindState;
    if (outcome.kind === 'loaded') {
      set(outcome.value);
      next = { digest: outcome.digest, source: outcome.source, loadedAtMs: prev?.digest === outcome.digest ? prev.loadedAtMs : this.now(), error: outcome.warning };
    } else if (outcome.kind === 'none') {
      set(undefined);
      next = { digest: null, source: prev?.source ?? '', loadedAtMs: undefined, error: undefined };
    } else {
      next = { digest: prev?.digest ?? null, source: outcome.source, loadedAtMs: prev?.loadedAtMs, error: outcome.error.slice(0, 512) };
    }
    const changed = !prev || prev.digest !== next.digest || prev.error !== next.error;
    this.kinds.set(kind, next);
    this.rebuild();
    if (changed) for (const fn of this.listeners) fn();
  }

  setInference(o: LoadOutcome<InferenceRules>): void {
    this.apply('InferencePolicy', o, (v) => (this.inference = v));
  }

  setTools(o: LoadOutcome<ToolRules>): void {
    this.apply('AgtProfile', o, (v) => (this.tools = v));
  }

  setEgress(o: LoadOutcome<EgressParts>): void {
    this.apply('EgressApproval', o, (v) => (this.egress = v ?? { baseline: [], approvals: [] }));
  }

  private rebuild(): void {
    this.snap = Object.freeze({
      inference: this.inference,
      tools: this.tools ? [this.tools] : [],
      egress: [...this.egress.baseline, ...this.egress.approvals],
      loadedAtMs: this.now(),
    });
  }

  /** Digest per kind, for the echo lease. */
  digests(): Partial<Record<EchoKind, string | null>> {
    const out: Partial<Record<EchoKind, string | null>> = {};
    for (const [k, s] of this.kinds) out[k] = s.digest;
    return out;
  }

  /** Last error per kind, for the echo lease. */
  errors(): Partial<Record<EchoKind, string>> {
    const out: Partial<Record<EchoKind, string>> = {};
    for (const [k, s] of this.kinds) if (s.error) out[k] = s.error;
    return out;
  }

  /** The `/internal/policy-status` entries. */
  statusEntries(): PolicyStatusEntry[] {
    return [...this.kinds.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([kind, s]) => ({ kind, digest: s.digest, source_path: s.source, loaded_at: s.loadedAtMs === undefined ? null : new Date(s.loadedAtMs).toISOString().replace(/\.\d{3}Z$/, 'Z'), last_error: s.error ?? null }));
  }
}
