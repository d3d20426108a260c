import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { formatHostPort, ListenAddressError, listenOn, parseListen, readBody } from './http.js';

describe('parseListen', () => {
  it('reads HOST:PORT, [IPv6]:PORT and :PORT', () => {
    assert.deepEqual(parseListen('127.0.0.1:8088'), { host: '127.0.0.1', port: 8088 });
    assert.deepEqual(parseListen('[::1]:0'), { host: '::1', port: 0 });
    assert.deepEqual(parseListen('localhost:65535'), { host: 'localhost', port: 65535 });
    assert.deepEqual(parseListen(':9000'), { host: '127.0.0.1', port: 9000 }, 'an empty host is loopback, never every interface');
  });

  it('refuses anything else with a ListenAddressError (a RangeError) naming the flag', () => {
    for (const bad of [
      'localhost',
      '127.0.0.1',
      '127.0.0.1:',
      '127.0.0.1:65536',
      '127.0.0.1:-1',
      '::1:80',
      '[::1]',
      'a:b',
      'h:1:2',
      ' 1.2.3.4:80',
      '1.2.3.4:80 ',
      '1.2.3.4:123456',
      '',
    ]) {
      assert.throws(
        () => parseListen(bad, '--listen'),
        (e: unknown) => e instanceof ListenAddressError && e instanceof RangeError && e.message.startsWith('--listen must be HOST:PORT'),
        bad,
      );
    }
  });

  it('property: any string either parses to a port in 0..65535 or throws ListenAddressError', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (s) => {
        try {
          const { host, port } = parseListen(s);
          return Number.isInteger(port) && port >= 0 && port <= 65535 && host !== '' && !/[\s\]]/.test(host);
        } catch (e) {
          return e instanceof ListenAddressError;
        }
      }),
    );
    fc.assert(
      fc.property(fc.ipV4(), fc.integer({ min: 0, max: 65535 }), (h, p) => {
        const r = parseListen(`${h}:${p}`);
        return r.host === h && r.port === p;
      }),
    );
  });

  it('property: formatHostPort is the inverse of parseListen for IPv4, IPv6 and names', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6(), fc.domain()), fc.integer({ min: 0, max: 65535 }), (h, p) => {
        const text = formatHostPort(h, p);
        assert.deepEqual(parseListen(text), { host: h, port: p });
        assert.equal(h.includes(':'), text.startsWith('['));
      }),
    );
  });

  it('listenOn binds, reports the bound port, and rejects a taken one', async () => {
    const a = http.createServer();
    const b = http.createServer();
    try {
      const bound = await listenOn(a, '127.0.0.1:0');
      assert.ok(bound.port > 0);
      assert.equal(bound.url, `http://127.0.0.1:${bound.port}`);
      await assert.rejects(listenOn(b, `127.0.0.1:${bound.port}`), /EADDRINUSE/);
      await assert.rejects(listenOn(b, 'nope'), ListenAddressError);
    } finally {
      a.close();
      b.close();
    }
  });
});

describe('readBody', () => {
  it('reads a body of exactly the limit', async () => {
    const s = new PassThrough();
    const p = readBody(s, 6);
    s.write('abc');
    s.end('def');
    assert.deepEqual(await p, { ok: true, body: Buffer.from('abcdef') });
  });

  it('refuses a declared length over the limit before reading a byte', async () => {
    const s = new PassThrough();
    assert.deepEqual(await readBody(s, 5, '6'), { ok: false, reason: 'too_large' });
  });

  it('refuses a body that grows past the limit and drains the rest', async () => {
    const s = new PassThrough();
    const p = readBody(s, 5);
    s.write('abc');
    s.write('def');
    assert.deepEqual(await p, { ok: false, reason: 'too_large' });
    s.write('more');
    s.end();
    await new Promise((r) => s.once('end', r));
    assert.equal(s.readableEnded, true, 'the rest was drained');
  });

  it('reports a stream that fails or closes before its end as aborted', async () => {
    const s = new PassThrough();
    const p = readBody(s, 100);
    s.write('abc');
    s.destroy(new Error('reset'));
    assert.deepEqual(await p, { ok: false, reason: 'aborted' });
  });
});
