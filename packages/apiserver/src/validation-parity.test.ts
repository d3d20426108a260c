// Regression tests for validation the differential suite (issue 19) found worded or missing: kube-apiserver
// v1.34's answers for an apps/v1 Deployment without selector or template, a SelfSubjectAccessReview with no
// attributes, a too-short TokenRequest, an invalid CustomResourceDefinition, the credential id a
// SelfSubjectReview reports for a ServiceAccount token, and kube-openapi's order of a custom resource's causes, over real HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { KubeObject } from '@kars/kube-core';
import { deploymentCauses } from './apps-validation.js';
import { resourceFromCrd } from './registry/crd.js';
import { TestClient, createCrds, simpleCrd, startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const DEPLOYS = '/apis/apps/v1/namespaces/default/deployments';
const deployment = (name: string, spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec,
});
const goodSpec = (app: string): Record<string, unknown> => ({
  replicas: 1,
  selector: { matchLabels: { app } },
  template: { metadata: { labels: { app } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
});
const causeTexts = (body: { details: { causes: Array<{ field: string; message: string }> } }): string[] =>
  body.details.causes.map((c) => `${c.field}: ${c.message}`);

describe('kube-apiserver parity: validation wording', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('a Deployment update without selector or template is refused with ValidateDeploymentUpdate causes, PUT and apply alike', async () => {
    assert.equal((await ts.client.post(DEPLOYS, deployment('d', goodSpec('d')))).status, 201);
    const put = await ts.client.request('PUT', `${DEPLOYS}/d`, deployment('d', { replicas: 2 }));
    assert.equal(put.status, 422, put.text);
    const expected = [
      'spec.selector: Required value',
      'spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`',
      'spec.template.spec.containers: Required value',
      'spec.selector: Invalid value: null: field is immutable',
    ];
    assert.deepEqual(causeTexts(put.body), expected);
    assert.equal(put.body.message, `Deployment.apps "d" is invalid: [${expected.join(', ')}]`);
    assert.deepEqual(
      put.body.details.causes.map((c: { reason: string }) => c.reason),
      ['FieldValueRequired', 'FieldValueInvalid', 'FieldValueRequired', 'FieldValueInvalid'],
    );
    const ct = { 'content-type': 'application/apply-patch+yaml' };
    const apply = (spec: Record<string, unknown>): Promise<{ status: number; text: string; body: never }> =>
      ts.client.request('PATCH', `${DEPLOYS}/a?fieldManager=diff`, JSON.stringify(deployment('a', spec)), ct) as never;
    assert.equal((await apply(goodSpec('a'))).status, 201);
    const reapplied = await apply({ replicas: 2 });
    assert.equal(reapplied.status, 422, reapplied.text);
    assert.deepEqual(causeTexts(reapplied.body), expected);
  });

  it('a Deployment create whose selector does not select its template, or is empty, names the values as Go marshals them', async () => {
    const mismatch = await ts.client.post(DEPLOYS, deployment('m', { ...goodSpec('m'), selector: { matchLabels: { app: 'other' } } }));
    assert.equal(mismatch.status, 422, mismatch.text);
    assert.deepEqual(causeTexts(mismatch.body), [
      'spec.template.metadata.labels: Invalid value: {"app":"m"}: `selector` does not match template `labels`',
    ]);
    const empty = await ts.client.post(DEPLOYS, deployment('e', { ...goodSpec('e'), selector: {} }));
    assert.equal(empty.status, 422, empty.text);
    assert.deepEqual(causeTexts(empty.body), ['spec.selector: Invalid value: {}: empty selector is invalid for deployment']);
    assert.equal((await ts.client.get(`${DEPLOYS}/m`)).status, 404);
  });

  it('a SelfSubjectAccessReview needs exactly one of the attributes; the Invalid names an empty kind', async () => {
    const path = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';
    const none = await ts.client.post(path, { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: {} });
    assert.equal(none.status, 422, none.text);
    const why =
      'spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified';
    assert.equal(none.body.message, `.authorization.k8s.io "" is invalid: ${why}`);
    assert.deepEqual(none.body.details, {
      group: 'authorization.k8s.io',
      causes: [
        {
          reason: 'FieldValueInvalid',
          field: 'spec.resourceAttributes',
          message: 'Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified',
        },
      ],
    });
    const both = await ts.client.post(path, {
      spec: { resourceAttributes: { verb: 'get', resource: 'pods' }, nonResourceAttributes: { verb: 'get', path: '/healthz' } },
    });
    assert.equal(both.status, 422, both.text);
    assert.deepEqual(causeTexts(both.body), [
      'spec.nonResourceAttributes: Invalid value: {"Path":"/healthz","Verb":"get"}: cannot be specified in combination with resourceAttributes',
    ]);
  });

  it('a TokenRequest shorter than 10 minutes is refused naming no object', async () => {
    assert.equal((await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'me' } })).status, 201);
    const short = await ts.client.post('/api/v1/namespaces/default/serviceaccounts/me/token', { spec: { expirationSeconds: 60 } });
    assert.equal(short.status, 422, short.text);
    assert.equal(
      short.body.message,
      'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes',
    );
    assert.deepEqual(Object.keys(short.body.details), ['group', 'kind', 'causes']);
  });

  it('a SelfSubjectReview by a ServiceAccount token reports the token id as its credential id', async () => {
    const minted = await ts.client.post('/api/v1/namespaces/default/serviceaccounts/me/token', { spec: {} });
    assert.equal(minted.status, 201, minted.text);
    const token = minted.body.status.token as string;
    const jti = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')).jti as string;
    assert.match(jti, /^[0-9a-f-]{36}$/);
    const me = new TestClient(ts.server.url, ts.server.caCert, token);
    try {
      const r = await me.post('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'SelfSubjectReview',
      });
      assert.equal(r.status, 201, r.text);
      const sa = await ts.client.get('/api/v1/namespaces/default/serviceaccounts/me');
      assert.deepEqual(r.body.status.userInfo, {
        username: 'system:serviceaccount:default:me',
        uid: sa.body.metadata.uid,
        groups: ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated'],
        extra: { 'authentication.kubernetes.io/credential-id': [`JTI=${jti}`] },
      });
    } finally {
      me.close();
    }
  });

  it('a CRD named other than plural.group, with no versions, gets kube-apiextensions-apiserver causes', async () => {
    const r = await ts.client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'wrong.diff.example.com' },
      spec: { group: 'diff.example.com', scope: 'Namespaced', names: { plural: 'things', kind: 'Thing' }, versions: [] },
    });
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(causeTexts(r.body), [
      'metadata.name: Invalid value: "wrong.diff.example.com": must be spec.names.plural+"."+spec.group',
      'spec.versions: Invalid value: []: must have exactly one version marked as storage version',
      'status.storedVersions: Invalid value: null: must have at least one stored version',
    ]);
    const crd = simpleCrd('nodot', 'Thing', { type: 'object' });
    const noDot = await ts.client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    assert.equal(noDot.status, 422, noDot.text);
    assert.deepEqual(causeTexts(noDot.body), ['spec.group: Invalid value: "nodot": should be a domain with at least one dot']);
    // No group at all is a Required (its name then fails on its own), as resourceFromCrd reports it.
    const groupless = resourceFromCrd(simpleCrd('', 'Thing', { type: 'object' }) as unknown as KubeObject);
    assert.deepEqual(
      groupless.causes.filter((c) => c.field === 'spec.group'),
      [{ reason: 'FieldValueRequired', field: 'spec.group', message: 'Required value' }],
    );
  });
});

describe("kube-openapi's order of a custom resource's causes", () => {
  let ts: TestServer;
  const PATH = '/apis/order.example.com/v1/namespaces/default/probes';
  before(async () => {
    ts = await startTestServer();
    const spec = {
      type: 'object',
      required: ['wanted'],
      properties: {
        wanted: { type: 'string' },
        name: { type: 'string', maxLength: 8, pattern: '^[a-z]+$' },
        inner: { type: 'object', properties: { n: { type: 'integer', minimum: 0 } } },
      },
    };
    await createCrds(ts.client, simpleCrd('order.example.com', 'Probe', { type: 'object', properties: { spec } }));
  });
  after(async () => ts.close());

  const probe = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: 'order.example.com/v1',
    kind: 'Probe',
    metadata: { name: 'p' },
    spec,
  });
  const fields = (body: { details: { causes: Array<{ field: string; message: string }> } }): string[] =>
    causeTexts(body).filter((t) => !t.startsWith('<nil>'));

  it('a string stops at the first of maxLength, minLength and pattern that fails', async () => {
    const r = await ts.client.post(PATH, probe({ wanted: 'w', name: 'ABCDEFGHIJK' }));
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(fields(r.body), ['spec.name: Too long: may not be more than 8 bytes']);
    const pattern = await ts.client.post(PATH, probe({ wanted: 'w', name: 'ABC' }));
    assert.deepEqual(fields(pattern.body), [`spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'`]);
  });

  it("an object's missing required properties come after its properties' causes", async () => {
    const r = await ts.client.post(PATH, probe({ inner: { n: -1 } }));
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(fields(r.body), [
      'spec.inner.n: Invalid value: -1: spec.inner.n in body should be greater than or equal to 0',
      'spec.wanted: Required value',
    ]);
  });
});

describe('Deployment selector matching', () => {
  const key = fc.constantFrom('a', 'b', 'c');
  const labelMap = fc.dictionary(key, fc.constantFrom('x', 'y'));
  it('the template must carry every matchLabels pair, whatever else it carries', () => {
    fc.assert(
      fc.property(labelMap, labelMap, (matchLabels, labels) => {
        fc.pre(Object.keys(matchLabels).length > 0);
        const obj = {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'p' },
          spec: { selector: { matchLabels }, template: { metadata: { labels }, spec: { containers: [{ name: 'c' }] } } },
        } as unknown as KubeObject;
        const selects = Object.entries(matchLabels).every(([k, v]) => labels[k] === v);
        const causes = deploymentCauses(obj, undefined);
        assert.equal(causes.length, selects ? 0 : 1);
        if (!selects) assert.equal(causes[0]!.field, 'spec.template.metadata.labels');
      }),
    );
  });
});
