/**
 * Issue 24 item 7: `kars up`'s "Try it" text is worded from the live objects. Before, a resumed
 * stack whose kept edit had made the cap 100 still printed that request 1 (200 tokens) is allowed
 * and "the cap is 1000 per request". A kars apiserver with the CRDs and the demo InferencePolicy
 * from examples/ (what `kars up` creates), an edit of the cap, then the text as `kars up` derives it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { eventually, startTestServer, type TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { connect, type KubeContext } from '../lib/kube.js';
import { readObjectFile } from '../lib/objects.js';
import { EXAMPLES_DIR, nextSteps, readDemoState } from './up.js';

const IP = '/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies';

describe('kars up: "Try it" tells the truth about the live policy (issue 24 item 7)', () => {
  let ts: TestServer;
  let ctx: KubeContext;
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds())
      assert.equal((await ts.client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status, 201);
    await eventually(async () => (await ts.client.get(IP)).status === 200);
    const ip = readObjectFile(join(EXAMPLES_DIR, 'inference-policy.yaml'), 'InferencePolicy');
    assert.equal((await ts.client.post(IP, ip)).status, 201);
    ctx = connect({ kubeconfig: ts.server.kubeconfigPath, namespace: 'default' });
  });
  after(async () => {
    ctx.close();
    await ts.close();
  });

  const text = async (): Promise<string> =>
    nextSteps({
      repo: '/repo',
      kubeconfig: '/k',
      host: '127.0.0.1',
      routerPort: 8088,
      egressPort: 8089,
      adminPort: 8090,
      adminTokenFile: '/t',
      logs: '/l/logs',
      demo: await readDemoState(ctx),
    });

  it('on a fresh stack: request 1 is allowed under the cap of 1000, request 2 blocked, step 8 tightens to 100', async () => {
    const t = await text();
    assert.match(t, /# 1\. a request InferencePolicy demo-budget allows \(200 tokens; the cap is 1000 per request\)/);
    assert.match(
      t,
      /# 2\. a request InferencePolicy demo-budget blocks \(4000 tokens > the cap of 1000 per request: 429 per_request_tokens_exceeded\)/,
    );
    assert.match(
      t,
      /# 8\. tighten the budget to 100 tokens.*\n\s+npx kars ip apply -f examples\/inference-policy-strict\.yaml --wait\n\s+#\s+then run request 1 again: now it is blocked \(200 > 100\)/,
    );
  });

  it('after the kept edit to 100: request 1 is refused with the new cap, and step 8 offers the way back', async () => {
    const r = await ts.client.patch(`${IP}/demo-budget`, { spec: { tokenBudget: { perRequestTokens: 100 } } }, 'merge');
    assert.equal(r.status, 200, r.text);
    const t = await text();
    assert.match(
      t,
      /# 1\. a request InferencePolicy demo-budget blocks \(200 tokens > the cap of 100 per request: 429 per_request_tokens_exceeded\)/,
    );
    assert.doesNotMatch(t, /cap is 1000/);
    assert.match(t, /# 2\. a request InferencePolicy demo-budget blocks \(4000 tokens > the cap of 100 per request/);
    assert.match(
      t,
      /npx kars ip apply -f examples\/inference-policy\.yaml --wait\n\s+#\s+then run request 1 again: now it is allowed \(200 ≤ 1000\)/,
    );
    assert.doesNotMatch(t, /inference-policy-strict\.yaml/, 'no step that would change nothing');
  });

  it('with the cap removed: both requests are described as allowed', async () => {
    const r = await ts.client.patch(`${IP}/demo-budget`, { spec: { tokenBudget: { perRequestTokens: null } } }, 'merge');
    assert.equal(r.status, 200, r.text);
    const t = await text();
    assert.match(t, /# 1\. a 200-token request: allowed \(InferencePolicy demo-budget sets no per-request cap now\)/);
    assert.match(t, /# 2\. a 4000-token request: allowed/);
  });
});
