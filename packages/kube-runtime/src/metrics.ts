import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';

/** Why a watch stream was restarted; every reason is exported at zero from the start. */
export const WATCH_RESTART_REASONS = ['server_timeout', 'idle', 'ping', 'expired', 'error'] as const;
/** One of {@link WATCH_RESTART_REASONS}. */
export type WatchRestartReason = (typeof WATCH_RESTART_REASONS)[number];

/** Watch event types exported at zero from the start (others appear when first seen). */
const WATCH_EVENT_TYPES = ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR'] as const;
const RECONCILE_RESULTS = ['success', 'error', 'requeue'] as const;
/** Reconcile durations from 1 ms to 1 min. */
const RECONCILE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Freshness and restart metrics of one watch (one reflector), labelled `{watch}`. */
export interface WatchMetrics {
  /** Count one watch event by its type (`ADDED`, `MODIFIED`, ...) and record it as the last event. */
  event(type: string): void;
  /** Count a BOOKMARK (same as `event('BOOKMARK')`) and record it as the last event. */
  bookmark(): void;
  /** Count one restart of the watch stream. */
  restart(reason: WatchRestartReason): void;
  /** Count one full relist (after a 410 or at start). */
  relist(): void;
  /** Count `n` objects a relist found different from the cache (missed events repaired). */
  driftRepaired(n: number): void;
  /** Seconds since the last event or bookmark (or since this watch's metrics were created). */
  lastEventAgeSeconds(): number;
}

/** Queue and reconcile metrics of one controller, labelled `{controller}`. */
export interface ControllerMetrics {
  /** Set the number of keys waiting in the queue. */
  queueDepth(n: number): void;
  /** Record one finished reconcile; `error` also counts in `kars_controller_reconcile_errors_total`. */
  reconciled(result: 'success' | 'error' | 'requeue', seconds: number): void;
}

/**
 * The runtime's Prometheus metrics, all in one registry:
 *
 * - `kars_watch_last_event_age_seconds{watch}` gauge, computed when scraped
 * - `kars_watch_events_total{watch,type}`, `kars_watch_restarts_total{watch,reason}`,
 *   `kars_watch_relists_total{watch}`, `kars_watch_drift_repairs_total{watch}` counters
 * - `kars_controller_queue_depth{controller}` gauge,
 *   `kars_controller_reconcile_duration_seconds{controller}` histogram,
 *   `kars_controller_reconcile_total{controller,result}`,
 *   `kars_controller_reconcile_errors_total{controller}` counters
 * - `kars_leader_is_leader{lease}` gauge (1 or 0)
 *
 * Guarantees: each label set is exported at zero as soon as its `watch`/`controller`/`leader`
 * handle is created, for every known `type`, `reason` and `result`, so rates and alerts work
 * before the first event. Asking twice for the same name returns the same handle.
 *
 * Caveats: create one instance per process (per registry); a second instance on the same
 * registry throws, because the metric names are already registered.
 */
export class RuntimeMetrics {
  /** The registry holding every metric; serve it with `startHealthServer`. */
  readonly registry: Registry;
  private readonly clock: Clock;
  private readonly watches = new Map<string, WatchMetricsImpl>();
  private readonly controllers = new Map<string, ControllerMetrics>();
  private readonly leaders = new Map<string, { set(isLeader: boolean): void }>();

  private readonly watchEvents: Counter<'watch' | 'type'>;
  private readonly watchRestarts: Counter<'watch' | 'reason'>;
  private readonly watchRelists: Counter<'watch'>;
  private readonly watchDrift: Counter<'watch'>;
  private readonly queueDepth: Gauge<'controller'>;
  private readonly reconcileDuration: Histogram<'controller'>;
  private readonly reconcileTotal: Counter<'controller' | 'result'>;
  private readonly reconcileErrors: Counter<'controller'>;
  private readonly isLeader: Gauge<'lease'>;

  /**
   * @param registry where to register; default a new `Registry` that also gets prom-client's
   *   default process metrics. A registry you pass gets only the kars metrics.
   * @param opts.clock time source for the last-event age, default {@link systemClock}.
   */
  constructor(registry?: Registry, opts: { clock?: Clock } = {}) {
    this.clock = opts.clock ?? systemClock;
    if (registry) {
      this.registry = registry;
    } else {
      this.registry = new Registry();
      collectDefaultMetrics({ register: this.registry });
    }
    const registers = [this.registry];
    const watches = this.watches;
    const age: Gauge<'watch'> = new Gauge({
      name: 'kars_watch_last_event_age_seconds',
      help: 'Seconds since the watch last received an event or bookmark.',
      labelNames: ['watch'],
      registers,
      collect(): void {
        for (const [name, w] of watches) age.set({ watch: name }, w.lastEventAgeSeconds());
      },
    });
    /** A counter or gauge in this registry, with these label names. */
    const counter = <L extends string>(name: string, help: string, ...labelNames: L[]): Counter<L> =>
      new Counter({ name, help, labelNames, registers });
    const gauge = <L extends string>(name: string, help: string, ...labelNames: L[]): Gauge<L> =>
      new Gauge({ name, help, labelNames, registers });
    this.watchEvents = counter('kars_watch_events_total', 'Watch events received, by type.', 'watch', 'type');
    this.watchRestarts = counter('kars_watch_restarts_total', 'Watch stream restarts, by reason.', 'watch', 'reason');
    this.watchRelists = counter('kars_watch_relists_total', 'Full relists of the watched collection.', 'watch');
    this.watchDrift = counter('kars_watch_drift_repairs_total', 'Objects a relist found out of date in the cache.', 'watch');
    this.queueDepth = gauge('kars_controller_queue_depth', 'Keys waiting in the work queue.', 'controller');
    this.reconcileDuration = new Histogram({
      name: 'kars_controller_reconcile_duration_seconds',
      help: 'Time spent in reconcile.',
      labelNames: ['controller'],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.reconcileTotal = counter('kars_controller_reconcile_total', 'Finished reconciles, by result.', 'controller', 'result');
    this.reconcileErrors = counter('kars_controller_reconcile_errors_total', 'Reconciles that failed (retried or terminal).', 'controller');
    this.isLeader = gauge('kars_leader_is_leader', '1 while this process holds the lease, else 0.', 'lease');
  }

  /** The metrics of the watch called `name`, created at zero on first use. */
  watch(name: string): WatchMetrics {
    let w = this.watches.get(name);
    if (w) return w;
    const labels = { watch: name };
    for (const type of WATCH_EVENT_TYPES) this.watchEvents.inc({ ...labels, type }, 0);
    for (const reason of WATCH_RESTART_REASONS) this.watchRestarts.inc({ ...labels, reason }, 0);
    this.watchRelists.inc(labels, 0);
    this.watchDrift.inc(labels, 0);
    w = new WatchMetricsImpl(name, this.clock, this.watchEvents, this.watchRestarts, this.watchRelists, this.watchDrift);
    this.watches.set(name, w);
    return w;
  }

  /** The metrics of the controller called `name`, created at zero on first use. */
  controller(name: string): ControllerMetrics {
    let c = this.controllers.get(name);
    if (c) return c;
    const labels = { controller: name };
    this.queueDepth.set(labels, 0);
    this.reconcileDuration.zero(labels);
    for (const result of RECONCILE_RESULTS) this.reconcileTotal.inc({ ...labels, result }, 0);
    this.reconcileErrors.inc(labels, 0);
    const { queueDepth, reconcileDuration, reconcileTotal, reconcileErrors } = this;
    c = {
      queueDepth(n: number): void {
        queueDepth.set(labels, n);
      },
      reconciled(result: 'success' | 'error' | 'requeue', seconds: number): void {
        reconcileDuration.observe(labels, Math.max(0, seconds));
        reconcileTotal.inc({ ...labels, result });
        if (result === 'error') reconcileErrors.inc(labels);
      },
    };
    this.controllers.set(name, c);
    return c;
  }

  /** The leadership gauge of `lease`, created at 0 (not leader) on first use. */
  leader(lease: string): { set(isLeader: boolean): void } {
    let l = this.leaders.get(lease);
    if (l) return l;
    const labels = { lease };
    const gauge = this.isLeader;
    gauge.set(labels, 0);
    l = {
      set(isLeader: boolean): void {
        gauge.set(labels, isLeader ? 1 : 0);
      },
    };
    this.leaders.set(lease, l);
    return l;
  }
}

class WatchMetricsImpl implements WatchMetrics {
  private lastEventAt: number;
  private readonly eventsByType = new Map<string, { inc(): void }>();

  constructor(
    private readonly name: string,
    private readonly clock: Clock,
    private readonly events: Counter<'watch' | 'type'>,
    private readonly restarts: Counter<'watch' | 'reason'>,
    private readonly relists: Counter<'watch'>,
    private readonly drift: Counter<'watch'>,
  ) {
    this.lastEventAt = clock.now();
  }

  event(type: string): void {
    // One labelled child per event type, looked up once: prom-client hashes the label object on
    // every inc() otherwise, and this runs for every event of every watch.
    let child = this.eventsByType.get(type);
    if (!child) this.eventsByType.set(type, (child = this.events.labels({ watch: this.name, type })));
    child.inc();
    this.lastEventAt = this.clock.now();
  }

  bookmark(): void {
    this.event('BOOKMARK');
  }

  restart(reason: WatchRestartReason): void {
    this.restarts.inc({ watch: this.name, reason });
  }

  relist(): void {
    this.relists.inc({ watch: this.name });
  }

  driftRepaired(n: number): void {
    if (n > 0 && Number.isFinite(n)) this.drift.inc({ watch: this.name }, n);
  }

  lastEventAgeSeconds(): number {
    return Math.max(0, (this.clock.now() - this.lastEventAt) / 1000);
  }
}
