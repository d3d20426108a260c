/**
 * The one time source of kars (ADR 0016). Everything that waits or measures time takes a
 * {@link Clock}, so its timing can be tested in virtual time with {@link FakeClock}.
 *
 * `now()` is milliseconds on a monotonic timeline (compare and subtract, never format);
 * `wallNow()` is epoch milliseconds, only for timestamps written into objects or compared with
 * timestamps other processes wrote.
 */

/** A pending timer; `cancel` is idempotent. */
export interface Timer {
  cancel(): void;
}

/** Options of {@link Clock.setTimeout}. */
export interface TimerOptions {
  /**
   * Keep the process alive while this timer is pending (a loop's own sleep). Default false: a
   * pending timer alone does not keep the process alive.
   */
  keepAlive?: boolean;
}

/** A time source: monotonic now, wall-clock now, and one-shot timers. */
export interface Clock {
  /** Current time in milliseconds on this clock's monotonic timeline. */
  now(): number;
  /** Wall-clock time in epoch milliseconds (`Date.now()` for the real clock). */
  wallNow(): number;
  /** Run `fn` once, `ms` milliseconds from now (negative or NaN count as 0, +Infinity never fires). */
  setTimeout(fn: () => void, ms: number, opts?: TimerOptions): Timer;
}

/** Node caps a single timer at 2^31-1 ms and fires longer ones after 1 ms; longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Negative and NaN delays mean "now"; +Infinity means "never". */
function normalizeDelay(ms: number): number {
  return Number.isNaN(ms) ? 0 : Math.max(0, ms);
}

/**
 * Real time: `performance.now()`, `Date.now()` and Node timers.
 *
 * Guarantees: delays longer than Node's 24.8-day timer limit are honoured (chained), not
 * collapsed to 1 ms.
 *
 * Caveats: timers are `unref`'d unless `keepAlive` is set, so a pending timer alone does not keep
 * the process alive; something else (a server, a watch connection, a keep-alive timer) must.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout(fn: () => void, ms: number, opts?: TimerOptions): Timer {
    let handle: NodeJS.Timeout | undefined;
    const arm = (remaining: number): void => {
      const step = Math.min(remaining, MAX_TIMER_MS);
      handle = setTimeout(() => {
        if (remaining > step) arm(remaining - step);
        else fn();
      }, step);
      if (!opts?.keepAlive) handle.unref();
    };
    const delay = normalizeDelay(ms);
    if (delay !== Infinity) arm(delay);
    return {
      cancel(): void {
        if (handle !== undefined) clearTimeout(handle);
      },
    };
  },
};

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/** Let promise continuations and `setImmediate` callbacks already queued run (no real waiting). */
function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Virtual time for tests: time stands still until {@link FakeClock.advance} or
 * {@link FakeClock.advanceAsync} moves it.
 *
 * Guarantees: `advance` runs every timer that falls due within the advanced window, in order of
 * due time (ties in the order they were set), with `now()` equal to the timer's due time while it
 * runs. Timers set by a running timer also run if they fall due within the window. `wallNow()`
 * moves with `now()`, from the wall start given to the constructor.
 *
 * Caveats: `advance` is synchronous; promise continuations triggered by a timer run after it
 * returns. Use `advanceAsync` for code that awaits between timers (loops that sleep).
 */
export class FakeClock implements Clock {
  private current: number;
  private readonly wallOffset: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  /**
   * @param start the initial value of `now()`, default 0.
   * @param wallStart the initial value of `wallNow()`, default 2026-01-01T00:00:00Z.
   */
  constructor(start = 0, wallStart = Date.UTC(2026, 0, 1)) {
    this.current = start;
    this.wallOffset = wallStart - start;
  }

  now(): number {
    return this.current;
  }

  wallNow(): number {
    return this.wallOffset + this.current;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    const timer: FakeTimer = { at: this.current + normalizeDelay(ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return {
      cancel: (): void => {
        this.timers = this.timers.filter((t) => t !== timer);
      },
    };
  }

  /**
   * Move time forward by `ms` (≥ 0), running due timers in order. If a timer throws, time stops
   * at that timer's due time and the error propagates; later timers stay pending.
   */
  advance(ms: number): void {
    const target = this.target(ms);
    for (;;) {
      const next = this.nextDue(target);
      if (!next) break;
      this.fire(next);
    }
    this.current = target;
  }

  /**
   * Like {@link advance}, but lets the work each timer starts run before the next one fires:
   * before the first timer and after each one, pending promise continuations and immediates
   * run (no real time passes). Use it for loops that `await` a sleep on this clock.
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.target(ms);
    await flush();
    for (;;) {
      const next = this.nextDue(target);
      if (!next) break;
      this.fire(next);
      await flush();
    }
    this.current = target;
    await flush();
  }

  /** Number of timers set and not yet run or cancelled. */
  pending(): number {
    return this.timers.length;
  }

  /** Milliseconds until the next pending timer is due, or undefined when none is pending. */
  nextTimerInMs(): number | undefined {
    let at: number | undefined;
    for (const t of this.timers) if (t.at !== Infinity && (at === undefined || t.at < at)) at = t.at;
    return at === undefined ? undefined : at - this.current;
  }

  private target(ms: number): number {
    if (!(ms >= 0)) throw new RangeError(`FakeClock.advance needs a non-negative duration, got ${ms}`);
    return this.current + ms;
  }

  private fire(t: FakeTimer): void {
    this.timers = this.timers.filter((x) => x !== t);
    this.current = t.at;
    t.fn();
  }

  private nextDue(target: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.at > target) continue;
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/**
 * Resolve after `ms` on `clock`, or at once when `signal` aborts (never rejects). The timer keeps
 * the process alive (a loop's sleep), and never outlives the wait.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms, { keepAlive: true });
    signal?.addEventListener('abort', done, { once: true });
  });
}
