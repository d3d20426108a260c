import { startTcpEchoServer } from '@kars/kube-core/testing';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, request, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { spawn } from 'node:child_process';
import { lookup as dnsLookup } from 'node:dns/promises';
import { FakeClock } from '@kars/kube-core';
import type { EgressEntry, PolicySnapshot } from '../snapshot.js';
import { parseAuthority, startEgressProxy, type EgressDecision, type EgressProxy } from './proxy.js';

/** Socket tests fail instead of hanging when bytes never arrive. */
const T = { timeout: 5000 };

// Only 127.0.0.1 and localhost are ever contacted: this machine has no network.

/** A name the test's resolver answers with 127.0.0.1 (`.invalid`: the system resolver never would). */
const REBIND = 'rebind.invalid';

function snap(egress: EgressEntry[]): PolicySnapshot {
  return { inference: undefined, tools: [], egress, loadedAtMs: 0, refused: {} };
}

async function listen(server: NetServer | HttpServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function closeServer(server: NetServer | HttpServer, sockets: Set<Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

/** An HTTP server that records what it received. */
async function httpTarget(): Promise<{
  port: number;
  seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }>;
  close(): Promise<void>;
}> {
  const seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }> = [];
  const sockets = new Set<Socket>();
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { 'content-type': 'text/plain', 'x-target': 'yes' });
      res.end(`hello from target: ${req.method} ${req.url}`);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listen(server);
  return { port, seen, close: () => closeServer(server, sockets) };
}

/** Send a raw CONNECT and read the response head; the socket stays open for tunnelled bytes. */
function rawConnect(
  proxyPort: number,
  target: string,
  pipelined = '',
): Promise<{ socket: Socket; status: number; head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const i = buf.indexOf('\r\n\r\n');
      if (i < 0) return;
      socket.off('data', onData);
      socket.pause();
      const head = buf.subarray(0, i).toString();
      resolve({ socket, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), head, rest: buf.subarray(i + 4) });
    };
    socket.on('data', onData);
    socket.on('error', reject);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n${pipelined}`);
  });
}

/** Read a socket to its end. */
function readToEnd(socket: Socket, first: Buffer = Buffer.alloc(0)): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks = [first];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('error', reject);
    socket.resume();
  });
}

/** Read exactly n bytes from a socket. */
function readBytes(socket: Socket, n: number, first: Buffer = Buffer.alloc(0)): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = first;
    const check = (): void => {
      if (buf.length >= n) {
        socket.off('data', onData);
        resolve(buf.subarray(0, n).toString());
      }
    };
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      check();
    };
    socket.on('data', onData);
    socket.on('error', reject);
    socket.resume();
    check();
  });
}

/** GET an absolute URI through the proxy. */
function proxiedGet(
  proxyPort: number,
  absoluteUri: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: 'GET',
        path: absoluteUri,
        headers: { host: new URL(absoluteUri).host, ...headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function deniedBody(host: string, port: number): string {
  const hp = `${host}:${port}`;
  return JSON.stringify({
    error: `egress to ${hp} is not allowed for sandbox sb1; request a temporary approval with: kars egress allow-extra sb1 --host ${hp} --ttl PT1H --reason "..."`,
  });
}

/** The decision headers of a raw CONNECT answer head. */
function decisionOf(head: string): { decision?: string; byKind?: string; code?: string } {
  const get = (name: string): string | undefined => new RegExp(`^${name}: (.*)$`, 'im').exec(head)?.[1]?.trim();
  const out: { decision?: string; byKind?: string; code?: string } = {};
  const decision = get('x-kars-decision');
  const byKind = get('x-kars-decision-by-kind');
  const code = get('x-kars-decision-code');
  if (decision !== undefined) out.decision = decision;
  if (byKind !== undefined) out.byKind = byKind;
  if (code !== undefined) out.code = code;
  return out;
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const probe = createNetServer();
  const port = await listen(probe);
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

/**
 * A loopback port whose TCP connects never complete: a child process listens with backlog 1 and
 * then blocks its event loop, so it never accepts; two filler connections fill the kernel's
 * accept queue and the kernel drops every later SYN (Linux: `sk_acceptq_is_full`).
 */
async function blackhole(): Promise<{ port: number; close(): void }> {
  const code =
    "const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>{process.stdout.write(s.address().port+'\\n');Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0);});";
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  const fillers: Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const f = connect(port, '127.0.0.1');
    f.on('error', () => undefined);
    await new Promise((r) => f.once('connect', r));
    fillers.push(f);
  }
  return {
    port,
    close: () => {
      for (const f of fillers) f.destroy();
      child.kill('SIGKILL');
    },
  };
}

describe('egress proxy', () => {
  let echo: Awaited<ReturnType<typeof startTcpEchoServer>>;
  let web: Awaited<ReturnType<typeof httpTarget>>;
  let proxy: EgressProxy;
  let current: PolicySnapshot;
  let reads = 0;
  const decisions: EgressDecision[] = [];
  const clock = new FakeClock(0, 1_700_000_000_000);
  /**
   * The allowlist: the echo server by the baseline, the web target by an approval valid for 60 s
   * from now. The baseline lists `localhost` (on a port nothing uses), which is what lets an
   * approval open that special name (ADR 0045).
   */
  const allowlist = (): PolicySnapshot =>
    snap([
      { host: '127.0.0.1', port: echo.port },
      { host: 'localhost', port: 1 },
      { host: 'LOCALHOST', port: web.port, approval: 'web-approval', expiresAtMs: clock.wallNow() + 60_000 },
    ]);

  before(async () => {
    echo = await startTcpEchoServer();
    web = await httpTarget();
    current = allowlist();
    proxy = await startEgressProxy({
      listen: '127.0.0.1:0',
      sandbox: 'sb1',
      clock,
      snapshot: () => {
        reads++;
        return current;
      },
      onDecision: (d) => decisions.push(d),
    });
  });
  after(async () => {
    await proxy.close();
    await echo.close();
    await web.close();
  });

  it('tunnels CONNECT to an allowed host:port and round-trips bytes both ways', T, async () => {
    const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
    assert.equal(c.status, 200);
    c.socket.write('ping-1');
    assert.equal(await readBytes(c.socket, 6, c.rest), 'ping-1');
    c.socket.write('and more bytes');
    assert.equal(await readBytes(c.socket, 14), 'and more bytes');
    c.socket.destroy();
  });

  it('delivers bytes pipelined right after the CONNECT request', T, async () => {
    const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`, 'early');
    assert.equal(c.status, 200);
    assert.equal(await readBytes(c.socket, 5, c.rest), 'early');
    c.socket.destroy();
  });

  it('answers CONNECT to a host:port not in the allowlist with 403, a flat JSON error and how to ask, without connecting', T, async () => {
    const before = echo.connections();
    const c = await rawConnect(proxy.port, `127.0.0.1:${web.port}`);
    assert.equal(c.status, 403);
    assert.match(c.head, /content-type: application\/json/i);
    assert.deepEqual(decisionOf(c.head), { decision: 'blocked', byKind: 'EgressAllowlist', code: 'egress_not_allowed' });
    assert.equal(await readToEnd(c.socket, c.rest), deniedBody('127.0.0.1', web.port));
    const d = await rawConnect(proxy.port, `localhost:${echo.port}`);
    assert.equal(d.status, 403, 'localhost is not 127.0.0.1: names are compared, not resolved');
    d.socket.destroy();
    assert.equal(echo.connections(), before);
  });

  it('answers a CONNECT target that is not host:port with 400', T, async () => {
    const c = await rawConnect(proxy.port, 'no-port-here');
    assert.equal(c.status, 400);
    c.socket.destroy();
  });

  it('forwards a plain HTTP absolute-URI GET to an allowed host, with the URI host as Host and no proxy headers', T, async () => {
    const r = await proxiedGet(proxy.port, `http://localhost:${web.port}/path?q=1`, {
      'proxy-authorization': 'Basic secret',
      'x-custom': 'kept',
    });
    assert.equal(r.status, 200);
    assert.equal(r.body, 'hello from target: GET /path?q=1');
    assert.equal(r.headers['x-target'], 'yes');
    const seen = web.seen.at(-1)!;
    assert.equal(seen.url, '/path?q=1');
    assert.equal(seen.headers['host'], `localhost:${web.port}`);
    assert.equal(seen.headers['x-custom'], 'kept');
    assert.equal(seen.headers['proxy-authorization'], undefined);
    assert.deepEqual(decisions.at(-1), {
      sandbox: 'sb1',
      host: 'localhost',
      port: web.port,
      via: 'HTTP',
      allowed: true,
      decision: 'allowed',
      approval: 'web-approval',
    });
  });

  it('answers a plain HTTP GET to a host not in the allowlist with 403 and never contacts it', T, async () => {
    const before = web.seen.length;
    const r = await proxiedGet(proxy.port, `http://127.0.0.1:${web.port}/secret`);
    assert.equal(r.status, 403);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['x-kars-decision'], 'blocked');
    assert.equal(r.headers['x-kars-decision-by-kind'], 'EgressAllowlist');
    assert.equal(r.headers['x-kars-decision-code'], 'egress_not_allowed');
    assert.equal(r.headers['x-kars-decision-reason'], JSON.parse(deniedBody('127.0.0.1', web.port)).error);
    assert.equal(r.body, deniedBody('127.0.0.1', web.port));
    assert.equal(web.seen.length, before);
  });

  it('treats an absolute URI naming the proxy itself like any other host:port (denied, no loop)', T, async () => {
    const r = await proxiedGet(proxy.port, `http://127.0.0.1:${proxy.port}/`);
    assert.equal(r.status, 403);
    assert.equal(r.body, deniedBody('127.0.0.1', proxy.port));
  });

  it('answers an origin-form request (not a proxy request) with 400', T, async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const s = connect(proxy.port, '127.0.0.1', () => s.write('GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
      void readToEnd(s).then(resolve, reject);
    });
    assert.match(raw, /^HTTP\/1\.1 400 /);
    assert.match(raw, /send an absolute http:\/\/ URI/);
  });

  it('counts allowed uses per host:port and not denied attempts', T, async () => {
    const before = proxy.usage();
    const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
    c.socket.destroy();
    await proxiedGet(proxy.port, `http://localhost:${web.port}/a`);
    await proxiedGet(proxy.port, `http://LocalHost:${web.port}/b`);
    await proxiedGet(proxy.port, `http://127.0.0.1:${web.port}/denied`);
    const after = proxy.usage();
    assert.equal((after[`127.0.0.1:${echo.port}`] ?? 0) - (before[`127.0.0.1:${echo.port}`] ?? 0), 1);
    assert.equal((after[`localhost:${web.port}`] ?? 0) - (before[`localhost:${web.port}`] ?? 0), 2);
    assert.equal(after[`127.0.0.1:${web.port}`], undefined);
  });

  it('denies an approval entry once it has expired, checking expiresAt itself', T, async () => {
    try {
      current = allowlist();
      clock.advance(59_999);
      assert.equal((await proxiedGet(proxy.port, `http://localhost:${web.port}/just-in-time`)).status, 200);
      clock.advance(1);
      const r = await proxiedGet(proxy.port, `http://localhost:${web.port}/late`);
      assert.equal(r.status, 403);
    } finally {
      current = allowlist();
    }
  });

  it('takes the snapshot once per connection: an open tunnel survives a reload, a new CONNECT sees it', T, async () => {
    const saved = current;
    const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
    try {
      const readsBefore = reads;
      current = snap([]);
      c.socket.write('still-open');
      assert.equal(await readBytes(c.socket, 10, c.rest), 'still-open');
      assert.equal(reads, readsBefore, 'tunnelled bytes take no snapshot');
      const d = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
      assert.equal(d.status, 403);
      d.socket.destroy();
    } finally {
      c.socket.destroy();
      current = saved;
    }
  });

  it('survives clients that reset tunnels, send garbage or vanish mid-request', T, async () => {
    const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
    c.socket.resetAndDestroy();
    const garbage = connect(proxy.port, '127.0.0.1');
    garbage.on('error', () => undefined);
    garbage.write('\x00\x01 not http at all\r\n\r\n');
    const half = connect(proxy.port, '127.0.0.1');
    half.on('error', () => undefined);
    half.write(`POST http://localhost:${web.port}/upload HTTP/1.1\r\nHost: localhost:${web.port}\r\nContent-Length: 100\r\n\r\nonly-part`);
    await new Promise((r) => setTimeout(r, 50));
    half.resetAndDestroy();
    garbage.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const again = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
    assert.equal(again.status, 200);
    again.socket.write('alive');
    assert.equal(await readBytes(again.socket, 5, again.rest), 'alive');
    again.socket.destroy();
  });

  it('answers 502 upstream_unreachable (decision error) when an allowed target refuses the connection', T, async () => {
    const deadPort = await closedPort();
    const saved = current;
    current = snap([{ host: '127.0.0.1', port: deadPort }]);
    try {
      const c = await rawConnect(proxy.port, `127.0.0.1:${deadPort}`);
      assert.equal(c.status, 502);
      assert.match(c.head, /^HTTP\/1\.1 502 Bad Gateway/);
      assert.deepEqual(decisionOf(c.head), { decision: 'error', code: 'upstream_unreachable' });
      assert.equal(
        await readToEnd(c.socket, c.rest),
        JSON.stringify({ error: `egress to 127.0.0.1:${deadPort} is allowed, but the target cannot be reached (ECONNREFUSED)` }),
      );
      const r = await proxiedGet(proxy.port, `http://127.0.0.1:${deadPort}/`);
      assert.equal(r.status, 502);
      assert.equal(r.headers['x-kars-decision'], 'error');
      assert.equal(r.headers['x-kars-decision-by-kind'], undefined, 'no policy decided this');
      assert.equal(r.headers['x-kars-decision-code'], 'upstream_unreachable');
      assert.match(r.body, /ECONNREFUSED/);
    } finally {
      current = saved;
    }
  });
});

describe('egress proxy: a policy refusal is told apart from a network failure (issue 24 item 4)', () => {
  let proxy: EgressProxy;
  let current: PolicySnapshot;
  const clock = new FakeClock(0, 1_700_000_000_000);
  const approved = (host: string, port: number): EgressEntry => ({
    host,
    port,
    approval: 'net-approval',
    expiresAtMs: clock.wallNow() + 3_600_000,
  });

  let echo: Awaited<ReturnType<typeof startTcpEchoServer>>;

  before(async () => {
    current = snap([]);
    echo = await startTcpEchoServer();
    proxy = await startEgressProxy({
      listen: '127.0.0.1:0',
      sandbox: 'sb1',
      clock,
      snapshot: () => current,
      connectTimeoutMs: 150,
      // One name resolves to loopback as a rebinding DNS server would answer; the rest go to the system resolver.
      lookup: (h) => (h === REBIND ? Promise.resolve([{ address: '127.0.0.1' }]) : dnsLookup(h, { all: true, verbatim: true })),
    });
  });
  after(async () => {
    await proxy.close();
    await echo.close();
  });

  it('answers an approved name that does not resolve with 502 upstream_unresolvable, on CONNECT and on plain HTTP', T, async () => {
    current = snap([approved('nothing-here.invalid', 443), approved('nothing-here.invalid', 80)]);
    const c = await rawConnect(proxy.port, 'nothing-here.invalid:443');
    assert.equal(c.status, 502);
    assert.deepEqual(decisionOf(c.head), { decision: 'error', code: 'upstream_unresolvable' });
    const body = JSON.parse(await readToEnd(c.socket, c.rest)) as { error: string };
    assert.match(
      body.error,
      /^egress to nothing-here\.invalid:443 is allowed, but nothing-here\.invalid does not resolve \((ENOTFOUND|EAI_AGAIN|EAI_FAIL|ENODATA)\)$/,
    );
    const r = await proxiedGet(proxy.port, 'http://nothing-here.invalid/x');
    assert.equal(r.status, 502);
    assert.equal(r.headers['x-kars-decision'], 'error');
    assert.equal(r.headers['x-kars-decision-code'], 'upstream_unresolvable');
    assert.match(r.headers['x-kars-decision-reason'] as string, /does not resolve/);
    assert.match(r.body, /nothing-here\.invalid does not resolve/);
  });

  it('keeps an unapproved name 403 whether or not it resolves: the answer reveals nothing about DNS', T, async () => {
    current = snap([approved('nothing-here.invalid', 443)]);
    // Same name, unapproved port; an unapproved name that does not resolve; one that does (localhost).
    for (const [host, port] of [
      ['nothing-here.invalid', 8443],
      ['other.invalid', 443],
      ['localhost', 443],
    ] as const) {
      const c = await rawConnect(proxy.port, `${host}:${port}`);
      assert.equal(c.status, 403, `${host}:${port}`);
      assert.deepEqual(decisionOf(c.head), { decision: 'blocked', byKind: 'EgressAllowlist', code: 'egress_not_allowed' });
      assert.equal(await readToEnd(c.socket, c.rest), deniedBody(host, port));
      const r = await proxiedGet(proxy.port, `http://${host}:${port}/`);
      assert.equal(r.status, 403, `${host}:${port} over HTTP`);
      assert.equal(r.headers['x-kars-decision'], 'blocked');
      assert.equal(r.body, deniedBody(host, port));
    }
  });

  it(
    'keeps an approved ordinary name that resolves only to special addresses 403 egress_special_address (a policy refusal)',
    T,
    async () => {
      const port = await closedPort();
      current = snap([approved(REBIND, port)]);
      const c = await rawConnect(proxy.port, `${REBIND}:${port}`);
      assert.equal(c.status, 403);
      assert.deepEqual(decisionOf(c.head), { decision: 'blocked', byKind: 'EgressAllowlist', code: 'egress_special_address' });
      assert.match(await readToEnd(c.socket, c.rest), /resolves only to special addresses/);
    },
  );

  it('lets that name reach its special address once the baseline lists the name, or the address (ADR 0045)', T, async () => {
    for (const listed of [REBIND, '127.0.0.1']) {
      current = snap([{ host: listed, port: 1 }, approved(REBIND, echo.port)]);
      const c = await rawConnect(proxy.port, `${REBIND}:${echo.port}`);
      assert.equal(c.status, 200, `baseline lists ${listed}`);
      c.socket.write('rebound');
      assert.equal(await readBytes(c.socket, 7, c.rest), 'rebound');
      c.socket.destroy();
    }
  });

  it('ignores an approval for a special name the baseline does not list: 403 egress_not_allowed, never resolved', T, async () => {
    // The baseline lists the address localhost resolves to, not the name: the approval opens nothing.
    current = snap([{ host: '127.0.0.1', port: 1 }, approved('localhost', echo.port)]);
    const before = echo.connections();
    const c = await rawConnect(proxy.port, `localhost:${echo.port}`);
    assert.equal(c.status, 403);
    assert.deepEqual(decisionOf(c.head), { decision: 'blocked', byKind: 'EgressAllowlist', code: 'egress_not_allowed' });
    c.socket.destroy();
    assert.equal(echo.connections(), before);
  });

  it('answers 504 upstream_timeout when an allowed target does not complete the connect within the timeout', T, async () => {
    const hole = await blackhole();
    try {
      current = snap([{ host: '127.0.0.1', port: hole.port }]);
      const c = await rawConnect(proxy.port, `127.0.0.1:${hole.port}`);
      assert.equal(c.status, 504);
      assert.match(c.head, /^HTTP\/1\.1 504 Gateway Timeout/);
      assert.deepEqual(decisionOf(c.head), { decision: 'error', code: 'upstream_timeout' });
      assert.equal(
        await readToEnd(c.socket, c.rest),
        JSON.stringify({ error: `egress to 127.0.0.1:${hole.port} is allowed, but the target did not answer within 150 ms` }),
      );
      const r = await proxiedGet(proxy.port, `http://127.0.0.1:${hole.port}/`);
      assert.equal(r.status, 504);
      assert.equal(r.headers['x-kars-decision'], 'error');
      assert.equal(r.headers['x-kars-decision-code'], 'upstream_timeout');
    } finally {
      hole.close();
    }
  });

  it('answers 504 upstream_timeout when an allowed HTTP target accepts but never sends a response head', T, async () => {
    const sockets = new Set<Socket>();
    const mute = createNetServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
      s.resume();
    });
    const port = await listen(mute);
    try {
      current = snap([{ host: '127.0.0.1', port }]);
      const r = await proxiedGet(proxy.port, `http://127.0.0.1:${port}/`);
      assert.equal(r.status, 504);
      assert.equal(r.headers['x-kars-decision-code'], 'upstream_timeout');
    } finally {
      await closeServer(mute, sockets);
    }
  });
});

describe('egress proxy with an empty allowlist', () => {
  it('denies every CONNECT and every plain HTTP request', T, async () => {
    const echo = await startTcpEchoServer();
    const web = await httpTarget();
    const proxy = await startEgressProxy({ listen: '127.0.0.1:0', sandbox: 'sb1', snapshot: () => snap([]) });
    try {
      const c = await rawConnect(proxy.port, `127.0.0.1:${echo.port}`);
      assert.equal(c.status, 403);
      assert.equal(await readToEnd(c.socket, c.rest), deniedBody('127.0.0.1', echo.port));
      assert.equal((await proxiedGet(proxy.port, `http://127.0.0.1:${web.port}/`)).status, 403);
      assert.equal((await proxiedGet(proxy.port, `http://localhost:${web.port}/`)).status, 403);
      assert.equal(echo.connections(), 0);
      assert.equal(web.seen.length, 0);
      assert.deepEqual(proxy.usage(), {});
    } finally {
      await proxy.close();
      await echo.close();
      await web.close();
    }
  });
});

describe('parseAuthority', () => {
  it('reads host:port and [v6]:port, and refuses anything else', () => {
    assert.deepEqual(parseAuthority('Example.com:443'), { host: 'example.com', port: 443 });
    assert.deepEqual(parseAuthority('[::1]:8443'), { host: '::1', port: 8443 });
    assert.equal(parseAuthority('example.com'), undefined);
    assert.equal(parseAuthority('example.com:0'), undefined);
    assert.equal(parseAuthority('example.com:70000'), undefined);
    assert.equal(parseAuthority('exa mple.com:443'), undefined);
    assert.equal(parseAuthority('::1:443'), undefined);
    assert.equal(parseAuthority('user@example.com:443'), undefined);
  });
});
