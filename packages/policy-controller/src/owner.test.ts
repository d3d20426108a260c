// Compiled ConfigMaps carry ownerReferences to the kars objects they were compiled from (ADR 0032),
// against kars apiserver with the real controller: one controlling reference on a profile
// ConfigMap (restored when removed by hand, replaced when the policy is recreated under the same
// name), one reference per approval on the shared egress-approvals ConfigMap.
// packages/kube-envtest/src/pipeline.test.ts proves the real garbage collector acts on them.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { OwnerReference } from '@kars/kube-core';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';
import { TestRouter } from './testing/test-router.js';

const NS = 'owners';
const KARS = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const CM = `/api/v1/namespaces/${NS}/configmaps`;

describe('compiled ConfigMaps are owned by their kars objects', () => {
  let stack: ControllerStack;
  let ts: TestServer;
  before(async () => {
    stack = await startControllerStack({ namespace: NS, config: fastWatchConfig() });
    ({ ts } = stack);
  });
  after(() => stack.close());

  const owners = async (name: string): Promise<OwnerReference[] | undefined> => {
    const r = await ts.client.get(`${CM}/${name}`);
    return r.status === 200 ? (r.body.metadata.ownerReferences ?? []) : undefined;
  };
  const policy = (name: string, daily: number): Record<string, unknown> => ({
    apiVersion: 'kars.azure.com/v1alpha1',
    kind: 'InferencePolicy',
    metadata: { name },
    spec: { appliesTo: { sandboxName: 'sb' }, tokenBudget: { dailyTokens: daily } },
  });

  it('an InferencePolicy ConfigMap has one controlling reference, restored when removed by hand and replaced on recreation', async () => {
    const created = await ts.client.post(`${KARS}/inferencepolicies`, policy('ip', 100));
    assert.equal(created.status, 201, created.text);
    const want = (uid: string): OwnerReference[] => [
      { apiVersion: 'kars.azure.com/v1alpha1', kind: 'InferencePolicy', name: 'ip', uid, controller: true },
    ];
    await until(
      'owned ConfigMap',
      async () => JSON.stringify(await owners('inferencepolicy-ip-profile')) === JSON.stringify(want(created.body.metadata.uid)),
    );
    // As a ConfigMap written by an older controller (no reference) looks: the controller adds it.
    const stripped = await ts.client.patch(`${CM}/inferencepolicy-ip-profile`, { metadata: { ownerReferences: null } }, 'merge');
    assert.equal(stripped.status, 200, stripped.text);
    await until(
      'reference restored',
      async () => JSON.stringify(await owners('inferencepolicy-ip-profile')) === JSON.stringify(want(created.body.metadata.uid)),
    );
    // Deleted and created again under the same name: the new object's uid, not the old one's.
    await ts.client.delete(`${KARS}/inferencepolicies/ip`);
    await until('policy gone', async () => (await ts.client.get(`${KARS}/inferencepolicies/ip`)).status === 404);
    const again = await ts.client.post(`${KARS}/inferencepolicies`, policy('ip', 200));
    assert.equal(again.status, 201, again.text);
    assert.notEqual(again.body.metadata.uid, created.body.metadata.uid);
    await until(
      'owned by the new policy',
      async () => JSON.stringify(await owners('inferencepolicy-ip-profile')) === JSON.stringify(want(again.body.metadata.uid)),
    );
  });

  it('the egress-approvals ConfigMap has one (non-controlling) reference per approval with a key, dropped with the key', async () => {
    const sb = await ts.client.post(`${KARS}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb' },
      spec: { networkPolicy: { allowedEndpoints: [{ host: 'api.example.com' }] } },
    });
    assert.equal(sb.status, 201, sb.text);
    const router = new TestRouter(stack.routerClient, NS, 'sb', 'r1');
    await router.step();
    await until('sandbox Running', async () => (await ts.client.get(`${KARS}/karssandboxes/sb`)).body.status?.phase === 'Running');
    const uids: Record<string, string> = {};
    for (const name of ['a', 'b']) {
      const r = await ts.client.post(`${KARS}/egressapprovals`, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'EgressApproval',
        metadata: { name },
        spec: { sandbox: 'sb', hosts: [{ host: `${name}.example.com` }], reason: 'docs', ttl: 'PT1H' },
      });
      assert.equal(r.status, 201, r.text);
      uids[name] = r.body.metadata.uid;
    }
    const ref = (name: string): OwnerReference => ({
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'EgressApproval',
      name,
      uid: uids[name] ?? '',
    });
    const sorted = (refs: OwnerReference[] | undefined): string =>
      JSON.stringify([...(refs ?? [])].sort((x, y) => x.name.localeCompare(y.name)));
    await until(
      'both approvals own the ConfigMap',
      async () => sorted(await owners('kars-sb-egress-approvals')) === sorted([ref('a'), ref('b')]),
    );
    await ts.client.delete(`${KARS}/egressapprovals/a`);
    await until('only b owns it once a is gone', async () => sorted(await owners('kars-sb-egress-approvals')) === sorted([ref('b')]));
    const cm = (await ts.client.get(`${CM}/kars-sb-egress-approvals`)).body;
    assert.deepEqual(Object.keys(cm.data ?? {}), ['approval-b.json']);
  });
});
