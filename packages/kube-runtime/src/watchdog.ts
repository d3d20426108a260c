import type { Clock } from '@kars/kube-core';
import { systemClock } from '@kars/kube-core';
import type { ReadinessCheck } from './health.js';

/** A named condition `/healthz` requires (same shape as a readiness check). */
export type LivenessCheck = ReadinessCheck;

/** What the reconcile-activity watchdog reads from a controller: see {@link Controller.activity}. */
export interface ActivitySource {
  readonly name: string;
  activity(): { waiting: number; inFlight: number; lastProgressMs: number };
}

/** Options of {@link eventLoopWatchdog}. */
export interface EventLoopWatchdogOptions {
  /** A timer firing this much later than due counts as a stall. */
  maxDelayMs: number;
  /** A stall fails the check for this long after it ends (default 10 s), so a probe sees it. */
  windowMs?: number;
  /** Sampling period (default 250 ms). */
  intervalMs?: number;
  signal: AbortSignal;
}

/**
 * Liveness: the event loop is not stalled. A timer is armed every `intervalMs` and its lateness
 * measured; the check fails while a lateness of `maxDelayMs` or more was seen within `windowMs`, or
 * while the current timer is already overdue by `maxDelayMs` (the loop is blocked right now, and a
 * probe got through anyway, e.g. between two blocking tasks).
 *
 * Caveats: a loop blocked for good cannot answer `/healthz` at all: the kubelet's probe timeout is
 * the detector then. Uses real time (performance.now and Node timers), which is what it measures.
 */
export function eventLoopWatchdog(opts: EventLoopWatchdogOptions): LivenessCheck {
  const interval = opts.intervalMs ?? 250;
  const windowMs = opts.windowMs ?? 10_000;
  let due = performance.now() + interval;
  let stalledAt = -Infinity;
  let worst = 0;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    timer = setTimeout(() => {
      const now = performance.now();
      const late = now - due;
      if (late >= opts.maxDelayMs) {
        stalledAt = now;
        worst = late;
      }
      due = now + interval;
      if (!opts.signal.aborted) arm();
    }, interval);
    timer.unref();
  };
  if (!opts.signal.aborted) arm();
  opts.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  return {
    name: 'event-loop',
    check: () => {
      const now = performance.now();
      const overdue = now - due;
      if (overdue >= opts.maxDelayMs)
        return { ok: false, detail: `event loop blocked: a ${interval} ms timer is ${Math.round(overdue)} ms late` };
      if (now - stalledAt <= windowMs)
        return {
          ok: false,
          detail: `event loop stalled ${Math.round(worst)} ms (limit ${opts.maxDelayMs} ms) ${Math.round(now - stalledAt)} ms ago`,
        };
      return { ok: true };
    },
  };
}

/** Options of {@link reconcileWatchdog}. */
export interface ReconcileWatchdogOptions {
  controllers: ActivitySource[];
  /** Only a leader is expected to reconcile. */
  isLeader: () => boolean;
  /** No reconcile started or finished for this long while keys wait: wedged. */
  stallMs: number;
  clock?: Clock;
}

/**
 * Liveness: the reconcile-activity watchdog. Fails when this replica leads, a controller has keys
 * waiting, and none of its reconciles has started or finished for `stallMs` (every worker is stuck
 * in a reconcile that never returns, or the loop stopped taking keys). A follower, or a leader with
 * nothing queued, is healthy however long it has been idle.
 */
export function reconcileWatchdog(opts: ReconcileWatchdogOptions): LivenessCheck {
  const clock = opts.clock ?? systemClock;
  return {
    name: 'reconcile-activity',
    check: () => {
      if (!opts.isLeader()) return { ok: true };
      const now = clock.now();
      const stuck = opts.controllers
        .map((c) => ({ c, a: c.activity() }))
        .filter(({ a }) => a.waiting > 0 && now - a.lastProgressMs >= opts.stallMs)
        .map(
          ({ c, a }) =>
            `${c.name}: ${a.waiting} key(s) waiting, ${a.inFlight} in flight, no progress for ${Math.round((now - a.lastProgressMs) / 1000)} s`,
        );
      return stuck.length === 0
        ? { ok: true }
        : { ok: false, detail: `leader not reconciling (limit ${Math.round(opts.stallMs / 1000)} s): ${stuck.join('; ')}` };
    },
  };
}
