/**
 * `PolicyNotEnforced` is a signal operators can trust (issue 9 item 7): a routine edit that the
 * router echoes within the grace emits no Warning; a policy no router echoes gets one, but only
 * after the grace. Real kars apiserver, the real controller, the test router (the wire contract's
 * own echo code); the grace is shortened so the test is quick.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient } from '@kars/kube-client';

import type { TestServer } from '@kars/apiserver/testing';
import { notEnforcedGraceFromEnv } from './context.js';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';
import { TestRouter } from './testing/test-router.js';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';

const NS = 'grace';
const API = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const cfg = fastWatchConfig();
/** Long enough for a test router to echo on a loaded 2-core machine; short enough for a quick test. */
const GRACE_MS = 3000;

describe('PolicyNotEnforced only after the grace period', () => {
  let ts: TestServer;
  let routerClient: KubeClient;
  let stack: ControllerStack;

  before(async () => {
    stack = await startControllerStack({ namespace: NS, config: cfg, notEnforcedGraceMs: GRACE_MS });
    ({ ts, routerClient } = stack);
  });
  after(() => stack.close());

  const warnings = async (name: string): Promise<Array<{ reason: string; message: string }>> =>
    (
      (await ts.client.get(`/api/v1/namespaces/${NS}/events`)).body.items as Array<{
        reason: string;
        message: string;
        type: string;
        involvedObject: { name: string };
      }>
    ).filter((e) => e.involvedObject.name === name && e.type === 'Warning' && e.reason === 'PolicyNotEnforced');

  it('reads the grace from KARS_NOT_ENFORCED_GRACE_SECS, defaulting to 10 s', () => {
    assert.equal(notEnforcedGraceFromEnv({}), 10_000);
    assert.equal(notEnforcedGraceFromEnv({ KARS_NOT_ENFORCED_GRACE_SECS: '2.5' }), 2500);
    assert.equal(notEnforcedGraceFromEnv({ KARS_NOT_ENFORCED_GRACE_SECS: '0' }), 0);
    assert.equal(notEnforcedGraceFromEnv({ KARS_NOT_ENFORCED_GRACE_SECS: '-1' }), 10_000);
    assert.equal(notEnforcedGraceFromEnv({ KARS_NOT_ENFORCED_GRACE_SECS: 'soon' }), 10_000);
  });

  it('emits no Warning for routine edits the router echoes within the grace', async () => {
    await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb' },
      spec: { inferenceRef: { name: 'edited' } },
    });
    const router = new TestRouter(routerClient, NS, 'sb', 'r1');
    await router.step();
    await ts.client.post(`${API}/inferencepolicies`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'InferencePolicy',
      metadata: { name: 'edited' },
      spec: { appliesTo: { sandboxName: 'sb' }, tokenBudget: { dailyTokens: 1 } },
    });
    for (let edit = 2; edit <= 4; edit++) {
      // The router loads each compiled ConfigMap as soon as it appears, like a real router's watch.
      const gen = edit - 1;
      await until(`generation ${gen} compiled and awaiting`, async () => {
        const p = (await ts.client.get(`${API}/inferencepolicies/edited`)).body;
        return p.status?.observedGeneration === gen && p.status?.compiledDigest ? p : undefined;
      });
      await router.step();
      await until(
        `generation ${gen} Ready`,
        async () => (await ts.client.get(`${API}/inferencepolicies/edited`)).body.status?.conditions?.[0]?.status === 'True',
      );
      await ts.client.patch(`${API}/inferencepolicies/edited`, { spec: { tokenBudget: { dailyTokens: edit } } }, 'merge');
    }
    await until(
      'last edit compiled',
      async () => (await ts.client.get(`${API}/inferencepolicies/edited`)).body.status?.observedGeneration === 4,
    );
    await router.step();
    await until(
      'last edit Ready',
      async () => (await ts.client.get(`${API}/inferencepolicies/edited`)).body.status?.conditions?.[0]?.status === 'True',
    );
    // Wait past the grace: a Warning scheduled for any of those edits would have fired by now.
    await new Promise((r) => setTimeout(r, GRACE_MS + 1000));
    assert.deepEqual(await warnings('edited'), [], 'four routine edits, each echoed within the grace: no PolicyNotEnforced');
  });

  it('emits PolicyNotEnforced once the grace passes without an echo, and not before', async () => {
    await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'silent' },
      spec: { inferenceRef: { name: 'unechoed' } },
    });
    const t0 = Date.now();
    await ts.client.post(`${API}/inferencepolicies`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'InferencePolicy',
      metadata: { name: 'unechoed' },
      spec: { appliesTo: { sandboxName: 'silent' }, tokenBudget: { dailyTokens: 5 } },
    });
    await until(
      'awaiting',
      async () =>
        (await ts.client.get(`${API}/inferencepolicies/unechoed`)).body.status?.conditions?.[0]?.reason === 'AwaitingRouterEnforcement',
    );
    // Well inside the grace (measured from the create, which is earlier than the controller's first Awaiting).
    const early = GRACE_MS / 2 - (Date.now() - t0);
    if (early > 0) await new Promise((r) => setTimeout(r, early));
    if (Date.now() - t0 < GRACE_MS - 200) assert.deepEqual(await warnings('unechoed'), [], 'no Warning inside the grace');
    const events = await until('PolicyNotEnforced', async () => {
      const w = await warnings('unechoed');
      return w.length > 0 ? w : undefined;
    });
    assert.ok(Date.now() - t0 >= GRACE_MS, 'not before the grace');
    assert.equal(events.length, 1);
    assert.match(events[0]!.message, /AwaitingRouterConfirmation: 0\/1 sandbox routers confirmed digest; silent: router unreachable/);
  });
});
