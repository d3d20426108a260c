// A watch's events of one event-loop turn go out as one write (one HTTP/2 DATA frame, one HTTP/1.1
// chunk), as kube-apiserver flushes a watch only once no further event is queued; a burst past the
// coalescing size still arrives whole.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import https from 'node:https';
import { startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

/** The chunks of a watch's body as the client's stream delivers them, until `lines` complete lines arrived. */
type Reader = (ts: TestServer, path: string, lines: number) => Promise<string[]>;

/** Collect `body`'s chunks as they come; once `lines` newlines arrived, `done` gets them. */
function collectLines(body: NodeJS.ReadableStream, lines: number, done: (chunks: string[]) => void): void {
  const chunks: string[] = [];
  let seen = 0;
  body.setEncoding('utf8');
  body.on('data', (d: string) => {
    chunks.push(d);
    seen += d.split('\n').length - 1;
    if (seen >= lines) done(chunks);
  });
}

const overHttp2: Reader = (ts, path, lines) =>
  new Promise((resolve, reject) => {
    const c = http2.connect(ts.server.url, { ca: ts.server.caCert, servername: 'localhost' });
    c.on('error', reject);
    const r = c.request({ ':path': path, authorization: `Bearer ${ts.server.token}` });
    collectLines(r, lines, (chunks) => {
      r.close();
      c.close();
      resolve(chunks);
    });
    r.on('error', reject);
    r.end();
  });

const overHttp1: Reader = (ts, path, lines) =>
  new Promise((resolve, reject) => {
    const u = new URL(ts.server.url);
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        ca: ts.server.caCert,
        servername: 'localhost',
        headers: { authorization: `Bearer ${ts.server.token}` },
      },
      (res) =>
        collectLines(res, lines, (chunks) => {
          req.destroy();
          resolve(chunks);
        }),
    );
    req.on('error', (e) => (e.message === 'socket hang up' ? undefined : reject(e)));
    req.end();
  });

describe('watch: the events of one turn share one write', () => {
  let ts: TestServer;
  const few = 8;
  const many = 400;
  before(async () => {
    ts = await startTestServer();
    for (const [ns, n] of [
      ['coalesce-few', few],
      ['coalesce-many', many],
    ] as const) {
      assert.equal(
        (await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })).status,
        201,
      );
      for (let i = 0; i < n; i++) {
        const r = await ts.client.post(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `cm-${i}` },
          data: { v: 'x'.repeat(200) },
        });
        assert.equal(r.status, 201);
      }
    }
  });
  after(() => ts.close());

  for (const [proto, read] of [
    ['HTTP/2', overHttp2],
    ['HTTP/1.1', overHttp1],
  ] as const) {
    it(`${proto}: the synthetic ADDED events of a watch's start arrive in one chunk`, async () => {
      // ~6 KB of events (under one TLS record and one DATA frame), all delivered in the turn the watch starts.
      const chunks = await read(ts, '/api/v1/namespaces/coalesce-few/configmaps?watch=1', few);
      assert.equal(chunks.length, 1, `${chunks.length} chunks for ${few} events`);
      const events = chunks
        .join('')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string });
      assert.deepEqual(
        events.map((e) => e.type),
        Array.from({ length: few }, () => 'ADDED'),
      );
    });

    it(`${proto}: a burst past the coalescing size arrives whole, every event once`, async () => {
      // ~130 KB in one turn, written in 64 KiB pieces: every event arrives, once.
      const chunks = await read(ts, '/api/v1/namespaces/coalesce-many/configmaps?watch=1', many);
      const events = chunks
        .join('')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string; resourceVersion: string } } });
      assert.equal(events.length, many);
      assert.equal(new Set(events.map((e) => e.object.metadata.name)).size, many);
    });
  }
});
