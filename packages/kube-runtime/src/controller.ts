import { randomUUID } from 'node:crypto';
import { silentLogger, systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger } from '@kars/kube-core';
import { traceHop } from '@kars/kube-client';
import type { ControllerMetrics } from './metrics.js';
import { WorkQueue, exponentialRateLimiter } from './queue.js';
import type { RateLimiter } from './queue.js';
import { keyOf } from './store.js';
import type { Change, ChangeSource } from './store.js';

/** How often an inactive controller re-checks `isActive` when nobody calls `wake()`. */
const ACTIVE_POLL_MS = 200;

/** What a reconcile gets besides its key. */
export interface ReconcileContext {
  /** Aborts when the controller shuts down; pass it to every API call. */
  signal: AbortSignal;
  /** A child logger carrying `{controller, key, reconcileId}`. */
  log: Logger;
  /** Failed attempts since the key last succeeded (0 on a first try). */
  attempt: number;
}

/** `undefined`: done, wait for the next change. `{ requeueAfterMs }`: done, look again after that long. */
export type ReconcileResult = void | { requeueAfterMs: number };

/**
 * Throw this from a reconcile when retrying cannot help (invalid spec, missing permission by
 * design). The key is not requeued; the error is logged and counted; the next change to the
 * object (or a trigger) reconciles it again.
 */
export class TerminalError extends Error {
  readonly code = 'KARS_RECONCILE_TERMINAL';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

/** Wraps a value a reconcile threw that was not an `Error`. */
class NonErrorThrown extends Error {
  readonly code = 'KARS_RECONCILE_NON_ERROR';

  constructor(key: string, value: unknown) {
    super(`reconcile of "${key}" threw a non-Error value: ${describe(value)}; throw Error instances instead`, { cause: value });
    this.name = 'NonErrorThrown';
  }
}

/**
 * A secondary source (objects the primary owns or depends on) and how its changes map to
 * primary keys.
 *
 * Caveat: for an `apply` change, map `old` too when the reference can move (e.g. an owner
 * reference or a `spec.sandboxRef` changed), so the previous primary is also reconciled.
 */
export interface Trigger<T extends KubeObject = KubeObject> {
  source: ChangeSource<T>;
  /** Primary keys ("namespace/name") to reconcile for this change; a throw is logged and skipped. */
  mapToKeys(c: Change<T>): string[];
}

/**
 * A trigger typed at the call site: `mapToKeys` sees changes of the source's own object type, and
 * the result fits `ControllerOptions.triggers` whatever the primary's type (no casts needed).
 */
export function trigger<T extends KubeObject>(source: ChangeSource<T>, mapToKeys: (c: Change<T>) => string[]): Trigger {
  return { source, mapToKeys };
}

/** What a process needs of a controller it runs, whatever its primary type (see {@link Controller}). */
export interface ControllerHandle {
  readonly name: string;
  run(signal: AbortSignal): Promise<void>;
  wake(): void;
  activity(): { waiting: number; inFlight: number; lastProgressMs: number };
}

/** Options of {@link Controller}. */
export interface ControllerOptions<P extends KubeObject> {
  /** Appears in logs and metric labels. */
  name: string;
  /** Each change of a primary object enqueues `keyOf(object)`. */
  primary: ChangeSource<P>;
  /** Secondary sources whose changes enqueue the primary keys they map to. */
  triggers?: Trigger[];
  /**
   * Make the cluster match the desired state of `key`. Reads current state from the stores (the
   * object may be gone: then clean up), never from event payloads. Must honour `ctx.signal`.
   *
   * Resolve → the key's backoff resets. Throw → retried with backoff, unless it is a
   * {@link TerminalError}.
   */
  reconcile: (key: string, ctx: ReconcileContext) => Promise<ReconcileResult>;
  /** Keys reconciled at once (never the same key twice at once). Default 2. */
  concurrency?: number;
  /** Retry backoff; default `exponentialRateLimiter()` (5 ms doubling to 60 s). */
  rateLimiter?: RateLimiter;
  /** Time source; default {@link systemClock}. */
  clock?: Clock;
  /** Base logger (a pino logger fits); default silent. */
  log?: Logger;
  /** Where to record queue depth and reconcile results, e.g. `runtimeMetrics.controller(name)`. */
  metrics?: ControllerMetrics;
  /** Gate: only reconcile while this returns true (leader election); keys stay queued otherwise. */
  isActive?: () => boolean;
}

/**
 * The controller loop: changes of the primary and trigger sources become keys in a
 * {@link WorkQueue}, and `concurrency` workers call `reconcile` for them, following
 * controller-runtime's Reconciler contract.
 *
 * Guarantees:
 * - Level-triggered: reconcile gets only a key; a burst of changes to one object while it waits
 *   yields one reconcile.
 * - The same key is never reconciled twice at once; a change arriving during its reconcile causes
 *   exactly one more reconcile afterwards, so no change is lost.
 * - No reconcile runs before every source's store is ready (fully listed); then every primary
 *   key is reconciled once.
 * - Outcomes: success → backoff forgotten, plus a timed requeue if `requeueAfterMs` is given;
 *   error → requeue with the key's next backoff delay; {@link TerminalError} → backoff
 *   forgotten, no requeue. Errors and terminal errors count as `error` in the metrics.
 * - A reconcile that throws (synchronously or not), or throws a non-Error, never stops the loop.
 *
 * Caveats:
 * - When `isActive()` turns false, reconciles already running are not cancelled; abort the run
 *   signal to fence hard. Call {@link Controller.wake} when it turns true, or the workers notice
 *   within 200 ms.
 * - A controller runs once; create a new one to run again.
 */
export class Controller<P extends KubeObject> implements ControllerHandle {
  private readonly opts: ControllerOptions<P>;
  private readonly queue: WorkQueue;
  private readonly rateLimiter: RateLimiter;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly concurrency: number;
  private readonly activeWaiters = new Set<() => void>();
  private started = false;
  private inFlight = 0;
  private lastProgressMs: number;
  private workersRunning = false;

  constructor(opts: ControllerOptions<P>) {
    const concurrency = opts.concurrency ?? 2;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`controller "${opts.name}": concurrency must be a positive integer, got ${concurrency}`);
    }
    this.opts = opts;
    this.concurrency = concurrency;
    this.clock = opts.clock ?? systemClock;
    this.rateLimiter = opts.rateLimiter ?? exponentialRateLimiter();
    this.log = opts.log ?? silentLogger;
    this.lastProgressMs = this.clock.now();
    const metrics = opts.metrics;
    this.queue = new WorkQueue({
      clock: this.clock,
      rateLimiter: this.rateLimiter,
      ...(metrics ? { onDepth: (n: number) => metrics.queueDepth(n) } : {}),
    });
  }

  /**
   * Wait until the primary and every trigger's store is ready, enqueue every primary key once,
   * then run workers until `signal` aborts. Resolves after in-flight reconciles finish (graceful
   * shutdown); keys still queued are dropped. Resolves at once if `signal` aborts while waiting
   * for the stores. Rejects if called a second time.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.started) throw new Error(`controller "${this.opts.name}" was already run; create a new Controller to run again`);
    this.started = true;
    const unsubscribe: Array<() => void> = [];
    const onAbort = (): void => {
      this.queue.shutDown();
      this.wake();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal.aborted) return;
      // Subscribe before waiting, so no change between "ready" and the initial enqueue is missed.
      unsubscribe.push(this.opts.primary.subscribe((c) => this.enqueue(keyOf(c.object))));
      for (const t of this.opts.triggers ?? []) unsubscribe.push(t.source.subscribe((c) => this.onTrigger(t, c)));

      const stores = [this.opts.primary.store, ...(this.opts.triggers ?? []).map((t) => t.source.store)];
      try {
        await Promise.all(stores.map((s) => s.ready(signal)));
      } catch (err: unknown) {
        if (signal.aborted) return;
        throw err;
      }
      if (signal.aborted) return;
      for (const o of this.opts.primary.store.list()) this.enqueue(keyOf(o));
      this.log.info({ controller: this.opts.name, concurrency: this.concurrency }, 'controller started');

      this.lastProgressMs = this.clock.now();
      this.workersRunning = true;
      const workers: Array<Promise<void>> = [];
      for (let i = 0; i < this.concurrency; i++) workers.push(this.worker(signal));
      await Promise.all(workers);
      this.workersRunning = false;
      this.log.info({ controller: this.opts.name }, 'controller stopped');
    } finally {
      signal.removeEventListener('abort', onAbort);
      for (const u of unsubscribe) u();
      this.queue.shutDown();
    }
  }

  /** Queue `key` ("namespace/name") for reconciliation; deduplicated with keys already waiting. */
  enqueue(key: string): void {
    this.queue.add(key);
  }

  /**
   * For the reconcile-activity watchdog: keys waiting, reconciles running, and when (on this
   * controller's clock) a reconcile last started or finished, or the controller last went idle.
   */
  activity(): { waiting: number; inFlight: number; lastProgressMs: number } {
    return { waiting: this.workersRunning ? this.queue.len() : 0, inFlight: this.inFlight, lastProgressMs: this.lastProgressMs };
  }

  /** The name given in the options (metrics, logs, the watchdog). */
  get name(): string {
    return this.opts.name;
  }

  /** Tell idle workers to re-check `isActive` now (call it when leadership is acquired). */
  wake(): void {
    for (const w of [...this.activeWaiters]) w();
  }

  private onTrigger(t: Trigger, c: Change): void {
    let keys: string[];
    try {
      keys = t.mapToKeys(c);
    } catch (err: unknown) {
      this.log.error({ controller: this.opts.name, err, object: keyOf(c.object) }, 'trigger mapToKeys threw; change skipped');
      return;
    }
    for (const k of keys) this.enqueue(k);
  }

  private active(): boolean {
    if (!this.opts.isActive) return true;
    try {
      return this.opts.isActive();
    } catch (err: unknown) {
      this.log.error({ controller: this.opts.name, err }, 'isActive threw; treating the controller as inactive');
      return false;
    }
  }

  /** Resolves on wake(), after the poll interval, or on abort. */
  private waitActive(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const finish = (): void => {
        timer.cancel();
        this.activeWaiters.delete(finish);
        signal.removeEventListener('abort', finish);
        resolve();
      };
      const timer = this.clock.setTimeout(finish, ACTIVE_POLL_MS);
      this.activeWaiters.add(finish);
      signal.addEventListener('abort', finish, { once: true });
    });
  }

  private async worker(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (!this.active()) {
        await this.waitActive(signal);
        this.lastProgressMs = this.clock.now(); // idle by design (not leading) is not a stall
        continue;
      }
      const key = await this.queue.get(signal);
      if (key === undefined) return;
      if (!this.active()) {
        // Lost the gate while waiting: hand the key back and idle.
        this.queue.add(key);
        this.queue.done(key);
        continue;
      }
      await this.process(key, signal);
    }
  }

  /** One reconcile of `key`; never throws, always marks the key done. */
  private async process(key: string, signal: AbortSignal): Promise<void> {
    const name = this.opts.name;
    const started = this.clock.now();
    this.lastProgressMs = started;
    this.inFlight++;
    try {
      const reconcileId = randomUUID();
      const log = this.log.child({ controller: name, key, reconcileId });
      const attempt = this.rateLimiter.retries(key);
      let result: ReconcileResult = undefined;
      let failure: Error | undefined;
      try {
        traceHop('rec.start', { c: this.opts.name, key });
        result = await this.opts.reconcile(key, { signal, log, attempt });
        traceHop('rec.end', { c: this.opts.name, key });
      } catch (err: unknown) {
        failure = err instanceof Error ? err : new NonErrorThrown(key, err);
      }
      if (failure === undefined && result !== undefined && result !== null && !validDelay(result)) {
        failure = new Error(
          `reconcile of "${key}" returned requeueAfterMs=${describe((result as { requeueAfterMs?: unknown }).requeueAfterMs)}; it must be a finite number >= 0`,
        );
      }
      const seconds = (this.clock.now() - started) / 1000;

      if (failure === undefined) {
        this.queue.forget(key);
        if (validDelay(result)) {
          this.queue.addAfter(key, result.requeueAfterMs);
          this.opts.metrics?.reconciled('requeue', seconds);
          log.debug({ seconds, requeueAfterMs: result.requeueAfterMs }, 'reconciled; requeue scheduled');
        } else {
          this.opts.metrics?.reconciled('success', seconds);
          log.debug({ seconds }, 'reconciled');
        }
      } else if (isTerminal(failure)) {
        this.queue.forget(key);
        this.opts.metrics?.reconciled('error', seconds);
        log.error({ err: failure, seconds, attempt }, 'reconcile failed terminally; not retrying until the next change');
      } else {
        this.queue.addRateLimited(key);
        this.opts.metrics?.reconciled('error', seconds);
        if (signal.aborted) log.warn({ err: failure, seconds }, 'reconcile failed during shutdown');
        else log.error({ err: failure, seconds, attempt }, 'reconcile failed; retrying with backoff');
      }
    } catch (err: unknown) {
      // Only a throwing logger, metrics sink or rate limiter gets here; keep the worker alive.
      try {
        this.log.error({ controller: name, key, err }, 'controller bookkeeping failed');
      } catch {
        // Nothing left to report to.
      }
    } finally {
      this.inFlight--;
      this.lastProgressMs = this.clock.now();
      this.queue.done(key);
    }
  }
}

function validDelay(r: unknown): r is { requeueAfterMs: number } {
  if (typeof r !== 'object' || r === null) return false;
  const ms = (r as { requeueAfterMs?: unknown }).requeueAfterMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0;
}

function isTerminal(err: Error): boolean {
  return err instanceof TerminalError || (err as { code?: unknown }).code === 'KARS_RECONCILE_TERMINAL';
}

function describe(v: unknown): string {
  try {
    const s = typeof v === 'string' ? JSON.stringify(v) : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
    return s.length > 200 ? `${s.slice(0, 200)}…` : s;
  } catch {
    return Object.prototype.toString.call(v);
  }
}
