/**
 * A minimal time source, so the queue, backoff and controller can run in virtual time in tests.
 *
 * Times are milliseconds on a monotonic timeline. They are not wall-clock times: compare and
 * subtract them, never format them as dates.
 */
export interface Clock {
  /** Current time in milliseconds on this clock's monotonic timeline. */
  now(): number;
  /**
   * Run `fn` once, `ms` milliseconds from now (negative or NaN count as 0, +Infinity never fires).
   *
   * Caveat: timers of {@link systemClock} do not keep the process alive.
   */
  setTimeout(fn: () => void, ms: number): { cancel(): void };
}

/** Node caps a single timer at 2^31-1 ms and fires longer ones after 1 ms; longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Negative and NaN delays mean "now"; +Infinity means "never". */
function normalizeDelay(ms: number): number {
  return Number.isNaN(ms) ? 0 : Math.max(0, ms);
}

/**
 * Real time: `performance.now()` and Node timers.
 *
 * Guarantees: delays longer than Node's 24.8-day timer limit are honoured (chained), not
 * collapsed to 1 ms.
 *
 * Caveats: timers are `unref`'d, so a pending timer alone does not keep the process alive;
 * something else (a server, a watch connection) must.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout(fn: () => void, ms: number): { cancel(): void } {
    let handle: NodeJS.Timeout | undefined;
    const arm = (remaining: number): void => {
      const step = Math.min(remaining, MAX_TIMER_MS);
      handle = setTimeout(() => {
        if (remaining > step) arm(remaining - step);
        else fn();
      }, step);
      handle.unref();
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

/**
 * Virtual time for tests: time stands still until {@link FakeClock.advance} moves it.
 *
 * Guarantees: `advance` runs every timer that falls due within the advanced window, in order of
 * due time (ties in the order they were set), with `now()` equal to the timer's due time while it
 * runs. Timers set by a running timer also run if they fall due within the window.
 *
 * Caveats: `advance` is synchronous; promise continuations triggered by a timer run after it
 * returns, so tests that await such work must yield to the event loop afterwards.
 */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  /** @param start the initial value of `now()`, default 0. */
  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): { cancel(): void } {
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
    if (!(ms >= 0)) throw new RangeError(`FakeClock.advance needs a non-negative duration, got ${ms}`);
    const target = this.current + ms;
    for (;;) {
      const next = this.nextDue(target);
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = next.at;
      next.fn();
    }
    this.current = target;
  }

  /** Number of timers set and not yet run or cancelled. */
  pending(): number {
    return this.timers.length;
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
