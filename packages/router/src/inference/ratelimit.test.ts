import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { budgetHeadroomHeaders, budgetRetryHeaders, duration } from './ratelimit.js';
import { resetAt, type BudgetRefusal } from './budget.js';

const NOW = Date.parse('2026-12-02T23:59:30.250Z');
const refusal = (held: boolean, resetAtMs: number): BudgetRefusal => ({
  ok: false,
  period: 'daily',
  used: 10,
  cap: 10,
  message: 'm',
  held,
  resetAtMs,
});

describe('retry advice of a budget refusal', () => {
  it('an exhausted budget: retry-after is the whole seconds to the reset (at least 1), never retried', () => {
    assert.deepEqual(budgetRetryHeaders(refusal(false, resetAt('daily', NOW)), NOW), { 'retry-after': '30', 'x-should-retry': 'false' });
    assert.deepEqual(budgetRetryHeaders(refusal(false, NOW + 1), NOW), { 'retry-after': '1', 'x-should-retry': 'false' });
  });
  it('a budget held by requests in flight: retried after a second', () => {
    assert.deepEqual(budgetRetryHeaders(refusal(true, resetAt('daily', NOW)), NOW), { 'retry-after': '1', 'x-should-retry': 'true' });
  });
});

describe('the token headroom headers', () => {
  it('writes the limit, the remaining and the reset as OpenAI does', () => {
    const h = budgetHeadroomHeaders({ period: 'daily', limit: 5000, remaining: 12, resetAtMs: resetAt('daily', NOW) }, NOW);
    assert.deepEqual(h, { 'x-ratelimit-limit-tokens': '5000', 'x-ratelimit-remaining-tokens': '12', 'x-ratelimit-reset-tokens': '30s' });
  });
  it('durations: ms under a second, then h/m/s rounded up to the second', () => {
    assert.equal(duration(250), '250ms');
    assert.equal(duration(1000), '1s');
    assert.equal(duration(360_000), '6m0s');
    assert.equal(duration(3_723_400), '1h2m4s');
  });
  it('a duration always reads back to within a second above the time (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1000, max: 40 * 86_400_000 }), (ms) => {
        const m = /^(?:(\d+)h)?(?:(\d+)m)?(\d+)s$/.exec(duration(ms));
        assert.ok(m !== null, duration(ms));
        const back = (Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3])) * 1000;
        assert.ok(back >= ms && back - ms < 1000, `${ms} → ${duration(ms)}`);
      }),
    );
  });
  it('resetAt is the next UTC midnight, or the 1st of the next month (December rolls the year)', () => {
    assert.equal(resetAt('daily', NOW), Date.parse('2026-12-03T00:00:00Z'));
    assert.equal(resetAt('monthly', NOW), Date.parse('2027-01-01T00:00:00Z'));
    assert.equal(resetAt('daily', Date.parse('2026-12-03T00:00:00Z')), Date.parse('2026-12-04T00:00:00Z'));
  });
});
