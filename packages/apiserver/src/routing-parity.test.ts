// Regression tests for routing, 404s, discovery order and Accept negotiation, each asserting
// kube-apiserver v1.34's answer (as the differential suite recorded it) over real HTTP.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '@kars/kube-core';
import { createCrds, startTestServer, widgetCrd } from './testing/harness.js';
import type { TestResponse, TestServer } from './testing/harness.js';
import { storageVersionHash } from './http/discovery.js';
import { requireRouteAccepts } from './http/restful.js';

const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';
const LIST_TYPES =
  'application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch';

/** A CRD of diff.example.com (kube's recorded storage version hashes are for this group's kinds). */
function diffCrd(plural: string, kind: string, scope: 'Namespaced' | 'Cluster'): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.diff.example.com` },
    spec: {
      group: 'diff.example.com',
      scope,
      names: { plural, singular: kind.toLowerCase(), kind },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } } }],
    },
  };
}

/** Assert Go's http.NotFound answer: 404, plain text. */
function assertPageNotFound(r: TestResponse, path: string): void {
  assert.equal(r.status, 404, `${path}: ${r.text}`);
  assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8', path);
  assert.equal(r.text, '404 page not found\n', path);
}

/** Assert go-restful's answer for a path none of its routes fits: a NotFound Status with empty details. */
function assertRouteNotFound(r: TestResponse, path: string): void {
  assert.equal(r.status, 404, `${path}: ${r.text}`);
  assert.equal(r.headers['content-type'], 'application/json', path);
  assert.deepEqual(
    r.body,
    {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the server could not find the requested resource',
      reason: 'NotFound',
      details: {},
      code: 404,
    },
    path,
  );
}

describe('kube-apiserver parity: routing and 404s', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd(), diffCrd('knobs', 'Knob', 'Cluster'));
  });
  after(async () => ts.close());

  it("answers Go's plain 404 for paths no handler claims: unknown groups and paths, a custom resource's unknown version or wrong scope", async () => {
    for (const path of [
      '/apis/nope.example.com/v1/things',
      '/apis/nope.example.com/v1',
      '/apis/nope.example.com',
      '/not/a/kubernetes/path',
      '/apis/example.com/v9',
      '/apis/example.com/v9/namespaces/default/widgets',
      '/apis/example.com/v1/namespaces/default/gizmos',
      '/apis/diff.example.com/v1/namespaces/default/knobs',
      '/apis/example.com/v1/widgets/w',
    ])
      assertPageNotFound(await ts.client.get(path), path);
    const post = await ts.client.post('/apis/diff.example.com/v1/namespaces/default/knobs', {
      apiVersion: 'diff.example.com/v1',
      kind: 'Knob',
      metadata: { name: 'k' },
    });
    assertPageNotFound(post, 'POST knobs in a namespace');
    const across = await ts.client.post('/apis/example.com/v1/widgets', {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w' },
    });
    assertPageNotFound(across, 'POST widgets in no namespace');
    // A list across all namespaces is served.
    assert.equal((await ts.client.get('/apis/example.com/v1/widgets')).status, 200);
  });

  it('answers a NotFound Status with empty details for an unknown path under /api or a built-in group', async () => {
    const made = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } });
    assert.equal(made.status, 201, made.text);
    for (const path of [
      '/api/v1/namespaces/default/widgets',
      `${CM}/a/scale`,
      '/api/v2',
      '/apis/rbac.authorization.k8s.io/v9',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles',
      `${CM}/a/b/c/d`,
    ])
      assertRouteNotFound(await ts.client.get(path), path);
  });

  it('names the custom resource and object in the NotFound of a subresource the CRD does not declare', async () => {
    const r = await ts.client.get(`${WD}/w/scale`);
    assert.equal(r.status, 404, r.text);
    assert.equal(r.body.message, 'widgets.example.com "w" not found');
    assert.deepEqual(r.body.details, { name: 'w', group: 'example.com', kind: 'widgets' });
  });
});

describe('kube-apiserver parity: Accept negotiation', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
    await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } });
  });
  after(async () => ts.close());

  it("refuses a built-in route's unproducible Accept with go-restful's 406, listing the route's media types", async () => {
    const list = await ts.client.request('GET', CM, undefined, { accept: 'application/xml' });
    assert.equal(list.status, 406, list.text);
    assert.deepEqual(list.body, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `406: Not Acceptable\n\nAvailable representations: ${LIST_TYPES}`,
      reason: 'NotAcceptable',
      details: {},
      code: 406,
    });
    const item = await ts.client.request('GET', `${CM}/a`, undefined, { accept: 'application/*' });
    assert.equal(item.status, 406, item.text);
    assert.equal(
      item.body.message,
      '406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf',
    );
    const ok = await ts.client.request('GET', `${CM}/a`, undefined, { accept: 'application/xml, application/json;q=0.5' });
    assert.equal(ok.status, 200, ok.text);
  });

  it("refuses a custom resource's unproducible Accept with its handler's 406", async () => {
    const r = await ts.client.request('GET', WD, undefined, { accept: 'application/xml' });
    assert.equal(r.status, 406, r.text);
    assert.equal(
      r.body.message,
      'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf',
    );
    assert.equal(r.body.reason, 'NotAcceptable');
    assert.equal((await ts.client.request('GET', WD, undefined, { accept: 'application/*' })).status, 200);
  });

  it('accepts a built-in route exactly when one range, parameters dropped, is one of its media types or */*, in any order', () => {
    const range = fc.tuple(
      fc.constantFrom(
        'application/json',
        'application/yaml',
        'application/vnd.kubernetes.protobuf',
        '*/*',
        'application/*',
        'application/xml',
        'text/html',
        'Application/JSON',
      ),
      fc.constantFrom('', ';q=0.9', ';as=Table;v=v1;g=meta.k8s.io', ';stream=watch'),
      fc.constantFrom('', ' '),
    );
    const accepts = (header: string): boolean => {
      try {
        requireRouteAccepts(header, false);
        return true;
      } catch (err) {
        assert.ok(err instanceof ApiError && err.code === 406);
        return false;
      }
    };
    fc.assert(
      fc.property(fc.array(range, { minLength: 1, maxLength: 4 }), (ranges) => {
        const parts = ranges.map(([t, p, s]) => `${s}${t}${p}`);
        const expected = ranges.some(([t]) =>
          ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf', '*/*'].includes(t),
        );
        assert.equal(accepts(parts.join(',')), expected);
        assert.equal(accepts([...parts].reverse().join(',')), expected);
      }),
    );
  });
});

describe('kube-apiserver parity: custom resource discovery', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    // Created out of name order: kube lists them in the order its CRD informer learnt of them.
    await createCrds(ts.client, diffCrd('knobs', 'Knob', 'Cluster'), diffCrd('gadgets', 'Gadget', 'Namespaced'));
  });
  after(async () => ts.close());

  it("lists a group version's custom resources in CRD creation order, with kube's verb order and storage version hash", async () => {
    const r = await ts.client.get('/apis/diff.example.com/v1');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.resources.map((x: { name: string }) => x.name),
      ['knobs', 'gadgets'],
    );
    const gadgets = r.body.resources[1];
    assert.deepEqual(gadgets.verbs, ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch']);
    // kube-apiserver v1.34.4's recorded hashes of diff.example.com/v1 Gadget and Knob.
    assert.equal(gadgets.storageVersionHash, 'M43MYX2eTK0=');
    assert.equal(r.body.resources[0].storageVersionHash, 'Nr71GYSfg/o=');
    assert.equal(storageVersionHash('kars.azure.com', 'v1alpha1', 'InferencePolicy'), 'fxLNf41dNWc=');
  });
});
