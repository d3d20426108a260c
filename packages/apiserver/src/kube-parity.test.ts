// Regression tests for differences the differential suite (issue 19, packages/kube-envtest/src/differential)
// found between kars apiserver and kube-apiserver v1.34, each asserting kube-apiserver's answer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCrds, startTestServer, widgetCrd } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const CM = '/api/v1/namespaces/default/configmaps';
const ROLES = '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles';
const WD = '/apis/example.com/v1/namespaces/default/widgets';

describe('kube-apiserver parity: Status bodies', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('NotFound, AlreadyExists and Conflict details name the resource and omit the core group', async () => {
    const missing = await ts.client.get(`${CM}/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body.details, { name: 'nope', kind: 'configmaps' });
    const role = await ts.client.get(`${ROLES}/nope`);
    assert.deepEqual(role.body.details, { name: 'nope', group: 'rbac.authorization.k8s.io', kind: 'roles' });
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'dup' } };
    assert.equal((await ts.client.post(CM, cm)).status, 201);
    const dup = await ts.client.post(CM, cm);
    assert.equal(dup.status, 409);
    assert.deepEqual(dup.body.details, { name: 'dup', kind: 'configmaps' });
    const stale = await ts.client.request('PUT', `${CM}/dup`, { ...cm, metadata: { name: 'dup', resourceVersion: '1' } });
    assert.equal(stale.status, 409, stale.text);
    assert.deepEqual(stale.body.details, { name: 'dup', kind: 'configmaps' });
  });

  it('Invalid names the GroupKind and brackets several causes; a nil field path prints <nil>; a wrong type shows its type name', async () => {
    const badName = await ts.client.post('/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'Bad_Name' },
    });
    assert.equal(badName.status, 422, badName.text);
    assert.match(badName.body.message, /^Lease\.coordination\.k8s\.io "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": /);
    assert.deepEqual(
      { group: badName.body.details.group, kind: badName.body.details.kind, name: badName.body.details.name },
      { group: 'coordination.k8s.io', kind: 'Lease', name: 'Bad_Name' },
    );
    const several = await ts.client.post(WD, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w' },
      spec: { size: 'big' },
    });
    assert.equal(several.status, 422, several.text);
    assert.equal(
      several.body.message,
      'Widget.example.com "w" is invalid: [spec.size: Invalid value: "string": spec.size in body must be of type integer: "string", ' +
        '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]',
    );
    assert.equal(several.body.details.causes.at(-1).field, '<nil>');
  });

  it('a failed delete precondition is a Conflict on the Kind, in rest.BeforeDelete words', async () => {
    assert.equal(
      (await ts.client.post(ROLES, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'r' } })).status,
      201,
    );
    const r = await ts.client.request('DELETE', `${ROLES}/r`, { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: 'x' } });
    assert.equal(r.status, 409, r.text);
    assert.match(
      r.body.message,
      /^Operation cannot be fulfilled on Role\.rbac\.authorization\.k8s\.io "r": the UID in the precondition \(x\) does not match the UID in record \([0-9a-f-]+\)\. The object might have been deleted and then recreated$/,
    );
    assert.deepEqual(r.body.details, { name: 'r', group: 'rbac.authorization.k8s.io', kind: 'Role' });
  });
});
