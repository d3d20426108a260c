import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, TestClient } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const CM = '/api/v1/namespaces/default/configmaps';

function cm(name: string, v: string): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { v } };
}

describe('fault injection', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
  });
  after(async () => ts.close());

  it('freezes open watches silently: no events, no bookmarks, no close, while new connections still work', async () => {
    const c = await ts.client.post(CM, cm('frozen', '0'));
    const w = await ts.client.watch(`${CM}?watch=true&allowWatchBookmarks=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    await ts.client.put(`${CM}/frozen`, cm('frozen', '1'));
    assert.equal((await w.next((e) => e.type === 'MODIFIED')).object.data.v, '1');
    assert.ok(ts.server.faults!.freezeWatches() >= 1);
    const fresh = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
    const edit = await fresh.put(`${CM}/frozen`, cm('frozen', '2'));
    assert.equal(edit.status, 200, 'a new connection is served during the freeze');
    const seen = w.events.length;
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(w.events.length, seen, 'the frozen watch receives nothing, not even bookmarks');
    assert.equal(w.ended, false, 'the frozen watch is not closed (no FIN, no RST)');
    const w2 = await fresh.watch(`${CM}?watch=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    const got = await w2.next((e) => e.object.data?.v === '2');
    assert.equal(got.type, 'MODIFIED');
    w.stop();
    w2.stop();
    fresh.close();
  });

  it('resets connections so open watches end with an error', async () => {
    const client = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
    const w = await client.watch(`${CM}?watch=true`);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(ts.server.faults!.resetConnections() >= 1);
    await w.closed(3000);
    assert.equal(w.ended, true);
    client.close();
  });

  it('compacts history so the next resume from an older resourceVersion gets 410', async () => {
    const c = await ts.client.post(CM, cm('compact', '0'));
    await ts.client.put(`${CM}/compact`, cm('compact', '1'));
    ts.server.faults!.compact();
    const w = await ts.client.watch(`${CM}?watch=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    const e = await w.next();
    assert.equal(e.type, 'ERROR');
    assert.equal(e.object.code, 410);
  });

  it('restarts on the same port with state intact', async () => {
    const c = await ts.client.post(CM, cm('survivor', 'x'));
    await ts.server.faults!.restart();
    const client = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
    const r = await client.get(`${CM}/survivor`);
    assert.equal(r.status, 200);
    assert.equal(r.body.metadata.uid, c.body.metadata.uid);
    client.close();
  });

  it('serves the faults over HTTP only when fault injection is on', async () => {
    const r = await ts.client.request('POST', '/debug/faults/compact');
    assert.equal(r.status, 200);
    assert.ok(Number(r.body.compactedTo) > 0);
    const plain = await startTestServer();
    try {
      const off = await plain.client.request('POST', '/debug/faults/compact');
      assert.equal(off.status, 404);
    } finally {
      await plain.close();
    }
  });
});
