// Regression tests for differences the differential suite (issue 19, packages/kube-envtest/src/differential)
// found between kars apiserver and kube-apiserver v1.34, each asserting kube-apiserver's answer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCrds, startTestServer, TestClient, widgetCrd } from './testing/harness.js';
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

  it('checks credentials sent to /healthz and /version: a bad token is a 401, none is let through', async () => {
    const bogus = new TestClient(ts.server.url, ts.server.caCert, 'not-a-token');
    const anonymous = new TestClient(ts.server.url, ts.server.caCert, undefined);
    for (const path of ['/healthz', '/readyz', '/version']) {
      assert.equal((await bogus.get(path)).status, 401, `${path} with a bad token`);
      assert.equal((await anonymous.get(path)).status, 200, `${path} without credentials`);
      assert.equal((await ts.client.get(path)).status, 200, `${path} with a good token`);
    }
  });

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

describe('kube-apiserver parity: lists, deletes, dry runs and 405/403 Status', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ authorizationMode: 'RBAC' });
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it("a built-in kind's list items carry no apiVersion or kind (a typed list); a custom resource's do", async () => {
    assert.equal((await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'l' } })).status, 201);
    const list = await ts.client.get(CM);
    assert.equal(list.status, 200);
    assert.ok(list.body.items.length > 0);
    for (const item of list.body.items) assert.deepEqual([item.apiVersion, item.kind], [undefined, undefined], JSON.stringify(item));
    const gone = await ts.client.request('DELETE', CM);
    assert.equal(gone.status, 200, gone.text);
    for (const item of gone.body.items) assert.equal(item.kind, undefined, 'deletecollection answers a typed list too');
    assert.equal(
      (await ts.client.post(WD, { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' }, spec: { size: 1 } })).status,
      201,
    );
    const widgets = await ts.client.get(WD);
    assert.deepEqual([widgets.body.items[0].apiVersion, widgets.body.items[0].kind], ['example.com/v1', 'Widget']);
  });

  it('a delete answers a success Status without a code; a dry-run create has no resourceVersion', async () => {
    assert.equal((await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'd' } })).status, 201);
    const del = await ts.client.request('DELETE', `${CM}/d`);
    assert.equal(del.status, 200, del.text);
    assert.equal(del.body.status, 'Success');
    assert.equal('code' in del.body, false, del.text);
    const dry = await ts.client.post(`${CM}?dryRun=All`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'dry' } });
    assert.equal(dry.status, 201, dry.text);
    assert.equal('resourceVersion' in dry.body.metadata, false, dry.text);
  });

  it('405 has empty details; 403 omits an empty name and the core group', async () => {
    const notAllowed = await ts.client.request('POST', `${CM}/x`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } });
    assert.equal(notAllowed.status, 405, notAllowed.text);
    assert.deepEqual(notAllowed.body.details, {});
    const { TestClient } = await import('./testing/harness.js');
    assert.equal((await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'nobody' } })).status, 201);
    const tok = await ts.client.post('/api/v1/namespaces/default/serviceaccounts/nobody/token', { spec: {} });
    const sa = new TestClient(ts.server.url, ts.server.caCert, tok.body.status.token as string);
    try {
      const list = await sa.get(CM);
      assert.equal(list.status, 403, list.text);
      assert.deepEqual(list.body.details, { kind: 'configmaps' });
      const get = await sa.get(`${ROLES}/x`);
      assert.deepEqual(get.body.details, { name: 'x', group: 'rbac.authorization.k8s.io', kind: 'roles' });
    } finally {
      sa.close();
    }
  });
});

describe('kube-apiserver parity: managedFields of built-in kinds follow their Go types', () => {
  let ts: TestServer;
  before(async () => (ts = await startTestServer()));
  after(async () => ts.close());

  const fieldsOf = (body: any): unknown => body.metadata.managedFields[0].fieldsV1;

  it('value structs own no "." entry; atomic structs are one leaf; generateName is tracked', async () => {
    const rb = await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { generateName: 'rb-' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: 'default' }],
    });
    assert.equal(rb.status, 201, rb.text);
    assert.deepEqual(fieldsOf(rb.body), { 'f:metadata': { 'f:generateName': {} }, 'f:roleRef': {}, 'f:subjects': {} });
    const dep = await ts.client.post('/apis/apps/v1/namespaces/default/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'd' } },
        template: { metadata: { labels: { app: 'd' } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      },
    });
    assert.equal(dep.status, 201, dep.text);
    const f = fieldsOf(dep.body) as any;
    assert.equal(f['f:spec']['.'], undefined, 'spec is a value struct of the zero Deployment');
    assert.deepEqual(f['f:spec']['f:selector'], {}, 'a LabelSelector is atomic');
    assert.equal(f['f:spec']['f:template']['f:spec']['f:containers']['.'], undefined, 'containers is in the zero PodSpec');
    assert.deepEqual(Object.keys(f['f:spec']['f:template']['f:spec']['f:containers']), ['k:{"name":"c"}']);
    const owned = await ts.client.post(CM, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'owned',
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid: '6f0c1f5e-0000-4000-8000-000000000001' }],
      },
    });
    assert.equal(owned.status, 201, owned.text);
    assert.deepEqual(fieldsOf(owned.body), {
      'f:metadata': { 'f:ownerReferences': { '.': {}, 'k:{"uid":"6f0c1f5e-0000-4000-8000-000000000001"}': {} } },
    });
  });
});

describe('kube-apiserver parity: reviews and token requests', () => {
  let ts: TestServer;
  before(async () => (ts = await startTestServer({ authorizationMode: 'RBAC' })));
  after(async () => ts.close());

  it('a SelfSubjectAccessReview has managedFields and no creationTimestamp, and RBAC names the binding that allowed', async () => {
    const { TestClient } = await import('./testing/harness.js');
    const post = (path: string, body: unknown): Promise<any> => ts.client.post(path, body);
    assert.equal((await post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'me' } })).status, 201);
    const role = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'r' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
    };
    assert.equal((await post(ROLES, role)).status, 201);
    const rb = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'rb' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
      subjects: [{ kind: 'ServiceAccount', name: 'me' }],
    };
    assert.equal((await post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', rb)).status, 201);
    const tok = await post('/api/v1/namespaces/default/serviceaccounts/me/token?fieldManager=tester', {
      spec: { expirationSeconds: 3600 },
    });
    assert.equal(tok.status, 201, tok.text);
    assert.match(tok.body.metadata.uid, /^[0-9a-f-]{36}$/);
    assert.match(tok.body.metadata.creationTimestamp, /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(
      tok.body.metadata.managedFields.map((m: any) => [m.manager, m.operation, m.subresource, m.fieldsV1]),
      [['tester', 'Update', 'token', { 'f:spec': { 'f:expirationSeconds': {} } }]],
    );
    const me = new TestClient(ts.server.url, ts.server.caCert, tok.body.status.token as string);
    try {
      const review = (verb: string): Promise<any> =>
        me.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace: 'default', verb, resource: 'configmaps' } },
        });
      const yes = await review('get');
      assert.equal(yes.status, 201, yes.text);
      assert.equal('creationTimestamp' in yes.body.metadata, false, yes.text);
      assert.deepEqual(yes.body.metadata.managedFields[0].fieldsV1, {
        'f:spec': { 'f:resourceAttributes': { '.': {}, 'f:namespace': {}, 'f:resource': {}, 'f:verb': {} } },
      });
      assert.deepEqual(yes.body.status, {
        allowed: true,
        reason: 'RBAC: allowed by RoleBinding "rb/default" of Role "r" to ServiceAccount "me/default"',
      });
      const no = await review('delete');
      assert.deepEqual(no.body.status, { allowed: false }, 'a denial carries no empty reason');
    } finally {
      me.close();
    }
  });
});

describe('kube-apiserver parity: messages, YAML answers and built-in decoding', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it("apimachinery's validation messages, word for word", async () => {
    const r = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'UPPER' } });
    assert.equal(r.status, 422, r.text);
    assert.equal(
      r.body.details.causes[0].message,
      "Invalid value: \"UPPER\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
  });

  it('a kind the scheme does not know, a CR strict error, a failed JSON patch test and an unknown patch type, as kube words them', async () => {
    const kind = await ts.client.post(ROLES, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Nonsense', metadata: { name: 'x' } });
    assert.equal(kind.status, 400, kind.text);
    assert.equal(
      kind.body.message,
      'Nonsense in version "v1" cannot be handled as a Role: no kind "Nonsense" is registered for version "rbac.authorization.k8s.io/v1" in scheme "pkg/runtime/scheme.go:110"',
    );
    const strict = await ts.client.post(`${WD}?fieldValidation=Strict`, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w' },
      spec: { size: 1, bogus: 1 },
    });
    assert.equal(strict.status, 400, strict.text);
    assert.equal(
      strict.body.message,
      'Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.bogus"',
    );
    assert.equal((await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'p' } })).status, 201);
    const test = await ts.client.request('PATCH', `${CM}/p`, [{ op: 'test', path: '/metadata/name', value: 'other' }], {
      'content-type': 'application/json-patch+json',
    });
    assert.equal(test.status, 422, test.text);
    assert.equal(test.body.message, 'the server rejected our request due to an error in our request');
    assert.deepEqual(test.body.details, {});
    const unknown = await ts.client.request('PATCH', `${CM}/p`, { data: {} }, { 'content-type': 'text/plain' });
    assert.equal(unknown.status, 415, unknown.text);
    assert.equal(unknown.body.message, '415: Unsupported Media Type');
  });

  it('answers in YAML when the client asks for it first', async () => {
    const r = await ts.client.request('GET', `${CM}/p`, undefined, { accept: 'application/yaml' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['content-type'], 'application/yaml');
    assert.match(r.text, /^apiVersion: v1\nkind: ConfigMap\nmetadata:\n/, 'keys sorted, as sigs.k8s.io/yaml writes them');
    const json = await ts.client.request('GET', `${CM}/p`, undefined, { accept: 'application/json, application/yaml' });
    assert.equal(json.headers['content-type'], 'application/json');
  });

  it("decodes built-ins as kube does: a Secret's stringData into data, an Event's zero fields, a Deployment's defaults", async () => {
    const secret = await ts.client.post('/api/v1/namespaces/default/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's' },
      stringData: { pw: 'hunter2' },
    });
    assert.equal(secret.status, 201, secret.text);
    assert.deepEqual([secret.body.data, secret.body.stringData], [{ pw: Buffer.from('hunter2').toString('base64') }, undefined]);
    assert.deepEqual(secret.body.metadata.managedFields[0].fieldsV1, { 'f:data': { '.': {}, 'f:pw': {} }, 'f:type': {} });
    const ev = await ts.client.post('/api/v1/namespaces/default/events', {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'e' },
      involvedObject: { kind: 'ConfigMap', name: 'p', namespace: 'default' },
      reason: 'R',
    });
    assert.equal(ev.status, 201, ev.text);
    for (const [k, v] of Object.entries({
      firstTimestamp: null,
      lastTimestamp: null,
      eventTime: null,
      reportingComponent: '',
      reportingInstance: '',
      source: {},
    }))
      assert.deepEqual(ev.body[k], v, k);
    assert.deepEqual(ev.body.metadata.managedFields[0].fieldsV1, { 'f:involvedObject': {}, 'f:reason': {} }, 'zero fields are not owned');
    const dep = await ts.client.post('/apis/apps/v1/namespaces/default/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: {
        selector: { matchLabels: { a: 'b' } },
        template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } },
      },
    });
    assert.equal(dep.status, 201, dep.text);
    assert.equal(dep.body.spec.replicas, 1);
    assert.deepEqual(dep.body.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } });
    assert.equal(dep.body.spec.template.spec.containers[0].imagePullPolicy, 'IfNotPresent');
    assert.equal(dep.body.spec.template.spec.restartPolicy, 'Always');
    assert.deepEqual(dep.body.status, {});
    const gone = await ts.client.request('DELETE', '/api/v1/namespaces/default/events');
    assert.match(gone.body.metadata.resourceVersion, /^\d+$/, 'a deletecollection list has a resourceVersion');
  });
});

describe('kube-apiserver parity: apply, update and delete semantics of kube strategies', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('an apply needs an explicit fieldManager; an apply conflict is a bare 409 naming an updater with its API version', async () => {
    const body = { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'a' }, spec: { size: 1 } };
    const noManager = await ts.client.patch(`${WD}/a`, body, 'apply');
    assert.equal(noManager.status, 422, noManager.text);
    assert.equal(
      noManager.body.message,
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    );
    assert.deepEqual(noManager.body.details, {
      group: 'meta.k8s.io',
      kind: 'PatchOptions',
      causes: [{ reason: 'FieldValueRequired', message: 'Required value: is required for apply patch', field: 'fieldManager' }],
    });
    assert.equal((await ts.client.post(`${WD}?fieldManager=creator`, body)).status, 201);
    const clash = await ts.client.patch(`${WD}/a`, { ...body, spec: { size: 2 } }, 'apply', '?fieldManager=applier');
    assert.equal(clash.status, 409, clash.text);
    assert.equal(clash.body.message, 'Apply failed with 1 conflict: conflict with "creator" using example.com/v1: .spec.size');
    assert.deepEqual(clash.body.details, {
      causes: [{ reason: 'FieldManagerConflict', field: '.spec.size', message: 'conflict with "creator" using example.com/v1' }],
    });
  });

  it('a Service or ServiceAccount delete answers the object; a custom resource list keeps an empty continue; a CRD column is described by its JSONPath', async () => {
    assert.equal((await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'sa' } })).status, 201);
    const del = await ts.client.request('DELETE', '/api/v1/namespaces/default/serviceaccounts/sa');
    assert.equal(del.status, 200, del.text);
    assert.deepEqual([del.body.kind, del.body.metadata.name], ['ServiceAccount', 'sa']);
    const list = await ts.client.get(WD);
    assert.equal(list.body.metadata.continue, '');
    const table = await ts.client.request('GET', WD, undefined, { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' });
    assert.equal(table.status, 200, table.text);
    assert.equal(table.body.columnDefinitions[1].description, 'Custom resource definition column (in JSONPath format): .spec.size');
    assert.match(
      table.body.columnDefinitions[0].description,
      /^Name must be unique within a namespace\. Is required when creating resources/,
    );
  });

  it('a PUT of a missing Role creates it; a Lease update needs a resourceVersion, in kube words', async () => {
    const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'put' }, rules: [] };
    const put = await ts.client.request('PUT', `${ROLES}/put`, role);
    assert.equal(put.status, 201, put.text);
    const cmPut = await ts.client.request('PUT', `${CM}/put`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'put' } });
    assert.equal(cmPut.status, 404, 'a ConfigMap is not created by a PUT');
    const LEASES = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
    assert.equal(
      (await ts.client.post(LEASES, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l' } })).status,
      201,
    );
    const unconditional = await ts.client.request('PUT', `${LEASES}/l`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'l' },
    });
    assert.equal(unconditional.status, 422, unconditional.text);
    assert.equal(
      unconditional.body.message,
      'leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update',
    );
  });
});
