/**
 * Issue 24 item 7: the leader's first heartbeat goes out when it starts leading, not one interval
 * (15 s) later, so `kars policy status` and the routers' staleness have a value from the start.
 * A real `kars apiserver`, the real PolicyController with leader election on, and a fake clock that
 * is never advanced past the first interval: any beat seen came at leadership.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { allCrds, readHeartbeat } from '@kars/policy-api';
import type { KubeClient } from '@kars/kube-client';
import { pino } from 'pino';
import { PolicyController } from './manager.js';

const INTERVAL_MS = 15_000;
const START_WALL = Date.UTC(2026, 11, 1, 12, 0, 0);

describe('heartbeat at start-up (issue 24 item 7)', { timeout: 60_000 }, () => {
  let ts: TestServer;
  let client: KubeClient;
  const clock = new FakeClock(0, START_WALL);
  const ac = new AbortController();
  let run: Promise<void>;

  async function ns(name: string): Promise<void> {
    assert.equal((await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } })).status, 201);
  }
  async function sandbox(namespace: string, name: string): Promise<void> {
    const r = await ts.client.post(`/apis/kars.azure.com/v1alpha1/namespaces/${namespace}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name },
      spec: {},
    });
    assert.equal(r.status, 201, r.text);
  }
  async function heartbeatIn(namespace: string): Promise<{ atMs: number; seq: number } | undefined> {
    const r = await ts.client.get(`/api/v1/namespaces/${namespace}/configmaps/kars-heartbeat`);
    if (r.status !== 200) return undefined;
    const hb = readHeartbeat(r.body);
    return hb === undefined ? undefined : { atMs: hb.atMs, seq: hb.seq };
  }

  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    await ns('kars-system');
    await ns('hb-a');
    await sandbox('hb-a', 'sb1');
    const cfg = fastWatchConfig();
    client = clientFor(ts.server.kubeconfigPath, cfg);
    const controller = new PolicyController({
      client,
      config: cfg,
      metrics: new RuntimeMetrics(),
      log: pino({ level: 'silent' }),
      leaderElection: { enabled: true, namespace: 'kars-system', name: 'kars-controller', identity: 'hb-test' },
      env: {},
      clock,
      heartbeatIntervalMs: INTERVAL_MS,
    });
    run = controller.run(ac.signal);
  });
  after(async () => {
    ac.abort();
    await run;
    client.close();
    await ts.close();
  });

  it('writes the first heartbeat as soon as the replica leads, with no interval passed', async () => {
    const hb = await until('first heartbeat in hb-a', () => heartbeatIn('hb-a'));
    assert.equal(clock.now(), 0, 'the fake clock never moved: the beat came at leadership');
    assert.equal(hb.atMs, START_WALL);
    assert.equal(hb.seq, 1);
    const lease = await ts.client.get('/apis/coordination.k8s.io/v1/namespaces/kars-system/leases/kars-controller');
    assert.equal(lease.body.spec.holderIdentity, 'hb-test');
  });

  it('beats a namespace that gets its first sandbox at once, then every namespace once per interval', async () => {
    await ns('hb-b');
    await sandbox('hb-b', 'sb2');
    const first = await until('heartbeat in the new namespace hb-b', () => heartbeatIn('hb-b'));
    assert.equal(first.atMs, START_WALL, 'no time passed');
    assert.equal((await heartbeatIn('hb-a'))?.seq, 1, 'the new namespace did not cost a round for the others');
    clock.advance(INTERVAL_MS);
    const a = await until('second round in hb-a', async () => {
      const h = await heartbeatIn('hb-a');
      return h !== undefined && h.seq > 1 ? h : undefined;
    });
    const b = await until('second round in hb-b', async () => {
      const h = await heartbeatIn('hb-b');
      return h !== undefined && h.seq > first.seq ? h : undefined;
    });
    assert.equal(a.seq, b.seq, 'one round, one sequence number');
    assert.equal(a.atMs, START_WALL + INTERVAL_MS);
  });
});
