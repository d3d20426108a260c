import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeObject } from '@kars/kube-core';
import { KubeClient, Resources } from '@kars/kube-client';
import { startTestServer, TestClient } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { RuntimeMetrics } from './metrics.js';
import { dropManagedFields, Reflector } from './reflector.js';
import type { Change } from './store.js';
import { clientFor, fastWatchConfig } from './testing/index.js';
import type { WatchConfig } from './watch-config.js';

const CM = '/api/v1/namespaces/default/configmaps';
const cm = (name: string, v: string): Record<string, unknown> => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { v } });

/** Fast settings for tests: the same mechanisms as production, with second-scale bounds. */
function testConfig(over: Partial<WatchConfig> = {}): WatchConfig {
  return fastWatchConfig({ backoffMs: 200, backoffMaxMs: 2000, idleMs: 2000 }, { timeoutSeconds: 60, ...over });
}

interface Running {
  reflector: Reflector;
  client: KubeClient;
  changes: Change[];
  metrics: RuntimeMetrics;
  stop(): Promise<void>;
}

async function runReflector(
  ts: TestServer,
  cfg: WatchConfig,
  name = 'configmaps',
  transform?: (o: KubeObject) => KubeObject,
): Promise<Running> {
  const client = clientFor(ts.server.kubeconfigPath, cfg);
  const metrics = new RuntimeMetrics();
  const reflector = new Reflector({
    name,
    client,
    resource: Resources.configmaps,
    namespace: 'default',
    config: cfg,
    metrics: metrics.watch(name),
    ...(transform ? { transform } : {}),
  });
  const changes: Change[] = [];
  reflector.subscribe((c) => changes.push(c));
  const ac = new AbortController();
  const done = reflector.run(ac.signal);
  await reflector.store.ready();
  await within(5000, () => reflector.isWatching(), 'watch open');
  return {
    reflector,
    client,
    changes,
    metrics,
    stop: async () => {
      ac.abort();
      await done;
      client.close();
    },
  };
}

/** Wait until `pred` holds, polling every 10 ms; returns the elapsed milliseconds. */
async function within(ms: number, pred: () => boolean, what: string): Promise<number> {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

const valueOf = (r: Reflector, name: string): string | undefined =>
  (r.store.get(`default/${name}`) as (KubeObject & { data?: { v?: string } }) | undefined)?.data?.v;

describe('reflector freshness under injected faults', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
  });
  after(async () => ts.close());

  it('applies its transform to listed, watched and deleted objects: dropManagedFields keeps none cached', async () => {
    await ts.client.post(CM, cm('tf-listed', '1'));
    const r = await runReflector(ts, testConfig(), 'configmaps-transform', dropManagedFields);
    try {
      const listed = r.reflector.store.get('default/tf-listed');
      assert.equal(listed?.metadata.name, 'tf-listed');
      assert.equal(listed?.metadata.managedFields, undefined, 'the listed copy has no managedFields');
      await ts.client.post(CM, cm('tf-watched', '1'));
      await within(5000, () => valueOf(r.reflector, 'tf-watched') === '1', 'watched create');
      const watched = r.reflector.store.get('default/tf-watched');
      assert.equal(watched?.metadata.managedFields, undefined, 'the watched copy has no managedFields');
      assert.ok(watched?.metadata.resourceVersion, 'resourceVersion kept');
      const applied = r.changes.filter((c) => c.type === 'apply' && c.object.metadata.name === 'tf-watched');
      assert.ok(
        applied.length > 0 && applied.every((c) => c.object.metadata.managedFields === undefined),
        'subscribers get the transformed copy',
      );
      await ts.client.delete(`${CM}/tf-watched`);
      await within(5000, () => r.reflector.store.get('default/tf-watched') === undefined, 'watched delete');
      assert.ok(r.changes.some((c) => c.type === 'delete' && c.object.metadata.name === 'tf-watched'));
      const raw = (await ts.client.get(`${CM}/tf-listed`)).body as KubeObject;
      assert.ok(raw.metadata.managedFields?.length, 'the server still has them: only the cache drops them');
    } finally {
      await r.stop();
    }
  });

  it('catches up with an edit made during a silent freeze, detected by HTTP/2 PING', async (t) => {
    await ts.client.post(CM, cm('freeze-ping', '0'));
    const r = await runReflector(ts, testConfig({ pingIntervalMs: 500, pingTimeoutMs: 500, idleTimeoutMs: 30_000 }));
    try {
      assert.equal(valueOf(r.reflector, 'freeze-ping'), '0');
      ts.server.faults!.freezeWatches();
      const editor = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
      await editor.put(`${CM}/freeze-ping`, cm('freeze-ping', '1'));
      editor.close();
      const ms = await within(5000, () => valueOf(r.reflector, 'freeze-ping') === '1', 'edit seen after freeze');
      t.diagnostic(`edit during freeze reached the store in ${ms} ms (bound: ping 500 + 500 ms, then backoff)`);
      assert.match(await r.metrics.registry.metrics(), /kars_watch_restarts_total\{watch="configmaps",reason="ping"\} [1-9]/);
    } finally {
      await r.stop();
    }
  });

  it('catches up with an edit made during a silent freeze with the idle deadline alone (no periodic pings)', async (t) => {
    await ts.client.post(CM, cm('freeze-idle', '0'));
    const r = await runReflector(ts, testConfig({ pingIntervalMs: 0, pingTimeoutMs: 500, idleTimeoutMs: 2000 }), 'idle-only');
    try {
      ts.server.faults!.freezeWatches();
      const editor = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
      await editor.put(`${CM}/freeze-idle`, cm('freeze-idle', '1'));
      editor.close();
      const ms = await within(6000, () => valueOf(r.reflector, 'freeze-idle') === '1', 'edit seen after freeze');
      t.diagnostic(`edit during freeze reached the store in ${ms} ms (bound: idle 2000 + probe 500 ms, then backoff)`);
      assert.ok(ms >= 1000, 'it was the idle deadline, not luck, that recovered it');
      assert.match(await r.metrics.registry.metrics(), /kars_watch_restarts_total\{watch="idle-only",reason="idle"\} [1-9]/);
    } finally {
      await r.stop();
    }
  });

  it('recovers from a connection reset', async (t) => {
    await ts.client.post(CM, cm('reset', '0'));
    const r = await runReflector(ts, testConfig());
    try {
      ts.server.faults!.resetConnections();
      const editor = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
      await editor.put(`${CM}/reset`, cm('reset', '1'));
      editor.close();
      const ms = await within(5000, () => valueOf(r.reflector, 'reset') === '1', 'edit seen after reset');
      t.diagnostic(`edit after a reset reached the store in ${ms} ms`);
    } finally {
      await r.stop();
    }
  });

  it('recovers from an apiserver restart', async (t) => {
    await ts.client.post(CM, cm('restart', '0'));
    const r = await runReflector(ts, testConfig());
    try {
      await ts.server.faults!.restart();
      const editor = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
      await editor.put(`${CM}/restart`, cm('restart', '1'));
      editor.close();
      const ms = await within(8000, () => valueOf(r.reflector, 'restart') === '1', 'edit seen after restart');
      t.diagnostic(`edit after a restart reached the store in ${ms} ms`);
    } finally {
      await r.stop();
    }
  });

  it('relists after a compaction (410), loses no object, invents none and reports the vanished one as deleted', async () => {
    await ts.client.post(CM, cm('keep', '0'));
    await ts.client.post(CM, cm('vanish', '0'));
    const r = await runReflector(ts, testConfig({ pingIntervalMs: 300, pingTimeoutMs: 300 }));
    try {
      ts.server.faults!.freezeWatches();
      const editor = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
      await editor.delete(`${CM}/vanish`);
      await editor.post(CM, cm('appeared', '1'));
      await editor.put(`${CM}/keep`, cm('keep', '1'));
      ts.server.faults!.compact();
      await within(
        6000,
        () =>
          valueOf(r.reflector, 'keep') === '1' &&
          r.reflector.store.get('default/appeared') !== undefined &&
          r.reflector.store.get('default/vanish') === undefined,
        'store converged after 410',
      );
      const server = await editor.get(CM);
      editor.close();
      const serverNames = server.body.items.map((o: any) => o.metadata.name).sort();
      const storeNames = r.reflector.store
        .list()
        .map((o) => o.metadata.name)
        .sort();
      assert.deepEqual(storeNames, serverNames, 'the store holds exactly what the server holds');
      assert.ok(
        r.changes.some((c) => c.type === 'delete' && c.object.metadata.name === 'vanish'),
        'the vanished object was reported deleted',
      );
      const text = await r.metrics.registry.metrics();
      assert.match(text, /kars_watch_restarts_total\{watch="configmaps",reason="expired"\} [1-9]/);
      assert.match(text, /kars_watch_relists_total\{watch="configmaps"\} [2-9]/);
    } finally {
      await r.stop();
    }
  });

  it('repairs drift with the periodic relist-and-diff, and counts it', async () => {
    await ts.client.post(CM, cm('drift', '0'));
    const r = await runReflector(ts, testConfig({ relistIntervalMs: 800 }), 'drifty');
    try {
      // Make the cache wrong behind the watcher's back, as a missed event would.
      const wrong = structuredClone(r.reflector.store.get('default/drift')!) as KubeObject & { data: { v: string } };
      wrong.data.v = 'corrupted';
      wrong.metadata.resourceVersion = '1';
      r.reflector.store.apply(wrong);
      await within(4000, () => valueOf(r.reflector, 'drift') === '0', 'drift repaired');
      assert.match(await r.metrics.registry.metrics(), /kars_watch_drift_repairs_total\{watch="drifty"\} [1-9]/);
    } finally {
      await r.stop();
    }
  });

  it('lists 10,000 objects in pages and becomes ready only once all are in', async (t) => {
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'many' } });
    const N = 10_000;
    const t0 = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < N) {
          const i = next++;
          const res = await ts.client.post('/api/v1/namespaces/many/configmaps', cm(`m${i}`, String(i)));
          assert.equal(res.status, 201);
        }
      }),
    );
    t.diagnostic(`created ${N} objects in ${Date.now() - t0} ms`);
    const client = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    const pages: number[] = [];
    const orig = client.list.bind(client);
    client.list = ((ref, p, signal) => {
      pages.push(p?.limit ?? 0);
      return orig(ref, p, signal);
    }) as typeof client.list;
    const reflector = new Reflector({
      name: 'many',
      client,
      resource: Resources.configmaps,
      namespace: 'many',
      config: testConfig({ pageSize: 500 }),
    });
    const ac = new AbortController();
    const done = reflector.run(ac.signal);
    const t1 = Date.now();
    await reflector.store.ready();
    t.diagnostic(`listed ${N} objects in ${pages.length} pages in ${Date.now() - t1} ms`);
    assert.equal(reflector.store.size(), N);
    assert.equal(pages.length, N / 500);
    assert.ok(pages.every((l) => l === 500));
    ac.abort();
    await done;
    client.close();
  });
});
