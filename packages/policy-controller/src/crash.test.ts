import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';

const KARS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../apps/cli/bin/kars.js');
const NS = 'crash';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;

function startController(kubeconfig: string): ChildProcess {
  return spawn(process.execPath, [KARS, 'controller', '--kubeconfig', kubeconfig, '--metrics-addr', 'disabled'], {
    stdio: ['ignore', 'ignore', 'ignore'],
    env: { ...process.env, LEADER_ELECTION_ENABLED: 'false', KARS_HTTP2_PING_INTERVAL_SECS: '1', KARS_HTTP2_PING_TIMEOUT_SECS: '1' },
  });
}

describe('kars controller process', () => {
  let ts: TestServer;
  const procs: ChildProcess[] = [];
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  });
  after(async () => {
    for (const p of procs) p.kill('SIGKILL');
    await ts.close();
  });

  it('finishes after kill -9 mid-reconcile: every policy ends with its ConfigMap and a true status', async (t) => {
    const N = 200;
    const first = startController(ts.server.kubeconfigPath);
    procs.push(first);
    await new Promise((r) => setTimeout(r, 800));
    await Promise.all(
      Array.from({ length: N }, (_, i) =>
        ts.client.post(IP, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'InferencePolicy',
          metadata: { name: `p${i}` },
          spec: { appliesTo: {}, tokenBudget: { dailyTokens: i + 1 } },
        }),
      ),
    );
    // Kill it while it is still working through the burst: once the first ConfigMaps exist.
    const tKill = Date.now();
    while ((await ts.client.get(`/api/v1/namespaces/${NS}/configmaps`)).body.items.length === 0 && Date.now() - tKill < 10_000)
      await new Promise((r) => setTimeout(r, 10));
    first.kill('SIGKILL');
    const halfDone = (await ts.client.get(`/api/v1/namespaces/${NS}/configmaps`)).body.items.length;
    t.diagnostic(`ConfigMaps written before kill -9: ${halfDone}/${N}`);
    assert.ok(halfDone > 0 && halfDone < N, `the kill landed mid-way (${halfDone}/${N})`);
    const second = startController(ts.server.kubeconfigPath);
    procs.push(second);
    const t0 = Date.now();
    for (;;) {
      const list = (await ts.client.get(IP)).body.items as Array<{
        metadata: { generation: number; finalizers?: string[] };
        status?: { observedGeneration?: number; compiledDigest?: string };
      }>;
      const done = list.filter(
        (p) => p.status?.observedGeneration === p.metadata.generation && p.status?.compiledDigest && p.metadata.finalizers?.length === 1,
      );
      const cms = (await ts.client.get(`/api/v1/namespaces/${NS}/configmaps`)).body.items.length;
      if (done.length === N && cms === N) break;
      if (Date.now() - t0 > 20_000)
        assert.fail(`after the restart only ${done.length}/${N} policies converged and ${cms}/${N} ConfigMaps exist`);
      await new Promise((r) => setTimeout(r, 100));
    }
    t.diagnostic(`the restarted controller converged all ${N} in ${Date.now() - t0} ms`);
    const cms = (await ts.client.get(`/api/v1/namespaces/${NS}/configmaps`)).body.items as Array<{
      metadata: { name: string; annotations: Record<string, string> };
    }>;
    const policies = (await ts.client.get(IP)).body.items as Array<{ metadata: { name: string }; status: { compiledDigest: string } }>;
    for (const p of policies) {
      const cm = cms.find((c) => c.metadata.name === `inferencepolicy-${p.metadata.name}-profile`);
      assert.equal(
        cm?.metadata.annotations['kars.azure.com/inference-policy-digest'],
        p.status.compiledDigest,
        `${p.metadata.name}: status and ConfigMap agree`,
      );
    }
    second.kill('SIGTERM');
  });
});
