// Regression tests for the per-kind validation the differential suite (issue 19, ADR 0052) found
// missing: kube-apiserver v1.34's answers for ConfigMap keys, size and immutability, a RoleBinding's
// roleRef, a changed uid, an ownerReference without uid, and an Event's name, over real HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';
import { builtinKindCauses } from './builtin-validation.js';
import { builtinResources } from './registry/builtins.js';

const CM = '/api/v1/namespaces/default/configmaps';
const RB = '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings';
const cm = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  ...extra,
});

describe('built-in kinds are validated as kube-apiserver validates them', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('a ConfigMap key must be a config key; the data may not pass 1 MiB; nothing is stored', async () => {
    const bad = await ts.client.post(CM, cm('keys', { data: { 'bad key!': 'v' } }));
    assert.equal(bad.status, 422);
    assert.equal(
      bad.body.message,
      `ConfigMap "keys" is invalid: data[bad key!]: Invalid value: "bad key!": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    );
    const dots = await ts.client.post(CM, cm('keys', { data: { '..x': 'v' }, binaryData: { '..x': 'dg==' } }));
    assert.deepEqual(
      dots.body.details.causes.map((c: { field: string; message: string }) => `${c.field}: ${c.message}`),
      [
        `data[..x]: Invalid value: "..x": must not start with '..'`,
        'data[..x]: Invalid value: "..x": duplicate of key present in binaryData',
        `binaryData[..x]: Invalid value: "..x": must not start with '..'`,
      ],
    );
    const big = await ts.client.post(CM, cm('big', { data: { a: 'x'.repeat(1024 * 1024), b: 'y' } }));
    assert.equal(big.status, 422);
    assert.equal(big.body.message, 'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes');
    assert.equal((await ts.client.post(CM, cm('fits', { data: { a: 'x'.repeat(1024 * 1024) } }))).status, 201, 'exactly 1 MiB is fine');
    for (const n of ['keys', 'big']) assert.equal((await ts.client.get(`${CM}/${n}`)).status, 404);
    // Keys that name Object.prototype members are keys like any other.
    const proto = await ts.client.post(CM, cm('proto', { data: { constructor: 'a', toString: 'b', __proto__x: 'c' } }));
    assert.equal(proto.status, 201, proto.text);
  });

  it('an immutable ConfigMap keeps its data and its immutability; its labels may change', async () => {
    assert.equal((await ts.client.post(CM, cm('frozen', { data: { k: 'v' }, immutable: true }))).status, 201);
    const edit = await ts.client.patch(`${CM}/frozen`, { data: { k: 'changed' } }, 'merge');
    assert.equal(edit.status, 422);
    assert.equal(edit.body.message, 'ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set');
    const thaw = await ts.client.patch(`${CM}/frozen`, { immutable: false }, 'merge');
    assert.equal(thaw.body.message, 'ConfigMap "frozen" is invalid: immutable: Forbidden: field is immutable when `immutable` is set');
    assert.equal((await ts.client.patch(`${CM}/frozen`, { metadata: { labels: { a: 'b' } } }, 'merge')).status, 200);
    assert.equal((await ts.client.get(`${CM}/frozen`)).body.data.k, 'v');
  });

  it("a RoleBinding's roleRef never changes", async () => {
    const rb = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'rb' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'a' },
      subjects: [{ kind: 'User', name: 'u', apiGroup: 'rbac.authorization.k8s.io' }],
    };
    assert.equal((await ts.client.post(RB, rb)).status, 201);
    const change = await ts.client.patch(`${RB}/rb`, { roleRef: { name: 'b' } }, 'merge');
    assert.equal(change.status, 422);
    assert.equal(
      change.body.message,
      'RoleBinding.rbac.authorization.k8s.io "rb" is invalid: roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"b"}: cannot change roleRef',
    );
    assert.equal((await ts.client.patch(`${RB}/rb`, { subjects: [] }, 'merge')).status, 200, 'the subjects may change');
  });

  it('an update may not change the uid: the cause twice, the message once; an update without a uid keeps it', async () => {
    const made = await ts.client.post(CM, cm('uid', { data: { k: 'v' } }));
    const uid = '11111111-1111-1111-1111-111111111111';
    const change = await ts.client.patch(`${CM}/uid`, { metadata: { uid } }, 'merge');
    assert.equal(change.status, 422);
    assert.equal(change.body.message, `ConfigMap "uid" is invalid: metadata.uid: Invalid value: "${uid}": field is immutable`);
    assert.equal(change.body.details.causes.length, 2);
    const put = await ts.client.put(`${CM}/uid`, cm('uid', { data: { k: 'w' } }));
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.metadata.uid, made.body.metadata.uid);
  });

  it('an ownerReference needs apiVersion, kind, name and uid; an Event name is only a path segment', async () => {
    const orphan = await ts.client.post(
      CM,
      cm('dep', { metadata: { name: 'dep', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner' }] } }),
    );
    assert.equal(orphan.status, 422);
    assert.equal(orphan.body.message, 'ConfigMap "dep" is invalid: metadata.ownerReferences.uid: Invalid value: "": must not be empty');
    const event = await ts.client.post('/api/v1/namespaces/default/events', {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'Not_A_Valid_Name' },
      involvedObject: { kind: 'ConfigMap', name: 'x', namespace: 'default', apiVersion: 'v1' },
      reason: 'Tested',
      message: 'an event',
      type: 'Normal',
    });
    assert.equal(event.status, 201, event.text);
  });

  it('a config key is accepted exactly when it matches [-._a-zA-Z0-9]+, is at most 253 long and is not . or ..-prefixed', () => {
    const configMaps = builtinResources().find((r) => r.resource === 'configmaps')!;
    const key = fc.oneof(fc.string({ maxLength: 300 }), fc.stringMatching(/^[-._a-zA-Z0-9]{1,260}$/));
    fc.assert(
      fc.property(key, (k) => {
        const causes = builtinKindCauses(configMaps, { metadata: { name: 'p' }, data: { [k]: 'v' } } as never, undefined);
        const valid = /^[-._a-zA-Z0-9]+$/.test(k) && k.length <= 253 && k !== '.' && !k.startsWith('..');
        return valid ? causes.length === 0 : causes.length > 0 && causes.every((c) => c.field === `data[${k}]`);
      }),
    );
  });
});
