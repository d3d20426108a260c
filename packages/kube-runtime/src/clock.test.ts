import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, systemClock } from './clock.js';

describe('FakeClock', () => {
  it('stands still until advanced', () => {
    const c = new FakeClock(1000);
    let fired = false;
    c.setTimeout(() => (fired = true), 10);
    assert.equal(c.now(), 1000);
    assert.equal(fired, false);
    c.advance(9);
    assert.equal(fired, false);
    c.advance(1);
    assert.equal(fired, true);
    assert.equal(c.now(), 1010);
  });

  it('runs due timers in due-time order, ties in the order they were set, with now() at each due time', () => {
    const c = new FakeClock();
    const seen: Array<[string, number]> = [];
    c.setTimeout(() => seen.push(['c', c.now()]), 30);
    c.setTimeout(() => seen.push(['a1', c.now()]), 10);
    c.setTimeout(() => seen.push(['a2', c.now()]), 10);
    c.setTimeout(() => seen.push(['b', c.now()]), 20);
    c.advance(100);
    assert.deepEqual(seen, [
      ['a1', 10],
      ['a2', 10],
      ['b', 20],
      ['c', 30],
    ]);
    assert.equal(c.now(), 100);
  });

  it('runs timers set by a timer when they fall due inside the same advance', () => {
    const c = new FakeClock();
    const seen: number[] = [];
    c.setTimeout(() => {
      seen.push(c.now());
      c.setTimeout(() => seen.push(c.now()), 5);
      c.setTimeout(() => seen.push(c.now()), 50);
    }, 10);
    c.advance(20);
    assert.deepEqual(seen, [10, 15]);
    assert.equal(c.pending(), 1);
    c.advance(40);
    assert.deepEqual(seen, [10, 15, 60]);
  });

  it('does not run a cancelled timer', () => {
    const c = new FakeClock();
    let fired = 0;
    const t = c.setTimeout(() => fired++, 10);
    c.setTimeout(() => fired++, 10);
    t.cancel();
    c.advance(10);
    assert.equal(fired, 1);
    assert.equal(c.pending(), 0);
  });

  it('treats a negative delay as now and never fires an infinite one', () => {
    const c = new FakeClock();
    const seen: string[] = [];
    c.setTimeout(() => seen.push('neg'), -5);
    c.setTimeout(() => seen.push('inf'), Infinity);
    c.advance(0);
    c.advance(1e12);
    assert.deepEqual(seen, ['neg']);
  });

  it('rejects a negative advance', () => {
    assert.throws(() => new FakeClock().advance(-1), RangeError);
  });
});

describe('systemClock', () => {
  it('fires a real timer and can cancel another', async () => {
    const guard = setTimeout(() => undefined, 5000); // systemClock timers are unref'd
    try {
      const start = systemClock.now();
      let cancelledFired = false;
      const t = systemClock.setTimeout(() => (cancelledFired = true), 5);
      t.cancel();
      await new Promise<void>((resolve) => systemClock.setTimeout(resolve, 20));
      assert.ok(systemClock.now() - start >= 15, 'now() advances with real time');
      assert.equal(cancelledFired, false);
    } finally {
      clearTimeout(guard);
    }
  });

  it('does not collapse a delay beyond the 2^31-1 ms Node timer limit to 1 ms', async () => {
    let fired = false;
    const t = systemClock.setTimeout(() => (fired = true), 2 ** 31 + 10);
    await new Promise((resolve) => setTimeout(resolve, 30));
    t.cancel();
    assert.equal(fired, false);
  });
});
