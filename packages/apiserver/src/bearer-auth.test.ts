/**
 * Regression tests for issue 25 item 5 on the API server, over a raw TLS socket (so spacing and
 * repeated headers are sent exactly as written): only exactly one `Authorization: Bearer <token>`
 * authenticates.
 *
 * Before the fix the server matched `^Bearer\s+(\S+)\s*$`: two spaces or a tab passed, and a
 * repeated header was decided on its first copy only.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:tls';
import { startTestServer, type TestServer } from './testing/harness.js';

function statusWith(ts: TestServer, headerLines: string[]): Promise<number> {
  const u = new URL(ts.server.url);
  return new Promise((resolve, reject) => {
    const s = connect(
      { host: u.hostname, port: Number(u.port), ca: ts.server.caCert, servername: 'localhost', ALPNProtocols: ['http/1.1'] },
      () => {
        s.write(
          `GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headerLines.map((l) => `${l}\r\n`).join('')}\r\n`,
        );
      },
    );
    let got = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => (got += c));
    s.on('end', () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m) resolve(Number(m[1]));
      else reject(new Error(`no status line: ${JSON.stringify(got.slice(0, 100))}`));
    });
    s.on('error', reject);
  });
}

describe('API server: the Authorization check (issue 25 item 5)', () => {
  let ts: TestServer;
  let token: string;
  before(async () => {
    ts = await startTestServer();
    token = ts.server.token;
  });
  after(() => ts.close());

  it('authenticates "Bearer <token>", the scheme in any case', async () => {
    assert.equal(await statusWith(ts, [`Authorization: Bearer ${token}`]), 200);
    assert.equal(await statusWith(ts, [`Authorization: bearer ${token}`]), 200);
  });

  for (const [label, lines] of [
    ['the token without its scheme', (t: string) => [`Authorization: ${t}`]],
    ['Basic', (t: string) => [`Authorization: Basic ${t}`]],
    ['Bearer with two spaces (hole: 200)', (t: string) => [`Authorization: Bearer  ${t}`]],
    ['Bearer with a tab (hole: 200)', (t: string) => [`Authorization: Bearer\t${t}`]],
    ['trailing junk', (t: string) => [`Authorization: Bearer ${t} x`]],
    ['a token prefix', (t: string) => [`Authorization: Bearer ${t.slice(0, -1)}`]],
    ['a token suffix', (t: string) => [`Authorization: Bearer ${t}x`]],
    ['an empty token', () => ['Authorization: Bearer ']],
    ['the header twice (good, bad) (hole: 200)', (t: string) => [`Authorization: Bearer ${t}`, 'Authorization: Bearer nope']],
    ['the header twice (good, good) (hole: 200)', (t: string) => [`Authorization: Bearer ${t}`, `Authorization: Bearer ${t}`]],
  ] as const) {
    it(`answers 401 to ${label}`, async () => {
      assert.equal(await statusWith(ts, lines(token)), 401);
    });
  }
});
