import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';

import { TestClient } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';
import { TestRouter } from './testing/test-router.js';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';

const NS = 'team-a';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const TP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/toolpolicies`;
const EA = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/egressapprovals`;
const SB = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
const CM = `/api/v1/namespaces/${NS}/configmaps`;

const cfg = fastWatchConfig();

function inferencePolicy(name: string, daily: number): Record<string, unknown> {
  return {
    apiVersion: 'kars.azure.com/v1alpha1',
    kind: 'InferencePolicy',
    metadata: { name },
    spec: { appliesTo: { sandboxName: 'sb1' }, tokenBudget: { dailyTokens: daily, monthlyTokens: daily * 30 } },
  };
}

describe('kars controller end to end', () => {
  let ts: TestServer;
  let routerClient: KubeClient;
  let router: TestRouter;
  let stack: ControllerStack;
  const metrics = new RuntimeMetrics();
  const api = (): TestClient => ts.client;

  before(async () => {
    stack = await startControllerStack({
      namespace: NS,
      config: cfg,
      server: { faultInjection: true, bookmarkIntervalSeconds: 1 },
      metrics,
      notEnforcedGraceMs: 300,
    });
    ({ ts, routerClient } = stack);
    router = new TestRouter(routerClient, NS, 'sb1', 'r1');
  });
  after(() => stack.close());

  it('compiles a new InferencePolicy into its ConfigMap and reports NoSandboxesReferencing', async () => {
    assert.equal((await api().post(IP, inferencePolicy('ip1', 1000))).status, 201);
    const cm = await until('ConfigMap written', async () => {
      const r = await api().get(`${CM}/inferencepolicy-ip1-profile`);
      return r.status === 200 ? r.body : undefined;
    });
    assert.equal(cm.metadata.labels['kars.azure.com/inferencepolicy'], 'ip1');
    assert.match(cm.metadata.annotations['kars.azure.com/inference-policy-digest'], /^sha256:[0-9a-f]{64}$/);
    const st = await until('status', async () => {
      const r = await api().get(`${IP}/ip1`);
      return r.body.status?.conditions ? r.body : undefined;
    });
    assert.deepEqual(st.metadata.finalizers, ['kars.azure.com/inferencepolicy-cleanup']);
    assert.equal(st.status.phase, 'Compiled');
    assert.equal(st.status.compiledDigest, cm.metadata.annotations['kars.azure.com/inference-policy-digest']);
    assert.equal(st.status.loadedDigest ?? null, null, 'loadedDigest is null (absent) until routers confirm');
    assert.deepEqual(
      st.status.conditions.map((c: any) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'False', 'NoSandboxesReferencing'],
        ['Progressing', 'True', 'NoSandboxesReferencing'],
        ['Degraded', 'False', 'Reconciled'],
      ],
    );
    assert.equal(st.status.observedGeneration, 1);
  });

  it('becomes Ready only when the referencing sandbox router echoes the compiled digest', async (t) => {
    assert.equal(
      (
        await api().post(SB, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'KarsSandbox',
          metadata: { name: 'sb1' },
          spec: { inferenceRef: { name: 'ip1' }, networkPolicy: { allowedEndpoints: [{ host: 'api.example.com' }] } },
        })
      ).status,
      201,
    );
    const awaiting = await until('Awaiting', async () => {
      const r = await api().get(`${IP}/ip1`);
      return r.body.status?.conditions?.[0]?.reason === 'AwaitingRouterEnforcement' ? r.body : undefined;
    });
    assert.equal(awaiting.status.phase, 'Compiled');
    assert.match(awaiting.status.conditions[0].message, /0\/1 sandbox routers confirmed digest; sb1: router unreachable/);
    const events = await until('Warning event', async () => {
      const r = await api().get(`/api/v1/namespaces/${NS}/events`);
      return r.body.items.some((e: any) => e.reason === 'PolicyNotEnforced' && e.involvedObject.name === 'ip1') ? r.body.items : undefined;
    });
    assert.equal(events.find((e: any) => e.reason === 'PolicyNotEnforced').type, 'Warning');
    const t0 = Date.now();
    await router.step();
    const ready = await until('Ready', async () => {
      const r = await api().get(`${IP}/ip1`);
      return r.body.status?.phase === 'Ready' ? r.body : undefined;
    });
    t.diagnostic(`router echo → Ready in ${Date.now() - t0} ms`);
    assert.equal(ready.status.loadedDigest, ready.status.compiledDigest);
    assert.deepEqual(ready.status.conditions[0].reason, 'RouterEnforcing');
    assert.equal(typeof ready.status.propagation.lastMs, 'number');
    const sb = await until('sandbox Running', async () => {
      const r = await api().get(`${SB}/sb1`);
      return r.body.status?.phase === 'Running' ? r.body : undefined;
    });
    assert.deepEqual(
      sb.status.routers.map((r: any) => r.instance),
      ['r1'],
    );
  });

  it('recompiles on edit, goes back to Awaiting until the router reloads, and keeps the condition transition time', async () => {
    const before = (await api().get(`${IP}/ip1`)).body;
    await api().patch(`${IP}/ip1`, { spec: { tokenBudget: { dailyTokens: 2000, monthlyTokens: 60000 } } }, 'merge');
    const awaiting = await until('Awaiting after edit', async () => {
      const r = await api().get(`${IP}/ip1`);
      return r.body.status?.observedGeneration === 2 && r.body.status.compiledDigest !== before.status.compiledDigest ? r.body : undefined;
    });
    assert.equal(awaiting.status.phase, 'Compiled');
    assert.equal(awaiting.status.loadedDigest ?? null, null);
    const cm = (await api().get(`${CM}/inferencepolicy-ip1-profile`)).body;
    assert.match(cm.data['inference-policy.json'], /"dailyTokens":2000/);
    await router.step();
    const ready = await until('Ready after reload', async () => {
      const r = await api().get(`${IP}/ip1`);
      return r.body.status?.phase === 'Ready' && r.body.status.observedGeneration === 2 ? r.body : undefined;
    });
    assert.equal(ready.status.loadedDigest, awaiting.status.compiledDigest);
  });

  it('degrades an invalid spec with the field named and never replaces the last good ConfigMap', async () => {
    const goodCm = (await api().get(`${CM}/inferencepolicy-ip1-profile`)).body;
    const r = await api().patch(
      `${IP}/ip1`,
      { spec: { bundleRef: { registry: 'r.example.com', repository: 'p', digest: 'sha256:' + 'c'.repeat(64) } } },
      'merge',
    );
    if (r.status === 422) {
      // The CRD's CEL rule already refuses it at admission: nothing reaches the controller.
      assert.match(JSON.stringify(r.body.details.causes), /bundleRef/);
      return;
    }
    const degraded = await until('Degraded', async () => {
      const x = await api().get(`${IP}/ip1`);
      return x.body.status?.phase === 'Degraded' ? x.body : undefined;
    });
    assert.match(degraded.status.conditions.find((c: any) => c.type === 'Degraded').message, /spec\./);
    assert.deepEqual((await api().get(`${CM}/inferencepolicy-ip1-profile`)).body.data, goodCm.data);
  });

  it('restores a compiled ConfigMap edited or deleted by hand', async () => {
    const good = (await api().get(`${CM}/inferencepolicy-ip1-profile`)).body;
    await api().patch(`${CM}/inferencepolicy-ip1-profile`, { data: { 'inference-policy.json': '{"tampered":true}' } }, 'merge');
    await until(
      'edit reverted',
      async () =>
        (await api().get(`${CM}/inferencepolicy-ip1-profile`)).body.data['inference-policy.json'] === good.data['inference-policy.json'],
    );
    await api().delete(`${CM}/inferencepolicy-ip1-profile`);
    await until('deletion reverted', async () => {
      const r = await api().get(`${CM}/inferencepolicy-ip1-profile`);
      return r.status === 200 && r.body.data['inference-policy.json'] === good.data['inference-policy.json'];
    });
  });

  it('applies an edit made while the controller watches are frozen, within the freshness bound', async (t) => {
    const ready = (await api().get(`${IP}/ip1`)).body;
    ts.server.faults!.freezeWatches();
    const fresh = new TestClient(ts.server.url, ts.server.caCert, ts.server.token);
    const t0 = Date.now();
    await fresh.patch(`${IP}/ip1`, { spec: { tokenBudget: { dailyTokens: 3000, monthlyTokens: 90000 } } }, 'merge');
    await until(
      'ConfigMap updated after the freeze',
      async () => /"dailyTokens":3000/.test((await fresh.get(`${CM}/inferencepolicy-ip1-profile`)).body.data['inference-policy.json']),
      10_000,
    );
    t.diagnostic(`edit during a silent freeze reached the ConfigMap in ${Date.now() - t0} ms (ping 500 + 500 ms)`);
    fresh.close();
    assert.ok(ready.status.phase);
  });

  it('cleans up the ConfigMap and the finalizer when a policy is deleted', async () => {
    assert.equal((await api().post(IP, inferencePolicy('ip-del', 10))).status, 201);
    await until('ConfigMap', async () => (await api().get(`${CM}/inferencepolicy-ip-del-profile`)).status === 200);
    await until('finalizer', async () => (await api().get(`${IP}/ip-del`)).body.metadata.finalizers?.length === 1);
    await api().delete(`${IP}/ip-del`);
    await until('policy gone', async () => (await api().get(`${IP}/ip-del`)).status === 404);
    assert.equal((await api().get(`${CM}/inferencepolicy-ip-del-profile`)).status, 404);
  });

  it('confirms a ToolPolicy without an AGT profile by the ToolPolicy (profile.json) echo, and with one by both echoes', async () => {
    await api().post(TP, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'ToolPolicy',
      metadata: { name: 'kars-default' },
      spec: { appliesTo: { tool: '*' }, rateLimit: { rps: 5, burst: 10 } },
    });
    // Unreferenced: the router enforces profile.json (rate limits), so nothing is Ready without a sandbox and an echo.
    await until(
      'NoSandboxesReferencing',
      async () => (await api().get(`${TP}/kars-default`)).body.status?.conditions?.[0]?.reason === 'NoSandboxesReferencing',
    );
    await api().patch(`${SB}/sb1`, { spec: { governance: { enabled: true } } }, 'merge');
    await until(
      'awaiting the ToolPolicy echo',
      async () => (await api().get(`${TP}/kars-default`)).body.status?.conditions?.[0]?.reason === 'AwaitingRouterEnforcement',
    );
    await router.step();
    const plain = await until('ToolPolicy confirmed', async () => {
      const r = await api().get(`${TP}/kars-default`);
      return r.body.status?.conditions?.[0]?.reason === 'RouterEnforcing' ? r.body : undefined;
    });
    assert.equal(plain.status.phase, 'Ready');
    await api().patch(`${TP}/kars-default`, { spec: { agtProfile: { inline: 'rules:\n  - deny: "shell.*"\n' } } }, 'merge');
    await until(
      'awaiting AgtProfile',
      async () => (await api().get(`${TP}/kars-default`)).body.status?.conditions?.[0]?.reason === 'AwaitingRouterEnforcement',
    );
    await router.step();
    const ready = await until('AgtProfile confirmed', async () => {
      const r = await api().get(`${TP}/kars-default`);
      return r.body.status?.conditions?.[0]?.reason === 'RouterEnforcing' ? r.body : undefined;
    });
    const cm = (await api().get(`${CM}/toolpolicy-kars-default-profile`)).body;
    assert.equal(ready.status.agtProfileDigest, cm.metadata.annotations['kars.azure.com/agt-profile-digest']);
  });

  it('activates two approvals for one sandbox with a merged digest covering both, and expires one on time', async (t) => {
    const approval = (name: string, host: string, ttl: string): Record<string, unknown> => ({
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'EgressApproval',
      metadata: { name },
      spec: { sandbox: 'sb1', hosts: [{ host }], reason: 'incident 42', ttl },
    });
    assert.equal((await api().post(EA, approval('long', 'long.example.com', 'PT1H'))).status, 201);
    assert.equal((await api().post(EA, approval('short', 'short.example.com', 'PT3S'))).status, 201);
    const cmName = `${CM}/kars-sb1-egress-approvals`;
    await until('both keys written', async () => {
      const r = await api().get(cmName);
      return r.status === 200 && r.body.data['approval-long.json'] && r.body.data['approval-short.json'];
    });
    await router.step();
    const both = await until('both Active', async () => {
      const l = (await api().get(`${EA}/long`)).body;
      const s = (await api().get(`${EA}/short`)).body;
      return l.status?.phase === 'Active' && s.status?.phase === 'Active' ? [l, s] : undefined;
    });
    assert.equal(both[0].status.mergedDigest, both[1].status.mergedDigest, 'one merged digest covers both approvals');
    const { mergedAllowlist } = await import('@kars/policy-compiler');
    assert.equal(
      both[0].status.mergedDigest,
      mergedAllowlist([{ host: 'api.example.com' }], [[{ host: 'long.example.com' }], [{ host: 'short.example.com' }]]).digest,
    );
    assert.equal(both[1].status.effectiveAt, (await api().get(`${EA}/short`)).body.status.effectiveAt, 'effectiveAt does not move');
    const expiresAt = Date.parse(both[1].status.expiresAt);
    await until('short expired', async () => (await api().get(`${EA}/short`)).body.status?.phase === 'Expired', 8000);
    const lateMs = Date.now() - expiresAt;
    t.diagnostic(`approval expired ${lateMs} ms after expiresAt (whole-second timestamps)`);
    assert.ok(lateMs < 2500, `expired on time, not on a 30 s poll (${lateMs} ms late)`);
    const data = (await api().get(cmName)).body.data;
    assert.equal(data['approval-short.json'], undefined, 'the expired key is gone');
    assert.ok(data['approval-long.json'], 'the sibling key stays');
    await router.step();
    const long = await until('long re-confirmed with the smaller merged set', async () => {
      const l = (await api().get(`${EA}/long`)).body;
      return l.status?.phase === 'Active' && l.status.mergedDigest !== both[0].status.mergedDigest ? l : undefined;
    });
    assert.equal(long.status.mergedDigest, mergedAllowlist([{ host: 'api.example.com' }], [[{ host: 'long.example.com' }]]).digest);
  });

  it('holds an approval Pending/BlockedOnSandbox for a sandbox with no router, and rejects a TTL over the ceiling', async () => {
    await api().post(SB, { apiVersion: 'kars.azure.com/v1alpha1', kind: 'KarsSandbox', metadata: { name: 'lonely' }, spec: {} });
    await api().post(EA, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'EgressApproval',
      metadata: { name: 'blocked' },
      spec: { sandbox: 'lonely', hosts: [{ host: 'x.example.com' }], reason: 'r', ttl: 'PT1H' },
    });
    await until(
      'BlockedOnSandbox',
      async () => (await api().get(`${EA}/blocked`)).body.status?.conditions?.[0]?.reason === 'BlockedOnSandbox',
    );
    const tooLong = await api().post(EA, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'EgressApproval',
      metadata: { name: 'toolong' },
      spec: { sandbox: 'sb1', hosts: [{ host: 'y.example.com' }], reason: 'r', ttl: 'P2D' },
    });
    if (tooLong.status === 201) {
      const st = await until('TtlExceedsCeiling', async () => {
        const r = await api().get(`${EA}/toolong`);
        return r.body.status?.conditions?.find((c: any) => c.type === 'Degraded' && c.status === 'True') ? r.body : undefined;
      });
      assert.equal(st.status.conditions.find((c: any) => c.type === 'Degraded').reason, 'TtlExceedsCeiling');
      assert.equal(st.status.phase, 'Pending');
    } else {
      assert.equal(tooLong.status, 422);
    }
  });

  it('never activates an approval for a wildcard or a special address the baseline does not list, also for a sandbox without a baseline', async () => {
    await api().post(SB, { apiVersion: 'kars.azure.com/v1alpha1', kind: 'KarsSandbox', metadata: { name: 'bare' }, spec: {} });
    const cases: Array<[string, string]> = [
      ['sb1', '169.254.169.254'],
      ['sb1', '*'],
      ['sb1', '*.com'],
      ['sb1', '2852039166'], // 169.254.169.254 spelled as one decimal number
      ['bare', '10.0.0.1'],
      ['bare', '127.0.0.1'],
    ];
    for (const [i, [sandbox, host]] of cases.entries()) {
      const r = await api().post(EA, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'EgressApproval',
        metadata: { name: `special-${i}` },
        spec: { sandbox, hosts: [{ host }], reason: 'r', ttl: 'PT1H' },
      });
      if (r.status === 422) continue; // refused at admission: just as good
      assert.equal(r.status, 201);
      const st = await until(`special-${i} (${host}) Degraded`, async () => {
        const o = (await api().get(`${EA}/special-${i}`)).body;
        return o.status?.conditions?.find((c: any) => c.type === 'Degraded' && c.status === 'True') ? o : undefined;
      });
      assert.notEqual(st.status.phase, 'Active', `${host} must never be Active`);
      assert.match(JSON.stringify(st.status.conditions), /hosts/, `the condition names the host field for ${host}`);
    }
  });

  it('exports propagation histograms and stops counting a router whose lease lapses', async () => {
    const text = await metrics.registry.metrics();
    const count = Number(text.match(/kars_policy_propagation_seconds_count\{kind="InferencePolicy"\} (\d+)/)?.[1] ?? '0');
    assert.ok(count >= 2, `edit → echo propagation was observed (${count})`);
    assert.match(text, /kars_policy_compile_seconds_count\{kind="InferencePolicy"\} [1-9]/);
    assert.match(text, /kars_policies_not_ready\{kind="InferencePolicy"\} \d/);
    assert.equal((await api().get(`${IP}/ip1`)).body.status.phase, 'Ready');
    await router.step({ leaseSeconds: 1 });
    const stale = await until(
      'Awaiting after the lease lapsed',
      async () => {
        const r = await api().get(`${IP}/ip1`);
        return r.body.status?.phase === 'Compiled' ? r.body : undefined;
      },
      5000,
    );
    assert.match(stale.status.conditions[0].message, /router unreachable/);
    await until('sandbox Pending', async () => (await api().get(`${SB}/sb1`)).body.status?.phase === 'Pending');
    await router.step();
    await until('Ready again', async () => (await api().get(`${IP}/ip1`)).body.status?.phase === 'Ready');
  });
});
