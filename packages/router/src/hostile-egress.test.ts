/**
 * Regression tests for issue 9 item 5 against a real router (policy directory, egress proxy) with
 * real CONNECT tunnels: tunnels end on time, and approvals cannot open wildcards or special addresses.
 */
import { startTcpEchoServer } from '@kars/kube-core/testing';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { FakeClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';
import { startOpenAIStub } from './stubs/openai.js';
import { startDirRouter, type DirRouter } from './testing/policy-dir.js';

/** Open a CONNECT tunnel; resolves with the socket after `200`, or the status line when refused. */
function connectVia(
  proxyUrl: string,
  target: string,
): Promise<{ ok: true; socket: net.Socket } | { ok: false; status: number; body: string }> {
  const u = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    let buf = '';
    s.on('error', reject);
    const onData = (c: Buffer): void => {
      buf += c.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = Number(buf.slice(9, 12));
      s.off('data', onData);
      if (status === 200) resolve({ ok: true, socket: s });
      else {
        s.on('data', (d: Buffer) => (buf += d.toString('latin1')));
        s.on('close', () => resolve({ ok: false, status, body: buf.slice(end + 4) }));
      }
    };
    s.on('data', onData);
  });
}

/** Send `msg` through an echoing tunnel and resolve with what came back. */
function roundTrip(s: net.Socket, msg: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (d: Buffer): void => {
      got += d.toString('latin1');
      if (got.length >= msg.length) {
        s.off('data', onData);
        s.off('close', onClose);
        resolve(got);
      }
    };
    const onClose = (): void => reject(new Error(`tunnel closed after ${JSON.stringify(got)}`));
    s.on('data', onData);
    s.once('close', onClose);
    s.write(msg);
  });
}

/** Keep traffic flowing through the tunnel; resolves with the time the tunnel closed. */
function pingUntilClosed(s: net.Socket): Promise<number> {
  return new Promise((resolve) => {
    let echoed = 0;
    s.on('data', () => echoed++);
    const t = setInterval(() => {
      if (!s.destroyed) s.write('ping');
    }, 50);
    s.once('close', () => {
      clearInterval(t);
      assert.ok(echoed > 0, 'the tunnel carried traffic');
      resolve(Date.now());
    });
    s.on('error', () => undefined);
  });
}

const iso = (ms: number): string => new Date(ms).toISOString();

describe('hostile agent vs egress (issue 9 item 5)', { timeout: 60_000 }, () => {
  async function rig(
    approvals: Record<string, { hosts: Array<{ host: string; port: number }>; expiresAt: string }>,
    echoPort: number,
    clock?: Clock,
  ): Promise<DirRouter> {
    const stub = await startOpenAIStub();
    const r = await startDirRouter(
      { baseline: [{ host: '127.0.0.1', port: 1 }], approvals },
      { upstream: stub.url, egressListen: '127.0.0.1:0', ...(clock ? { clock } : {}) },
    );
    const stop = r.stop;
    r.stop = async () => {
      await stop();
      await stub.close();
    };
    void echoPort;
    return r;
  }

  it('closes a CONNECT tunnel carrying traffic within 1 s of its approval expiring (hole: the tunnel kept carrying traffic after expiry)', async () => {
    // Virtual time (ADR 0016): the router's clock decides expiry and runs the egress sweep.
    const clock = new FakeClock(0, Date.now());
    const echo = await startTcpEchoServer();
    const expiresAt = clock.wallNow() + 60_000;
    const r = await rig({ tmp: { hosts: [{ host: '127.0.0.1', port: echo.port }], expiresAt: iso(expiresAt) } }, echo.port, clock);
    try {
      const c = await connectVia(r.router.egressUrl!, `127.0.0.1:${echo.port}`);
      assert.ok(c.ok, `tunnel refused: ${JSON.stringify(c)}`);
      c.socket.on('error', () => undefined);
      for (let left = 60_000; left > 1; left -= 10_000) {
        clock.advance(Math.min(10_000, left - 1));
        assert.equal(
          await roundTrip(c.socket, 'ping'),
          'ping',
          `the tunnel carries traffic ${expiresAt - clock.wallNow()} ms before expiry`,
        );
      }
      assert.equal(expiresAt - clock.wallNow(), 1, 'open 1 ms before the expiry');
      // Step virtual time by 50 ms past the expiry until a round trip fails: the sweep has closed it.
      let closedAfterMs: number | undefined;
      while (closedAfterMs === undefined && clock.wallNow() - expiresAt < 5000) {
        clock.advance(50);
        await roundTrip(c.socket, 'ping').catch(() => (closedAfterMs = clock.wallNow() - expiresAt));
      }
      assert.ok(closedAfterMs !== undefined && closedAfterMs <= 1000, `closed ${closedAfterMs} ms after the expiry`);
      const again = await connectVia(r.router.egressUrl!, `127.0.0.1:${echo.port}`);
      assert.equal(again.ok, false);
    } finally {
      await r.stop();
      await echo.close();
    }
  });

  it('closes a CONNECT tunnel within 1 s of the router loading the revocation of its approval', async (t) => {
    const echo = await startTcpEchoServer();
    const r = await rig({ tmp: { hosts: [{ host: '127.0.0.1', port: echo.port }], expiresAt: iso(Date.now() + 3_600_000) } }, echo.port);
    try {
      const c = await connectVia(r.router.egressUrl!, `127.0.0.1:${echo.port}`);
      assert.ok(c.ok, `tunnel refused: ${JSON.stringify(c)}`);
      const closed = pingUntilClosed(c.socket);
      await new Promise((res) => setTimeout(res, 300));
      r.setApproval('tmp', undefined);
      let loadedAt = 0;
      while (r.router.state.current().egress.some((e) => e.approval === 'tmp')) await new Promise((res) => setTimeout(res, 5));
      loadedAt = Date.now();
      const closedAt = await closed;
      t.diagnostic(`tunnel closed ${closedAt - loadedAt} ms after the router loaded the revocation`);
      assert.ok(closedAt - loadedAt <= 1000, `closed ${closedAt - loadedAt} ms after the revocation was loaded`);
    } finally {
      await r.stop();
      await echo.close();
    }
  });

  for (const [label, host, target] of [
    ['169.254.169.254', '169.254.169.254', '169.254.169.254:80'],
    ['169.254.169.254 spelled in decimal', '2852039166', '169.254.169.254:80'],
    ['169.254.169.254 spelled in hex', '0xa9.0xfe.0xa9.0xfe', '2852039166:80'],
    ['169.254.169.254 as IPv4-mapped IPv6', '::ffff:169.254.169.254', '[::ffff:a9fe:a9fe]:80'],
    ['the private address 10.0.0.1', '10.0.0.1', '10.0.0.1:80'],
    ['*.com', '*.com', 'example.com:80'],
    ['*', '*', 'example.com:80'],
  ] as const) {
    it(`an approval for ${label} opens nothing (hole: approvals for *, *.com and 169.254.169.254 were accepted)`, async () => {
      const r = await rig({ bad: { hosts: [{ host, port: 80 }], expiresAt: iso(Date.now() + 3_600_000) } }, 0);
      try {
        const c = await connectVia(r.router.egressUrl!, target);
        assert.equal(c.ok, false, `${target} was tunnelled`);
        if (!c.ok) assert.equal(c.status, 403, c.body);
      } finally {
        await r.stop();
      }
    });
  }

  it('an approval for a special name the baseline does not list opens nothing, and the name is never resolved (ADR 0045)', async () => {
    const echo = await startTcpEchoServer();
    // localhost is a special name; the baseline does not list it.
    const stub = await startOpenAIStub();
    const r = await startDirRouter(
      {
        baseline: [{ host: 'example.org', port: 443 }],
        approvals: { loop: { hosts: [{ host: 'localhost', port: echo.port }], expiresAt: iso(Date.now() + 3_600_000) } },
      },
      { upstream: stub.url, egressListen: '127.0.0.1:0' },
    );
    try {
      const c = await connectVia(r.router.egressUrl!, `localhost:${echo.port}`);
      assert.equal(c.ok, false);
      if (!c.ok) {
        assert.equal(c.status, 403);
        assert.match(c.body, /egress to localhost:\d+ is not allowed/);
      }
      assert.equal(echo.connections(), 0, 'nothing reached the echo server');
    } finally {
      await r.stop();
      await stub.close();
      await echo.close();
    }
  });
});
