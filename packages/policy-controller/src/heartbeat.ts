import { sleep, systemClock } from '@kars/kube-core';
import type { Clock, Logger } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import type { StoreReader } from '@kars/kube-runtime';
import { heartbeatConfigMap, HEARTBEAT_LABEL } from '@kars/policy-api';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '@kars/policy-compiler';
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

export interface HeartbeatWriterOptions {
  client: KubeClient;
  /** The KarsSandbox store: a heartbeat goes to every namespace that holds one. */
  sandboxes: StoreReader;
  /** Only the leader writes (one writer, so a reader's "newest" is well defined). */
  isLeader: () => boolean;
  identity: string;
  /** Period; 0 turns the heartbeat off. */
  intervalMs: number;
  log: Logger;
  registry?: Registry;
  /** Time source: `wallNow()` stamps each beat, timers pace the rounds. Default the system clock. */
  clock?: Clock;
  /** Parallel writes per round (default 16). */
  concurrency?: number;
}

/**
 * Keeps `kars-heartbeat` current in every sandbox namespace while this replica leads: one
 * server-side apply per namespace per period, carrying the controller's clock and a sequence
 * number. The ConfigMap has the compiled-policy label, so it reaches routers through the very watch
 * that carries their policy (ADR 0011). A round that is still writing when the next is due is not
 * doubled up: the slow round is the signal (routers see staleness rise), not something to pile onto.
 */
export class HeartbeatWriter {
  private seq = 0;
  private readonly writes: Counter<'result'> | undefined;

  constructor(private readonly opts: HeartbeatWriterOptions) {
    this.writes = opts.registry
      ? new Counter({
          name: 'kars_controller_heartbeat_writes_total',
          help: 'Heartbeat ConfigMap writes by result.',
          labelNames: ['result'],
          registers: [opts.registry],
        })
      : undefined;
    this.writes?.inc({ result: 'ok' }, 0);
    this.writes?.inc({ result: 'error' }, 0);
  }

  /** The namespaces that get a heartbeat now. */
  namespaces(): string[] {
    return [
      ...new Set(
        this.opts.sandboxes
          .list()
          .map((s) => s.metadata.namespace ?? '')
          .filter((n) => n !== ''),
      ),
    ].sort();
  }

  /** Write one round now (every namespace once). Resolves when every write has finished. */
  async beat(): Promise<void> {
    const namespaces = this.namespaces();
    const seq = ++this.seq;
    const at = (this.opts.clock ?? systemClock).wallNow();
    const labels = { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [HEARTBEAT_LABEL]: 'true' };
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < namespaces.length) {
        const ns = namespaces[next++] as string;
        try {
          await this.opts.client.apply(
            Resources.configmaps,
            heartbeatConfigMap(ns, at, seq, this.opts.identity, labels),
            'kars-controller/heartbeat',
            { force: true },
          );
          this.writes?.inc({ result: 'ok' });
        } catch (err) {
          this.writes?.inc({ result: 'error' });
          this.opts.log.warn({ namespace: ns, err: err instanceof Error ? err.message : String(err) }, 'heartbeat write failed');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.concurrency ?? 16, namespaces.length) }, () => worker()));
  }

  /** Beat every intervalMs while leading, until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.opts.intervalMs <= 0) return;
    let round: Promise<void> | undefined;
    const tick = (): void => {
      if (round || !this.opts.isLeader() || !this.opts.sandboxes.isReady()) return;
      round = this.beat().finally(() => (round = undefined));
    };
    const clock = this.opts.clock ?? systemClock;
    while (!signal.aborted) {
      tick();
      await sleep(clock, this.opts.intervalMs, signal);
    }
    await round;
  }
}
