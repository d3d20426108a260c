import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import { WorkQueue, exponentialRateLimiter } from './queue.js';

const never = new AbortController().signal;
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A getter whose result can be inspected without awaiting it. */
function pendingGet(
  q: WorkQueue,
  signal = never,
): { value: () => string | undefined; settled: () => boolean; promise: Promise<string | undefined> } {
  let settled = false;
  let value: string | undefined;
  const promise = q.get(signal).then((v) => {
    settled = true;
    value = v;
    return v;
  });
  return { value: () => value, settled: () => settled, promise };
}

describe('WorkQueue', () => {
  it('stores a waiting key once however often it is added, and hands keys out first-in first-out', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    assert.equal(q.len(), 2);
    assert.equal(await q.get(never), 'a');
    assert.equal(await q.get(never), 'b');
    assert.equal(q.len(), 0);
  });

  it('never hands out a key that is processing, even to a waiting getter', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    assert.equal(await q.get(never), 'a');
    const second = pendingGet(q);
    q.add('a');
    await tick();
    assert.equal(second.settled(), false, 'a processing key must not be handed out');
    assert.equal(q.len(), 0);
    q.done('a');
    assert.equal(await second.promise, 'a');
  });

  it('requeues a key added several times while processing exactly once after done', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    await q.get(never);
    q.add('a');
    q.add('a');
    q.add('a');
    q.done('a');
    assert.equal(q.len(), 1);
    assert.equal(await q.get(never), 'a');
    q.done('a');
    assert.equal(q.len(), 0);
  });

  it('does not requeue a key on done when nobody added it meanwhile', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    await q.get(never);
    q.done('a');
    assert.equal(q.len(), 0);
  });

  it('adds a key after the delay of addAfter, in virtual time', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('a', 1000);
    assert.equal(q.len(), 0);
    clock.advance(999);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
    assert.equal(await q.get(never), 'a');
  });

  it('keeps the soonest of two pending timed adds of one key', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('a', 1000);
    q.addAfter('a', 300);
    q.addAfter('a', 2000);
    assert.equal(clock.pending(), 1, 'one timer per key');
    clock.advance(300);
    assert.equal(q.len(), 1);
    assert.equal(clock.pending(), 0, 'the later timer was cancelled');
  });

  it('adds at once when addAfter gets a delay of zero or less', () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.addAfter('a', 0);
    q.addAfter('b', -5);
    assert.equal(q.len(), 2);
  });

  it('delays addRateLimited by the rate limiter and starts over after forget', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, rateLimiter: exponentialRateLimiter({ baseMs: 100, jitter: 0 }) });
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const start = clock.now();
      q.addRateLimited('a');
      while (q.len() === 0) clock.advance(1);
      waits.push(clock.now() - start);
      void q.get(never); // marks 'a' processing synchronously
      q.done('a');
    }
    assert.deepEqual(waits, [100, 200, 400]);
    q.forget('a');
    q.addRateLimited('a');
    clock.advance(99);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
  });

  it('resolves every waiting getter with undefined on shutDown and ignores later adds', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    const g1 = q.get(never);
    const g2 = q.get(never);
    q.shutDown();
    assert.deepEqual(await Promise.all([g1, g2]), [undefined, undefined]);
    q.add('a');
    assert.equal(q.len(), 0);
    assert.equal(await q.get(never), undefined);
  });

  it('cancels timed adds on shutDown', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('a', 10);
    q.shutDown();
    assert.equal(clock.pending(), 0);
    clock.advance(10);
    assert.equal(q.len(), 0);
  });

  it('resolves an aborted getter with undefined without letting it swallow a later key', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    const ac = new AbortController();
    const g = q.get(ac.signal);
    ac.abort();
    assert.equal(await g, undefined);
    q.add('a');
    assert.equal(q.len(), 1, 'the key stays waiting for a live getter');
    assert.equal(await q.get(ac.signal), undefined, 'an already-aborted signal gets nothing');
    assert.equal(await q.get(never), 'a');
  });

  it('reports the waiting depth through onDepth', async () => {
    const depths: number[] = [];
    const q = new WorkQueue({ clock: new FakeClock(), onDepth: (n) => depths.push(n) });
    q.add('a');
    q.add('b');
    q.add('a');
    await q.get(never);
    assert.deepEqual(depths, [1, 2, 1]);
  });
});

describe('exponentialRateLimiter', () => {
  it('doubles the delay per retry from baseMs and caps it at maxMs', () => {
    const rl = exponentialRateLimiter({ baseMs: 5, maxMs: 100, jitter: 0 });
    const delays = Array.from({ length: 8 }, () => rl.when('k'));
    assert.deepEqual(delays, [5, 10, 20, 40, 80, 100, 100, 100]);
    assert.equal(rl.retries('k'), 8);
  });

  it('starts again at baseMs after forget, and counts keys separately', () => {
    const rl = exponentialRateLimiter({ baseMs: 5, jitter: 0 });
    rl.when('k');
    rl.when('k');
    assert.equal(rl.when('other'), 5);
    rl.forget('k');
    assert.equal(rl.retries('k'), 0);
    assert.equal(rl.when('k'), 5);
    assert.equal(rl.retries('other'), 1);
  });

  it('stays capped after many retries instead of overflowing', () => {
    const rl = exponentialRateLimiter({ baseMs: 5, maxMs: 60_000, jitter: 0 });
    let last = 0;
    for (let i = 0; i < 2000; i++) last = rl.when('k');
    assert.equal(last, 60_000);
  });

  it('shortens each delay by at most the jitter fraction', () => {
    const low = exponentialRateLimiter({ baseMs: 100, maxMs: 1000, jitter: 0.2, random: () => 0.999999 });
    const high = exponentialRateLimiter({ baseMs: 100, maxMs: 1000, jitter: 0.2, random: () => 0 });
    assert.ok(Math.abs(low.when('k') - 80) < 0.01);
    assert.equal(high.when('k'), 100);
    const real = exponentialRateLimiter({ baseMs: 100, maxMs: 1000 });
    for (let i = 0; i < 100; i++) {
      const d = real.when(`k${i}`);
      assert.ok(d >= 80 && d <= 100, `default jitter keeps ${d} within [80, 100]`);
    }
  });

  it('uses 5 ms and 60 s as defaults', () => {
    const rl = exponentialRateLimiter({ jitter: 0 });
    assert.equal(rl.when('k'), 5);
    for (let i = 0; i < 30; i++) rl.when('k');
    assert.equal(rl.when('k'), 60_000);
  });

  it('rejects nonsensical options', () => {
    assert.throws(() => exponentialRateLimiter({ baseMs: 10, maxMs: 5 }), RangeError);
    assert.throws(() => exponentialRateLimiter({ jitter: 1.5 }), RangeError);
  });
});
