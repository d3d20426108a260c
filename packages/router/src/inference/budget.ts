/**
 * Daily and monthly token budgets per sandbox (kars-wire-contract.md §5.3 step 2).
 *
 * The tracker adds up `usage.total_tokens` of every answered request, per sandbox, by UTC
 * calendar day and UTC calendar month, and tells the route whether a sandbox may send another
 * request under given caps.
 *
 * It is a **reserve / settle ledger** (issue 9 item 3): {@link TokenBudgetTracker.reserve} admits a
 * request only while `used + reserved < cap` for every capped period and then holds the request's
 * maximum as reserved; {@link Reservation.settle} replaces the reservation with the real usage.
 * Requests in flight therefore count against the budget before they are answered, and concurrent
 * requests cannot overshoot a cap by more than one request's reservation (when no request uses
 * more than it reserved; property-tested in `budget.property.test.ts`).
 *
 * Guarantees:
 * - A day is the UTC calendar day (`00:00:00.000Z` to the next), a month the UTC calendar month.
 *   Counters roll over lazily on the first check or record after the boundary; no timers run.
 * - A sandbox is refused once its usage plus its reservations has **reached** a cap
 *   (`used + reserved >= cap`), so the request that crosses a cap is served and the next one is
 *   refused. A cap of 0 refuses everything.
 * - A reservation made on one day and settled on the next is charged to the day it settles in.
 *
 * Caveats:
 * - **In memory only: every counter resets when the router restarts.** A restart mid-day gives the
 *   sandbox its whole daily budget again.
 * - A request that uses more than it reserved (the route estimates prompt tokens from bytes, and a
 *   request with no completion bound reserves a fixed amount) can overshoot by the difference.
 * - `check` + `record` remain for callers that do not reserve; they have no concurrency guarantee.
 *
 * Memory: one small entry per sandbox seen; entries not touched in the current UTC month are
 * dropped when more than {@link PRUNE_THRESHOLD} sandboxes are tracked.
 */
import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';

/** When this many sandboxes are tracked, entries from past months are pruned on the next record. */
export const PRUNE_THRESHOLD = 4096;

const DAY_MS = 86_400_000;

/** Caps to check against; `null` means no cap. */
export interface BudgetCaps {
  dailyTokens: number | null;
  monthlyTokens: number | null;
}

/** A refusal of a budget check: which cap, why, and when it can pass again. */
export interface BudgetRefusal {
  ok: false;
  period: 'daily' | 'monthly';
  used: number;
  cap: number;
  message: string;
  /**
   * Whether the settled usage alone is below the cap, so only requests in flight hold the rest:
   * the refusal can pass as soon as they settle. Otherwise it passes only at `resetAtMs`.
   */
  held: boolean;
  /** When the period resets (epoch ms): the next 00:00 UTC, or the 1st of the next month. */
  resetAtMs: number;
}

/** The outcome of a budget check. */
export type BudgetVerdict = { ok: true } | BudgetRefusal;

/** What is left of the tightest cap: the `x-ratelimit-*-tokens` a response carries. */
export interface BudgetHeadroom {
  period: 'daily' | 'monthly';
  limit: number;
  /** The cap less the usage and the reservations in flight (this request's included), at least 0. */
  remaining: number;
  resetAtMs: number;
}

/** A sandbox's usage in the current UTC day and month. */
export interface BudgetUsage {
  /** `YYYY-MM-DD` (UTC). */
  day: string;
  /** `YYYY-MM` (UTC). */
  month: string;
  dailyUsed: number;
  monthlyUsed: number;
}

export interface TokenBudgetTrackerOptions {
  /** Periods are UTC days and months of `clock.wallNow()`; default the system clock. Inject a `FakeClock` in tests. */
  clock?: Clock;
}

interface Entry {
  day: number;
  month: number;
  daily: number;
  monthly: number;
  /** Tokens held by admitted requests that have not settled (not tied to a period). */
  reserved: number;
}

/** The tokens held for one admitted request. Settle it exactly once; later calls do nothing. */
export interface Reservation {
  readonly amount: number;
  /** Replace the reservation with `actualTokens` of real usage (0 when nothing was used). */
  settle(actualTokens: number): void;
}

export type ReserveResult = { ok: true; reservation: Reservation } | (BudgetVerdict & { ok: false });

const OK: BudgetVerdict = Object.freeze({ ok: true }) as BudgetVerdict;

/** Tracks token usage per sandbox by UTC day and month. See the module comment for semantics. */
export class TokenBudgetTracker {
  readonly #clock: Clock;
  readonly #entries = new Map<string, Entry>();
  /** Month index cached for one day index, so the hot path rarely builds a Date. */
  #cachedDay = Number.NaN;
  #cachedMonth = 0;

  constructor(opts: TokenBudgetTrackerOptions = {}) {
    this.#clock = opts.clock ?? systemClock;
  }

  /** Whether `sandbox` may send another request under `caps` (usage plus reservations below every cap). */
  check(sandbox: string, caps: BudgetCaps): BudgetVerdict {
    if (caps.dailyTokens === null && caps.monthlyTokens === null) return OK;
    const e = this.#entries.get(sandbox);
    if (e === undefined) {
      // Nothing used yet: only a zero cap refuses.
      if (caps.dailyTokens !== null && caps.dailyTokens <= 0) return this.#refuse(sandbox, 'daily', 0, 0, caps.dailyTokens);
      if (caps.monthlyTokens !== null && caps.monthlyTokens <= 0) return this.#refuse(sandbox, 'monthly', 0, 0, caps.monthlyTokens);
      return OK;
    }
    this.#roll(e);
    // An exhausted period first: a daily cap only held by requests in flight must not advise a
    // retry when the month is spent (the retry would meet the monthly refusal).
    if (caps.dailyTokens !== null && e.daily >= caps.dailyTokens)
      return this.#refuse(sandbox, 'daily', e.daily, e.reserved, caps.dailyTokens);
    if (caps.monthlyTokens !== null && e.monthly >= caps.monthlyTokens)
      return this.#refuse(sandbox, 'monthly', e.monthly, e.reserved, caps.monthlyTokens);
    if (caps.dailyTokens !== null && e.daily + e.reserved >= caps.dailyTokens)
      return this.#refuse(sandbox, 'daily', e.daily, e.reserved, caps.dailyTokens);
    if (caps.monthlyTokens !== null && e.monthly + e.reserved >= caps.monthlyTokens)
      return this.#refuse(sandbox, 'monthly', e.monthly, e.reserved, caps.monthlyTokens);
    return OK;
  }

  /** What is left of `sandbox`'s tightest cap under `caps` (undefined when nothing is capped). */
  headroom(sandbox: string, caps: BudgetCaps): BudgetHeadroom | undefined {
    const e = this.#entries.get(sandbox);
    if (e !== undefined) this.#roll(e);
    const reserved = e?.reserved ?? 0;
    let best: BudgetHeadroom | undefined;
    for (const [period, cap, used] of [
      ['daily', caps.dailyTokens, e?.daily ?? 0],
      ['monthly', caps.monthlyTokens, e?.monthly ?? 0],
    ] as const) {
      if (cap === null) continue;
      const remaining = Math.max(0, cap - used - reserved);
      if (best === undefined || remaining < best.remaining)
        best = { period, limit: cap, remaining, resetAtMs: resetAt(period, this.#clock.wallNow()) };
    }
    return best;
  }

  #refuse(sandbox: string, period: 'daily' | 'monthly', used: number, reserved: number, cap: number): BudgetRefusal {
    return refuse(sandbox, period, used, reserved, cap, this.#clock.wallNow());
  }

  /**
   * Admit one request of at most `maxTokens` under `caps` and hold that many tokens until it
   * settles. Refused (nothing held) when usage plus reservations has reached a cap. A
   * non-finite or negative `maxTokens` is held as 0.
   */
  reserve(sandbox: string, caps: BudgetCaps, maxTokens: number): ReserveResult {
    const v = this.check(sandbox, caps);
    if (!v.ok) return v;
    const amount = Number.isFinite(maxTokens) && maxTokens > 0 ? maxTokens : 0;
    const e = this.#entry(sandbox);
    e.reserved += amount;
    let open = true;
    const reservation: Reservation = {
      amount,
      settle: (actual: number): void => {
        if (!open) return;
        open = false;
        e.reserved -= amount;
        // The entry may have been pruned meanwhile; re-attach it so the usage is not lost.
        if (this.#entries.get(sandbox) !== e) {
          this.record(sandbox, actual);
          return;
        }
        this.#roll(e);
        if (Number.isFinite(actual) && actual > 0) {
          e.daily += actual;
          e.monthly += actual;
        }
      },
    };
    return { ok: true, reservation };
  }

  /** Add `totalTokens` (a response's `usage.total_tokens`) to `sandbox`'s usage. Ignores anything but a finite number ≥ 0. */
  record(sandbox: string, totalTokens: number): void {
    if (!Number.isFinite(totalTokens) || totalTokens < 0) return;
    const e = this.#entry(sandbox);
    e.daily += totalTokens;
    e.monthly += totalTokens;
  }

  /** `sandbox`'s entry, created (and rolled to the current period) as needed. */
  #entry(sandbox: string): Entry {
    let e = this.#entries.get(sandbox);
    if (e === undefined) {
      if (this.#entries.size >= PRUNE_THRESHOLD) this.#prune();
      const { day, month } = this.#period();
      e = { day, month, daily: 0, monthly: 0, reserved: 0 };
      this.#entries.set(sandbox, e);
    } else {
      this.#roll(e);
    }
    return e;
  }

  /** `sandbox`'s usage in the current UTC day and month (zeros when it has none), and its open reservations. */
  usage(sandbox: string): BudgetUsage & { reserved: number } {
    const { day } = this.#period();
    const d = new Date(day * DAY_MS).toISOString();
    const e = this.#entries.get(sandbox);
    if (e !== undefined) this.#roll(e);
    return {
      day: d.slice(0, 10),
      month: d.slice(0, 7),
      dailyUsed: e?.daily ?? 0,
      monthlyUsed: e?.monthly ?? 0,
      reserved: e?.reserved ?? 0,
    };
  }

  #period(): { day: number; month: number } {
    const day = Math.floor(this.#clock.wallNow() / DAY_MS);
    if (day !== this.#cachedDay) {
      const d = new Date(day * DAY_MS);
      this.#cachedMonth = d.getUTCFullYear() * 12 + d.getUTCMonth();
      this.#cachedDay = day;
    }
    return { day, month: this.#cachedMonth };
  }

  #roll(e: Entry): void {
    const { day, month } = this.#period();
    if (e.month !== month) {
      e.month = month;
      e.day = day;
      e.daily = 0;
      e.monthly = 0;
    } else if (e.day !== day) {
      e.day = day;
      e.daily = 0;
    }
  }

  #prune(): void {
    const { month } = this.#period();
    for (const [k, e] of this.#entries) if (e.month !== month && e.reserved === 0) this.#entries.delete(k);
  }
}

/** When `period` (a UTC day or month) that holds `nowMs` ends, epoch ms. */
export function resetAt(period: 'daily' | 'monthly', nowMs: number): number {
  if (period === 'daily') return (Math.floor(nowMs / DAY_MS) + 1) * DAY_MS;
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

function refuse(sandbox: string, period: 'daily' | 'monthly', used: number, reserved: number, cap: number, nowMs: number): BudgetRefusal {
  const held = reserved > 0 ? ` (plus ${reserved} held by requests in flight)` : '';
  const word = period === 'daily' ? 'Daily' : 'Monthly';
  if (used < cap)
    return {
      ok: false,
      period,
      used,
      cap,
      message: `${word} token budget of sandbox "${sandbox}" is held by requests in flight: ${used} of ${cap} tokens used and ${reserved} reserved; retry when they finish`,
      held: true,
      resetAtMs: resetAt(period, nowMs),
    };
  const message =
    period === 'daily'
      ? `Daily token budget exhausted for sandbox "${sandbox}": ${used} of ${cap} tokens used today${held}; it resets at 00:00 UTC`
      : `Monthly token budget exhausted for sandbox "${sandbox}": ${used} of ${cap} tokens used this month${held}; it resets on the 1st at 00:00 UTC`;
  return { ok: false, period, used, cap, message, held: false, resetAtMs: resetAt(period, nowMs) };
}
