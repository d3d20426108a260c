import type { KubeObject } from '@kars/kube-core';
import { Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

export type PolicyKind = 'InferencePolicy' | 'ToolPolicy' | 'EgressApproval';
const KINDS: PolicyKind[] = ['InferencePolicy', 'ToolPolicy', 'EgressApproval'];

/**
 * Measures propagation: from the controller first seeing a new generation of a policy, to its
 * compiled ConfigMap being written, and to every referencing router echoing its digest.
 * Exports both as histograms per kind, and a gauge of the policies that are not Ready.
 */
export class PropagationTracker {
  private readonly firstSeen = new Map<string, number>();
  private readonly confirmed = new Set<string>();
  private readonly written = new Set<string>();
  private readonly notReady = new Map<PolicyKind, Set<string>>(KINDS.map((k) => [k, new Set()]));
  private readonly compileHist: Histogram<'kind'>;
  private readonly echoHist: Histogram<'kind'>;

  constructor(
    registry: Registry,
    private readonly now: () => number,
  ) {
    const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
    this.compileHist = new Histogram({ name: 'kars_policy_compile_seconds', help: 'Time from the controller seeing a new policy generation to its compiled ConfigMap being written.', labelNames: ['kind'], buckets, registers: [registry] });
    this.echoHist = new Histogram({ name: 'kars_policy_propagation_seconds', help: 'Time from the controller seeing a new policy generation to every referencing router echoing its digest.', labelNames: ['kind'], buckets, registers: [registry] });
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

  private key(obj: KubeObject): string {
    return `${obj.metadata.uid ?? ''}/${obj.metadata.generation ?? 0}`;
  }

  /** Record that a generation was observed (call from the watch, before any reconcile). */
  observe(obj: KubeObject): void {
    const k = this.key(obj);
    if (!this.firstSeen.has(k)) this.firstSeen.set(k, this.now());
  }

  private since(obj: KubeObject): number {
    const k = this.key(obj);
    let t = this.firstSeen.get(k);
    if (t === undefined) {
      t = this.now();
      this.firstSeen.set(k, t);
    }
    return this.now() - t;
  }

  /** The compiled ConfigMap for this generation was written: the milliseconds it took, once per generation (undefined after). */
  compiled(kind: PolicyKind, obj: KubeObject): number | undefined {
    const k = this.key(obj);
    if (this.written.has(k)) return undefined;
    this.written.add(k);
    const ms = this.since(obj);
    this.compileHist.observe({ kind }, ms / 1000);
    return ms;
  }

  /** Every router echoes this generation: returns the milliseconds, once per generation (undefined after). */
  enforced(kind: PolicyKind, obj: KubeObject): number | undefined {
    const k = this.key(obj);
    if (this.confirmed.has(k)) return undefined;
    this.confirmed.add(k);
    const ms = this.since(obj);
    this.echoHist.observe({ kind }, ms / 1000);
    return ms;
  }

  /** Track readiness for the not-ready gauge. */
  setReady(kind: PolicyKind, key: string, ready: boolean): void {
    const set = this.notReady.get(kind);
    if (!set) return;
    if (ready) set.delete(key);
    else set.add(key);
  }

  /** Forget a deleted policy. */
  forget(kind: PolicyKind, key: string, obj?: KubeObject): void {
    this.notReady.get(kind)?.delete(key);
    if (obj) {
      const prefix = `${obj.metadata.uid ?? ''}/`;
      for (const k of [...this.firstSeen.keys()]) if (k.startsWith(prefix)) this.firstSeen.delete(k);
      for (const k of [...this.confirmed]) if (k.startsWith(prefix)) this.confirmed.delete(k);
      for (const k of [...this.written]) if (k.startsWith(prefix)) this.written.delete(k);
    }
  }
}
