import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';

/** Decides how long a failing key waits before its next retry, per key. */
export interface RateLimiter {
  /** Delay in ms before the key's next retry; each call counts one more retry. */
  when(key: string): number;
  /** Reset the key's retry count (call after a success). */
  forget(key: string): void;
  /** Retries counted for the key since it was last forgotten. */
  retries(key: string): number;
}

/**
 * Per-key exponential backoff: the n-th retry (from 0) waits `min(maxMs, baseMs · 2^n)`, shortened
 * by a random fraction of at most `jitter` so keys that failed together spread out.
 *
 * Guarantees: without jitter, delays double per retry until capped; a delay never exceeds
 * `maxMs`; `forget` restarts the sequence at `baseMs`.
 *
 * Memory: one counter per key that failed and was not forgotten.
 *
 * @param opts.baseMs first delay, default 5 ms.
 * @param opts.maxMs cap, default 60 000 ms.
 * @param opts.jitter fraction in [0, 1]; each delay lies in `[(1 - jitter)·d, d]`. Default 0.2.
 * @param opts.random source of uniform numbers in [0, 1), default `Math.random` (for tests).
 */
export function exponentialRateLimiter(
  opts: { baseMs?: number; maxMs?: number; jitter?: number; random?: () => number } = {},
): RateLimiter {
  const baseMs = opts.baseMs ?? 5;
  const maxMs = opts.maxMs ?? 60_000;
  const jitter = opts.jitter ?? 0.2;
  const random = opts.random ?? Math.random;
  if (!(baseMs >= 0) || !(maxMs >= baseMs))
    throw new RangeError(`exponentialRateLimiter needs 0 <= baseMs <= maxMs, got baseMs=${baseMs} maxMs=${maxMs}`);
  if (!(jitter >= 0 && jitter <= 1)) throw new RangeError(`exponentialRateLimiter needs jitter in [0, 1], got ${jitter}`);
  const failures = new Map<string, number>();
  return {
    when(key: string): number {
      const n = failures.get(key) ?? 0;
      failures.set(key, n + 1);
      const d = Math.min(maxMs, baseMs * 2 ** n);
      return jitter === 0 ? d : d * (1 - jitter * random());
    },
    forget(key: string): void {
      failures.delete(key);
    },
    retries(key: string): number {
      return failures.get(key) ?? 0;
    },
  };
}

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Time source for `addAfter`; default {@link systemClock}. */
  clock?: Clock;
  /** Backoff for `addRateLimited`; default `exponentialRateLimiter()`. */
  rateLimiter?: RateLimiter;
  /** Called with `len()` whenever the number of waiting keys changes (e.g. a depth gauge). */
  onDepth?: (n: number) => void;
}

/**
 * A keyed work queue in the manner of client-go's workqueue and kube-rs' scheduler: it holds
 * keys, not events, so a burst of changes to one object becomes one unit of work.
 *
 * A key is in at most one of three states at a time: *waiting* (in the queue), *processing*
 * (handed out by `get`, not yet `done`), or *processing and dirty* (re-added while processing).
 * Timed adds (`addAfter`) are held apart until due and then added like `add`.
 *
 * Guarantees:
 * - Dedup: a key waiting in the queue is stored once, however often it is added.
 * - Exclusion: a key handed out by `get` is not handed out again until `done(key)`, so two
 *   workers never process the same key at once.
 * - No lost wake-ups: a key added while it is processing is queued again, once, at `done`.
 * - Order: waiting keys are handed out first-in, first-out (by first add).
 * - Per key, at most one timed add is pending; the soonest wins.
 *
 * Caveats: after `shutDown`, `get` resolves `undefined` at once even if keys are still waiting
 * (they are dropped, not drained), and adds are ignored.
 */
export class WorkQueue {
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter;
  private readonly onDepth: ((n: number) => void) | undefined;
  /** Waiting keys, in FIFO order (a Set keeps insertion order and dedups). */
  private readonly waiting = new Set<string>();
  private readonly processing = new Set<string>();
  /** Keys added while processing; queued again at `done`. */
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; cancel(): void }>();
  private readonly getters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;

  constructor(opts: WorkQueueOptions = {}) {
    this.clock = opts.clock ?? systemClock;
    this.rateLimiter = opts.rateLimiter ?? exponentialRateLimiter();
    this.onDepth = opts.onDepth;
  }

  /** Queue `key` now. No-op if it is already waiting, or after `shutDown`. */
  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.waiting.has(key)) return;
    this.waiting.add(key);
    this.dispatch();
  }

  /**
   * Queue `key` after `ms` milliseconds (at once if `ms` ≤ 0). If a timed add for the key is
   * already pending, the sooner of the two is kept.
   */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const pending = this.timers.get(key);
    if (pending) {
      if (pending.at <= at) return;
      pending.cancel();
    }
    const t = this.clock.setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, cancel: () => t.cancel() });
  }

  /** `addAfter(key, rateLimiter.when(key))`: retry with the key's next backoff delay. */
  addRateLimited(key: string): void {
    if (this.shuttingDown) return;
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Reset the key's retry count. Does not cancel a pending timed add. */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  /**
   * The next waiting key, marked processing; waits if none is waiting. Resolves `undefined` when
   * the queue shuts down or `signal` aborts. The caller must call `done(key)` when finished.
   */
  get(signal: AbortSignal): Promise<string | undefined> {
    if (this.shuttingDown || signal.aborted) return Promise.resolve(undefined);
    const key = this.take();
    if (key !== undefined) return Promise.resolve(key);
    return new Promise((resolve) => {
      const getter = (k: string | undefined): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(k);
      };
      const onAbort = (): void => {
        const i = this.getters.indexOf(getter);
        if (i >= 0) this.getters.splice(i, 1);
        resolve(undefined);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.getters.push(getter);
    });
  }

  /** Processing of `key` finished. If it was added meanwhile, it is queued again now. */
  done(key: string): void {
    if (!this.processing.delete(key)) return;
    if (this.dirty.delete(key) && !this.shuttingDown) {
      this.waiting.add(key);
      this.dispatch();
    }
  }

  /** Number of keys waiting (not processing, not held for a timed add). */
  len(): number {
    return this.waiting.size;
  }

  /** Stop: cancel timed adds, drop waiting keys, resolve every pending `get` with `undefined`. */
  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
    this.dirty.clear();
    const hadWaiting = this.waiting.size > 0;
    this.waiting.clear();
    if (hadWaiting) this.reportDepth();
    for (const g of this.getters.splice(0)) g(undefined);
  }

  /** Pop the first waiting key and mark it processing. */
  private take(): string | undefined {
    const first = this.waiting.values().next();
    if (first.done) return undefined;
    const key = first.value;
    this.waiting.delete(key);
    this.processing.add(key);
    this.reportDepth();
    return key;
  }

  /** Hand waiting keys to waiting getters; report the depth if nothing was handed out. */
  private dispatch(): void {
    let handed = false;
    while (this.getters.length > 0 && this.waiting.size > 0) {
      const getter = this.getters.shift();
      const key = this.take();
      handed = true;
      if (getter && key !== undefined) getter(key);
    }
    if (!handed) this.reportDepth();
  }

  private reportDepth(): void {
    if (!this.onDepth) return;
    try {
      this.onDepth(this.waiting.size);
    } catch {
      // A metrics callback must not break the queue.
    }
  }
}
