import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { EventEmitter } from 'node:events';
import { AdmissionGate, admitRequest } from './admission.js';
import { startOpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter } from './testing/policy-dir.js';

describe('AdmissionGate', () => {
  it('refuses a declared length over the per-request limit with 413, and malformed lengths too', () => {
    const g = new AdmissionGate({ maxRequestBodyBytes: 100, maxInflightBodyBytes: 1000, maxConcurrent: 10 });
    for (const v of ['101', '1e3', '-1', ' 5', '99999999999999999999']) {
      const a = g.admit(v);
      assert.equal(a.ok, false, v);
      if (!a.ok) assert.equal(a.status, 413, v);
    }
    assert.deepEqual(g.inFlight, { requests: 0, bodyBytes: 0 });
  });

  it('holds declared bytes (the per-request limit when undeclared) and answers 503 router_busy above the caps; release is idempotent', () => {
    const g = new AdmissionGate({ maxRequestBodyBytes: 100, maxInflightBodyBytes: 250, maxConcurrent: 3 });
    const a = g.admit('100');
    const b = g.admit(undefined);
    assert.ok(a.ok && b.ok);
    const c = g.admit('60');
    assert.equal(c.ok, false, '200 + 60 > 250');
    if (!c.ok) assert.equal(c.code, 'router_busy');
    const d = g.admit('50');
    assert.ok(d.ok);
    const e = g.admit('0');
    assert.equal(e.ok, false, 'three in flight');
    a.release();
    a.release();
    assert.deepEqual(g.inFlight, { requests: 2, bodyBytes: 150 });
  });

  it('holds no body bytes for a request with neither content-length nor transfer-encoding (an MCP GET stream), the limit for a chunked one', () => {
    const g = new AdmissionGate({ maxRequestBodyBytes: 100, maxInflightBodyBytes: 100, maxConcurrent: 10 });
    const res = (): http.ServerResponse => new EventEmitter() as unknown as http.ServerResponse;
    const req = (headers: http.IncomingHttpHeaders): http.IncomingMessage => ({ headers }) as http.IncomingMessage;
    for (let i = 0; i < 5; i++) assert.equal(admitRequest(g, req({}), res()), true, `bodiless request ${i}`);
    const chunked = res();
    assert.equal(admitRequest(g, req({ 'transfer-encoding': 'chunked' }), chunked), true);
    // the chunked one holds the whole 100: nothing with a body fits beside it
    assert.equal(g.admit('1').ok, false);
    chunked.emit('close');
    assert.equal(g.admit('1').ok, true);
  });

  it('refuses a configuration whose in-flight cap is below the per-request limit', () => {
    assert.throws(() => new AdmissionGate({ maxRequestBodyBytes: 100, maxInflightBodyBytes: 99 }), RangeError);
  });
});

describe('router admission over HTTP', () => {
  it('answers 413 to a declared 11 MiB body before a byte of it is sent, and 503 router_busy over the concurrency cap', async () => {
    const stub = await startOpenAIStub();
    stub.setBehaviour({ delayMs: 400 });
    const r = await startDirRouter({ inference: budgetPolicy({}) }, { upstream: stub.url, maxConcurrentRequests: 2 });
    try {
      const { port } = new URL(r.router.url);
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { 'content-type': 'application/json', 'content-length': 11 * 1024 * 1024 },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.flushHeaders(); // headers only: the body is never sent
      });
      assert.equal(status, 413);
      const send = (): Promise<number> =>
        fetch(`${r.router.url}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","messages":[]}' }).then((x) => x.status);
      const statuses = await Promise.all([send(), send(), send(), send()]);
      assert.deepEqual([...statuses].sort(), [200, 200, 503, 503]);
    } finally {
      await r.stop();
      await stub.close();
    }
  });
});
