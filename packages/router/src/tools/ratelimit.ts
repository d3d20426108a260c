/**
 * Token buckets for ToolPolicy `rateLimit`, one per (sandbox, policy name, tool).
 *
 * A bucket holds at most `burst` tokens (default `max(1, rps)`), starts full, and refills at
 * `rps` tokens per second. A call takes one token or is refused with the time until one is there.
 *
 * Guarantees: time comes only from the injected clock, so tests run in virtual time. A clock that
 * steps backwards refills nothing (it never drains a bucket either).
 *
 * Recovery: when a policy's numbers change, the existing bucket keeps its tokens, clamped to the
 * new capacity, and refills at the new rate from then on.
 *
 * Caveats: `rps: 0` means the bucket never refills: `burst` calls (default 1), then none until the
 * policy changes its numbers or the router restarts. `burst` below 1 reads as unset. Buckets live
 * in this process only; several router replicas each allow the full rate.
 *
 * Memory: one small record per key ever used; full buckets (indistinguishable from new ones) are
 * swept once the map holds more than `sweepAbove` entries.
 */
import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';

/** A ToolPolicy rate limit, as compiled. */
export interface RateLimitSpec {
  rps: number | null;
  burst: number | null;
}

export type TakeResult = { ok: true; remaining: number } | { ok: false; retryAfterMs: number | null };

interface Bucket {
  tokens: number;
  atMs: number;
  capacity: number;
  rps: number;
}

/** Effective capacity and rate, or undefined when the spec imposes no limit (`rps` null or not a number). */
export function effectiveLimit(spec: RateLimitSpec): { capacity: number; rps: number } | undefined {
  const { rps, burst } = spec;
  if (rps === null || !Number.isFinite(rps)) return undefined;
  const rate = Math.max(0, rps);
  const capacity = burst !== null && Number.isFinite(burst) && burst >= 1 ? burst : Math.max(1, rate);
  return { capacity, rps: rate };
}

export class ToolRateLimiter {
  readonly #clock: Pick<Clock, 'now'>;
  readonly #buckets = new Map<string, Bucket>();
  readonly #sweepAbove: number;

  /** `clock.now()` (monotonic) measures refill; default the system clock. */
  constructor(opts: { clock?: Pick<Clock, 'now'>; sweepAbove?: number } = {}) {
    this.#clock = opts.clock ?? systemClock;
    this.#sweepAbove = opts.sweepAbove ?? 10_000;
  }

  /** Take one token for this call. A spec without a limit always succeeds with `remaining: Infinity`. */
  take(key: { sandbox: string; policy: string; tool: string }, spec: RateLimitSpec): TakeResult {
    const limit = effectiveLimit(spec);
    if (limit === undefined) return { ok: true, remaining: Number.POSITIVE_INFINITY };
    const now = this.#clock.now();
    const id = JSON.stringify([key.sandbox, key.policy, key.tool]);
    let b = this.#buckets.get(id);
    if (b === undefined) {
      if (this.#buckets.size >= this.#sweepAbove) this.#sweep(now);
      b = { tokens: limit.capacity, atMs: now, capacity: limit.capacity, rps: limit.rps };
      this.#buckets.set(id, b);
    } else {
      refill(b, now);
      b.capacity = limit.capacity;
      b.rps = limit.rps;
      b.tokens = Math.min(b.tokens, b.capacity);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true, remaining: Math.floor(b.tokens) };
    }
    if (b.rps === 0) return { ok: false, retryAfterMs: null };
    // the epsilon keeps float dust (1 - 0.999 = 0.0010000000000000009) from adding a millisecond
    return { ok: false, retryAfterMs: Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / b.rps - 1e-6)) };
  }

  /** Number of buckets held (for tests and metrics). */
  get size(): number {
    return this.#buckets.size;
  }

  #sweep(now: number): void {
    for (const [id, b] of this.#buckets) {
      refill(b, now);
      if (b.tokens >= b.capacity) this.#buckets.delete(id);
    }
  }
}

function refill(b: Bucket, now: number): void {
  const elapsed = now - b.atMs;
  if (elapsed > 0) {
    b.tokens = Math.min(b.capacity, b.tokens + (elapsed / 1000) * b.rps);
    b.atMs = now;
  } else if (elapsed < 0) {
    b.atMs = now;
  }
}
