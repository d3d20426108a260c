import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { readBody } from '@kars/kube-core';
import { UpstreamClient, type UpstreamCall, type UpstreamSink } from './upstream.js';
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

  describe('dispatch (the raw handler the inference route uses)', { timeout: 20_000 }, () => {
    /** What a dispatch delivered, in order. */
    interface Seen {
      events: string[];
      body: string;
      bytes: number;
      call: UpstreamCall;
      done: Promise<void>;
      /** `written` as onError reported it. */
      written?: boolean;
    }

    function dispatch(c: UpstreamClient, origin: string, retryStale: boolean, onData?: (chunk: Buffer, seen: Seen) => boolean): Seen {
      let end!: () => void;
      const seen = { events: [] as string[], body: '', bytes: 0, done: new Promise<void>((r) => (end = r)) } as Seen;
      const sink: UpstreamSink = {
        onHead: (status) => void seen.events.push(`head ${status}`),
        onData: (chunk) => {
          seen.bytes += chunk.length;
          if (seen.bytes <= 1024) seen.body += chunk.toString();
          return onData ? onData(chunk, seen) : true;
        },
        onEnd: () => {
          seen.events.push('end');
          end();
        },
        onError: (err, answered, written) => {
          seen.written = written;
          seen.events.push(`error ${(err as { code?: string }).code ?? err.message} answered=${answered}`);
          end();
        },
      };
      seen.call = c.dispatch({ origin, path: '/', method: 'POST', headers: {}, body: '{}', retryStale }, sink);
      return seen;
    }

    it('retries a dispatch that met a stale pooled connection once, on a new connection', async (t) => {
      const s = await staleOnReuse(t);
      const c = new UpstreamClient();
      t.after(() => c.close());
      const two = [dispatch(c, s.origin, true), dispatch(c, s.origin, true)];
      await Promise.all(two.map((x) => x.done));
      assert.deepEqual(
        two.map((x) => x.body),
        ['ok', 'ok'],
      );
      const retried = dispatch(c, s.origin, true);
      await retried.done;
      assert.deepEqual(retried.events, ['head 200', 'end']);
      assert.equal(retried.body, 'ok');
      assert.equal(s.received(), 4, 'one retry, and not on the other stale connection');
      assert.equal(s.connections(), 3);
    });

    it('says whether a failed request was written: not when the connection was refused, yes when the upstream read it and dropped (ADR 0027)', async (t) => {
      const closed = net.createServer();
      const refused = await listen(t, closed);
      await new Promise((r) => closed.close(r));
      const c = new UpstreamClient();
      t.after(() => c.close());
      const a = dispatch(c, refused, false);
      await a.done;
      assert.deepEqual(a.events, ['error ECONNREFUSED answered=false']);
      assert.equal(a.written, false);
      assert.equal(a.call.written, false);
      const s = await staleOnReuse(t);
      await Promise.all([dispatch(c, s.origin, false).done, dispatch(c, s.origin, false).done]);
      const b = dispatch(c, s.origin, false);
      await b.done;
      assert.deepEqual(b.events, ['error UND_ERR_SOCKET answered=false']);
      assert.equal(b.written, true, 'the upstream read it before it dropped the connection');
      assert.equal(s.received(), 3);
    });

    it('never retries a dispatch not marked retryStale', async (t) => {
      const s = await staleOnReuse(t);
      const c = new UpstreamClient();
      t.after(() => c.close());
      const two = [dispatch(c, s.origin, false), dispatch(c, s.origin, false)];
      await Promise.all(two.map((x) => x.done));
      const third = dispatch(c, s.origin, false);
      await third.done;
      assert.deepEqual(third.events, ['error UND_ERR_SOCKET answered=false']);
      assert.equal(s.received(), 3);
    });

    it('pauses the upstream while onData says so, and resumes on resume()', async (t) => {
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let written = 0;
      const server = http.createServer((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const pump = (): void => {
          while (written < 256 * 1024 * 1024) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      });
      const origin = await listen(t, server);
      const c = new UpstreamClient();
      t.after(() => c.close());
      let paused = false;
      const seen = dispatch(c, origin, false, () => {
        if (paused) return true;
        paused = true;
        return false;
      });
      await new Promise((resolve) => setTimeout(resolve, 1500));
      // Paused after the first chunk: only what the socket buffers hold has left the upstream (a few
      // MiB; unpaused it is 50+ MiB in this time even on a loaded 2-core VM).
      assert.ok(written < 16 * 1024 * 1024, `the upstream wrote ${written} bytes while paused`);
      assert.deepEqual(seen.events, ['head 200']);
      seen.call.resume();
      await seen.done;
      assert.deepEqual(seen.events, ['head 200', 'end']);
      assert.equal(seen.bytes, 256 * 1024 * 1024);
    });

    it('abort() cuts the request: onError once, the upstream sees the connection close', async (t) => {
      let closed = false;
      const server = http.createServer((req, res) => {
        req.resume();
        res.on('close', () => (closed = true));
      });
      const origin = await listen(t, server);
      const c = new UpstreamClient();
      t.after(() => c.close());
      const seen = dispatch(c, origin, true);
      // Aborted at once, before undici has given it a connection: cut as soon as it has one.
      seen.call.abort();
      await seen.done;
      assert.deepEqual(seen.events, ['error upstream request aborted answered=false']);
      const late = dispatch(c, origin, true);
      while (server.connections === 0 && !closed) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50));
      late.call.abort();
      late.call.abort();
      await late.done;
      assert.deepEqual(late.events, ['error upstream request aborted answered=false'], 'one onError, no retry of an aborted request');
      for (let i = 0; i < 100 && !closed; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.ok(closed, 'the upstream saw the request cut');
    });
  });
});
