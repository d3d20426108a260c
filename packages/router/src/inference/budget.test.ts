import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import { TokenBudgetTracker } from './budget.js';

const at = (iso: string): number => Date.parse(iso);
/** A clock whose wall time starts at `iso`. */
const clockAt = (iso: string): FakeClock => new FakeClock(0, at(iso));
/** Move `clock`'s wall time forward to `iso`. */
const moveTo = (clock: FakeClock, iso: string): void => clock.advance(at(iso) - clock.wallNow());

describe('TokenBudgetTracker', () => {
  it('refuses once daily usage has reached the cap, and says who, how much and when it resets', () => {
    const t = new TokenBudgetTracker({ clock: clockAt('2025-03-14T12:00:00Z') });
    const caps = { dailyTokens: 100, monthlyTokens: null };
    assert.deepEqual(t.check('sb', caps), { ok: true });
    t.record('sb', 99);
    assert.deepEqual(t.check('sb', caps), { ok: true });
    t.record('sb', 1);
    assert.deepEqual(t.check('sb', caps), {
      ok: false,
      period: 'daily',
      used: 100,
      cap: 100,
      message: 'Daily token budget exhausted for sandbox "sb": 100 of 100 tokens used today; it resets at 00:00 UTC',
      held: false,
      resetAtMs: at('2025-03-15T00:00:00Z'),
    });
  });

  it('tells a budget held by requests in flight (passes once they settle) from one exhausted (passes at the reset)', () => {
    const t = new TokenBudgetTracker({ clock: clockAt('2025-01-31T12:00:00Z') });
    const caps = { dailyTokens: 1000, monthlyTokens: 5000 };
    const r = t.reserve('sb', caps, 995);
    assert.ok(r.ok);
    assert.deepEqual(t.headroom('sb', caps), { period: 'daily', limit: 1000, remaining: 5, resetAtMs: at('2025-02-01T00:00:00Z') });
    const r2 = t.reserve('sb', caps, 5);
    assert.ok(r2.ok);
    const held = t.check('sb', caps);
    assert.ok(!held.ok && held.held, JSON.stringify(held));
    assert.equal(held.ok ? 0 : held.resetAtMs, at('2025-02-01T00:00:00Z'));
    assert.match(held.ok ? '' : held.message, /held by requests in flight: 0 of 1000 tokens used and 1000 reserved/);
    assert.equal(t.headroom('sb', caps)?.remaining, 0);
    r.reservation.settle(10);
    r2.reservation.settle(0);
    assert.ok(t.check('sb', caps).ok, 'settled below the cap: it passes');
    t.record('sb', 4990);
    const spent = t.check('sb', caps);
    assert.ok(!spent.ok && !spent.held && spent.period === 'daily');
    // The month is the tighter cap now (0 left of it, 0 of the day): the first cap at 0 wins.
    assert.equal(t.headroom('sb', caps)?.remaining, 0);
    assert.equal(t.headroom('sb', { dailyTokens: null, monthlyTokens: 5000 })?.resetAtMs, at('2025-02-01T00:00:00Z'));
    assert.equal(t.headroom('sb', { dailyTokens: null, monthlyTokens: null }), undefined);
  });

  it('starts a new day at 00:00:00.000 UTC and keeps counting the month across it', () => {
    const clock = clockAt('2025-03-14T23:59:59.999Z');
    const t = new TokenBudgetTracker({ clock });
    const caps = { dailyTokens: 100, monthlyTokens: 1000 };
    t.record('sb', 150);
    assert.equal(t.check('sb', caps).ok, false);
    moveTo(clock, '2025-03-15T00:00:00.000Z');
    assert.equal(t.check('sb', caps).ok, true);
    t.record('sb', 10);
    assert.deepEqual(t.usage('sb'), { day: '2025-03-15', month: '2025-03', dailyUsed: 10, monthlyUsed: 160, reserved: 0 });
  });

  it('refuses on the monthly cap and starts a new month on the 1st at 00:00 UTC', () => {
    const clock = clockAt('2025-01-31T23:00:00Z');
    const t = new TokenBudgetTracker({ clock });
    const caps = { dailyTokens: null, monthlyTokens: 500 };
    t.record('sb', 500);
    const v = t.check('sb', caps);
    assert.equal(v.ok ? undefined : v.period, 'monthly');
    moveTo(clock, '2025-02-01T00:00:00Z');
    assert.equal(t.check('sb', caps).ok, true);
    assert.deepEqual(t.usage('sb'), { day: '2025-02-01', month: '2025-02', dailyUsed: 0, monthlyUsed: 0, reserved: 0 });
  });

  it('keeps sandboxes apart', () => {
    const t = new TokenBudgetTracker({ clock: clockAt('2025-03-14T12:00:00Z') });
    t.record('a', 100);
    assert.equal(t.check('a', { dailyTokens: 100, monthlyTokens: null }).ok, false);
    assert.equal(t.check('b', { dailyTokens: 100, monthlyTokens: null }).ok, true);
  });

  it('allows everything without caps and nothing with a zero cap', () => {
    const t = new TokenBudgetTracker();
    t.record('sb', 1e9);
    assert.equal(t.check('sb', { dailyTokens: null, monthlyTokens: null }).ok, true);
    assert.equal(t.check('fresh', { dailyTokens: 0, monthlyTokens: null }).ok, false);
    assert.equal(t.check('fresh', { dailyTokens: null, monthlyTokens: 0 }).ok, false);
  });

  it('ignores usage that is not a finite number at least zero', () => {
    const t = new TokenBudgetTracker();
    for (const n of [Number.NaN, -5, Number.POSITIVE_INFINITY]) t.record('sb', n);
    assert.equal(t.usage('sb').dailyUsed, 0);
  });
});
