import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger, Timer } from '@kars/kube-core';
import { Resources, traceHop } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import { Reflector } from '@kars/kube-runtime';
import type { RuntimeMetrics, WatchConfig } from '@kars/kube-runtime';
import { HEARTBEAT_CONFIGMAP, KARS_SANDBOX, readHeartbeat } from '@kars/policy-api';
import type { KarsSandbox } from '@kars/policy-api';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE, policyGenerationOf } from '@kars/policy-compiler/runtime';
import type { RouterCapabilities } from '@kars/policy-compiler/runtime';
import type { PolicyState } from '../state.js';
import { HeartbeatStaleness } from '../staleness.js';
import { loadFromConfigMaps } from './compute.js';

export interface ApiSourceOptions {
  client: KubeClient;
  namespace: string;
  sandbox: string;
  /** The shared watch configuration (the same one the controller uses). */
  config: WatchConfig;
  state: PolicyState;
  /** What this router can enforce beyond the core (MCP servers it fronts, guardrail backends). */
  capabilities: RouterCapabilities;
  metrics?: RuntimeMetrics;
  log?: Logger;
  /** Time for the watches' freshness and timers, the heartbeat staleness and approval expiry; default the system clock. */
  clock?: Clock;
}

/**
 * Policy straight from the API, through the freshness runtime: a watch on this router's
 * KarsSandbox and one on the compiled ConfigMaps of its namespace. Every change recomputes the
 * snapshot at once; a timer recomputes at the next approval expiry.
 */
export class ApiPolicySource {
  private readonly sandboxes: Reflector<KarsSandbox & KubeObject>;
  private readonly configmaps: Reflector<KubeObject & { data?: Record<string, string> }>;
  private expiryTimer: Timer | undefined;
  private readonly clock: Clock;
  /** Staleness from the controller's heartbeat, which arrives on the same ConfigMap watch as the policy. */
  readonly staleness: HeartbeatStaleness;

  constructor(private readonly opts: ApiSourceOptions) {
    this.clock = opts.clock ?? systemClock;
    this.staleness = new HeartbeatStaleness(this.clock);
    const common = {
      client: opts.client,
      namespace: opts.namespace,
      config: opts.config,
      clock: this.clock,
      ...(opts.log ? { log: opts.log } : {}),
    };
    this.sandboxes = new Reflector({
      ...common,
      name: 'router-sandbox',
      resource: KARS_SANDBOX,
      fieldSelector: `metadata.name=${opts.sandbox}`,
      ...(opts.metrics ? { metrics: opts.metrics.watch('router-sandbox') } : {}),
    });
    this.configmaps = new Reflector({
      ...common,
      name: 'router-configmaps',
      resource: Resources.configmaps,
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
      ...(opts.metrics ? { metrics: opts.metrics.watch('router-configmaps') } : {}),
    });
  }

  /** True once both watches have listed. */
  isReady(): boolean {
    return this.sandboxes.store.isReady() && this.configmaps.store.isReady();
  }

  /** How long the view has gone without confirmation that it is current (the older of the two watches), on this source's clock. */
  viewAgeMs(): number {
    return Math.max(this.sandboxes.staleForMs(), this.configmaps.staleForMs());
  }

  /** Whether both watches are confirmed fresh within their bound (on this source's clock). */
  isFresh(): boolean {
    return this.sandboxes.isFresh() && this.configmaps.isFresh();
  }

  private recompute(): void {
    if (!this.isReady()) return;
    const sb = this.sandboxes.store.get(`${this.opts.namespace}/${this.opts.sandbox}`);
    const next = loadFromConfigMaps(
      this.opts.state,
      sb,
      (name) => this.configmaps.store.get(`${this.opts.namespace}/${name}`)?.data ?? undefined,
      `configmap:${this.opts.namespace}/`,
      this.opts.capabilities,
      this.clock.wallNow(),
      {
        list: () => this.configmaps.store.list().map((c) => c.metadata.name ?? ''),
        generationOf: (name) => policyGenerationOf(this.configmaps.store.get(`${this.opts.namespace}/${name}`)),
      },
    );
    traceHop('router.loaded');
    this.expiryTimer?.cancel();
    this.expiryTimer = undefined;
    // `next` is an approval's expiry in epoch ms (wall time, as written into the approval).
    if (next !== undefined) this.expiryTimer = this.clock.setTimeout(() => this.recompute(), Math.max(0, next - this.clock.wallNow()) + 5);
  }

  /** Watch and load until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const unsub = [
      this.sandboxes.subscribe(() => this.recompute()),
      this.configmaps.subscribe((c) => {
        if (c.object.metadata.name === HEARTBEAT_CONFIGMAP) {
          if (c.type === 'apply') this.staleness.observe(readHeartbeat(c.object) ?? { atMs: NaN, seq: 0, holder: '', resourceVersion: '' });
          return;
        }
        this.recompute();
      }),
    ];
    const both = Promise.all([this.sandboxes.store.ready(signal), this.configmaps.store.ready(signal)]).then(
      () => this.recompute(),
      () => undefined,
    );
    try {
      await Promise.all([this.sandboxes.run(signal), this.configmaps.run(signal), both]);
    } finally {
      for (const u of unsub) u();
      this.expiryTimer?.cancel();
    }
  }
}
