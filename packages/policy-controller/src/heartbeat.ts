import { systemClock } from '@kars/kube-core';
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
  /** Ends the current wait of {@link run} early (set while it waits). */
  private wakeUp: (() => void) | undefined;
  /** A wake that came while {@link run} was not waiting: its next wait returns at once. */
  private woken = false;
  /** Namespaces beaten since this replica started leading (cleared while it does not lead). */
  private readonly beaten = new Set<string>();
  /** A namespace seen with a sandbox that has had no beat yet in this term. */
  private unbeaten = false;

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

  /**
   * Check now instead of at the end of the current wait: call it when this replica starts
   * leading and when the sandbox store becomes ready, so the first beat goes out at once.
   */
  wake(): void {
    if (this.wakeUp) this.wakeUp();
    else this.woken = true;
  }

  /**
   * A sandbox exists in `namespace`: when that namespace has had no beat yet in this leadership
   * term, it gets one now (only it, not the whole fleet), instead of after up to one interval.
   */
  noteNamespace(namespace: string): void {
    if (namespace === '' || this.beaten.has(namespace)) return;
    this.unbeaten = true;
    this.wake();
  }

  /**
   * Write one round now: every namespace once, or only `only`. Resolves when every write has
   * finished.
   */
  async beat(only?: readonly string[]): Promise<void> {
    const namespaces = only === undefined ? this.namespaces() : [...only];
    for (const ns of namespaces) this.beaten.add(ns);
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

  /**
   * Beat every intervalMs while leading, until `signal` aborts. The first round goes out as soon as
   * this replica leads and the sandbox store is ready (with {@link wake} called on those edges),
   * not one interval later; then one round per interval from there. A namespace that gets its first
   * sandbox between rounds is beaten at once ({@link noteNamespace}).
   */
  async run(signal: AbortSignal): Promise<void> {
    const interval = this.opts.intervalMs;
    if (interval <= 0) return;
    const clock = this.opts.clock ?? systemClock;
    let round: Promise<void> | undefined;
    /** Monotonic time the next full round is due; undefined: due now (a new term). */
    let nextFullAt: number | undefined;
    const tick = (): void => {
      if (!this.opts.isLeader() || !this.opts.sandboxes.isReady()) {
        nextFullAt = undefined;
        this.beaten.clear();
        this.unbeaten = false;
        return;
      }
      if (round) return;
      const now = clock.now();
      let only: string[] | undefined;
      if (nextFullAt === undefined || now >= nextFullAt) nextFullAt = now + interval;
      else if (this.unbeaten) only = this.namespaces().filter((n) => !this.beaten.has(n));
      else return;
      this.unbeaten = false;
      if (only?.length === 0) return;
      round = this.beat(only).finally(() => {
        round = undefined;
        this.wake(); // a namespace noted while the round ran is not left for a whole interval
      });
    };
    while (!signal.aborted) {
      tick();
      if (this.woken) {
        this.woken = false;
        continue;
      }
      const wait = nextFullAt === undefined ? interval : Math.max(0, nextFullAt - clock.now());
      await new Promise<void>((resolve) => {
        const done = (): void => {
          timer.cancel();
          signal.removeEventListener('abort', done);
          this.wakeUp = undefined;
          resolve();
        };
        const timer = clock.setTimeout(done, wait, { keepAlive: true });
        signal.addEventListener('abort', done, { once: true });
        this.wakeUp = done;
      });
    }
    await round;
  }
}
