/**
 * A router echo Lease written by two processes never counts (ADR 0024). Routers refuse to write a
 * lease another live process holds; this is the controller's own guard for when one does anyway
 * (a router before ADR 0024, a bug): against a real kars apiserver and the real controller.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TOOK_OVER_ANNOTATION } from '@kars/policy-api';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';
import { TestRouter } from './testing/test-router.js';

const NS = 'team-lease';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const SB = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
const OLD = `sha256:${'0'.repeat(64)}`;

interface Cond {
  type: string;
  status: string;
  message: string;
}

describe('a router lease written by two processes', () => {
  let stack: ControllerStack;
  before(async () => {
    stack = await startControllerStack({ namespace: NS, config: fastWatchConfig() });
    const sb = {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb1' },
      spec: { inferenceRef: { name: 'budget' } },
    };
    assert.equal((await stack.ts.client.post(SB, sb)).status, 201);
    const ip = {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'InferencePolicy',
      metadata: { name: 'budget' },
      spec: { appliesTo: { sandboxName: 'sb1' }, tokenBudget: { perRequestTokens: 100 } },
    };
    assert.equal((await stack.ts.client.post(IP, ip)).status, 201);
    await until('compiled', async () => (await stack.ts.client.get(`${IP}/budget`)).body.status?.compiledDigest);
  });
  after(() => stack.close());

  const ready = async (): Promise<Cond> => {
    const r = await stack.ts.client.get(`${IP}/budget`);
    return ((r.body.status?.conditions ?? []) as Cond[]).find((c) => c.type === 'Ready') ?? { type: 'Ready', status: '', message: '' };
  };

  it('counts as the echo of neither holder while both write it, and again once one has stopped and its lease ran out', async () => {
    // Two processes claim instance "vm": A never got the edit, B did.
    const a = new TestRouter(stack.routerClient, NS, 'sb1', 'vm');
    a.override.InferencePolicy = OLD;
    const b = new TestRouter(stack.routerClient, NS, 'sb1', 'vm');
    await a.step({ holder: 'vm/aaaa', leaseSeconds: 3 });
    await until('A alone: digest mismatch', async () => /digest mismatch/.test((await ready()).message));

    // B writes the same lease with the compiled digest: before ADR 0024 this was Ready (SYNCED).
    await b.step({ holder: 'vm/bbbb', leaseSeconds: 60 });
    const judged = await until('the controller judged B’s write', async () => {
      const c = await ready();
      return c.status === 'True' || /does not count/.test(c.message) ? c : undefined;
    });
    assert.equal(judged.status, 'False', `not Ready on a lease two processes write: ${judged.message}`);
    assert.match(judged.message, /sb1: router vm's echo does not count \(lease written by two processes: vm\/aaaa and vm\/bbbb\)/);

    // A stops; once its lease (3 s) has run out, B's echo is one process's again and counts.
    const c = await until('Ready once only B writes and A’s lease ran out', async () => {
      const r = await ready();
      return r.status === 'True' ? r : undefined;
    });
    assert.equal(c.status, 'True');
  });

  it('a restart that names the holder it replaced counts at once', async () => {
    const crashed = new TestRouter(stack.routerClient, NS, 'sb1', 'vm2');
    crashed.override.InferencePolicy = OLD;
    await crashed.step({ holder: 'vm2/cccc', leaseSeconds: 90 });
    await until('the crashed router’s stale echo holds Ready back', async () => /digest mismatch/.test((await ready()).message));
    const restarted = new TestRouter(stack.routerClient, NS, 'sb1', 'vm2');
    await restarted.step({ holder: 'vm2/dddd', leaseSeconds: 90, annotations: { [TOOK_OVER_ANNOTATION]: 'vm2/cccc' } });
    await until('Ready after the takeover, without waiting out the old lease', async () => (await ready()).status === 'True');
  });
});
