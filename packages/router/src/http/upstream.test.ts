import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { readBody } from '@kars/kube-core';
import { UpstreamClient } from './upstream.js';
import { startStaleOnReuse, type StaleOnReuse } from '../testing/upstreams.js';

async function listen(t: TestContext, server: net.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    if (server instanceof http.Server) server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A stale-on-reuse upstream (testing/upstreams.ts) closed after the test. */
async function staleOnReuse(t: TestContext): Promise<StaleOnReuse> {
  const s = await startStaleOnReuse('ok');
  t.after(() => s.close());
  return s;
}

async function text(c: UpstreamClient, origin: string, retryStale: boolean): Promise<string> {
  const r = await c.request({ origin, path: '/', method: 'POST', headers: {}, body: Buffer.from('{}'), retryStale });
  const b = await readBody(r.body, 1024);
  assert.ok(b.ok);
  return b.body.toString();
}

describe('UpstreamClient', () => {
  it('keeps connections alive: sequential requests share one connection', async (t) => {
    let connections = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    server.on('connection', () => connections++);
    const origin = await listen(t, server);
    const c = new UpstreamClient();
    t.after(() => c.close());
    for (let i = 0; i < 10; i++) assert.equal(await text(c, origin, false), 'ok');
    // undici's pool may open a second connection while the first is being released; never more.
    assert.ok(connections <= 2, `${connections} connections for 10 sequential requests`);
  });

  it('retries a request that met a stale pooled connection once, on a new connection', async (t) => {
    const s = await staleOnReuse(t);
    const c = new UpstreamClient();
    t.after(() => c.close());
    // Two at once: two pooled connections, both stale from now on.
    assert.deepEqual(await Promise.all([text(c, s.origin, true), text(c, s.origin, true)]), ['ok', 'ok']);
    assert.equal(await text(c, s.origin, true), 'ok', 'the dropped reuse was sent again');
    assert.equal(s.received(), 4, 'one retry, and not on the other stale connection');
    assert.equal(s.connections(), 3);
  });

  it('never retries a request not marked retryStale (a tool call may have acted)', async (t) => {
    const s = await staleOnReuse(t);
    const c = new UpstreamClient();
    t.after(() => c.close());
    assert.deepEqual(await Promise.all([text(c, s.origin, false), text(c, s.origin, false)]), ['ok', 'ok']);
    await assert.rejects(text(c, s.origin, false), (e: { code?: string }) => e.code === 'UND_ERR_SOCKET');
    assert.equal(s.received(), 3);
  });

  it('does not retry a failure on a fresh connection (the upstream may have acted on it)', async (t) => {
    let received = 0;
    const server = net.createServer((sock) => {
      sock.on('error', () => undefined);
      sock.on('data', () => {
        received++;
        sock.destroy();
      });
    });
    const origin = await listen(t, server);
    const c = new UpstreamClient();
    t.after(() => c.close());
    await assert.rejects(text(c, origin, true));
    assert.equal(received, 1);
  });

  it('gives up on response headers after headersTimeoutMs', async (t) => {
    const server = http.createServer((req) => req.resume());
    const origin = await listen(t, server);
    const c = new UpstreamClient();
    t.after(() => c.close());
    const t0 = Date.now();
    await assert.rejects(
      c.request({ origin, path: '/', method: 'POST', headers: {}, body: Buffer.from('x'), headersTimeoutMs: 100 }),
      (e: { code?: string }) => e.code === 'UND_ERR_HEADERS_TIMEOUT',
    );
    assert.ok(Date.now() - t0 < 2000);
  });
});
