/**
 * The headers that tell a client what its budget allows and whether a refusal is worth retrying
 * (issue 21 item 6, ADR 0049).
 *
 * The official `openai` and `@anthropic-ai/sdk` clients retry a 429 and a 5xx twice by default,
 * unless the answer says `x-should-retry: false`; they wait `retry-after-ms` / `retry-after` when
 * it is under a minute. So:
 * - a budget **exhausted** until its period resets: `retry-after` = seconds to the reset and
 *   `x-should-retry: false` (no retry within a request's lifetime can pass);
 * - a budget **held** by requests in flight: `retry-after: 1` and `x-should-retry: true` (it
 *   passes as soon as they settle);
 * - a request over the per-request cap, or a guardrail the router is not configured for: the same
 *   request is refused every time, `x-should-retry: false`.
 *
 * Every answer relayed under a daily or monthly cap carries OpenAI's token headers for that
 * budget, which replace the provider's own (the budget is the limit this agent meets):
 * `x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens` and `x-ratelimit-reset-tokens` (a
 * duration, `13h2m5s`, as OpenAI writes it). kars sets no request-rate limit on inference, so the
 * `*-requests` headers are the provider's, passed through.
 *
 * Guarantees: pure (the clock's reading is a parameter).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { BudgetHeadroom, BudgetRefusal } from './budget.js';

/** A refusal the same request meets every time: never retried by the SDKs. */
export const NO_RETRY: Readonly<OutgoingHttpHeaders> = Object.freeze({ 'x-should-retry': 'false' });

/** The retry advice of a budget refusal at `nowMs`. */
export function budgetRetryHeaders(v: BudgetRefusal, nowMs: number): OutgoingHttpHeaders {
  if (v.held) return { 'retry-after': '1', 'x-should-retry': 'true' };
  return { 'retry-after': String(Math.max(1, Math.ceil((v.resetAtMs - nowMs) / 1000))), 'x-should-retry': 'false' };
}

/** OpenAI's token rate-limit headers for a budget's headroom at `nowMs`. */
export function budgetHeadroomHeaders(h: BudgetHeadroom, nowMs: number): OutgoingHttpHeaders {
  return {
    'x-ratelimit-limit-tokens': String(h.limit),
    'x-ratelimit-remaining-tokens': String(h.remaining),
    'x-ratelimit-reset-tokens': duration(Math.max(0, h.resetAtMs - nowMs)),
  };
}

/** A duration as OpenAI's rate-limit headers write it: `1h2m3s`, `6m0s`, `59s`, `250ms`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const total = Math.ceil(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
