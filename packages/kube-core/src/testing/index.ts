/**
 * Test support shared by every kars package's tests (`@kars/kube-core/testing`; not part of the
 * main entry point). No I/O of its own, but for the kubectl helpers in `kubectl.ts`.
 */
export { findKubectl, runKubectl, type KubectlRun } from './kubectl.js';
export { startTcpEchoServer, type TcpEchoServer } from './echo-server.js';
import { sleep, systemClock } from '../clock.js';
import type { Clock } from '../clock.js';

/** Options of {@link until}. */
export interface UntilOptions {
  /** Give up after this long (default 15 s: generous, for a loaded 2-core machine). */
  timeoutMs?: number;
  /** Wait this long between polls (default 25 ms). */
  everyMs?: number;
  /** Time source for the deadline and the waits (default the system clock). */
  clock?: Clock;
}

/**
 * Poll `fn` until it returns a truthy value, and return that value. An exception thrown by `fn`
 * counts as "not yet" and is quoted in the timeout error, which names `what`.
 *
 * For conditions that real I/O (a server, a watch, a child process) makes true; a condition that
 * only time makes true belongs on a `FakeClock` instead.
 */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  opts: UntilOptions | number = {},
): Promise<T> {
  const o = typeof opts === 'number' ? { timeoutMs: opts } : opts;
  const clock = o.clock ?? systemClock;
  const timeoutMs = o.timeoutMs ?? 15_000;
  const deadline = clock.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (clock.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs} ms${last === undefined ? '' : ` (last error: ${String(last)})`}`);
    await sleep(clock, o.everyMs ?? 25);
  }
}
