import { readFileSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { KubeClient } from './client.js';
import { ConnectionLostError } from './errors.js';
import { Resources } from './paths.js';
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from './transport.js';

const cm = (name: string, v: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'default' },
  data: { v },
});

describe('KubeClient against kars apiserver', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ faultInjection: true, bookmarkIntervalSeconds: 1 });
  });
  after(async () => ts.close());

  it('creates, reads, replaces, patches, applies, lists and deletes over HTTP/2 with the kubeconfig token', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    try {
      const made = await c.create(Resources.configmaps, cm('crud', '1'));
      assert.ok(made.metadata.uid);
      const got = await c.get(Resources.configmaps, 'default', 'crud');
      assert.equal((got as any).data.v, '1');
      const rep = await c.replace(Resources.configmaps, { ...got, data: { v: '2' } });
      assert.equal((rep as any).data.v, '2');
      const pat = await c.patch(Resources.configmaps, 'default', 'crud', { data: { w: 'x' } }, 'merge');
      assert.deepEqual((pat as any).data, { v: '2', w: 'x' });
      const app = await c.apply(
        Resources.configmaps,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'crud', namespace: 'default' }, data: { mine: 'y' } },
        'test-manager',
      );
      assert.equal((app as any).data.mine, 'y');
      const list = await c.list(Resources.configmaps, { namespace: 'default' });
      assert.ok(list.items.some((o) => o.metadata.name === 'crud'));
      await c.delete(Resources.configmaps, 'default', 'crud');
      assert.equal(await c.getOrUndefined(Resources.configmaps, 'default', 'crud'), undefined);
    } finally {
      c.close();
    }
  });

  it('fieldValidation=Strict on create, replace, patch and apply refuses unknown fields (400) and writes nothing', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    const strict = (e: unknown): boolean =>
      e instanceof ApiError && e.code === 400 && /strict decoding error: unknown field "datta"/.test(e.message);
    try {
      const bad = { ...cm('strict', '1'), datta: { v: 'x' } } as KubeObject;
      await assert.rejects(c.create(Resources.configmaps, bad, { fieldValidation: 'Strict' }), strict);
      assert.equal(await c.getOrUndefined(Resources.configmaps, 'default', 'strict'), undefined);
      // Without it the server's default (Ignore here, as kube-apiserver's default for non-kubectl clients) drops the field.
      const made = await c.create(Resources.configmaps, bad);
      assert.equal((made as any).datta, undefined);
      await assert.rejects(
        c.replace(Resources.configmaps, { ...made, datta: { v: 'y' } } as KubeObject, { fieldValidation: 'Strict' }),
        strict,
      );
      await assert.rejects(
        c.patch(Resources.configmaps, 'default', 'strict', { datta: { v: 'y' } }, 'merge', { fieldValidation: 'Strict' }),
        strict,
      );
      await assert.rejects(
        c.apply(Resources.configmaps, { ...cm('strict', '9'), datta: { v: 'y' } }, 'test-manager', {
          fieldValidation: 'Strict',
          force: true,
        }),
        strict,
      );
      assert.equal(((await c.get(Resources.configmaps, 'default', 'strict')) as any).data.v, '1');
      await c.delete(Resources.configmaps, 'default', 'strict');
    } finally {
      c.close();
    }
  });

  it('surfaces server errors as ApiError with the Status code and reason', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    try {
      await c.create(Resources.configmaps, cm('twice', '1'));
      await assert.rejects(
        c.create(Resources.configmaps, cm('twice', '1')),
        (e: unknown) => e instanceof ApiError && e.code === 409 && e.reason === 'AlreadyExists',
      );
      await assert.rejects(c.get(Resources.configmaps, 'default', 'absent'), (e: unknown) => e instanceof ApiError && e.code === 404);
    } finally {
      c.close();
    }
  });

  it('fails a quiet watch with an idle ConnectionLostError after the idle deadline', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 0 });
    try {
      const rv = (await c.list(Resources.configmaps, { namespace: 'default' })).metadata.resourceVersion ?? '0';
      const t0 = Date.now();
      const ac = new AbortController();
      await assert.rejects(
        (async () => {
          for await (const _e of c.watch(Resources.configmaps, {
            namespace: 'default',
            resourceVersion: rv,
            timeoutSeconds: 60,
            allowWatchBookmarks: false,
            idleTimeoutMs: 400,
            signal: ac.signal,
          })) {
            /* no events expected */
          }
        })(),
        (e: unknown) => e instanceof ConnectionLostError && e.reason === 'idle',
      );
      const took = Date.now() - t0;
      assert.ok(took >= 350 && took < 3000, `idle detected after ${took} ms`);
    } finally {
      c.close();
    }
  });

  it('watchBatches: events in order in non-empty batches; the idle deadline counts from the last byte, not from the open', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 0 });
    const writer = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    const idleMs = 500;
    try {
      await writer.create(Resources.configmaps, cm('batches', '0'));
      const rv = (await c.list(Resources.configmaps, { namespace: 'default' })).metadata.resourceVersion ?? '0';
      const ac = new AbortController();
      const seen: string[] = [];
      let lastEventAt = 0;
      let wake: (() => void) | undefined;
      const openedAt = performance.now();
      const reading = (async () => {
        for await (const batch of c.watchBatches(Resources.configmaps, {
          namespace: 'default',
          resourceVersion: rv,
          timeoutSeconds: 60,
          allowWatchBookmarks: false,
          idleTimeoutMs: idleMs,
          signal: ac.signal,
        })) {
          assert.ok(batch.length > 0, 'a batch is never empty');
          for (const ev of batch) seen.push(String((ev.object as any).data?.v));
          lastEventAt = performance.now();
          wake?.();
        }
      })();
      const failure = reading.then(
        () => new Error('the watch ended without failing'),
        (e: unknown) => e,
      );
      // Feed the watch, one write per received event, for three idle deadlines: it must stay open
      // (unless the machine stalls one write past the deadline, which the final check allows).
      let n = 0;
      let failedEarly = false;
      void failure.then(() => {
        failedEarly = true;
        wake?.();
      });
      while (performance.now() - openedAt < 3 * idleMs && !failedEarly) {
        const arrived = new Promise<void>((r) => (wake = r));
        await writer.patch(Resources.configmaps, 'default', 'batches', { data: { v: String(++n) } }, 'merge');
        await arrived;
      }
      const cutWhileFed = failedEarly;
      const err = await failure;
      const failedAt = performance.now();
      assert.ok(err instanceof ConnectionLostError && err.reason === 'idle', `failed with ${String(err)}`);
      // Never before a whole deadline without bytes (a timer armed only at open would fire while events flow).
      assert.ok(failedAt - lastEventAt >= idleMs - 20, `failed ${Math.round(failedAt - lastEventAt)} ms after the last event`);
      assert.deepEqual(
        seen,
        Array.from({ length: seen.length }, (_, i) => String(i + 1)),
        'every event, in order',
      );
      assert.ok(seen.length === n || (cutWhileFed && seen.length === n - 1), `${seen.length} of ${n} events`);
    } finally {
      c.close();
      writer.close();
    }
  });

  it('declares a silently dropped connection dead by PING and reconnects for the next request', async () => {
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 200, pingTimeoutMs: 300 });
    try {
      const rv = (await c.list(Resources.configmaps, { namespace: 'default' })).metadata.resourceVersion ?? '0';
      const ac = new AbortController();
      const events: string[] = [];
      const done = (async () => {
        for await (const e of c.watch(Resources.configmaps, {
          namespace: 'default',
          resourceVersion: rv,
          timeoutSeconds: 60,
          allowWatchBookmarks: true,
          idleTimeoutMs: 60_000,
          signal: ac.signal,
        }))
          events.push(e.type);
      })();
      await new Promise((r) => setTimeout(r, 1300));
      assert.ok(events.includes('BOOKMARK'), 'the watch was alive before the freeze');
      const t0 = Date.now();
      ts.server.faults!.freezeWatches();
      await assert.rejects(done, (e: unknown) => e instanceof ConnectionLostError && e.reason === 'ping');
      const took = Date.now() - t0;
      assert.ok(took < 2000, `ping detected the dead connection after ${took} ms`);
      const after = await c.get(Resources.namespaces, undefined, 'default');
      assert.equal(after.metadata.name, 'default', 'a new connection serves the next request');
    } finally {
      c.close();
    }
  });
  it('fails a request on a connection that went silent at its deadline, and one whose signal aborts at once', async () => {
    // Periodic PINGs off, so only the request's own deadline (or its signal) can end it.
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath, pingIntervalMs: 0, pingTimeoutMs: 300 });
    const ac = new AbortController();
    try {
      const rv = (await c.list(Resources.configmaps, { namespace: 'default' })).metadata.resourceVersion ?? '0';
      const watching = (async () => {
        for await (const _e of c.watch(Resources.configmaps, {
          namespace: 'default',
          resourceVersion: rv,
          timeoutSeconds: 60,
          allowWatchBookmarks: false,
          idleTimeoutMs: 60_000,
          signal: ac.signal,
        })) {
          /* none expected */
        }
      })().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(ts.server.faults!.freezeWatches() >= 1, 'the watch (and so its connection) is frozen');

      const aborter = new AbortController();
      const t1 = Date.now();
      setTimeout(() => aborter.abort(), 100);
      await assert.rejects(
        c.transport.request({ method: 'GET', path: '/api/v1/namespaces/default', signal: aborter.signal, timeoutMs: 10_000 }),
        (e: unknown) => e instanceof Error && !(e instanceof ConnectionLostError),
      );
      assert.ok(Date.now() - t1 < 5000, `the abort ended the request after ${Date.now() - t1} ms`);

      const t0 = Date.now();
      await assert.rejects(
        c.transport.request({ method: 'GET', path: '/api/v1/namespaces/default', timeoutMs: 300 }),
        (e: unknown) => e instanceof ConnectionLostError && e.reason === 'idle' && /did not complete within 300 ms/.test(e.message),
      );
      const took = Date.now() - t0;
      assert.ok(took >= 250 && took < 5000, `deadline after ${took} ms`);
      ac.abort();
      await watching;
    } finally {
      ac.abort();
      c.close();
    }
  });
});

describe('KubeClient HTTP/2 flow control', () => {
  it('grants the server 4 MiB per stream and 32 MiB for the connection, so a burst is not held to 64 KiB round trips', async () => {
    // The test server's certificates, on a bare HTTP/2 server that reads what the client granted.
    const ts = await startTestServer();
    const pki = (f: string): string => readFileSync(join(ts.dataDir, 'pki', f), 'utf8');
    const sessions: http2.ServerHttp2Session[] = [];
    const srv = http2.createSecureServer({ cert: pki('server.crt'), key: pki('server.key') });
    srv.on('session', (s) => sessions.push(s));
    srv.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/json' });
      stream.end(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'w', namespace: 'default' } }));
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const port = (srv.address() as AddressInfo).port;
    const kubeconfig = join(ts.dataDir, 'flow-kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'c',
            cluster: { server: `https://127.0.0.1:${port}`, 'certificate-authority-data': Buffer.from(pki('ca.crt')).toString('base64') },
          },
        ],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    const c = KubeClient.fromKubeconfig({ kubeconfig });
    try {
      await c.get(Resources.configmaps, 'default', 'w');
      const s = sessions[0];
      assert.ok(s, 'the client connected');
      assert.equal(s.remoteSettings.initialWindowSize, STREAM_WINDOW_BYTES);
      assert.equal(STREAM_WINDOW_BYTES, 4 << 20);
      // The connection window the server may fill: the 32 MiB granted, less what this answer used.
      assert.ok((s.state.remoteWindowSize ?? 0) > CONNECTION_WINDOW_BYTES - 65_536, `connection window ${s.state.remoteWindowSize}`);
    } finally {
      c.close();
      for (const s of sessions) s.destroy();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
      await ts.close();
    }
  });
});

describe('KubeClient: an abort after the answer was read', () => {
  it('is not an uncaught error, even when it lands before the stream closes', async () => {
    const ts = await startTestServer();
    const c = KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
    try {
      // An uncaught AbortError would fail this test through node:test's own handler.
      for (let i = 0; i < 20; i++) {
        const ac = new AbortController();
        const list = await c.list(Resources.configmaps, { namespace: 'default' }, ac.signal);
        ac.abort(); // at once: the stream's 'end' has been seen, its 'close' may not have been
        assert.ok(Array.isArray(list.items));
      }
      await new Promise((r) => setTimeout(r, 100));
      // The client is still usable after the aborts.
      assert.ok(Array.isArray((await c.list(Resources.configmaps, { namespace: 'default' })).items));
    } finally {
      c.close();
      await ts.close();
    }
  });
});
