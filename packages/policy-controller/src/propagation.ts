import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject } from '@kars/kube-core';
import { Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

export type PolicyKind = 'InferencePolicy' | 'ToolPolicy' | 'EgressApproval';
const KINDS: PolicyKind[] = ['InferencePolicy', 'ToolPolicy', 'EgressApproval'];

/** What the tracker knows of one policy's newest generation. */
interface Generation {
  generation: number;
  firstSeenMs: number;
  /** Its compiled ConfigMap was written. */
  written: boolean;
  /** Every referencing router echoes it. */
  confirmed: boolean;
}

/**
 * Measures propagation: from the controller first seeing a new generation of a policy, to its
 * compiled ConfigMap being written, and to every referencing router echoing its digest.
 * Exports both as histograms per kind, and a gauge of the policies that are not Ready.
 */
export class PropagationTracker {
  /** Per object uid, only the newest generation seen: memory stays one entry per live policy. */
  private readonly gens = new Map<string, Generation>();
  private readonly notReady = new Map<PolicyKind, Set<string>>(KINDS.map((k) => [k, new Set()]));
  private readonly compileHist: Histogram<'kind'>;
  private readonly echoHist: Histogram<'kind'>;

  constructor(
    registry: Registry,
    /** Durations are measured on this clock's monotonic `now()`. */
    private readonly clock: Clock = systemClock,
  ) {
    const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
    this.compileHist = new Histogram({
      name: 'kars_policy_compile_seconds',
      help: 'Time from the controller seeing a new policy generation to its compiled ConfigMap being written.',
      labelNames: ['kind'],
      buckets,
      registers: [registry],
    });
    this.echoHist = new Histogram({
      name: 'kars_policy_propagation_seconds',
      help: 'Time from the controller seeing a new policy generation to every referencing router echoing its digest.',
      labelNames: ['kind'],
      buckets,
      registers: [registry],
    });
    const notReady = this.notReady;
    new Gauge({
      name: 'kars_policies_not_ready',
      help: 'Policies whose Ready condition is not True.',
      labelNames: ['kind'],
      registers: [registry],
      collect() {
        for (const k of KINDS) this.set({ kind: k }, notReady.get(k)?.size ?? 0);
      },
    });
    for (const k of KINDS) {
      this.compileHist.zero({ kind: k });
      this.echoHist.zero({ kind: k });
    }
  }

  private entry(obj: KubeObject): Generation {
    const uid = obj.metadata.uid ?? '';
    const generation = obj.metadata.generation ?? 0;
    let e = this.gens.get(uid);
    if (!e || e.generation < generation) {
      e = { generation, firstSeenMs: this.clock.now(), written: false, confirmed: false };
      this.gens.set(uid, e);
    }
    return e;
  }

  /** Record that a generation was observed (call from the watch, before any reconcile). */
  observe(obj: KubeObject): void {
    this.entry(obj);
  }

  /** The compiled ConfigMap for this generation was written: the milliseconds it took, once per generation (undefined after). */
  compiled(kind: PolicyKind, obj: KubeObject): number | undefined {
    return this.reached('written', this.compileHist, kind, obj);
  }

  /** Every router echoes this generation: the milliseconds, once per generation (undefined after). */
  enforced(kind: PolicyKind, obj: KubeObject): number | undefined {
    return this.reached('confirmed', this.echoHist, kind, obj);
  }

  /**
   * Mark `step` reached by `obj`'s generation: the whole milliseconds since it was first seen, also
   * observed in `hist`; undefined when the step was already reached or `obj` is an older generation.
   */
  private reached(step: 'written' | 'confirmed', hist: Histogram<'kind'>, kind: PolicyKind, obj: KubeObject): number | undefined {
    const e = this.entry(obj);
    if (e[step] || e.generation !== (obj.metadata.generation ?? 0)) return undefined;
    e[step] = true;
    const ms = Math.round(this.clock.now() - e.firstSeenMs); // whole ms: status fields are integers
    hist.observe({ kind }, ms / 1000);
    return ms;
  }

  /** Track readiness for the not-ready gauge. */
  setReady(kind: PolicyKind, key: string, ready: boolean): void {
    const set = this.notReady.get(kind);
    if (!set) return;
    if (ready) set.delete(key);
    else set.add(key);
  }

  /** How many objects are tracked (one entry per live policy, whatever its number of edits). */
  trackedObjects(): number {
    return this.gens.size;
  }

  /** Forget a deleted policy. */
  forget(kind: PolicyKind, key: string, obj?: KubeObject): void {
    this.notReady.get(kind)?.delete(key);
    if (obj?.metadata.uid) this.gens.delete(obj.metadata.uid);
  }
}
