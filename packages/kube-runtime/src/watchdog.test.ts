// Liveness that means something: /healthz fails for a wedged leader (keys queued, no reconcile
// progress) and for a stalled event loop, over real HTTP to the health server.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import type { KubeObject } from '@kars/kube-core';
import { FakeClock } from '@kars/kube-core';
import { Controller } from './controller.js';
import { startHealthServer } from './health.js';
import { Store } from './store.js';
import type { Change, ChangeSource } from './store.js';
import { eventLoopWatchdog, reconcileWatchdog } from './watchdog.js';

class Source implements ChangeSource {
  readonly store = new Store<KubeObject>();
  private readonly subs = new Set<(c: Change) => void>();
  subscribe(fn: (c: Change) => void): () => void {
    this.subs.add(fn);
    return () => this.subs.delete(fn);
  }
  list(objects: KubeObject[]): void {
    for (const c of this.store.replace(objects)) for (const fn of this.subs) fn(c);
  }
}

const obj = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Widget', metadata: { name, namespace: 'ns', resourceVersion: '1' } });
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await tick();
  }
  assert.fail(`timed out waiting for: ${what}`);
}

async function healthz(url: string): Promise<{ status: number; text: string }> {
  const r = await fetch(`${url}/healthz`);
  return { status: r.status, text: await r.text() };
}

void describe('reconcile-activity watchdog', () => {
  it('fails /healthz while the leader has keys queued and every worker is stuck; a follower or an idle leader is healthy', async () => {
    const clock = new FakeClock();
    const primary = new Source();
    let release!: () => void;
    const stuck = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    let leader = true;
    const ctrl = new Controller({
      name: 'widgets',
      primary,
      clock,
      concurrency: 1,
      isActive: () => leader,
      reconcile: async (key) => {
        started.push(key);
        if (key === 'ns/a') await stuck;
      },
    });
    const ac = new AbortController();
    const health = await startHealthServer({
      listen: '127.0.0.1:0',
      registry: new Registry(),
      readiness: [],
      liveness: [reconcileWatchdog({ controllers: [ctrl], isLeader: () => leader, stallMs: 60_000, clock })],
      signal: ac.signal,
    });
    const running = ctrl.run(ac.signal);
    try {
      assert.equal((await healthz(health.url)).status, 200);
      primary.list([obj('a')]);
      await until(() => started.length === 1, 'the first reconcile');
      clock.advance(120_000);
      assert.equal((await healthz(health.url)).status, 200, 'one long reconcile with nothing else queued is not a stall');
      primary.list([obj('a'), obj('b')]); // b is queued behind the stuck worker
      await until(() => ctrl.activity().waiting === 1, 'b waiting');
      const bad = await healthz(health.url);
      assert.equal(bad.status, 503);
      assert.match(
        bad.text,
        /\[-\]reconcile-activity: leader not reconciling \(limit 60 s\): widgets: 1 key\(s\) waiting, 1 in flight, no progress for 120 s/,
      );
      assert.match(bad.text, /healthz check failed\n$/);
      leader = false;
      assert.equal((await healthz(health.url)).status, 200, 'a follower is not expected to reconcile');
      leader = true;
      release();
      await until(() => started.includes('ns/b'), 'b reconciled after the stuck one returned');
      assert.equal((await healthz(health.url)).status, 200);
    } finally {
      release();
      ac.abort();
      await running;
      await health.close();
    }
  });

  it('does not count keys that wait for the initial list as a stall', async () => {
    const clock = new FakeClock();
    const primary = new Source();
    const ctrl = new Controller({ name: 'w', primary, clock, reconcile: async () => undefined });
    const check = reconcileWatchdog({ controllers: [ctrl], isLeader: () => true, stallMs: 1000, clock });
    const ac = new AbortController();
    const running = ctrl.run(ac.signal);
    clock.advance(10_000);
    assert.deepEqual(check.check(), { ok: true });
    ac.abort();
    await running;
  });
});

void describe('event-loop watchdog', () => {
  it('fails /healthz after the loop stalls past the limit, and recovers once the window passes', async () => {
    const ac = new AbortController();
    const health = await startHealthServer({
      listen: '127.0.0.1:0',
      registry: new Registry(),
      readiness: [],
      liveness: [eventLoopWatchdog({ maxDelayMs: 400, windowMs: 1500, intervalMs: 50, signal: ac.signal })],
      signal: ac.signal,
    });
    try {
      assert.equal((await healthz(health.url)).status, 200);
      const end = Date.now() + 1000;
      while (Date.now() < end) {
        // a wedged loop: nothing else runs for a second
      }
      await new Promise((r) => setTimeout(r, 120)); // let the late timer notice
      const bad = await healthz(health.url);
      assert.equal(bad.status, 503, bad.text);
      assert.match(bad.text, /\[-\]event-loop: event loop (stalled|blocked)/);
      await new Promise((r) => setTimeout(r, 1800));
      const ok = await healthz(health.url);
      assert.equal(ok.status, 200, ok.text);
    } finally {
      ac.abort();
      await health.close();
    }
  });
});
