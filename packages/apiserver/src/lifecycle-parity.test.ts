// Regression tests for the deletion-lifecycle differences the differential suite found between kars
// apiserver and kube-apiserver v1.34 (Namespaces, foreground deletion, graceful deletes of custom
// resources, the watch events of deletes), each asserting kube-apiserver's answer over HTTP.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { createCrds, eventually, startTestServer, widgetCrd } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';
import { propagationFinalizers } from './service.js';

const NSS = '/api/v1/namespaces';
const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';
const HOLD = 'example.com/hold';

const widget = (name: string, metadata: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'example.com/v1',
  kind: 'Widget',
  metadata: { name, ...metadata },
  spec: { size: 1 },
});

describe('kube-apiserver parity: Namespaces', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('a created Namespace has its name label (owned by its writer) and the kubernetes spec finalizer', async () => {
    const r = await ts.client.post(NSS, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ns-create' } });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.body.metadata.labels, { 'kubernetes.io/metadata.name': 'ns-create' });
    assert.deepEqual(
      r.body.metadata.managedFields.map((e: { fieldsV1: unknown }) => e.fieldsV1),
      [{ 'f:metadata': { 'f:labels': { '.': {}, 'f:kubernetes.io/metadata.name': {} } } }],
    );
    assert.deepEqual(r.body.spec, { finalizers: ['kubernetes'] });
    assert.deepEqual(r.body.status, { phase: 'Active' });
  });

  it('an update of the Namespace keeps its spec finalizers', async () => {
    assert.equal((await ts.client.post(NSS, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ns-update' } })).status, 201);
    const r = await ts.client.patch(`${NSS}/ns-update`, { spec: { finalizers: [] } }, 'merge');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.spec, { finalizers: ['kubernetes'] });
  });

  it('a deleted Namespace is Terminating without a grace period, and goes once the kubernetes finalizer is removed', async () => {
    assert.equal((await ts.client.post(NSS, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ns-delete' } })).status, 201);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } };
    assert.equal((await ts.client.post(`${NSS}/ns-delete/configmaps`, cm)).status, 201);
    const from = (await ts.client.get(`${NSS}/ns-delete`)).body.metadata.resourceVersion as string;
    const w = await ts.client.watch(`${NSS}?watch=true&resourceVersion=${from}&fieldSelector=metadata.name%3Dns-delete`);
    try {
      const r = await ts.client.delete(`${NSS}/ns-delete`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.kind, 'Namespace');
      assert.equal(r.body.metadata.deletionGracePeriodSeconds, undefined);
      assert.equal(typeof r.body.metadata.deletionTimestamp, 'string');
      assert.deepEqual(r.body.spec, { finalizers: ['kubernetes'] });
      assert.deepEqual(r.body.status, { phase: 'Terminating' });
      const gone = await w.next((e) => e.type === 'DELETED', 10_000);
      // The DELETED event carries the namespace as last stored, spec finalizer included.
      assert.deepEqual(gone.object.spec, { finalizers: ['kubernetes'] });
      assert.equal((await ts.client.get(`${NSS}/ns-delete`)).status, 404);
    } finally {
      w.stop();
    }
  });
});

describe('kube-apiserver parity: foreground deletion', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  /** Create the ConfigMap `owner-<tag>` and its dependent `dep-<tag>` (with `ref`'s and `meta`'s extra fields). */
  async function ownerAndDependent(tag: string, ref: Record<string, unknown>, meta: Record<string, unknown> = {}): Promise<void> {
    const owner = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `owner-${tag}` } });
    assert.equal(owner.status, 201, owner.text);
    const ownerReferences = [{ apiVersion: 'v1', kind: 'ConfigMap', name: `owner-${tag}`, uid: owner.body.metadata.uid, ...ref }];
    const dep = await ts.client.post(CM, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `dep-${tag}`, ownerReferences, ...meta },
    });
    assert.equal(dep.status, 201, dep.text);
  }

  const foreground = { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' };

  it('marks the owner with foregroundDeletion, deletes the dependent, then the owner', async () => {
    await ownerAndDependent('a', {});
    const r = await ts.client.delete(`${CM}/owner-a`, foreground);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.metadata.finalizers, ['foregroundDeletion']);
    assert.equal(typeof r.body.metadata.deletionTimestamp, 'string');
    await eventually(async () => (await ts.client.get(`${CM}/owner-a`)).status === 404);
    assert.equal((await ts.client.get(`${CM}/dep-a`)).status, 404);
  });

  it('breaks a cycle of blocking owners (A owns B owns A) as kube does, so a foreground delete of either ends', async () => {
    const a = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cycle-a' } });
    assert.equal(a.status, 201, a.text);
    const ref = (o: { body: { metadata: { name: string; uid: string } } }): Record<string, unknown> => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: o.body.metadata.name,
      uid: o.body.metadata.uid,
      blockOwnerDeletion: true,
    });
    const b = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cycle-b', ownerReferences: [ref(a)] } });
    assert.equal(b.status, 201, b.text);
    const owned = await ts.client.patch(`${CM}/cycle-a`, { metadata: { ownerReferences: [ref(b)] } }, 'merge');
    assert.equal(owned.status, 200, owned.text);
    assert.equal((await ts.client.delete(`${CM}/cycle-a`, foreground)).status, 200);
    await eventually(
      async () => (await ts.client.get(`${CM}/cycle-a`)).status === 404 && (await ts.client.get(`${CM}/cycle-b`)).status === 404,
    );
  });

  it('keeps the owner while a blocking dependent is still there', async () => {
    await ownerAndDependent('b', { blockOwnerDeletion: true }, { finalizers: [HOLD] });
    assert.equal((await ts.client.delete(`${CM}/owner-b`, foreground)).status, 200);
    await eventually(async () => (await ts.client.get(`${CM}/dep-b`)).body?.metadata?.deletionTimestamp);
    const held = await ts.client.get(`${CM}/owner-b`);
    assert.equal(held.status, 200);
    assert.deepEqual(held.body.metadata.finalizers, ['foregroundDeletion']);
    assert.equal((await ts.client.patch(`${CM}/dep-b`, { metadata: { finalizers: null } }, 'merge')).status, 200);
    await eventually(async () => (await ts.client.get(`${CM}/owner-b`)).status === 404);
    assert.equal((await ts.client.get(`${CM}/dep-b`)).status, 404);
  });
});

describe('kube-apiserver parity: graceful deletes of custom resources and their watch events', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('a DELETE that removes a custom resource answers a Success Status naming it', async () => {
    const c = await ts.client.post(WD, widget('plain'));
    assert.equal(c.status, 201, c.text);
    const r = await ts.client.delete(`${WD}/plain`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, {
      apiVersion: 'v1',
      kind: 'Status',
      metadata: {},
      status: 'Success',
      details: { name: 'plain', group: 'example.com', kind: 'widgets', uid: c.body.metadata.uid },
    });
  });

  it('refuses a finalizer added to an object being deleted, with the cause twice as kube lists it', async () => {
    assert.equal((await ts.client.post(WD, widget('adding', { finalizers: [HOLD] }))).status, 201);
    assert.equal((await ts.client.delete(`${WD}/adding`)).status, 200);
    const r = await ts.client.patch(`${WD}/adding`, { metadata: { finalizers: [HOLD, 'example.com/more'] } }, 'merge');
    assert.equal(r.status, 422, r.text);
    const msg =
      'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/more"}';
    assert.equal(r.body.message, `Widget.example.com "adding" is invalid: metadata.finalizers: ${msg}`);
    const cause = { reason: 'FieldValueForbidden', field: 'metadata.finalizers', message: msg };
    assert.deepEqual(r.body.details.causes, [cause, cause]);
  });

  it('removing the last finalizer answers the update at the stored version; the DELETED event carries the last stored state', async () => {
    const c = await ts.client.post(WD, widget('held', { finalizers: [HOLD] }));
    assert.equal(c.status, 201, c.text);
    const w = await ts.client.watch(`${WD}?watch=true&resourceVersion=${c.body.metadata.resourceVersion}`);
    try {
      const marked = await ts.client.delete(`${WD}/held`);
      assert.equal(marked.status, 200, marked.text);
      const r = await ts.client.patch(`${WD}/held`, { metadata: { finalizers: null } }, 'merge');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.metadata.finalizers, undefined);
      assert.equal(r.body.metadata.resourceVersion, marked.body.metadata.resourceVersion);
      const gone = await w.next((e) => e.type === 'DELETED');
      assert.deepEqual(gone.object.metadata.finalizers, [HOLD]);
      assert.ok(Number(gone.object.metadata.resourceVersion) > Number(marked.body.metadata.resourceVersion));
      assert.equal((await ts.client.get(`${WD}/held`)).status, 404);
    } finally {
      w.stop();
    }
  });

  it('an object leaving a label-selected watch is DELETED as the watcher last saw it, at the new version', async () => {
    const c = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'moves', labels: { on: 'yes' } } });
    assert.equal(c.status, 201, c.text);
    const w = await ts.client.watch(`${CM}?watch=true&labelSelector=on%3Dyes&resourceVersion=${c.body.metadata.resourceVersion}`);
    try {
      const r = await ts.client.patch(`${CM}/moves`, { metadata: { labels: { on: 'no' } } }, 'merge');
      assert.equal(r.status, 200, r.text);
      const gone = await w.next((e) => e.type === 'DELETED');
      assert.deepEqual(gone.object.metadata.labels, { on: 'yes' });
      assert.equal(gone.object.metadata.resourceVersion, r.body.metadata.resourceVersion);
    } finally {
      w.stop();
    }
  });
});

describe('propagationFinalizers', () => {
  const finalizer = fc.constantFrom('orphan', 'foregroundDeletion', 'a.example.com/x', 'b.example.com/y');
  const policy = fc.constantFrom(undefined, 'Orphan', 'Foreground', 'Background');

  it('leaves at most one GC finalizer, the policy’s, and keeps every other finalizer in order', () => {
    fc.assert(
      fc.property(fc.uniqueArray(finalizer), policy, (finalizers, p) => {
        const out = propagationFinalizers(finalizers, p);
        const others = (l: string[]): string[] => l.filter((f) => f !== 'orphan' && f !== 'foregroundDeletion');
        assert.deepEqual(others(out), others(finalizers));
        if (p === undefined) assert.deepEqual(out, finalizers);
        else {
          const want = p === 'Orphan' ? ['orphan'] : p === 'Foreground' ? ['foregroundDeletion'] : [];
          assert.deepEqual(
            out.filter((f) => !others([f]).length),
            want,
          );
        }
        assert.deepEqual(propagationFinalizers(out, p), out);
      }),
    );
  });
});

describe('garbage collection across a restart', () => {
  it('finishes a foreground delete whose owner was marked when the server stopped', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kars-gc-restart-'));
    try {
      const first = await startTestServer({ dataDir });
      // The first server's collector stops before the owner is marked, as if the process died then.
      (first.server as unknown as { running: { lifecycle: { close(): void } } }).running.lifecycle.close();
      const owner = await first.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gc-owner' } });
      assert.equal(owner.status, 201, owner.text);
      const ownerReferences = [
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'gc-owner', uid: owner.body.metadata.uid, blockOwnerDeletion: true },
      ];
      assert.equal(
        (await first.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gc-dep', ownerReferences } })).status,
        201,
      );
      const marked = await first.client.delete(`${CM}/gc-owner`, {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        propagationPolicy: 'Foreground',
      });
      assert.deepEqual(marked.body.metadata.finalizers, ['foregroundDeletion']);
      await first.close();
      const second = await startTestServer({ dataDir });
      try {
        await eventually(async () => (await second.client.get(`${CM}/gc-owner`)).status === 404, 10_000);
        assert.equal((await second.client.get(`${CM}/gc-dep`)).status, 404);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
