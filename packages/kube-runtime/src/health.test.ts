import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Registry } from 'prom-client';
import { startHealthServer } from './health.js';
import type { ReadinessCheck } from './health.js';
import { RuntimeMetrics } from './metrics.js';

function check(name: string, state: { ok: boolean; detail?: string }): ReadinessCheck {
  return { name, check: () => state };
}

async function withServer(readiness: ReadinessCheck[], fn: (url: string, metrics: RuntimeMetrics) => Promise<void>): Promise<void> {
  const metrics = new RuntimeMetrics(new Registry());
  const ac = new AbortController();
  const srv = await startHealthServer({ listen: '127.0.0.1:0', registry: metrics.registry, readiness, signal: ac.signal });
  try {
    await fn(srv.url, metrics);
  } finally {
    await srv.close();
  }
}

describe('startHealthServer', () => {
  it('answers /healthz with 200 ok on the port it reports', async () => {
    await withServer([check('never', { ok: false })], async (url) => {
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.notEqual(url, 'http://127.0.0.1:0');
      const res = await fetch(`${url}/healthz`);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'ok\n');
    });
  });

  it('answers /readyz with 200 only when every check is ok', async () => {
    const store = { ok: false, detail: 'policies store not synced' };
    await withServer([check('leader', { ok: true }), check('store', store)], async (url) => {
      let res = await fetch(`${url}/readyz`);
      assert.equal(res.status, 503);
      assert.equal(await res.text(), '[-]store: policies store not synced\nreadyz check failed\n');
      store.ok = true;
      res = await fetch(`${url}/readyz`);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'readyz check passed\n');
    });
  });

  it('lists passing checks too with ?verbose', async () => {
    await withServer([check('leader', { ok: true }), check('store', { ok: false })], async (url) => {
      const res = await fetch(`${url}/readyz?verbose`);
      assert.equal(res.status, 503);
      assert.equal(await res.text(), '[+]leader ok\n[-]store: not ready\nreadyz check failed\n');
    });
  });

  it('treats a throwing check as failing, with its message', async () => {
    const throwing: ReadinessCheck = {
      name: 'broken',
      check: () => {
        throw new Error('boom');
      },
    };
    await withServer([throwing], async (url) => {
      const res = await fetch(`${url}/readyz`);
      assert.equal(res.status, 503);
      assert.match(await res.text(), /^\[-\]broken: check threw: boom$/m);
    });
  });

  it('serves the registry at /metrics in its content type', async () => {
    await withServer([], async (url, metrics) => {
      metrics.watch('policies').restart('idle');
      const res = await fetch(`${url}/metrics`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), metrics.registry.contentType);
      assert.match(await res.text(), /^kars_watch_restarts_total\{watch="policies",reason="idle"\} 1$/m);
    });
  });

  it('answers 404 for unknown paths and 405 for other methods', async () => {
    await withServer([], async (url) => {
      assert.equal((await fetch(`${url}/nope`)).status, 404);
      const post = await fetch(`${url}/healthz`, { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get('allow'), 'GET, HEAD');
      const head = await fetch(`${url}/readyz`, { method: 'HEAD' });
      assert.equal(head.status, 200);
    });
  });

  it('stops listening when its signal aborts, even with a kept-alive connection open', async () => {
    const ac = new AbortController();
    const srv = await startHealthServer({ listen: '127.0.0.1:0', registry: new Registry(), readiness: [], signal: ac.signal });
    const agent = new http.Agent({ keepAlive: true });
    const get = (): Promise<number> =>
      new Promise((resolve, reject) => {
        http
          .get(`${srv.url}/healthz`, { agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          })
          .on('error', reject);
      });
    try {
      assert.equal(await get(), 200);
      ac.abort();
      await srv.close(); // the same close the abort started
      await assert.rejects(get(), /ECONNREFUSED|ECONNRESET|socket hang up/);
    } finally {
      agent.destroy();
    }
  });

  it('rejects a malformed listen address and an already-aborted signal', async () => {
    const registry = new Registry();
    const live = new AbortController().signal;
    await assert.rejects(startHealthServer({ listen: 'localhost', registry, readiness: [], signal: live }), RangeError);
    await assert.rejects(startHealthServer({ listen: '127.0.0.1:70000', registry, readiness: [], signal: live }), RangeError);
    await assert.rejects(
      startHealthServer({ listen: '127.0.0.1:0', registry, readiness: [], signal: AbortSignal.abort() }),
      /already aborted/,
    );
  });

  it('rejects when the port is taken', async () => {
    await withServer([], async (url) => {
      const port = new URL(url).port;
      await assert.rejects(
        startHealthServer({ listen: `127.0.0.1:${port}`, registry: new Registry(), readiness: [], signal: new AbortController().signal }),
        /EADDRINUSE/,
      );
    });
  });

  it('accepts a bracketed IPv6 listen address', async (t) => {
    const ac = new AbortController();
    let srv;
    try {
      srv = await startHealthServer({ listen: '[::1]:0', registry: new Registry(), readiness: [], signal: ac.signal });
    } catch (err: unknown) {
      t.skip(`no IPv6 loopback here: ${String(err)}`);
      return;
    }
    try {
      assert.match(srv.url, /^http:\/\/\[::1\]:\d+$/);
      assert.equal((await fetch(`${srv.url}/healthz`)).status, 200);
    } finally {
      ac.abort();
      await srv.close();
    }
  });
});
