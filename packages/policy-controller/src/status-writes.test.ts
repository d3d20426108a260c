import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient } from '@kars/kube-client';
import type { ResourceRef } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';

import type { TestServer } from '@kars/apiserver/testing';
import fc from 'fast-check';
import { appliesAsStored } from './status.js';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';
import { TestRouter } from './testing/test-router.js';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { sameRecord } from './reconcile-sandbox.js';

const NS = 'team-w';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const SB = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
const TP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/toolpolicies`;

const cfg = fastWatchConfig();

describe('appliesAsStored', () => {
  it('counts a null member as absent (server-side apply removes it) and anything else as a difference', () => {
    assert.ok(appliesAsStored({ a: 1, loaded: { X: 'd' } }, { loaded: { X: 'd', Y: null }, a: 1 }));
    assert.ok(appliesAsStored({ a: 1 }, { a: 1, loadedDigest: null }));
    assert.ok(!appliesAsStored({ a: 1 }, { a: 2 }));
    assert.ok(!appliesAsStored({ a: [1, 2] }, { a: [2, 1] }), 'list order matters');
    assert.ok(!appliesAsStored({ a: [null] }, { a: [] }), 'a null list item is a value');
    assert.ok(!appliesAsStored({ a: 'x' }, { a: null }), 'null over a stored value removes it: a change');
  });

  it('property: dropping null members never changes the verdict, and any other change does', () => {
    const json = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.string(), fc.integer(), fc.boolean(), fc.array(tie('v'), { maxLength: 3 }), tie('o')),
      o: fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), fc.option(tie('v'), { nil: null }), { maxKeys: 4 }),
    }));
    const dropNulls = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(dropNulls)
        : v && typeof v === 'object'
          ? Object.fromEntries(
              Object.entries(v)
                .filter(([, x]) => x !== null)
                .map(([k, x]) => [k, dropNulls(x)]),
            )
          : v;
    fc.assert(
      fc.property(json.o, (o) => {
        assert.ok(appliesAsStored(dropNulls(o), o));
        assert.ok(!appliesAsStored({ ...(dropNulls(o) as object), ['\u0000changed']: 1 }, o));
      }),
    );
  });
});

/**
 * The controller's status writes: every one must change what is stored. A write the apiserver drops
 * as a no-op costs a full server-side apply on the apiserver in the very moments an edit travels
 * through it (the freshness probe measured about three per edit before this was fixed).
 */
describe('sameRecord', () => {
  it('counts a null member as absent (the stored status never holds one) and any other difference as a change', () => {
    assert.ok(sameRecord({ ToolPolicy: 'sha256:a' }, { AgtProfile: null, ToolPolicy: 'sha256:a' }));
    assert.ok(sameRecord({}, { AgtProfile: null }));
    assert.ok(!sameRecord({ ToolPolicy: 'sha256:a' }, { ToolPolicy: 'sha256:b' }));
    assert.ok(!sameRecord({ ToolPolicy: 'sha256:a' }, { AgtProfile: 'sha256:c', ToolPolicy: 'sha256:a' }));
    assert.ok(!sameRecord({ AgtProfile: 'sha256:c' }, { AgtProfile: null }));
  });
});

describe('controller status writes', () => {
  let ts: TestServer;
  let routerClient: KubeClient;
  let stack: ControllerStack;
  const applies: Array<{ resource: string; rv: string }> = [];
  const metrics = new RuntimeMetrics();

  before(async () => {
    stack = await startControllerStack({
      namespace: NS,
      config: cfg,
      metrics,
      server: { bookmarkIntervalSeconds: 1 },
      // Record every status apply the controller sends, with the resourceVersion the server answered.
      instrument: (c) => {
        const apply = c.apply.bind(c);
        c.apply = async <T extends KubeObject = KubeObject>(
          ref: ResourceRef,
          obj: Record<string, unknown> & { metadata: { name?: string; namespace?: string } },
          fieldManager: string,
          opts: { force?: boolean; subresource?: 'status' } = {},
        ): Promise<T> => {
          const out = await apply<T>(ref, obj, fieldManager, opts);
          if (opts.subresource === 'status')
            applies.push({ resource: `${ref.resource}/${obj.metadata.name}`, rv: out.metadata.resourceVersion ?? '' });
          return out;
        };
      },
    });
    ({ ts, routerClient } = stack);
  });
  after(() => stack.close());

  it('never sends a status the server already holds (policy and sandbox, over several edits)', async () => {
    const router = new TestRouter(routerClient, NS, 'sb1', 'r1');
    assert.equal(
      (
        await ts.client.post(IP, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'InferencePolicy',
          metadata: { name: 'ip1' },
          spec: { appliesTo: { sandboxName: 'sb1' }, tokenBudget: { dailyTokens: 1000 } },
        })
      ).status,
      201,
    );
    assert.equal(
      (
        await ts.client.post(SB, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'KarsSandbox',
          metadata: { name: 'sb1' },
          spec: { inferenceRef: { name: 'ip1' } },
        })
      ).status,
      201,
    );
    for (let i = 1; i <= 4; i++) {
      if (i > 1)
        assert.equal((await ts.client.patch(`${IP}/ip1`, { spec: { tokenBudget: { dailyTokens: 1000 + i } } }, 'merge')).status, 200);
      const gen = (await ts.client.get(`${IP}/ip1`)).body.metadata.generation;
      await until('the policy compiled', async () => (await ts.client.get(`${IP}/ip1`)).body.status?.observedGeneration === gen);
      await router.step();
      await until('Ready', async () => {
        const st = (await ts.client.get(`${IP}/ip1`)).body.status;
        return st?.phase === 'Ready' && st.observedGeneration === gen;
      });
      await until(
        'the sandbox status lists what the router loaded',
        async () =>
          (await ts.client.get(`${SB}/sb1`)).body.status?.routers?.[0]?.loaded?.InferencePolicy ===
          (await ts.client.get(`${IP}/ip1`)).body.status?.loadedDigest,
      );
    }
    await new Promise((r) => setTimeout(r, 500)); // let any follow-up reconcile run
    const bySandbox = applies.filter((a) => a.resource.startsWith('karssandboxes/'));
    const byPolicy = applies.filter((a) => a.resource.startsWith('inferencepolicies/'));
    assert.ok(bySandbox.length >= 4 && byPolicy.length >= 8, `status writes happened: ${JSON.stringify(applies)}`);
    // A write that changes something gets a new resourceVersion; a no-op answers with one already seen.
    for (const list of [bySandbox, byPolicy]) {
      const seen = new Set<string>();
      for (const a of list) {
        assert.ok(
          !seen.has(a.rv),
          `${a.resource}: a status apply changed nothing (resourceVersion ${a.rv} again): ${JSON.stringify(list)}`,
        );
        seen.add(a.rv);
      }
    }
  });
  it('writes no status when a router renews an echo that did not change (null digests: a ToolPolicy without an AGT profile)', async () => {
    const router = new TestRouter(routerClient, NS, 'sb-plain', 'r-plain');
    assert.equal(
      (
        await ts.client.post(TP, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'ToolPolicy',
          metadata: { name: 'tp-plain' },
          spec: { appliesTo: { tool: '*' }, rateLimit: { rps: 5, burst: 10 } },
        })
      ).status,
      201,
    );
    assert.equal(
      (
        await ts.client.post(SB, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'KarsSandbox',
          metadata: { name: 'sb-plain' },
          spec: { governance: { toolPolicyRef: { name: 'tp-plain' } } },
        })
      ).status,
      201,
    );
    await until('the ToolPolicy compiled', async () => (await ts.client.get(`${TP}/tp-plain`)).body.status?.observedGeneration === 1);
    await router.step();
    await until('Ready', async () => (await ts.client.get(`${TP}/tp-plain`)).body.status?.phase === 'Ready');
    await until('the sandbox lists what its router loaded', async () =>
      Boolean((await ts.client.get(`${SB}/sb-plain`)).body.status?.routers?.[0]?.loaded?.ToolPolicy),
    );
    const reconciles = async (): Promise<number> => {
      const text = await metrics.registry.metrics();
      let n = 0;
      for (const l of text.split('\n'))
        if (/^kars_controller_reconcile_total\{controller="(karssandbox|toolpolic\w*)"/.test(l)) n += Number(l.split(' ').pop());
      return n;
    };
    // Every renewal changes the Lease (renewTime), so both the sandbox and the ToolPolicy reconcile again.
    const mine = (): number =>
      applies.filter((a) => a.resource === 'karssandboxes/sb-plain' || a.resource === 'toolpolicies/tp-plain').length;
    const before = mine();
    for (let i = 0; i < 3; i++) {
      const seen = await reconciles();
      await new Promise((r) => setTimeout(r, 1100)); // the next renewTime (whole seconds) must differ
      await router.step();
      await until('the renewal reconciled', async () => (await reconciles()) >= seen + 2);
    }
    assert.equal(mine() - before, 0, `status writes for unchanged echoes: ${JSON.stringify(applies.slice(-6))}`);
  });
});
