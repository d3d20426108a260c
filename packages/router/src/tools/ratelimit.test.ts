import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import { effectiveLimit, ToolRateLimiter } from './ratelimit.js';

const fakeClock = (): FakeClock => new FakeClock();
/** Move `clock` forward to `t` ms. */
const to = (clock: FakeClock, t: number): void => clock.advance(t - clock.now());

const key = { sandbox: 'sb', policy: 'p', tool: 'search' };

describe('ToolRateLimiter', () => {
  it('allows a full burst, then refuses with the time until the next token', () => {
    const clock = fakeClock();
    const l = new ToolRateLimiter({ clock });
    const spec = { rps: 2, burst: 3 };
    assert.deepEqual(
      [l.take(key, spec), l.take(key, spec), l.take(key, spec)].map((r) => r.ok),
      [true, true, true],
    );
    assert.deepEqual(l.take(key, spec), { ok: false, retryAfterMs: 500 });
  });

  it('refills at rps tokens per second, never above burst', () => {
    const clock = fakeClock();
    const l = new ToolRateLimiter({ clock });
    const spec = { rps: 1, burst: 2 };
    l.take(key, spec);
    l.take(key, spec);
    assert.equal(l.take(key, spec).ok, false);
    to(clock, 999);
    assert.deepEqual(l.take(key, spec), { ok: false, retryAfterMs: 1 });
    to(clock, 1000);
    assert.equal(l.take(key, spec).ok, true);
    to(clock, 100_000);
    assert.equal(l.take(key, spec).ok, true);
    assert.equal(l.take(key, spec).ok, true);
    assert.equal(l.take(key, spec).ok, false);
  });

  it('defaults burst to max(1, rps)', () => {
    assert.deepEqual(effectiveLimit({ rps: 5, burst: null }), { capacity: 5, rps: 5 });
    assert.deepEqual(effectiveLimit({ rps: 0.5, burst: null }), { capacity: 1, rps: 0.5 });
    assert.deepEqual(effectiveLimit({ rps: 3, burst: 0 }), { capacity: 3, rps: 3 });
  });

  it('does not limit when rps is unset', () => {
    const l = new ToolRateLimiter({ clock: fakeClock() });
    for (let i = 0; i < 100; i++) assert.equal(l.take(key, { rps: null, burst: 1 }).ok, true);
    assert.equal(l.size, 0);
  });

  it('never refills with rps 0 and says so with a null retry time', () => {
    const clock = fakeClock();
    const l = new ToolRateLimiter({ clock });
    assert.equal(l.take(key, { rps: 0, burst: null }).ok, true);
    to(clock, 1e9);
    assert.deepEqual(l.take(key, { rps: 0, burst: null }), { ok: false, retryAfterMs: null });
  });

  it('keeps separate buckets per sandbox, policy and tool', () => {
    const l = new ToolRateLimiter({ clock: fakeClock() });
    const spec = { rps: 1, burst: 1 };
    assert.equal(l.take(key, spec).ok, true);
    assert.equal(l.take(key, spec).ok, false);
    assert.equal(l.take({ ...key, tool: 'other' }, spec).ok, true);
    assert.equal(l.take({ ...key, policy: 'q' }, spec).ok, true);
    assert.equal(l.take({ ...key, sandbox: 'sb2' }, spec).ok, true);
  });

  it('clamps the tokens kept to a lowered burst when the policy changes', () => {
    const l = new ToolRateLimiter({ clock: fakeClock() });
    assert.equal(l.take(key, { rps: 1, burst: 10 }).ok, true);
    assert.equal(l.take(key, { rps: 1, burst: 1 }).ok, true);
    assert.equal(l.take(key, { rps: 1, burst: 1 }).ok, false);
  });

  it('refills nothing when the clock steps backwards', () => {
    // A monotonic clock never does this; a clock that only offers now() might (a FakeClock cannot go back).
    let t = 10_000;
    const l = new ToolRateLimiter({ clock: { now: () => t } });
    const spec = { rps: 1, burst: 1 };
    assert.equal(l.take(key, spec).ok, true);
    t = 0;
    assert.equal(l.take(key, spec).ok, false);
    t = 999;
    assert.equal(l.take(key, spec).ok, false);
    t = 1000;
    assert.equal(l.take(key, spec).ok, true);
  });

  it('sweeps full buckets once it holds too many', () => {
    const clock = fakeClock();
    const l = new ToolRateLimiter({ clock, sweepAbove: 3 });
    const spec = { rps: 1, burst: 1 };
    for (const tool of ['a', 'b', 'c']) l.take({ ...key, tool }, spec);
    assert.equal(l.size, 3);
    to(clock, 5000);
    l.take({ ...key, tool: 'd' }, spec);
    assert.equal(l.size, 1);
  });
});
