import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient, Resources } from '@kars/kube-client';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { Controller } from './controller.js';
import { startHealthServer } from './health.js';
import { LeaderElector } from './leader.js';
import { leaseApi } from './lease-api.js';
import { RuntimeMetrics } from './metrics.js';
import { Reflector } from './reflector.js';

import type { WatchConfig } from './watch-config.js';
import { clientFor, fastWatchConfig } from './testing/index.js';

const cfg = fastWatchConfig({ backoffMs: 200, idleMs: 2000 });
const CM = '/api/v1/namespaces/default/configmaps';

interface Replica {
  name: string;
  reconciled: string[];
  elector: LeaderElector;
  stop(): Promise<void>;
}

/** One controller process in miniature: client, reflector, leader elector and controller loop. */
async function replica(ts: TestServer, name: string, inFlight: { n: number; max: number }): Promise<Replica> {
  const client = clientFor(ts.server.kubeconfigPath, cfg);
  const reflector = new Reflector({
    name: `${name}-cm`,
    client,
    resource: Resources.configmaps,
    namespace: 'default',
    labelSelector: 'app=le',
    config: cfg,
  });
  const reconciled: string[] = [];
  const elector = new LeaderElector({
    api: leaseApi(client),
    namespace: 'default',
    name: 'le-test',
    identity: name,
    leaseDurationMs: 1500,
    renewDeadlineMs: 1000,
    retryPeriodMs: 250,
    releaseOnCancel: false,
  });
  const controller = new Controller({
    name,
    primary: reflector,
    isActive: () => elector.isLeader(),
    reconcile: async (key) => {
      inFlight.n++;
      inFlight.max = Math.max(inFlight.max, inFlight.n);
      reconciled.push(key);
      await new Promise((r) => setTimeout(r, 20));
      inFlight.n--;
    },
  });
  const ac = new AbortController();
  const runs = [reflector.run(ac.signal), elector.run(ac.signal), controller.run(ac.signal)];
  return {
    name,
    reconciled,
    elector,
    stop: async () => {
      ac.abort();
      await Promise.all(runs);
      client.close();
    },
  };
}

describe('runtime wired together', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
  });
  after(async () => ts.close());

  it('lets exactly one of two controllers reconcile at a time, and fails over when the leader dies', async (t) => {
    const inFlight = { n: 0, max: 0 };
    const a = await replica(ts, 'replica-a', inFlight);
    const b = await replica(ts, 'replica-b', inFlight);
    const replicas = [a, b];
    let leader: Replica | undefined;
    for (let i = 0; i < 100 && !leader; i++) {
      await new Promise((r) => setTimeout(r, 50));
      leader = replicas.find((r) => r.elector.isLeader());
    }
    assert.ok(leader, 'someone leads');
    const standby = leader === a ? b : a;
    for (let i = 0; i < 5; i++)
      await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `le-${i}`, labels: { app: 'le' } }, data: {} });
    const t0 = Date.now();
    while (leader.reconciled.length < 5 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
    assert.ok(leader.reconciled.includes('default/le-4'), 'the leader reconciles');
    assert.equal(standby.reconciled.length, 0, 'the standby reconciles nothing');
    assert.equal(replicas.filter((r) => r.elector.isLeader()).length, 1);

    const killedAt = Date.now();
    await leader.stop();
    await ts.client.post(CM, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'after-failover', labels: { app: 'le' } },
      data: {},
    });
    while (!standby.reconciled.includes('default/after-failover') && Date.now() - killedAt < 6000)
      await new Promise((r) => setTimeout(r, 20));
    const failover = Date.now() - killedAt;
    t.diagnostic(`failover to the standby reconciling took ${failover} ms (lease 1500 ms)`);
    assert.ok(standby.elector.isLeader(), 'the standby took over');
    assert.ok(standby.reconciled.includes('default/after-failover'), 'the new leader reconciles');
    assert.ok(failover <= 1500 + 2000, `failover within the lease duration plus slack (${failover} ms)`);
    assert.equal(inFlight.max <= 2, true);
    await standby.stop();
  });

  it('serves /readyz false while a watch is silent past its bound, and /metrics with watch metrics', async () => {
    const other = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
    const client = KubeClient.fromKubeconfig({ kubeconfig: other.server.kubeconfigPath, pingIntervalMs: 0 });
    const metrics = new RuntimeMetrics();
    const quick: WatchConfig = {
      ...cfg,
      pingIntervalMs: 0,
      idleTimeoutMs: 1000,
      pingTimeoutMs: 300,
      backoffInitialMs: 5000,
      backoffMaxMs: 5000,
    };
    const reflector = new Reflector({
      name: 'readyz',
      client,
      resource: Resources.configmaps,
      namespace: 'default',
      config: quick,
      metrics: metrics.watch('readyz'),
    });
    const ac = new AbortController();
    const run = reflector.run(ac.signal);
    const health = await startHealthServer({
      listen: '127.0.0.1:0',
      registry: metrics.registry,
      readiness: [{ name: 'watch-readyz', check: () => ({ ok: reflector.isFresh(), detail: `silent for ${reflector.staleForMs()} ms` }) }],
      signal: ac.signal,
    });
    try {
      await reflector.store.ready();
      assert.equal((await fetch(`${health.url}/readyz`)).status, 200);
      const text = await (await fetch(`${health.url}/metrics`)).text();
      assert.match(text, /kars_watch_restarts_total\{watch="readyz",reason="ping"\} 0/);
      await other.close();
      const t0 = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - t0 < 5000) {
        await new Promise((r) => setTimeout(r, 100));
        status = (await fetch(`${health.url}/readyz`)).status;
      }
      assert.equal(status, 503, 'readyz goes false once the watch is silent past idle deadline + probe');
      assert.match(await (await fetch(`${health.url}/readyz`)).text(), /\[-\]watch-readyz/);
      assert.ok((await fetch(`${health.url}/healthz`)).ok, 'healthz stays true');
    } finally {
      ac.abort();
      await run;
      await health.close();
      client.close();
    }
  });
});
