import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient } from '@kars/kube-client';
import { FakeClock } from '@kars/kube-core';
import { RuntimeMetrics } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { canonicalDigest } from '@kars/policy-compiler';
import { pino } from 'pino';
import { startRouter } from './server.js';
import type { RunningRouter } from './server.js';
import { startOpenAIStub } from './stubs/openai.js';
import type { OpenAIStub } from './stubs/openai.js';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { startApiRouter, startApiStack } from './testing/api-stack.js';
import type { ApiStack } from './testing/api-stack.js';
import { chatBody, postChat } from './testing/http.js';

const NS = 'agents';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const SB = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
const cfg = fastWatchConfig();
const silent = pino({ level: 'silent' });

async function chat(router: RunningRouter, maxTokens: number): Promise<{ status: number; body: any }> {
  const r = await postChat(router.url, chatBody('hi', { max_tokens: maxTokens }));
  return { status: r.status, body: r.json };
}

describe('kars router with the controller, end to end over the API', () => {
  let stack: ApiStack;
  let ts: TestServer;
  let stub: OpenAIStub;
  let router: RunningRouter;

  before(async () => {
    stub = await startOpenAIStub();
    stack = await startApiStack({
      namespace: NS,
      config: cfg,
      server: { faultInjection: true, bookmarkIntervalSeconds: 1 },
      objects: [
        [
          SB,
          {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'KarsSandbox',
            metadata: { name: 'sb1' },
            spec: { inferenceRef: { name: 'budget' } },
          },
        ],
        [
          IP,
          {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'InferencePolicy',
            metadata: { name: 'budget' },
            spec: { appliesTo: { sandboxName: 'sb1' }, tokenBudget: { perRequestTokens: 200 } },
          },
        ],
      ],
      router: { sandbox: 'sb1', adminListen: '127.0.0.1:0', adminToken: 'admin-token-123', upstream: stub.url, instance: 'r1' },
    });
    ({ ts, router } = stack);
  });

  after(async () => {
    await stack.close();
    await stub.close();
  });

  it('loads the compiled policy, enforces it, and the policy goes Ready by the real router echo', async () => {
    if (!router.isReady()) assert.equal((await chat(router, 10)).status, 503, 'before its first load the router fails closed');
    await until('router ready', () => router.isReady());
    await until('policy enforced', async () => (await chat(router, 300)).status === 429);
    const denied = await chat(router, 300);
    assert.equal(denied.body.error.code, 'per_request_tokens_exceeded');
    assert.equal((await chat(router, 100)).status, 200);
    const ready = await until('Ready', async () => {
      const r = await ts.client.get(`${IP}/budget`);
      return r.body.status?.phase === 'Ready' ? r.body : undefined;
    });
    assert.equal(ready.status.loadedDigest, ready.status.compiledDigest);
    const admin = await fetch(`${router.adminUrl}/internal/policy-status`, { headers: { authorization: 'Bearer admin-token-123' } });
    const status = (await admin.json()) as { schema_version: number; entries: Array<{ kind: string; digest: string }> };
    assert.equal(status.schema_version, 1);
    assert.equal(status.entries.find((e) => e.kind === 'InferencePolicy')?.digest, ready.status.compiledDigest);
    assert.equal((await fetch(`${router.adminUrl}/internal/policy-status`)).status, 401);
  });

  it('enforces an edit within the freshness bound of the ConfigMap change, and every request under load sees the old or the new policy', async (t) => {
    const results: Array<{ status: number; code?: string; at: number }> = [];
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const r = await chat(router, 300);
        results.push({ status: r.status, code: r.body.error?.code, at: Date.now() });
      }
    })();
    const load2 = (async () => {
      while (!stop) {
        const r = await chat(router, 300);
        results.push({ status: r.status, code: r.body.error?.code, at: Date.now() });
      }
    })();
    // Let the load run for at least 200 ms and 10 requests under the old policy (a loaded machine is slow).
    const settle = async (enough: () => boolean): Promise<void> => {
      const t0 = Date.now();
      while (Date.now() - t0 < 200 || (!enough() && Date.now() - t0 < 10_000)) await new Promise((r) => setTimeout(r, 20));
    };
    await settle(() => results.length >= 10);
    await ts.client.patch(`${IP}/budget`, { spec: { tokenBudget: { perRequestTokens: 400 } } }, 'merge');
    const cmAt = await until(
      'ConfigMap updated',
      async () => {
        const cm = await ts.client.get(`/api/v1/namespaces/${NS}/configmaps/inferencepolicy-budget-profile`);
        return /"perRequestTokens":400/.test(cm.body.data?.['inference-policy.json'] ?? '') ? Date.now() : undefined;
      },
      { everyMs: 10 },
    );
    const enforcedAt = await until('new policy enforced', async () => ((await chat(router, 300)).status === 200 ? Date.now() : undefined), {
      everyMs: 10,
    });
    t.diagnostic(`ConfigMap change → enforcement observed within ${enforcedAt - cmAt} ms (polling granularity ~10 ms)`);
    // …and for at least 200 ms and 10 requests after the switch.
    await settle(() => results.filter((r) => r.at > enforcedAt + 50).length >= 10);
    stop = true;
    await Promise.all([load, load2]);
    assert.ok(results.length > 20, `load ran (${results.length} requests)`);
    for (const r of results)
      assert.ok(
        r.status === 200 || (r.status === 429 && r.code === 'per_request_tokens_exceeded'),
        `unexpected response ${r.status} ${r.code ?? ''}`,
      );
    const afterSwitch = results.filter((r) => r.at > enforcedAt + 50);
    assert.ok(afterSwitch.length > 0 && afterSwitch.every((r) => r.status === 200), 'after the switch every request sees the new policy');
    const ready = await until('Ready on the new generation', async () => {
      const r = await ts.client.get(`${IP}/budget`);
      return r.body.status?.phase === 'Ready' && r.body.status.observedGeneration === 2 ? r.body : undefined;
    });
    assert.equal(typeof ready.status.propagation.lastMs, 'number');
  });

  it('keeps the last good policy when the ConfigMap is broken, and reports the error (NACK)', async () => {
    const good = (await fetch(`${router.adminUrl}/internal/policy-status`, { headers: { authorization: 'Bearer admin-token-123' } }).then(
      (r) => r.json(),
    )) as { entries: Array<{ kind: string; digest: string }> };
    const goodDigest = good.entries.find((e) => e.kind === 'InferencePolicy')?.digest;
    await ts.client.patch(
      `/api/v1/namespaces/${NS}/configmaps/inferencepolicy-budget-profile`,
      { data: { 'inference-policy.json': '{not json' } },
      'merge',
    );
    await until(
      'NACK reported',
      async () => {
        const s = (await fetch(`${router.adminUrl}/internal/policy-status`, { headers: { authorization: 'Bearer admin-token-123' } }).then(
          (r) => r.json(),
        )) as { entries: Array<{ kind: string; digest: string; last_error: string | null }> };
        const e = s.entries.find((x) => x.kind === 'InferencePolicy');
        return e?.last_error && e.digest === goodDigest ? e : undefined;
      },
      5000,
    ).catch(() => undefined);
    // Either the router saw the broken bytes (and NACKed, keeping the policy), or the controller
    // restored the ConfigMap first; in both cases enforcement never lapsed.
    assert.equal((await chat(router, 300)).status, 200);
    assert.equal((await chat(router, 500)).status, 429);
  });
});

describe('kars router from a mounted policy directory', () => {
  it('follows a kubelet-style ..data symlink swap within a second and echoes the new digest', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'kars-policy-dir-'));
    const stub = await startOpenAIStub();
    const ac = new AbortController();
    const mount = join(dir, 'inference');
    mkdirSync(mount);
    const writeVersion = (v: number, cap: number): string => {
      const body = JSON.stringify({
        appliesTo: { sandboxName: null, sandboxMatchLabels: {}, action: '*' },
        tokenBudget: { perRequestTokens: cap, dailyTokens: null, monthlyTokens: null },
        contentSafety: null,
        modelPreference: null,
        provider: null,
        guardrails: null,
        displayName: null,
      });
      const data = join(mount, `..v${v}`);
      mkdirSync(data);
      writeFileSync(join(data, 'inference-policy.json'), body);
      const tmp = join(mount, `..data_tmp${v}`);
      symlinkSync(`..v${v}`, tmp);
      renameSync(tmp, join(mount, '..data'));
      return body;
    };
    const first = writeVersion(1, 100);
    symlinkSync('..data/inference-policy.json', join(mount, 'inference-policy.json'));
    const router = await startRouter(
      {
        sandbox: 'sb',
        namespace: 'x',
        listen: '127.0.0.1:0',
        adminListen: '127.0.0.1:0',
        adminToken: 't0k3n',
        upstream: stub.url,
        source: { kind: 'dir', dir },
        instance: 'd1',
        metrics: new RuntimeMetrics(),
        log: silent,
      },
      ac.signal,
    );
    try {
      assert.equal((await chat(router, 150)).status, 429);
      const digestOf = async (): Promise<string | undefined> =>
        (
          (await fetch(`${router.adminUrl}/internal/policy-status`, { headers: { authorization: 'Bearer t0k3n' } }).then((r) =>
            r.json(),
          )) as { entries: Array<{ kind: string; digest: string }> }
        ).entries.find((e) => e.kind === 'InferencePolicy')?.digest;
      assert.equal(await digestOf(), canonicalDigest('inference-policy.json', first));
      const t0 = Date.now();
      const second = writeVersion(2, 1000);
      await until('reloaded', async () => (await chat(router, 150)).status === 200, 2000);
      t.diagnostic(`symlink swap → enforcement in ${Date.now() - t0} ms`);
      assert.ok(Date.now() - t0 < 1500);
      assert.equal(await digestOf(), canonicalDigest('inference-policy.json', second));
    } finally {
      ac.abort();
      await router.done;
      await stub.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('kars router before its first load', () => {
  it('fails closed with 503 policy_not_loaded and readyz false while it cannot list its policy', async () => {
    const ts = await startTestServer();
    const stub = await startOpenAIStub();
    const client = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    // No kars CRDs are installed, so the sandbox list fails and nothing can load.
    const { router, stop } = await startApiRouter(client, cfg, { sandbox: 'sb', namespace: 'default', upstream: stub.url, instance: 'n' });
    try {
      await new Promise((r) => setTimeout(r, 300));
      const r = await chat(router, 10);
      assert.equal(r.status, 503);
      assert.equal(r.body.error.code, 'policy_not_loaded');
      assert.equal((await fetch(`${router.url}/readyz`)).status, 503);
      assert.equal(stub.requests.length, 0, 'nothing reached the upstream');
    } finally {
      await stop();
      client.close();
      await stub.close();
      await ts.close();
    }
  });
});

describe('kars router staleness contract', () => {
  for (const mode of ['closed', 'open'] as const) {
    it(`answers ${mode === 'closed' ? '503 policy_stale' : 'normally, and counts it,'} when the view cannot be confirmed within --max-staleness (${mode})`, async () => {
      const ts = await startTestServer({ bookmarkIntervalSeconds: 1 });
      await createCrds(ts.client, ...allCrds());
      await ts.client.post(`/apis/kars.azure.com/v1alpha1/namespaces/default/karssandboxes`, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'KarsSandbox',
        metadata: { name: 'sb' },
        spec: {},
      });
      const stub = await startOpenAIStub();
      const client = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 300, pingTimeoutMs: 300 });
      const quick: WatchConfig = {
        ...cfg,
        idleTimeoutMs: 800,
        pingIntervalMs: 300,
        pingTimeoutMs: 300,
        backoffInitialMs: 5000,
        backoffMaxMs: 5000,
      };
      const metrics = new RuntimeMetrics();
      // The view's age runs on virtual time (ADR 0016); the watches themselves on the real network.
      const clock = new FakeClock();
      const { router, stop } = await startApiRouter(client, quick, {
        sandbox: 'sb',
        namespace: 'default',
        upstream: stub.url,
        maxStalenessMs: 1500,
        onStale: mode,
        instance: 's',
        metrics,
        clock,
      });
      try {
        await until('ready', () => router.isReady());
        assert.equal((await chat(router, 10)).status, 200);
        await ts.close();
        clock.advance(1500);
        assert.equal((await chat(router, 10)).status, 200, 'not stale at exactly --max-staleness');
        clock.advance(1);
        assert.ok(router.viewAgeMs() > 1500);
        const r = await chat(router, 10);
        if (mode === 'closed') {
          assert.equal(r.status, 503);
          assert.equal(r.body.error.code, 'policy_stale');
        } else assert.equal(r.status, 200);
        assert.match(await metrics.registry.metrics(), new RegExp(`kars_router_stale_requests_total\\{mode="${mode}"\\} [1-9]`));
        assert.equal((await fetch(`${router.url}/readyz`)).status, 503, 'readyz is false while stale');
      } finally {
        await stop();
        client.close();
        await stub.close();
      }
    });
  }
});
