/**
 * DELETE through the one write path: preconditions, dry runs, finalizers, namespaces, watch events
 * and exact optimistic concurrency against updates in the same group commit. Real HTTP.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCrds, eventually, startTestServer, widgetCrd } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';
const DELETE_OPTIONS = { apiVersion: 'v1', kind: 'DeleteOptions' };

/** A ConfigMap named `name`, with more metadata (finalizers, ownerReferences) from `meta`. */
const cm = (name: string, meta: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, ...meta },
  data: { a: '1' },
});

describe('DELETE through the one write path', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('refuses a delete whose uid or resourceVersion precondition does not hold, with kube messages', async () => {
    const c = await ts.client.post(CM, cm('pre'));
    const { uid, resourceVersion } = c.body.metadata;
    const badUid = await ts.client.delete(`${CM}/pre`, { ...DELETE_OPTIONS, preconditions: { uid: 'not-the-uid' } });
    assert.equal(badUid.status, 409, badUid.text);
    assert.equal(
      badUid.body.message,
      `Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (not-the-uid) does not match the UID in record (${uid}). The object might have been deleted and then recreated`,
    );
    const badRv = await ts.client.delete(`${CM}/pre`, { ...DELETE_OPTIONS, preconditions: { resourceVersion: '1' } });
    assert.equal(badRv.status, 409, badRv.text);
    assert.equal(
      badRv.body.message,
      `Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${resourceVersion}). The object might have been modified`,
    );
    assert.deepEqual(badRv.body.details, { name: 'pre', kind: 'ConfigMap' }, 'kube names the Kind and omits the core group');
    assert.equal((await ts.client.get(`${CM}/pre`)).status, 200, 'a failed precondition deletes nothing');
    const ok = await ts.client.delete(`${CM}/pre`, { ...DELETE_OPTIONS, preconditions: { uid, resourceVersion } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal((await ts.client.get(`${CM}/pre`)).status, 404);
  });

  it('answers a dry-run delete without storing anything (query and DeleteOptions)', async () => {
    const c = await ts.client.post(CM, cm('dry'));
    const byQuery = await ts.client.delete(`${CM}/dry?dryRun=All`);
    assert.equal(byQuery.status, 200, byQuery.text);
    const byBody = await ts.client.delete(`${CM}/dry`, { ...DELETE_OPTIONS, dryRun: ['All'] });
    assert.equal(byBody.status, 200, byBody.text);
    const still = await ts.client.get(`${CM}/dry`);
    assert.equal(still.status, 200);
    assert.equal(still.body.metadata.resourceVersion, c.body.metadata.resourceVersion);

    await ts.client.post(CM, cm('dryfin', { finalizers: ['example.com/hold'] }));
    const before = await ts.client.get(`${CM}/dryfin`);
    const marked = await ts.client.delete(`${CM}/dryfin?dryRun=All`);
    assert.equal(marked.status, 200, marked.text);
    assert.ok(marked.body.metadata.deletionTimestamp, 'the dry run shows the object as it would be marked');
    assert.equal(marked.body.metadata.resourceVersion, before.body.metadata.resourceVersion);
    const after = await ts.client.get(`${CM}/dryfin`);
    assert.equal(after.body.metadata.deletionTimestamp, undefined, 'the dry run marked nothing');
    assert.equal(after.body.metadata.resourceVersion, before.body.metadata.resourceVersion);
  });

  it('marks an object with finalizers once (MODIFIED, generation bumped), and removes it with its last finalizer (DELETED)', async () => {
    const c = await ts.client.post(WD, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'held', finalizers: ['example.com/hold'] },
      spec: { size: 1 },
    });
    assert.equal(c.status, 201, c.text);
    const w = await ts.client.watch(`${WD}?watch=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    try {
      const d1 = await ts.client.delete(`${WD}/held`);
      assert.equal(d1.status, 200, d1.text);
      assert.ok(d1.body.metadata.deletionTimestamp);
      assert.equal(d1.body.metadata.generation, c.body.metadata.generation + 1);
      const ev1 = await w.next();
      assert.equal(ev1.type, 'MODIFIED');
      assert.equal(ev1.object.metadata.resourceVersion, d1.body.metadata.resourceVersion);

      const d2 = await ts.client.delete(`${WD}/held`, { ...DELETE_OPTIONS, propagationPolicy: 'Orphan' });
      assert.equal(d2.status, 200, d2.text);
      assert.equal(d2.body.metadata.resourceVersion, d1.body.metadata.resourceVersion, 'a second delete changes nothing');
      assert.equal(d2.body.metadata.deletionTimestamp, d1.body.metadata.deletionTimestamp);
      assert.deepEqual(d2.body.metadata.finalizers, ['example.com/hold']);

      const rm = await ts.client.patch(`${WD}/held`, { metadata: { finalizers: null } }, 'merge');
      assert.equal(rm.status, 200, rm.text);
      const ev2 = await w.next();
      assert.equal(ev2.type, 'DELETED');
      assert.equal((await ts.client.get(`${WD}/held`)).status, 404);
    } finally {
      w.stop();
    }
  });

  it('removes an object without finalizers at once and answers with it as it was last stored', async () => {
    const c = await ts.client.post(CM, cm('plain'));
    const w = await ts.client.watch(`${CM}?watch=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    try {
      const d = await ts.client.delete(`${CM}/plain`);
      assert.equal(d.status, 200, d.text);
      assert.equal(d.body.kind, 'Status');
      assert.equal(d.body.details.uid, c.body.metadata.uid);
      const ev = await w.next();
      assert.equal(ev.type, 'DELETED');
      assert.ok(Number(ev.object.metadata.resourceVersion) > Number(c.body.metadata.resourceVersion));
      assert.equal((await ts.client.delete(`${CM}/plain`)).status, 404);
    } finally {
      w.stop();
    }
  });

  it('keeps a terminating namespace that still holds content when it is updated, and removes it once empty', async () => {
    const NS = '/api/v1/namespaces';
    assert.equal((await ts.client.post(NS, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'term' } })).status, 201);
    const inside = await ts.client.post('/api/v1/namespaces/term/configmaps', cm('stuck', { finalizers: ['example.com/hold'] }));
    assert.equal(inside.status, 201, inside.text);
    const d = await ts.client.delete(`${NS}/term`);
    assert.equal(d.status, 200, d.text);
    assert.equal(d.body.status.phase, 'Terminating');
    const label = await ts.client.patch(`${NS}/term`, { metadata: { labels: { touched: 'yes' } } }, 'merge');
    assert.equal(label.status, 200, label.text);
    await new Promise((r) => setTimeout(r, 200));
    const still = await ts.client.get(`${NS}/term`);
    assert.equal(still.status, 200, 'an update does not remove a namespace whose content is not gone');
    assert.equal(still.body.status.phase, 'Terminating');
    const rm = await ts.client.patch('/api/v1/namespaces/term/configmaps/stuck', { metadata: { finalizers: null } }, 'merge');
    assert.equal(rm.status, 200, rm.text);
    await eventually(async () => (await ts.client.get(`${NS}/term`)).status === 404);
  });

  it('lets exactly one of a racing update and delete at the same resourceVersion win', async () => {
    for (let i = 0; i < 20; i++) {
      const c = await ts.client.post(CM, cm(`race-${i}`));
      const rv = c.body.metadata.resourceVersion;
      const [put, del] = await Promise.all([
        ts.client.put(`${CM}/race-${i}`, { ...c.body, data: { a: 'changed' } }),
        ts.client.delete(`${CM}/race-${i}`, { ...DELETE_OPTIONS, preconditions: { resourceVersion: rv } }),
      ]);
      const wins = [put.status, del.status].filter((s) => s === 200).length;
      assert.equal(wins, 1, `round ${i}: put ${put.status} ${put.text} / delete ${del.status} ${del.text}`);
      assert.ok([put.status, del.status].includes(409) || [put.status, del.status].includes(404), `round ${i}: the loser gets 409/404`);
      const now = await ts.client.get(`${CM}/race-${i}`);
      assert.equal(now.status, put.status === 200 ? 200 : 404);
    }
  });
});
