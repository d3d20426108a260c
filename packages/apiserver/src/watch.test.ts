import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const NS = '/api/v1/namespaces/default/configmaps';

function cm(name: string, data: Record<string, string> = { v: '0' }, labels?: Record<string, string>): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, ...(labels ? { labels } : {}) }, data };
}

describe('watch semantics', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ bookmarkIntervalSeconds: 1, historyWindow: 1000 });
  });
  after(async () => ts.close());

  it('starts with synthetic ADDED events for existing objects when resourceVersion is unset', async () => {
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'w-init' } });
    await ts.client.post('/api/v1/namespaces/w-init/configmaps', cm('one'));
    await ts.client.post('/api/v1/namespaces/w-init/configmaps', cm('two'));
    const w = await ts.client.watch('/api/v1/namespaces/w-init/configmaps?watch=true');
    const a = await w.next();
    const b = await w.next();
    assert.deepEqual([a.type, b.type], ['ADDED', 'ADDED']);
    assert.deepEqual([a.object.metadata.name, b.object.metadata.name].sort(), ['one', 'two']);
    await ts.client.put('/api/v1/namespaces/w-init/configmaps/one', { ...cm('one', { v: '1' }) });
    const m = await w.next();
    assert.equal(m.type, 'MODIFIED');
    assert.equal(m.object.data.v, '1');
    w.stop();
  });

  it('resumes strictly after an exact resourceVersion, in order, with nothing skipped', async () => {
    const c = await ts.client.post(NS, cm('resume'));
    const rv0 = c.body.metadata.resourceVersion;
    for (let i = 1; i <= 5; i++) await ts.client.put(`${NS}/resume`, cm('resume', { v: String(i) }));
    const w = await ts.client.watch(`${NS}?watch=true&resourceVersion=${rv0}&fieldSelector=metadata.name%3Dresume`);
    const seen: string[] = [];
    let last = Number(rv0);
    for (let i = 1; i <= 5; i++) {
      const e = await w.next();
      assert.equal(e.type, 'MODIFIED');
      assert.ok(Number(e.object.metadata.resourceVersion) > last);
      last = Number(e.object.metadata.resourceVersion);
      seen.push(e.object.data.v);
    }
    assert.deepEqual(seen, ['1', '2', '3', '4', '5']);
    await ts.client.delete(`${NS}/resume`);
    const d = await w.next();
    assert.equal(d.type, 'DELETED');
    w.stop();
  });

  it('sends an ERROR event with a 410 Expired Status for a compacted resourceVersion', async () => {
    const c = await ts.client.post(NS, cm('old'));
    const rv = c.body.metadata.resourceVersion;
    await ts.client.put(`${NS}/old`, cm('old', { v: '1' }));
    const tiny = await startTestServer({ historyWindow: 10 });
    try {
      const first = await tiny.client.post(NS, cm('x'));
      for (let i = 0; i < 150; i++) await tiny.client.put(`${NS}/x`, cm('x', { v: String(i) }));
      const w = await tiny.client.watch(`${NS}?watch=true&resourceVersion=${first.body.metadata.resourceVersion}`);
      const e = await w.next();
      assert.equal(e.type, 'ERROR');
      assert.equal(e.object.kind, 'Status');
      assert.equal(e.object.code, 410);
      assert.equal(e.object.reason, 'Expired');
      await w.closed();
    } finally {
      await tiny.close();
    }
    assert.ok(Number(rv) > 0);
  });

  it('sends BOOKMARK events at the bookmark interval when asked, and only then', async () => {
    const start = await ts.client.get(NS);
    const rv = start.body.metadata.resourceVersion;
    const w = await ts.client.watch(`${NS}?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true`);
    const t0 = Date.now();
    const b = await w.next((e) => e.type === 'BOOKMARK', 4000);
    assert.ok(Date.now() - t0 < 3000);
    assert.equal(b.object.kind, 'ConfigMap');
    assert.ok(Number(b.object.metadata.resourceVersion) >= Number(rv));
    w.stop();
    const plain = await ts.client.watch(`${NS}?watch=true&resourceVersion=${rv}`);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(plain.events.filter((e) => e.type === 'BOOKMARK').length, 0);
    plain.stop();
  });

  it('ends the watch at timeoutSeconds', async () => {
    const rv = (await ts.client.get(NS)).body.metadata.resourceVersion;
    const t0 = Date.now();
    const w = await ts.client.watch(`${NS}?watch=true&resourceVersion=${rv}&timeoutSeconds=1`);
    await w.closed(4000);
    const took = Date.now() - t0;
    assert.ok(took >= 900 && took < 3500, `took ${took} ms`);
  });

  it('turns label transitions into ADDED and DELETED for a label-selected watch', async () => {
    const c = await ts.client.post(NS, cm('lbl', { v: '0' }, { team: 'a' }));
    const w = await ts.client.watch(`${NS}?watch=true&labelSelector=team%3Db&resourceVersion=${c.body.metadata.resourceVersion}`);
    await ts.client.patch(`${NS}/lbl`, { metadata: { labels: { team: 'b' } } }, 'merge');
    const added = await w.next();
    assert.equal(added.type, 'ADDED');
    await ts.client.patch(`${NS}/lbl`, { data: { v: '1' } }, 'merge');
    assert.equal((await w.next()).type, 'MODIFIED');
    await ts.client.patch(`${NS}/lbl`, { metadata: { labels: { team: 'c' } } }, 'merge');
    const gone = await w.next();
    assert.equal(gone.type, 'DELETED');
    w.stop();
  });

  it('marks the end of sendInitialEvents with an initial-events-end bookmark', async () => {
    await ts.client.post(NS, cm('initial-a'));
    const w = await ts.client.watch(`${NS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`);
    const bm = await w.next((e) => e.type === 'BOOKMARK');
    assert.equal(bm.object.metadata.annotations['k8s.io/initial-events-end'], 'true');
    const before = w.events.slice(0, w.events.indexOf(bm));
    assert.ok(before.length > 0 && before.every((e) => e.type === 'ADDED'));
    assert.ok(before.some((e) => e.object.metadata.name === 'initial-a'));
    w.stop();
  });

  it('delivers every change to many concurrent watchers in the same order', async () => {
    const c = await ts.client.post(NS, cm('fan'));
    const rv = c.body.metadata.resourceVersion;
    const ws = await Promise.all(
      Array.from({ length: 10 }, () => ts.client.watch(`${NS}?watch=true&resourceVersion=${rv}&fieldSelector=metadata.name%3Dfan`)),
    );
    await Promise.all(Array.from({ length: 30 }, (_, i) => ts.client.patch(`${NS}/fan`, { data: { [`k${i}`]: String(i) } }, 'merge')));
    for (const w of ws) {
      const rvs: number[] = [];
      for (let i = 0; i < 30; i++) rvs.push(Number((await w.next()).object.metadata.resourceVersion));
      assert.deepEqual(
        rvs,
        [...rvs].sort((a, b) => a - b),
      );
      assert.equal(new Set(rvs).size, 30);
      w.stop();
    }
  });
});
