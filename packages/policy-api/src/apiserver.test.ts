/**
 * The CRDs against a real `kars apiserver` (envtest's role): the server must accept every CRD, serve the kinds,
 * admit valid objects with defaults applied, and reject invalid ones with 422 naming the field.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestServer, type TestServer } from '@kars/apiserver/testing';
import { allCrds } from './crds.js';
import { KARS_RESOURCES, type KarsObject } from './types.js';
import { sampleBundleInferencePolicy, sampleEgressApproval, sampleInferencePolicy, sampleKarsSandbox, sampleToolPolicy } from './testing/samples.js';

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const path = (kind: KarsObject['kind'], ns = 'default'): string => {
  const r = KARS_RESOURCES.find((x) => x.kind === kind)!;
  return `/apis/${r.group}/${r.version}/namespaces/${ns}/${r.resource}`;
};

function causeFields(body: any): string[] {
  return ((body?.details?.causes ?? []) as { field?: string }[]).map((c) => c.field ?? '');
}

describe('kars CRDs on a real kars apiserver', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds()) {
      const r = await ts.client.post(CRDS, crd);
      assert.equal(r.status, 201, `${crd.metadata.name}: ${r.text}`);
    }
    for (const r of KARS_RESOURCES) {
      await eventually(async () => (await ts.client.get(`/apis/${r.group}/${r.version}/namespaces/default/${r.resource}`)).status === 200);
    }
  });
  after(async () => ts.close());

  it('creates a sample of each kind with 201', async () => {
    for (const obj of [sampleInferencePolicy(), sampleBundleInferencePolicy(), sampleToolPolicy(), sampleEgressApproval(), sampleKarsSandbox()]) {
      const r = await ts.client.post(path(obj.kind), obj);
      assert.equal(r.status, 201, `${obj.kind}/${obj.metadata.name}: ${r.text}`);
      assert.equal(r.body.metadata.generation, 1);
    }
  });

  it('stores server defaults: sandboxMatchLabels {} and action "*"', async () => {
    const ip = sampleBundleInferencePolicy('defaults');
    ip.spec.appliesTo = {};
    const r = await ts.client.post(path('InferencePolicy'), ip);
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.body.spec.appliesTo, { sandboxMatchLabels: {}, action: '*' });
  });

  it('lists the kinds in discovery with their short names and the kars category', async () => {
    const r = await ts.client.get('/apis/kars.azure.com/v1alpha1');
    assert.equal(r.status, 200, r.text);
    for (const k of KARS_RESOURCES) {
      const res = (r.body.resources as any[]).find((x) => x.name === k.resource);
      assert.ok(res, k.resource);
      assert.equal(res.kind, k.kind);
      assert.equal(res.namespaced, true);
      assert.deepEqual(res.shortNames, [...k.shortNames]);
      assert.deepEqual(res.categories, ['kars']);
    }
  });

  it('rejects bundleRef with tokenBudget with 422 naming spec.bundleRef', async () => {
    const ip = sampleBundleInferencePolicy('bad-bundle');
    ip.spec.tokenBudget = { dailyTokens: 1 };
    const r = await ts.client.post(path('InferencePolicy'), ip);
    assert.equal(r.status, 422, r.text);
    assert.ok(causeFields(r.body).includes('spec.bundleRef'), r.text);
  });

  it('rejects an invalid ToolPolicy, EgressApproval and KarsSandbox with 422 naming the field', async () => {
    const tp = sampleToolPolicy('bad-tp');
    tp.spec.commerce = { dailyCap: 'USD 10', monthlyCap: 'USD 9' };
    const ea = sampleEgressApproval('bad-ea');
    ea.spec.hosts = Array.from({ length: 17 }, (_, i) => ({ host: `h${i}.example.com` }));
    const sb = sampleKarsSandbox('bad-sb');
    sb.spec.networkPolicy = { allowedEndpoints: [{ host: 'example.com', port: 70000 }] };
    const cases: [KarsObject, string][] = [
      [tp, 'spec.commerce.monthlyCap'],
      [ea, 'spec.hosts'],
      [sb, 'spec.networkPolicy.allowedEndpoints[0].port'],
    ];
    for (const [obj, field] of cases) {
      const r = await ts.client.post(path(obj.kind), obj);
      assert.equal(r.status, 422, `${obj.kind}: ${r.text}`);
      assert.ok(causeFields(r.body).includes(field), `${obj.kind} should name ${field}: ${r.text}`);
    }
  });

  // Kubernetes drops `status` on create when the status subresource is enabled (apiextensions strategy
  // PrepareForCreate). kars apiserver keeps it today; this runs as a TODO so it turns green when that is fixed.
  it('drops status sent on create, as kube-apiserver does for a status subresource', async () => {
    const ea = sampleEgressApproval('status-on-create');
    ea.status = { phase: 'Active' };
    const c = await ts.client.post(path('EgressApproval'), ea);
    assert.equal(c.status, 201, c.text);
    assert.equal(c.body.status, undefined);
  });

  it('validates status written through the status subresource', async () => {
    const c = await ts.client.post(path('EgressApproval'), sampleEgressApproval('with-status'));
    assert.equal(c.status, 201, c.text);
    const status = { phase: 'Pending', observedGeneration: 1, hostCount: 2, conditions: [{ type: 'Ready', status: 'False', reason: 'BlockedOnSandbox', message: 'sandbox alice is not Running', lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 1 }] };
    const u = await ts.client.patch(`${path('EgressApproval')}/with-status/status`, { status }, 'merge');
    assert.equal(u.status, 200, u.text);
    assert.equal(u.body.status.phase, 'Pending');
    assert.equal(u.body.metadata.generation, 1, 'a status write does not bump generation');
    const bad = await ts.client.patch(`${path('EgressApproval')}/with-status/status`, { status: { phase: 'Ready' } }, 'merge');
    assert.equal(bad.status, 422, bad.text);
    assert.ok(causeFields(bad.body).includes('status.phase'), bad.text);
  });
});
