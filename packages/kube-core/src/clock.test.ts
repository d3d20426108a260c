import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, sleep, systemClock } from './clock.js';

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

  it('moves wallNow with now, from the wall start it was given', () => {
    const c = new FakeClock(500, 1_000_000);
    assert.equal(c.wallNow(), 1_000_000);
    c.advance(250);
    assert.equal(c.now(), 750);
    assert.equal(c.wallNow(), 1_000_250);
  });

  it('advanceAsync lets a loop that awaits between sleeps run every iteration inside the window', async () => {
    const c = new FakeClock();
    const woke: number[] = [];
    const ac = new AbortController();
    const loop = (async () => {
      while (!ac.signal.aborted) {
        await sleep(c, 100, ac.signal);
        await Promise.resolve(); // more work between sleeps, as real loops do
        woke.push(c.now());
      }
    })();
    await c.advanceAsync(0); // the loop starts its first sleep
    c.advance(350); // synchronous: the first sleep ends at 100, but the loop runs only after advance returns
    assert.deepEqual(woke, []);
    await c.advanceAsync(300); // the loop wakes at 350 (late), then sleeps again: due at 450, 550, 650
    assert.deepEqual(woke, [350, 450, 550, 650]);
    ac.abort();
    await loop;
  });

  it('reports when its next timer is due', () => {
    const c = new FakeClock();
    assert.equal(c.nextTimerInMs(), undefined);
    c.setTimeout(() => undefined, 40);
    c.setTimeout(() => undefined, Infinity);
    c.advance(15);
    assert.equal(c.nextTimerInMs(), 25);
  });
});

describe('sleep', () => {
  it('resolves after the delay on the given clock, at once on abort, and leaves no timer behind', async () => {
    const c = new FakeClock();
    let done = false;
    const p = sleep(c, 1000).then(() => (done = true));
    await c.advanceAsync(999);
    assert.equal(done, false);
    await c.advanceAsync(1);
    assert.equal(done, true);
    await p;
    const ac = new AbortController();
    const q = sleep(c, 60_000, ac.signal);
    assert.equal(c.pending(), 1);
    ac.abort();
    await q;
    assert.equal(c.pending(), 0, 'the aborted sleep cancelled its timer');
    await sleep(c, 10, ac.signal); // already aborted: resolves without a timer
    assert.equal(c.pending(), 0);
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
      assert.ok(Math.abs(systemClock.wallNow() - Date.now()) < 5, 'wallNow() is Date.now()');
      assert.equal(cancelledFired, false);
    } finally {
      clearTimeout(guard);
    }
  });

  it('keeps the process alive only for keepAlive timers', () => {
    const hasRef = (t: unknown): boolean => (t as { hasRef(): boolean }).hasRef();
    const seen: unknown[] = [];
    const orig = globalThis.setTimeout;
    globalThis.setTimeout = ((fn: () => void, ms: number) => {
      const t = orig(fn, ms);
      seen.push(t);
      return t;
    }) as typeof globalThis.setTimeout;
    try {
      systemClock.setTimeout(() => undefined, 10).cancel();
      systemClock.setTimeout(() => undefined, 10, { keepAlive: true }).cancel();
    } finally {
      globalThis.setTimeout = orig;
    }
    assert.equal(seen.length, 2);
    assert.equal(hasRef(seen[0]), false);
    assert.equal(hasRef(seen[1]), true);
  });

  it('does not collapse a delay beyond the 2^31-1 ms Node timer limit to 1 ms', async () => {
    let fired = false;
    const t = systemClock.setTimeout(() => (fired = true), 2 ** 31 + 10);
    await new Promise((resolve) => setTimeout(resolve, 30));
    t.cancel();
    assert.equal(fired, false);
  });
});
