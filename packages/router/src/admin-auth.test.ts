/**
 * Regression tests for issue 25 item 5, against a real router's admin listener over a raw socket
 * (so header spacing and repeats are sent exactly as written): `/internal/policy-status` answers
 * 200 only to exactly one `Authorization: Bearer <token>`.
 *
 * Before the fix the router stripped an optional `Bearer ` prefix, so the bare token passed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { startDirRouter, type DirRouter } from './testing/policy-dir.js';

const TOKEN = 'adm1n-T0ken_value.xyz';

/** GET /internal/policy-status with these header lines (each `Name: value`); the status code. */
function statusWith(adminUrl: string, headerLines: string[]): Promise<number> {
  const u = new URL(adminUrl);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => {
      s.write(`GET /internal/policy-status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headerLines.map((l) => `${l}\r\n`).join('')}\r\n`);
    });
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

describe('router admin listener: the Authorization check (issue 25 item 5)', () => {
  let stub: OpenAIStub;
  let r: DirRouter;
  let admin: string;
  before(async () => {
    stub = await startOpenAIStub();
    r = await startDirRouter({}, { upstream: stub.url, adminListen: '127.0.0.1:0', adminToken: TOKEN });
    admin = r.router.adminUrl ?? '';
  });
  after(async () => {
    await r.stop();
    await stub.close();
  });

  it('answers 200 to "Bearer <token>", the scheme in any case', async () => {
    assert.equal(await statusWith(admin, [`Authorization: Bearer ${TOKEN}`]), 200);
    assert.equal(await statusWith(admin, [`authorization: bearer ${TOKEN}`]), 200);
    assert.equal(await statusWith(admin, [`Authorization: BEARER ${TOKEN}`]), 200);
  });

  for (const [label, lines] of [
    ['no header', []],
    ['the token without its scheme (hole: 200)', [`Authorization: ${TOKEN}`]],
    ['Basic', [`Authorization: Basic ${TOKEN}`]],
    ['Bearer with two spaces', [`Authorization: Bearer  ${TOKEN}`]],
    ['Bearer with a tab', [`Authorization: Bearer\t${TOKEN}`]],
    ['trailing junk', [`Authorization: Bearer ${TOKEN} x`]],
    ['a token prefix', [`Authorization: Bearer ${TOKEN.slice(0, -1)}`]],
    ['a token suffix', [`Authorization: Bearer ${TOKEN}x`]],
    ['an empty token', ['Authorization: Bearer ']],
    ['the scheme glued to the token', [`Authorization: Bearer${TOKEN}`]],
    ['the header twice (good, bad)', [`Authorization: Bearer ${TOKEN}`, 'Authorization: Bearer nope']],
    ['the header twice (bad, good)', ['Authorization: Bearer nope', `Authorization: Bearer ${TOKEN}`]],
    ['the header twice (good, good)', [`Authorization: Bearer ${TOKEN}`, `Authorization: Bearer ${TOKEN}`]],
  ] as const) {
    it(`answers 401 to ${label}`, async () => {
      assert.equal(await statusWith(admin, [...lines]), 401);
    });
  }

  it('property: a random header value passes only when it is exactly "Bearer <token>" (scheme case aside)', async () => {
    const good = `Bearer ${TOKEN}`;
    // header-value characters Node accepts (no CR, LF, NUL); edits of the good value and noise
    const ch = fc.constantFrom(' ', '\t', 'B', 'b', 'x', '=', ',', '"', 'é', ...TOKEN);
    const value = fc.oneof(
      fc.tuple(fc.nat(good.length), fc.constantFrom('insert', 'delete', 'replace'), ch).map(([at, op, c]) => {
        const i = Math.min(at, op === 'insert' ? good.length : good.length - 1);
        return op === 'insert'
          ? good.slice(0, i) + c + good.slice(i)
          : op === 'delete'
            ? good.slice(0, i) + good.slice(i + 1)
            : good.slice(0, i) + c + good.slice(i + 1);
      }),
      fc.array(ch, { maxLength: 40 }).map((a) => a.join('')),
      // structured: scheme x separator x token x trailer
      fc
        .tuple(
          fc.constantFrom('Bearer', 'bearer', 'BeArEr', 'Basic', '', 'Bearer:', 'Token'),
          fc.constantFrom(' ', '  ', '\t', '', ' \t'),
          fc.constantFrom(TOKEN, TOKEN.slice(1), TOKEN.slice(0, -1), `${TOKEN}x`, ''),
          fc.constantFrom('', ' x', ',', ' ', `, Bearer ${TOKEN}`),
        )
        .map((parts) => parts.join('')),
      fc.constant(good),
    );
    await fc.assert(
      fc.asyncProperty(value, async (v) => {
        // Leading and trailing spaces/tabs are not part of an HTTP field value (RFC 9110 §5.5).
        const field = v.replace(/^[ \t]+|[ \t]+$/g, '');
        const exact = field.length === good.length && field.slice(0, 6).toLowerCase() === 'bearer' && field.slice(6) === good.slice(6);
        const status = await statusWith(admin, [`Authorization: ${v}`]);
        return status === (exact ? 200 : 401);
      }),
      { numRuns: 120 },
    );
  });
});
