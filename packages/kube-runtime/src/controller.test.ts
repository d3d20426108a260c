import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { KubeObject } from '@kars/kube-core';
import { FakeClock } from '@kars/kube-core';
import { Controller, TerminalError } from './controller.js';
import type { ControllerOptions, ReconcileContext, ReconcileResult, Trigger } from './controller.js';
import type { ControllerMetrics } from './metrics.js';
import { exponentialRateLimiter } from './queue.js';
import { Store } from './store.js';
import type { Change, ChangeSource } from './store.js';

/** A ChangeSource over a real Store, driven by the test instead of a reflector. */
class FakeSource<T extends KubeObject = KubeObject> implements ChangeSource<T> {
  readonly store = new Store<T>();
  private readonly subs = new Set<(c: Change<T>) => void>();

  subscribe(fn: (c: Change<T>) => void): () => void {
    this.subs.add(fn);
    return () => this.subs.delete(fn);
  }

  /** A complete listing (marks the store ready). */
  list(objects: T[]): void {
    for (const c of this.store.replace(objects)) this.emit(c);
  }

  apply(object: T): void {
    const old = this.store.apply(object);
    this.emit({ type: 'apply', object, old });
  }

  delete(object: T): void {
    this.store.delete(object);
    this.emit({ type: 'delete', object });
  }

  subscribers(): number {
    return this.subs.size;
  }

  private emit(c: Change<T>): void {
    for (const fn of this.subs) fn(c);
  }
}

let rv = 0;
function obj(name: string, extra: Partial<KubeObject> = {}, namespace = 'ns'): KubeObject {
  return { apiVersion: 'v1', kind: 'Widget', metadata: { name, namespace, resourceVersion: String(++rv) }, ...extra };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await tick();
  }
  assert.fail(`timed out waiting for: ${what}`);
}

/** Let pending promise chains run without advancing any clock. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await tick();
}

/** A promise the test resolves by hand. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

class RecordingMetrics implements ControllerMetrics {
  results: string[] = [];
  depths: number[] = [];
  queueDepth(n: number): void {
    this.depths.push(n);
  }
  reconciled(result: 'success' | 'error' | 'requeue'): void {
    this.results.push(result);
  }
}

/** A controller over a fresh primary source, with virtual time and a recording reconcile. */
function harness(opts: Partial<ControllerOptions<KubeObject>> & { reconcile?: ControllerOptions<KubeObject>['reconcile'] } = {}) {
  const primary = new FakeSource();
  const clock = new FakeClock();
  const calls: Array<{ key: string; attempt: number }> = [];
  const reconcile =
    opts.reconcile ??
    (async (key: string, ctx: ReconcileContext): Promise<ReconcileResult> => {
      calls.push({ key, attempt: ctx.attempt });
    });
  const ctrl = new Controller({
    name: 'widgets',
    primary,
    clock,
    rateLimiter: exponentialRateLimiter({ baseMs: 100, maxMs: 10_000, jitter: 0 }),
    ...opts,
    reconcile: async (key, ctx) => {
      if (opts.reconcile) calls.push({ key, attempt: ctx.attempt });
      return reconcile(key, ctx);
    },
  });
  const ac = new AbortController();
  return { primary, clock, calls, ctrl, ac, keys: () => calls.map((c) => c.key) };
}

describe('Controller', () => {
  it('reconciles nothing before the store is ready, then every primary key once', async () => {
    const h = harness();
    const running = h.ctrl.run(h.ac.signal);
    await settle();
    assert.equal(h.calls.length, 0);
    h.primary.list([obj('a'), obj('b'), obj('c', {}, '')]);
    await until(() => h.calls.length === 3, 'three reconciles');
    await settle();
    assert.deepEqual(h.keys().sort(), ['c', 'ns/a', 'ns/b']);
    h.ac.abort();
    await running;
  });

  it('collapses a burst of changes to one waiting object into one reconcile', async () => {
    const first = gate();
    const h = harness({
      concurrency: 1,
      reconcile: async (key) => {
        if (key === 'ns/x') await first.promise;
      },
    });
    h.primary.list([obj('x')]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.calls.length === 1, 'x in flight');
    for (let i = 0; i < 5; i++) h.primary.apply(obj('y', { spec: { i } }));
    for (let i = 0; i < 3; i++) h.primary.apply(obj('x', { spec: { i } }));
    first.open();
    await until(() => h.calls.length === 3, 'the burst reconciled');
    await settle();
    assert.deepEqual(h.keys(), ['ns/x', 'ns/y', 'ns/x'], 'y once; x once more for the changes seen while it ran');
    h.ac.abort();
    await running;
  });

  it('never reconciles the same key twice at once, while still running different keys in parallel', async () => {
    const inFlight = new Map<string, number>();
    let maxPerKey = 0;
    let maxTotal = 0;
    let total = 0;
    let done = 0;
    const h = harness({
      concurrency: 4,
      reconcile: async (key) => {
        const n = (inFlight.get(key) ?? 0) + 1;
        inFlight.set(key, n);
        total++;
        maxPerKey = Math.max(maxPerKey, n);
        maxTotal = Math.max(maxTotal, total);
        for (let i = 0; i < 3; i++) await tick();
        inFlight.set(key, n - 1);
        total--;
        done++;
      },
    });
    h.primary.list([obj('a'), obj('b'), obj('c')]);
    const running = h.ctrl.run(h.ac.signal);
    for (let round = 0; round < 30; round++) {
      for (const name of ['a', 'b', 'c']) h.primary.apply(obj(name, { spec: { round } }));
      await tick();
    }
    await until(() => total === 0 && done >= 3, 'all reconciles finished');
    await settle();
    assert.equal(maxPerKey, 1, 'one key was reconciled concurrently with itself');
    assert.ok(maxTotal > 1, `different keys should run in parallel (max in flight ${maxTotal})`);
    h.ac.abort();
    await running;
  });

  it('reconciles again after requeueAfterMs, in virtual time', async () => {
    const metrics = new RecordingMetrics();
    let n = 0;
    const h = harness({ metrics, reconcile: async () => (n++ === 0 ? { requeueAfterMs: 1000 } : undefined) });
    h.primary.list([obj('a')]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.calls.length === 1, 'first reconcile');
    await settle();
    h.clock.advance(999);
    await settle();
    assert.equal(h.calls.length, 1);
    h.clock.advance(1);
    await until(() => h.calls.length === 2, 'requeued reconcile');
    await settle();
    assert.deepEqual(metrics.results, ['requeue', 'success']);
    h.ac.abort();
    await running;
  });

  it('retries a failing key after the rate limiter delays, then forgets its backoff after a success', async () => {
    const metrics = new RecordingMetrics();
    let failuresLeft = 3;
    const times: number[] = [];
    const h = harness({
      metrics,
      reconcile: async () => {
        times.push(h.clock.now());
        if (failuresLeft-- > 0) throw new Error('transient');
      },
    });
    h.primary.list([obj('a')]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.calls.length === 1, 'first attempt');
    for (let ms = 0; ms < 1000 && h.calls.length < 4; ms++) {
      h.clock.advance(1);
      await settle();
    }
    assert.deepEqual(times, [0, 100, 300, 700], 'delays of 100, 200, 400 ms');
    assert.deepEqual(
      h.calls.map((c) => c.attempt),
      [0, 1, 2, 3],
    );
    assert.deepEqual(metrics.results, ['error', 'error', 'error', 'success']);
    h.primary.apply(obj('a', { spec: { again: true } }));
    await until(() => h.calls.length === 5, 'reconcile after change');
    assert.equal(h.calls[4]?.attempt, 0, 'the next change starts at attempt 0');
    h.ac.abort();
    await running;
  });

  it('does not retry a TerminalError but reconciles the key again on its next change', async () => {
    const metrics = new RecordingMetrics();
    const h = harness({
      metrics,
      reconcile: async () => {
        throw new TerminalError('spec.image is not allowed');
      },
    });
    h.primary.list([obj('a')]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.calls.length === 1, 'first attempt');
    for (let i = 0; i < 10; i++) {
      h.clock.advance(60_000);
      await settle();
    }
    assert.equal(h.calls.length, 1);
    assert.deepEqual(metrics.results, ['error']);
    h.primary.apply(obj('a', { spec: { fixed: true } }));
    await until(() => h.calls.length === 2, 'reconcile after change');
    assert.equal(h.calls[1]?.attempt, 0, 'a terminal error forgets the backoff');
    h.ac.abort();
    await running;
  });

  it('survives a synchronous throw and a thrown non-Error, logging them wrapped with the reconcile bindings', async () => {
    const lines: Array<Record<string, any>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, any>);
        cb();
      },
    });
    const log = pino({ level: 'debug' }, sink);
    const h = harness({
      log,
      concurrency: 1,
      reconcile: ((key: string) => {
        if (key === 'ns/sync') throw new Error('sync boom');
        if (key === 'ns/str') return Promise.reject('plain string');
        return Promise.resolve();
      }) as ControllerOptions<KubeObject>['reconcile'],
    });
    h.primary.list([obj('sync'), obj('str'), obj('ok')]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.keys().includes('ns/ok'), 'the healthy key reconciled');
    await until(() => lines.filter((l) => l.level === 50).length === 2, 'two error lines');
    const errors = lines.filter((l) => l.level === 50);
    const str = errors.find((l) => l.key === 'ns/str');
    assert.ok(str, 'the non-Error failure was logged');
    assert.equal(str.controller, 'widgets');
    assert.match(String(str.reconcileId), /^[0-9a-f-]{36}$/);
    assert.match(String(str.err?.message), /non-Error value: "plain string"/);
    assert.equal(str.err?.type, 'NonErrorThrown');
    assert.match(String(errors.find((l) => l.key === 'ns/sync')?.err?.message), /sync boom/);
    const ids = new Set(lines.filter((l) => l.reconcileId).map((l) => l.reconcileId));
    assert.equal(ids.size, 3, 'each reconcile has its own id');
    h.ac.abort();
    await running;
  });

  it('reconciles the primary key a secondary trigger maps to', async () => {
    interface Pod extends KubeObject {
      spec: { owner: string };
    }
    const pods = new FakeSource<Pod>();
    const podTrigger: Trigger<Pod> = { source: pods, mapToKeys: (c) => [`${c.object.metadata.namespace}/${c.object.spec.owner}`] };
    const broken: Trigger = {
      source: pods,
      mapToKeys: () => {
        throw new Error('mapper bug');
      },
    };
    const h = harness({ triggers: [podTrigger, broken] });
    h.primary.list([obj('a'), obj('b')]);
    const running = h.ctrl.run(h.ac.signal);
    await settle();
    assert.equal(h.calls.length, 0, 'waits for the trigger store too');
    pods.list([]);
    await until(() => h.calls.length === 2, 'initial reconciles');
    await settle();
    pods.apply({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p1', namespace: 'ns' }, spec: { owner: 'b' } });
    await until(() => h.calls.length === 3, 'reconcile from the trigger');
    assert.equal(h.calls[2]?.key, 'ns/b');
    h.ac.abort();
    await running;
    assert.equal(pods.subscribers(), 0, 'unsubscribed on shutdown');
    assert.equal(h.primary.subscribers(), 0);
  });

  it('enqueues the key of a deleted primary so the reconcile can clean up', async () => {
    const h = harness();
    const a = obj('a');
    h.primary.list([a]);
    const running = h.ctrl.run(h.ac.signal);
    await until(() => h.calls.length === 1, 'initial reconcile');
    h.primary.delete(a);
    await until(() => h.calls.length === 2, 'reconcile after delete');
    assert.equal(h.calls[1]?.key, 'ns/a');
    h.ac.abort();
    await running;
  });

  it('resolves run only after the in-flight reconcile finishes, and passes it the aborted signal', async () => {
    const release = gate();
    let sawAbort = false;
    let finished = false;
    const h = harness({
      reconcile: async (_key, ctx) => {
        await release.promise;
        sawAbort = ctx.signal.aborted;
        finished = true;
      },
    });
    h.primary.list([obj('a')]);
    let resolved = false;
    const running = h.ctrl.run(h.ac.signal).then(() => (resolved = true));
    await until(() => h.calls.length === 1, 'reconcile in flight');
    h.ac.abort();
    await settle();
    assert.equal(resolved, false, 'run resolved while a reconcile was still running');
    release.open();
    await running;
    assert.equal(finished, true);
    assert.equal(sawAbort, true);
  });

  it('reconciles nothing while isActive is false, and starts when it flips and wake is called', async () => {
    let active = false;
    const h = harness({ isActive: () => active });
    h.primary.list([obj('a'), obj('b')]);
    const running = h.ctrl.run(h.ac.signal);
    await settle();
    for (let i = 0; i < 5; i++) {
      h.clock.advance(1000);
      await settle();
    }
    h.primary.apply(obj('c'));
    await settle();
    assert.equal(h.calls.length, 0);
    active = true;
    h.ctrl.wake();
    await until(() => h.calls.length === 3, 'all keys reconciled once active');
    h.ac.abort();
    await running;
  });

  it('hands back a key taken just as isActive turned false, and reconciles it once when active again', async () => {
    let active = true;
    const h = harness({ isActive: () => active, concurrency: 2 });
    h.primary.list([]);
    const running = h.ctrl.run(h.ac.signal);
    await settle(); // both workers now wait for a key
    active = false;
    h.primary.apply(obj('a'));
    await settle();
    for (let i = 0; i < 3; i++) {
      h.clock.advance(200);
      await settle();
    }
    assert.equal(h.calls.length, 0, 'reconciled while inactive');
    active = true;
    h.ctrl.wake();
    await until(() => h.calls.length === 1, 'reconcile once active');
    await settle();
    h.clock.advance(1000);
    await settle();
    assert.deepEqual(h.keys(), ['ns/a']);
    h.ac.abort();
    await running;
  });

  it('notices isActive turning true within the poll interval without wake', async () => {
    let active = false;
    const h = harness({ isActive: () => active });
    h.primary.list([obj('a')]);
    const running = h.ctrl.run(h.ac.signal);
    await settle();
    active = true;
    await settle();
    assert.equal(h.calls.length, 0, 'nothing before the poll fires');
    h.clock.advance(200);
    await until(() => h.calls.length === 1, 'reconcile after poll');
    h.ac.abort();
    await running;
  });

  it('resolves run at once when aborted while the stores are not ready', async () => {
    const h = harness();
    const running = h.ctrl.run(h.ac.signal);
    await settle();
    h.ac.abort();
    await running;
    assert.equal(h.primary.subscribers(), 0);
  });

  it('refuses to run twice', async () => {
    const h = harness();
    h.ac.abort();
    await h.ctrl.run(h.ac.signal);
    await assert.rejects(h.ctrl.run(h.ac.signal), /already run/);
  });

  it('rejects a concurrency below one', () => {
    assert.throws(() => harness({ concurrency: 0 }), RangeError);
  });

  it('gives TerminalError a stable code', () => {
    const e = new TerminalError('nope', { cause: new Error('root') });
    assert.equal(e.code, 'KARS_RECONCILE_TERMINAL');
    assert.equal(e.name, 'TerminalError');
    assert.ok(e.cause instanceof Error);
  });
});
