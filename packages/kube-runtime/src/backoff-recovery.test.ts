import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient, Resources } from '@kars/kube-client';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { MIN_HEALTHY_WATCH_MS, shouldResetBackoff, watcher } from './watcher.js';
import type { WatcherEvent } from './watcher.js';
import { DEFAULT_WATCH_CONFIG } from './watch-config.js';
import type { WatchConfig } from './watch-config.js';

describe('backoff reset rule', () => {
  const cfg = { backoffResetMs: 60_000 };
  it('starts over once a watch opened and stayed up for a second', () => {
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS, cfg), true);
    assert.equal(shouldResetBackoff(true, 5_000, cfg), true);
  });
  it('keeps growing while the server refuses, or accepts and drops at once', () => {
    assert.equal(shouldResetBackoff(false, 5_000, cfg), false, 'never opened: the server is not reachable');
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS - 1, cfg), false, 'opened and dropped at once');
  });
  it('starts over after the long healthy period whatever happened', () => {
    assert.equal(shouldResetBackoff(false, 60_000, cfg), true);
  });
});

describe('watcher backoff across repeated faults (real apiserver)', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
  });
  after(async () => ts.close());

  it('waits only the initial delay after each of several faults separated by recoveries', async () => {
    // random() = 1 makes every delay the ceiling: initial, then ×2 per failure without a reset.
    const cfg: WatchConfig = {
      ...DEFAULT_WATCH_CONFIG,
      idleTimeoutMs: 5000,
      pingIntervalMs: 0,
      backoffInitialMs: 300,
      backoffMaxMs: 10_000,
      relistIntervalMs: 0,
    };
    const client = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 0 });
    const ac = new AbortController();
    let watching = false;
    const restarts: Array<Extract<WatcherEvent, { type: 'restart' }>> = [];
    const run = (async () => {
      for await (const ev of watcher(
        {
          client,
          resource: Resources.configmaps,
          namespace: 'default',
          config: cfg,
          random: () => 1,
          onWatching: (open) => (watching = open),
        },
        ac.signal,
      )) {
        if (ev.type === 'restart') restarts.push(ev);
      }
    })();
    try {
      for (let fault = 0; fault < 4; fault++) {
        const t0 = Date.now();
        while (!watching && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
        assert.ok(watching, `watch open before fault ${fault}`);
        await new Promise((r) => setTimeout(r, MIN_HEALTHY_WATCH_MS + 200));
        ts.server.faults?.resetConnections();
        const t1 = Date.now();
        while (restarts.length <= fault && Date.now() - t1 < 5000) await new Promise((r) => setTimeout(r, 10));
      }
      const delays = restarts.map((r) => r.delayMs);
      assert.ok(delays.length >= 4, `four restarts seen: ${JSON.stringify(delays)}`);
      for (const d of delays.slice(0, 4))
        assert.ok(d <= cfg.backoffInitialMs, `each fault after a recovery waits the initial delay only: ${JSON.stringify(delays)}`);
    } finally {
      ac.abort();
      await run;
      client.close();
    }
  });
});
