import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger } from '@kars/kube-core';
import type { ResourceRef } from '@kars/kube-client';
import type { WatchMetrics } from './metrics.js';
import { compareResourceVersions } from './own-writes.js';
import { keyOf, Store } from './store.js';
import type { Change, ChangeSource, IndexFn } from './store.js';
import type { WatchConfig } from './watch-config.js';
import { runWatcher } from './watcher.js';
import type { RelistReason, WatchClient, WatcherEvent } from './watcher.js';

/** @deprecated The runtime's logger is kube-core's {@link Logger}; this alias remains for old imports. */
export type RuntimeLogger = Logger;

export interface ReflectorOptions<T extends KubeObject> {
  /** Names this watch in logs and metrics, e.g. "inferencepolicies" or "router-configmaps". */
  name: string;
  /** A `KubeClient` (anything with its `list` and `watch`). */
  client: WatchClient;
  resource: ResourceRef;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  config: WatchConfig;
  indexers?: Record<string, IndexFn<T>>;
  metrics?: WatchMetrics;
  log?: Logger;
  /**
   * Applied to every object before it is cached and handed to subscribers (client-go's
   * SetTransform), e.g. {@link dropManagedFields} to keep less memory per cached object. It may
   * modify and return the object it is given; it must keep metadata.name, namespace and
   * resourceVersion.
   */
  transform?: (obj: T) => T;
  /** Time source for freshness and the watcher's timers; default the system clock. */
  clock?: Clock;
}

/** A {@link ReflectorOptions.transform} that drops metadata.managedFields, as most controllers never read them. */
export function dropManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields !== undefined) delete obj.metadata.managedFields;
  return obj;
}

/** What a process needs of a reflector it runs, whatever its object type (see {@link Reflector}). */
export interface ReflectorHandle<T extends KubeObject = KubeObject> extends ChangeSource<T> {
  readonly name: string;
  run(signal: AbortSignal): Promise<void>;
  isWatching(): boolean;
  staleForMs(now?: number): number;
  isFresh(now?: number): boolean;
  freshnessBoundMs(): number;
}

/** Whether an incoming copy is older than the cached one (resourceVersions compared as integers when both are). */
function isStale(incoming: KubeObject, cached: KubeObject | undefined): boolean {
  if (!cached) return false;
  return (compareResourceVersions(incoming.metadata.resourceVersion, cached.metadata.resourceVersion) ?? 0) < 0;
}

/**
 * Keeps a {@link Store} in step with the API through {@link watcher}, and tells subscribers about
 * every change it applies, in order.
 *
 * Guarantees: the store is ready only after the first complete list; a relist is swapped in at
 * once and reported as applies for new or changed objects and deletes for vanished ones (nothing
 * invented); drift found by the periodic relist-and-diff is repaired, counted and logged.
 * Memory: one copy of each object, plus one buffered listing while a relist runs.
 */
export class Reflector<T extends KubeObject = KubeObject> implements ReflectorHandle<T> {
  readonly store: Store<T>;
  private readonly subscribers = new Set<(c: Change<T>) => void>();
  /** When the watcher last confirmed it was current, on this reflector's clock. */
  private lastFresh: number | undefined;
  private streamOpen = false;
  private readonly clock: Clock;

  constructor(private readonly opts: ReflectorOptions<T>) {
    this.store = new Store<T>(opts.indexers ?? {});
    this.clock = opts.clock ?? systemClock;
  }

  get name(): string {
    return this.opts.name;
  }

  subscribe(fn: (c: Change<T>) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  /** Whether a watch stream is open right now (false while listing or reconnecting). */
  isWatching(): boolean {
    return this.streamOpen;
  }

  /**
   * Milliseconds since the watcher last confirmed it was current (event, bookmark, list, open).
   * `now` is on this reflector's clock (monotonic by default, not `Date.now()`); omit it.
   */
  staleForMs(now = this.clock.now()): number {
    return this.lastFresh === undefined ? Infinity : now - this.lastFresh;
  }

  /**
   * Whether the view is confirmed fresh within the watch's bound (idle deadline plus one PING
   * probe): false before the first list, and while a watch has been silent past that bound.
   */
  isFresh(now = this.clock.now()): boolean {
    return this.store.isReady() && this.staleForMs(now) <= this.freshnessBoundMs();
  }

  /** How long the view may go unconfirmed before it counts as stale: the idle deadline plus one PING probe. */
  freshnessBoundMs(): number {
    return this.opts.config.idleTimeoutMs + this.opts.config.pingTimeoutMs;
  }

  private emit(c: Change<T>): void {
    for (const fn of this.subscribers) {
      try {
        fn(c);
      } catch (err) {
        this.opts.log?.warn({ watch: this.opts.name, err: err instanceof Error ? err.message : String(err) }, 'change subscriber threw');
      }
    }
  }

  /** Swap a complete listing in and report what it changed (drift, when the relist was the periodic one). */
  private relisted(listed: T[], reason: RelistReason): void {
    const changes = this.store.replace(listed);
    if (reason === 'periodic' && changes.length > 0) {
      this.opts.metrics?.driftRepaired(changes.length);
      this.opts.log?.warn(
        {
          watch: this.opts.name,
          repaired: changes.length,
          keys: changes.slice(0, 10).map((c) => `${c.type}:${c.object.metadata.namespace ?? ''}/${c.object.metadata.name ?? ''}`),
        },
        'relist found drift; repaired',
      );
    }
    for (const c of changes) this.emit(c);
  }

  /**
   * Apply one watched object (the per-event hot path, on its own so that the batch loop compiles
   * small: TurboFan's time to optimize that loop is paid once per process, and a watch that sees a
   * few thousand events spends a measurable share of its CPU on it). A copy older than the cached
   * one is ignored.
   */
  private applyWatched(incoming: T, transform: ((obj: T) => T) | undefined): void {
    const key = keyOf(incoming);
    const cached = this.store.get(key);
    if (isStale(incoming, cached)) return;
    const object = transform ? transform(incoming) : incoming;
    // A transform must keep the name and namespace, so the key stays the same.
    const old = transform ? this.store.apply(object) : this.store.applyAt(key, object, cached);
    this.emit({ type: 'apply', object, old });
  }

  /** Run until `signal` aborts. Never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const log = this.opts.log;
    const name = this.opts.name;
    let buffer: T[] = [];
    const transform = this.opts.transform;
    // Everything but an apply: deletes, and a (re)list (buffered, then swapped in by relisted()).
    const onOther = (ev: WatcherEvent<T>): void => {
      switch (ev.type) {
        case 'delete': {
          const object = transform ? transform(ev.object) : ev.object;
          const old = this.store.delete(object);
          this.emit({ type: 'delete', object: old ?? object });
          break;
        }
        case 'init':
          buffer = [];
          break;
        case 'initApply':
          buffer.push(transform ? transform(ev.object) : ev.object);
          break;
        case 'initDone':
          this.relisted(buffer, ev.reason);
          buffer = [];
          break;
        case 'apply':
        case 'bookmark':
        case 'restart':
          break;
      }
    };
    // Each batch is handled synchronously as the watcher reads it (no promise per watch event).
    const onBatch = (batch: Array<WatcherEvent<T>>): void => {
      for (let i = 0; i < batch.length; i++) {
        const ev = batch[i] as WatcherEvent<T>;
        if (ev.type === 'apply') this.applyWatched(ev.object, transform);
        else onOther(ev);
      }
    };
    await runWatcher<T>(
      {
        client: this.opts.client,
        resource: this.opts.resource,
        namespace: this.opts.namespace,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        config: this.opts.config,
        metrics: this.opts.metrics,
        clock: this.clock,
        log: log?.child({ watch: name }),
        onFresh: () => {
          this.lastFresh = this.clock.now();
        },
        onWatching: (open) => {
          this.streamOpen = open;
        },
      },
      signal,
      onBatch,
    );
  }
}
