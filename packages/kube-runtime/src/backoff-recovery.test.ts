import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  it('starts over when the server accepts a watch, even one a new fault cuts at once', () => {
    assert.equal(shouldResetBackoff(true, 0, cfg, 0), true, 'accepted after an outage, cut at once');
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS - 1, cfg), true);
  });
  it('keeps growing while the server refuses, or accepts and drops watch after watch', () => {
    assert.equal(shouldResetBackoff(false, 5_000, cfg), false, 'never opened: the server is not reachable');
    assert.equal(shouldResetBackoff(false, 5_000, cfg, 0), false);
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS - 1, cfg, 1), false, 'the second accepted-and-dropped in a row');
    assert.equal(shouldResetBackoff(true, 10, cfg, 5), false);
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

/**
 * A TCP relay to the apiserver that the test can take down (refuse and cut every connection) and
 * bring back on the same port: an apiserver outage as a client sees it.
 */
class Outage {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly upstreamPort: number) {}

  async up(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.upstreamPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', () => resolve()));
    this.port = (server.address() as net.AddressInfo).port;
  }

  /** Cut every connection (RST) and, with `refuse`, stop accepting new ones. */
  async cut(refuse: boolean): Promise<void> {
    for (const s of this.sockets) s.resetAndDestroy();
    if (refuse && this.server) {
      const s = this.server;
      this.server = undefined;
      await new Promise((r) => s.close(r));
    }
  }
}

describe('watcher backoff after an outage (real apiserver behind a relay)', () => {
  let ts: TestServer;
  let dir: string;
  before(async () => {
    ts = await startTestServer({ bookmarkIntervalSeconds: 1 });
    dir = mkdtempSync(join(tmpdir(), 'kars-outage-'));
  });
  after(async () => {
    await ts.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a fault right after the server came back waits the initial delay, not the backoff the outage grew', async () => {
    const relay = new Outage(Number(new URL(ts.server.url).port));
    await relay.up();
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      readFileSync(ts.server.kubeconfigPath, 'utf8').replace(new URL(ts.server.url).host, `127.0.0.1:${relay.port}`),
    );
    const cfg: WatchConfig = {
      ...DEFAULT_WATCH_CONFIG,
      idleTimeoutMs: 5000,
      pingIntervalMs: 0,
      backoffInitialMs: 200,
      backoffMaxMs: 10_000,
      relistIntervalMs: 0,
    };
    const client = KubeClient.fromKubeconfig({ kubeconfig, pingIntervalMs: 0 });
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
    const waitFor = async (what: string, ok: () => boolean, ms = 15_000): Promise<void> => {
      const t0 = Date.now();
      while (!ok()) {
        if (Date.now() - t0 > ms) assert.fail(`${what} within ${ms} ms: ${JSON.stringify(restarts)}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    try {
      await waitFor('watching', () => watching);
      // Outage: the stream is cut and reconnects are refused until the backoff has grown to ≥ 1.6 s.
      await relay.cut(true);
      await waitFor('the backoff grows during the outage', () => restarts.some((r) => r.delayMs >= 1600));
      await relay.up();
      await waitFor('watching again after the outage', () => watching);
      // A new fault well within MIN_HEALTHY_WATCH_MS of the recovery.
      const before = restarts.length;
      await relay.cut(false);
      await waitFor('the restart after the new fault', () => restarts.length > before);
      const delay = restarts[before]?.delayMs ?? -1;
      assert.ok(
        delay <= cfg.backoffInitialMs,
        `a fault after the recovery waits the initial ${cfg.backoffInitialMs} ms, not ${delay} ms: ${JSON.stringify(restarts.map((r) => r.delayMs))}`,
      );
      // The server accepting and dropping watch after watch still backs off.
      await waitFor('watching again', () => watching);
      const b2 = restarts.length;
      await relay.cut(false);
      await waitFor('another restart', () => restarts.length > b2);
      assert.ok(
        (restarts[b2]?.delayMs ?? 0) > cfg.backoffInitialMs,
        `a second drop at once grows: ${JSON.stringify(restarts.map((r) => r.delayMs))}`,
      );
    } finally {
      ac.abort();
      await run;
      client.close();
      await relay.cut(true);
    }
  });
});
