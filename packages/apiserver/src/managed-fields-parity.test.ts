// Regression tests for managedFields bookkeeping where the differential suite found kars apiserver
// answering unlike kube-apiserver v1.34 (scenario group managed-fields-edges), each asserting kube's answer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCrds, startTestServer, widgetCrd } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';

/** A Widget manifest with the label suite=diff. */
const widget = (name: string, spec: Record<string, unknown> = { size: 1 }): Record<string, unknown> => ({
  apiVersion: 'example.com/v1',
  kind: 'Widget',
  metadata: { name, labels: { suite: 'diff' } },
  spec,
});

/** The managedFields entries of an answer as [manager, operation, has a time, subresource]. */
const entries = (body: any): Array<[string, string, boolean, string | undefined]> =>
  (body.metadata.managedFields ?? []).map((e: any) => [e.manager, e.operation, e.time !== undefined, e.subresource]);

describe('kube-apiserver parity: managedFields edge cases', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('an apply that changes nothing stamps no time: a new applier sharing every field has none and sorts first', async () => {
    const a = await ts.client.patch(`${WD}/shared`, widget('shared'), 'apply', '?fieldManager=a');
    assert.equal(a.status, 201, a.text);
    const b = await ts.client.patch(`${WD}/shared`, widget('shared'), 'apply', '?fieldManager=b');
    assert.equal(b.status, 200, b.text);
    assert.deepEqual(entries(b.body), [
      ['b', 'Apply', false, undefined],
      ['a', 'Apply', true, undefined],
    ]);
    assert.deepEqual(b.body.metadata.managedFields[0].fieldsV1, {
      'f:metadata': { 'f:labels': { 'f:suite': {} } },
      'f:spec': { 'f:size': {} },
    });
    // The same apply again still changes nothing: a keeps its time, b still has none.
    const again = await ts.client.patch(`${WD}/shared`, widget('shared'), 'apply', '?fieldManager=a');
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.metadata.managedFields[1].time, a.body.metadata.managedFields[0].time);
  });

  it('an applier taking over what a creator set, unchanged, has no time; the creator keeps its own', async () => {
    const created = await ts.client.post(`${WD}?fieldManager=creator`, widget('handover'));
    assert.equal(created.status, 201, created.text);
    const applied = await ts.client.patch(`${WD}/handover`, widget('handover'), 'apply', '?fieldManager=applier');
    assert.equal(applied.status, 200, applied.text);
    assert.deepEqual(entries(applied.body), [
      ['applier', 'Apply', false, undefined],
      ['creator', 'Update', true, undefined],
    ]);
    // An apply that does change the object is stamped.
    const changed = await ts.client.patch(
      `${WD}/handover`,
      widget('handover', { size: 1, color: 'red' }),
      'apply',
      '?fieldManager=applier',
    );
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(entries(changed.body)[0], ['applier', 'Apply', true, undefined]);
  });

  it("a custom resource's status PUT without the labels removes them from every manager, yet the object keeps them", async () => {
    const created = await ts.client.post(WD, widget('st'));
    assert.equal(created.status, 201, created.text);
    const body = {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'st', resourceVersion: created.body.metadata.resourceVersion },
      spec: { size: 1 },
      status: { phase: 'P' },
    };
    const put = await ts.client.put(`${WD}/st/status`, body);
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(put.body.metadata.labels, { suite: 'diff' });
    assert.deepEqual(put.body.status, { phase: 'P' });
    assert.deepEqual(
      put.body.metadata.managedFields.map((e: any) => [e.manager, e.subresource, e.fieldsV1]),
      [
        ['unknown', undefined, { 'f:spec': { '.': {}, 'f:max': {}, 'f:size': {} } }],
        ['unknown', 'status', { 'f:status': { '.': {}, 'f:phase': {} } }],
      ],
    );
  });

  it("a custom resource's status write records the labels it adds for the status manager", async () => {
    assert.equal((await ts.client.post(WD, widget('st2'))).status, 201);
    const r = await ts.client.patch(
      `${WD}/st2/status?fieldManager=st`,
      { metadata: { labels: { x: 'y' } }, status: { phase: 'Q' } },
      'merge',
    );
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.metadata.labels, { suite: 'diff' });
    const st = r.body.metadata.managedFields.find((e: any) => e.manager === 'st');
    assert.deepEqual(st.fieldsV1, { 'f:metadata': { 'f:labels': { 'f:x': {} } }, 'f:status': { '.': {}, 'f:phase': {} } });
  });

  it('removing the last finalizer of a deleting object: the DELETED event carries the object as stored, the answer the update', async () => {
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fin', finalizers: ['example.com/hold'] }, data: { k: 'v' } };
    const created = await ts.client.post(CM, cm);
    assert.equal(created.status, 201, created.text);
    const watch = await ts.client.watch(
      `${CM}?watch=true&fieldSelector=metadata.name%3Dfin&resourceVersion=${created.body.metadata.resourceVersion}`,
    );
    try {
      const del = await ts.client.delete(`${CM}/fin`);
      assert.equal(del.status, 200, del.text);
      const marked = await watch.next((e) => e.type === 'MODIFIED');
      const rv = marked.object.metadata.resourceVersion;
      const r = await ts.client.patch(`${CM}/fin`, { metadata: { finalizers: null } }, 'merge');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.metadata.finalizers, undefined);
      assert.equal(r.body.metadata.resourceVersion, rv);
      const gone = await watch.next((e) => e.type === 'DELETED');
      assert.deepEqual(gone.object.metadata.finalizers, ['example.com/hold']);
      assert.ok(Number(gone.object.metadata.resourceVersion) > Number(rv), gone.object.metadata.resourceVersion);
      assert.deepEqual(
        gone.object.metadata.managedFields.map((e: any) => e.fieldsV1),
        marked.object.metadata.managedFields.map((e: any) => e.fieldsV1),
      );
      assert.equal((await ts.client.get(`${CM}/fin`)).status, 404);
    } finally {
      watch.stop();
    }
  });
});
