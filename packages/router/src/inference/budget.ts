/**
 * Daily and monthly token budgets per sandbox (kars-wire-contract.md §5.3 step 2).
 *
 * The tracker adds up `usage.total_tokens` of every answered request, per sandbox, by UTC
 * calendar day and UTC calendar month, and tells the route whether a sandbox may send another
 * request under given caps.
 *
 * Guarantees:
 * - A day is the UTC calendar day (`00:00:00.000Z` to the next), a month the UTC calendar month.
 *   Counters roll over lazily on the first check or record after the boundary; no timers run.
 * - A sandbox is refused once its usage has **reached** a cap (`used >= cap`): the check runs
 *   before forwarding and cannot know how many tokens the next request will use, so the request
 *   that crosses a cap is served and the next one is refused. A cap of 0 refuses everything.
 *
 * Caveats:
 * - **In memory only: every counter resets when the router restarts.** A restart mid-day gives the
 *   sandbox its whole daily budget again.
 * - Check and record are separate steps, so concurrent requests that all pass the check before
 *   any of them records can overshoot a cap by their combined usage.
 * - Usage that a request never reports (no `usage` in the response, a stream the router cut)
 *   is not counted.
 *
 * Memory: one small entry per sandbox seen; entries not touched in the current UTC month are
 * dropped when more than {@link PRUNE_THRESHOLD} sandboxes are tracked.
 */

/** When this many sandboxes are tracked, entries from past months are pruned on the next record. */
export const PRUNE_THRESHOLD = 4096;

const DAY_MS = 86_400_000;

/** Caps to check against; `null` means no cap. */
export interface BudgetCaps {
  dailyTokens: number | null;
  monthlyTokens: number | null;
}

/** The outcome of a budget check. */
export type BudgetVerdict = { ok: true } | { ok: false; period: 'daily' | 'monthly'; used: number; cap: number; message: string };

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
  /** Epoch ms; default `Date.now`. Inject a fake clock in tests. */
  now?: () => number;
}

interface Entry {
  day: number;
  month: number;
  daily: number;
  monthly: number;
}

const OK: BudgetVerdict = Object.freeze({ ok: true }) as BudgetVerdict;

/** Tracks token usage per sandbox by UTC day and month. See the module comment for semantics. */
export class TokenBudgetTracker {
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  /** Month index cached for one day index, so the hot path rarely builds a Date. */
  #cachedDay = Number.NaN;
  #cachedMonth = 0;

  constructor(opts: TokenBudgetTrackerOptions = {}) {
    this.#now = opts.now ?? Date.now;
  }

  /** Whether `sandbox` may send another request under `caps`. */
  check(sandbox: string, caps: BudgetCaps): BudgetVerdict {
    if (caps.dailyTokens === null && caps.monthlyTokens === null) return OK;
    const e = this.#entries.get(sandbox);
    if (e === undefined) {
      // Nothing used yet: only a zero cap refuses.
      if (caps.dailyTokens !== null && caps.dailyTokens <= 0) return refuse(sandbox, 'daily', 0, caps.dailyTokens);
      if (caps.monthlyTokens !== null && caps.monthlyTokens <= 0) return refuse(sandbox, 'monthly', 0, caps.monthlyTokens);
      return OK;
    }
    this.#roll(e);
    if (caps.dailyTokens !== null && e.daily >= caps.dailyTokens) return refuse(sandbox, 'daily', e.daily, caps.dailyTokens);
    if (caps.monthlyTokens !== null && e.monthly >= caps.monthlyTokens) return refuse(sandbox, 'monthly', e.monthly, caps.monthlyTokens);
    return OK;
  }

  /** Add `totalTokens` (a response's `usage.total_tokens`) to `sandbox`'s usage. Ignores anything but a finite number ≥ 0. */
  record(sandbox: string, totalTokens: number): void {
    if (!Number.isFinite(totalTokens) || totalTokens < 0) return;
    let e = this.#entries.get(sandbox);
    if (e === undefined) {
      if (this.#entries.size >= PRUNE_THRESHOLD) this.#prune();
      const { day, month } = this.#period();
      e = { day, month, daily: 0, monthly: 0 };
      this.#entries.set(sandbox, e);
    } else {
      this.#roll(e);
    }
    e.daily += totalTokens;
    e.monthly += totalTokens;
  }

  /** `sandbox`'s usage in the current UTC day and month (zeros when it has none). */
  usage(sandbox: string): BudgetUsage {
    const { day } = this.#period();
    const d = new Date(day * DAY_MS).toISOString();
    const e = this.#entries.get(sandbox);
    if (e !== undefined) this.#roll(e);
    return { day: d.slice(0, 10), month: d.slice(0, 7), dailyUsed: e?.daily ?? 0, monthlyUsed: e?.monthly ?? 0 };
  }

  #period(): { day: number; month: number } {
    const day = Math.floor(this.#now() / DAY_MS);
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
    for (const [k, e] of this.#entries) if (e.month !== month) this.#entries.delete(k);
  }
}

function refuse(sandbox: string, period: 'daily' | 'monthly', used: number, cap: number): BudgetVerdict {
  const message =
    period === 'daily'
      ? `Daily token budget exhausted for sandbox "${sandbox}": ${used} of ${cap} tokens used today; it resets at 00:00 UTC`
      : `Monthly token budget exhausted for sandbox "${sandbox}": ${used} of ${cap} tokens used this month; it resets on the 1st at 00:00 UTC`;
  return { ok: false, period, used, cap, message };
}
