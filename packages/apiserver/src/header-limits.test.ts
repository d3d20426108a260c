/**
 * Regression tests for issue 25 item 6 (over-long URLs and headers) against a real `kars apiserver`
 * over raw TLS sockets (HTTP/1.1) and HTTP/2: a request whose URL or headers pass the limit gets a
 * status line (431, as kube-apiserver's Go server answers) and the server goes on serving others.
 *
 * Before the fix: HTTP/1.1 refused any head over Node's 16 KiB default (431), while HTTP/2 took up
 * to ~64 KiB and then reset the stream (no status at all); a 40 KiB URL passed on one protocol
 * and not the other.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { connect } from 'node:tls';
import { MAX_HEADER_BYTES } from './http/head-limits.js';
import { startTestServer, type TestServer } from './testing/harness.js';

/** Send `head` (in chunks of `chunk` bytes) over TLS HTTP/1.1; what comes back until close. */
function rawHttp1(ts: TestServer, head: string, chunk = head.length): Promise<string> {
  const u = new URL(ts.server.url);
  return new Promise((resolve) => {
    const s = connect(
      { host: u.hostname, port: Number(u.port), ca: ts.server.caCert, servername: 'localhost', ALPNProtocols: ['http/1.1'] },
      () => {
        let i = 0;
        const next = (): void => {
          if (i >= head.length || s.destroyed) return;
          const part = head.slice(i, i + chunk);
          i += chunk;
          s.write(part, () => setImmediate(next));
        };
        next();
      },
    );
    let got = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => (got += c));
    s.on('close', () => resolve(got));
    s.on('error', () => undefined);
  });
}

function h2Get(ts: TestServer, path: string, headers: Record<string, string> = {}): Promise<{ status?: number; error?: string }> {
  return new Promise((resolve) => {
    const c = http2.connect(ts.server.url, { ca: ts.server.caCert, servername: 'localhost', maxSendHeaderBlockLength: 4 * 1024 * 1024 });
    c.on('error', () => undefined);
    const r = c.request({ ':path': path, authorization: `Bearer ${ts.server.token}`, ...headers });
    let status: number | undefined;
    r.on('response', (h) => (status = Number(h[':status'])));
    r.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    r.on('close', () => {
      c.close();
      resolve(status === undefined ? { error: `reset ${r.rstCode}` } : { status });
    });
    r.resume();
    r.end();
  });
}

const LIST = '/api/v1/namespaces/default/configmaps';

describe('API server: over-long URLs and headers (issue 25 item 6)', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(() => ts.close());

  const get = (ts: TestServer, target: string, extra = ''): string =>
    `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ts.server.token}\r\n${extra}\r\n`;

  it('HTTP/1.1: a URL over the limit gets a 431 status line, sent at once or dribbled; others are still served', async () => {
    const url = `${LIST}?x=${'a'.repeat(MAX_HEADER_BYTES + 1000)}`;
    assert.match(await rawHttp1(ts, get(ts, url)), /^HTTP\/1\.1 431 /);
    assert.match(await rawHttp1(ts, get(ts, url), 4096), /^HTTP\/1\.1 431 /);
    assert.match(await rawHttp1(ts, get(ts, `${LIST}?x=${'a'.repeat(4 * MAX_HEADER_BYTES)}`)), /^HTTP\/1\.1 431 /);
    assert.match(await rawHttp1(ts, `${get(ts, LIST).slice(0, -2)}Connection: close\r\n\r\n`), /^HTTP\/1\.1 200 /);
  });

  it('HTTP/1.1: a header over the limit gets a 431 status line', async () => {
    assert.match(await rawHttp1(ts, get(ts, LIST, `X-Big: ${'b'.repeat(MAX_HEADER_BYTES + 10)}\r\n`)), /^HTTP\/1\.1 431 /);
  });

  it('HTTP/1.1 and HTTP/2 agree below the limit: a 40 KiB URL is served on both (hole: 431 on HTTP/1.1 only)', async () => {
    const url = `${LIST}?x=${'a'.repeat(40 * 1024)}`;
    assert.match(await rawHttp1(ts, `${get(ts, url).slice(0, -2)}Connection: close\r\n\r\n`), /^HTTP\/1\.1 200 /);
    assert.deepEqual(await h2Get(ts, url), { status: 200 });
  });

  it('HTTP/2: a :path over the limit gets 431, not a reset stream (hole: no status at all)', async () => {
    assert.deepEqual(await h2Get(ts, `${LIST}?x=${'a'.repeat(MAX_HEADER_BYTES + 10)}`), { status: 431 });
    assert.deepEqual(await h2Get(ts, LIST, { 'x-big': 'b'.repeat(MAX_HEADER_BYTES + 10) }), { status: 431 });
    assert.deepEqual(await h2Get(ts, LIST), { status: 200 });
  });
});
