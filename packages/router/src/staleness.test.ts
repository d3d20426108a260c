import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestServer } from '@kars/apiserver/testing';
import { readHeartbeatSeen } from '@kars/policy-api';
import type { Heartbeat } from '@kars/policy-api';
import type { RunningRouter } from './server.js';
import { HeartbeatStaleness } from './staleness.js';
import { FakeClock } from '@kars/kube-core';
import { fastWatchConfig } from '@kars/kube-runtime/testing';
import { startApiStack } from './testing/api-stack.js';
import type { ApiStack } from './testing/api-stack.js';

function hb(rv: string, atMs: number): Heartbeat {
  return { atMs, seq: Number(rv), holder: 'c', resourceVersion: rv };
}

describe('HeartbeatStaleness', () => {
  it('counts from the start until a heartbeat changes; the first one seen is only a baseline', () => {
    const clock = new FakeClock(1000, 5_000_000);
    const s = new HeartbeatStaleness(clock);
    clock.advance(3000);
    s.observe(hb('10', 0)); // written long ago (a dead controller's last heartbeat, from the initial list)
    assert.equal(s.stalenessSeconds(), 3, 'the baseline does not make the view look fresh');
    s.observe(hb('10', 0));
    assert.equal(s.stalenessSeconds(), 3, 'the same resourceVersion again (a relist) is not news');
    s.observe(hb('11', clock.wallNow()));
    assert.equal(s.stalenessSeconds(), 0);
    clock.advance(7000);
    assert.equal(s.stalenessSeconds(), 7, 'grows one second per second without news');
  });

  for (const skewMs of [-3_600_000, 0, 3_600_000]) {
    it(`is not hidden or inflated by a constant clock skew of ${skewMs / 1000} s, and still sees growing lag`, () => {
      // The router's clock runs skewMs off the controller's: the controller stamps wallNow() - skewMs.
      const clock = new FakeClock(0, 1_000_000 + skewMs);
      const s = new HeartbeatStaleness(clock);
      let rv = 1;
      const deliver = (transitMs: number): void => {
        const writtenAt = clock.wallNow() - skewMs;
        clock.advance(transitMs);
        s.observe(hb(String(rv++), writtenAt));
      };
      deliver(5); // baseline
      for (let i = 0; i < 5; i++) {
        deliver(5);
        assert.ok(s.stalenessSeconds() < 0.01, `healthy path reads fresh under skew ${skewMs}: ${s.stalenessSeconds()}`);
        clock.advance(1000);
      }
      deliver(2005); // the path now delivers two seconds late
      assert.ok(Math.abs(s.stalenessSeconds() - 2) < 0.01, `lag shows as staleness: ${s.stalenessSeconds()}`);
      assert.ok(Math.abs(s.status().lag_seconds - 2) < 0.01);
    });
  }
});

const NS = 'hb';
const cfg = fastWatchConfig({ pingMs: 0, idleMs: 60_000 });

describe('router staleness from the controller heartbeat (real apiserver, controller and router)', () => {
  let stack: ApiStack;
  let ts: TestServer;
  let router: RunningRouter;

  before(async () => {
    // The controller detects the freeze by PING and keeps writing heartbeats; the router has pings
    // off and a long idle deadline, so its frozen watch stays dead: exactly a silently dead watch.
    stack = await startApiStack({
      namespace: NS,
      config: cfg,
      controllerConfig: { ...cfg, pingIntervalMs: 200, pingTimeoutMs: 200, idleTimeoutMs: 3000 },
      controller: { identity: 'ctl-1', heartbeatIntervalMs: 250 },
      server: { faultInjection: true, bookmarkIntervalSeconds: 1 },
      objects: [
        [
          `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`,
          { apiVersion: 'kars.azure.com/v1alpha1', kind: 'KarsSandbox', metadata: { name: 'sb' }, spec: {} },
        ],
      ],
      router: { sandbox: 'sb', adminListen: '127.0.0.1:0', adminToken: 'tok', upstream: new URL('http://127.0.0.1:9'), instance: 'r1' },
    });
    ({ ts, router } = stack);
  });

  after(async () => {
    await stack.close();
  });

  async function status(): Promise<{ staleness_seconds: number; heartbeat: { seen: number; holder: string | null } }> {
    return (await (await fetch(`${router.adminUrl}/internal/policy-status`, { headers: { authorization: 'Bearer tok' } })).json()) as never;
  }

  it('stays within about one heartbeat period while healthy, in /internal/policy-status and /metrics', async () => {
    const t0 = Date.now();
    while ((await status()).heartbeat.seen < 3 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
    const st = await status();
    assert.ok(st.heartbeat.seen >= 3, 'heartbeats arrive on the policy watch');
    assert.equal(st.heartbeat.holder, 'ctl-1');
    for (let i = 0; i < 5; i++) {
      const s = (await status()).staleness_seconds;
      assert.ok(s < 1.5, `healthy staleness ${s} s stays under period + slack`);
      await new Promise((r) => setTimeout(r, 150));
    }
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    const m = metrics.match(/^kars_router_policy_staleness_seconds ([\d.e-]+)$/m);
    assert.ok(m, 'the metric is exported');
    assert.ok(Number(m[1]) < 1.5);
  });

  it('rises within one heartbeat period when the router watch silently dies, and the echo lease carries it on writes it makes anyway', async () => {
    ts.server.faults?.freezeWatches();
    const frozenAt = Date.now();
    let s = 0;
    while (s < 2 && Date.now() - frozenAt < 10_000) {
      await new Promise((r) => setTimeout(r, 100));
      s = (await status()).staleness_seconds;
    }
    assert.ok(s >= 2, `staleness rose past 2 s (8 heartbeat periods) after the freeze: ${s}`);
    const later = (await status()).staleness_seconds;
    await new Promise((r) => setTimeout(r, 500));
    assert.ok((await status()).staleness_seconds >= later + 0.4, 'and keeps rising');
    const lease = (await ts.client.get(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/kars-router-sb-r1`)).body;
    const seen = readHeartbeatSeen(lease);
    assert.ok(seen, 'the echo lease carries the heartbeat it had seen');
  });
});
