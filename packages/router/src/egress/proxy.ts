/**
 * The egress forward proxy: the sandbox's only way out at L7. It speaks
 * - `CONNECT host:port` (HTTPS and any other TCP): tunnelled with `net.connect` when allowed;
 * - plain HTTP with an absolute URI (`GET http://host:port/path`): forwarded when allowed.
 * A target not in the allowlist (see {@link isAllowed}) gets **403** with a flat JSON body
 * `{"error": "egress to <host>:<port> is not allowed for sandbox <sb>; request a temporary approval with: kars egress allow-extra ..."}`.
 * An allowed target that cannot be reached gets **502** (the name does not resolve, the connection
 * is refused or reset) or **504** (no connection within the connect timeout). Every such answer
 * carries the decision headers, `x-kars-decision: blocked|error` and a stable
 * `x-kars-decision-code` (`answers.ts` lists them), so a client can tell a policy refusal from a
 * network failure.
 *
 * Guarantees:
 * - The snapshot is taken once per CONNECT and once per plain HTTP request to decide. Open tunnels
 *   and forwarded requests are re-checked against the current snapshot and clock every
 *   {@link SWEEP_INTERVAL_MS}: when the approval that admitted one has expired or was revoked (and
 *   nothing else admits the target) its sockets are destroyed, within 1 s of the expiry or of the
 *   router loading the revocation (issue 9 item 5).
 * - The target is never contacted (nor resolved) before the decision, which is made on the name
 *   or the canonical address literal.
 * - **Resolve once, connect to the checked address** (ADR 0014, ADR 0045): an allowed name is
 *   resolved once; addresses that are special (loopback, private, link-local, metadata, ...) are
 *   dropped unless a baseline entry admitted the name, or the baseline lists the name or that
 *   address (`@kars/policy-api` `resolvedAddressProblem`, the one egress rule); the proxy connects to the
 *   first remaining address itself, so a DNS answer that changes between check and connect
 *   (rebinding) cannot steer it elsewhere. No acceptable address → 403; no address at all
 *   (the name does not resolve) → 502. The policy check comes first: a target that is not
 *   allowed is 403 whether or not it resolves, and is never resolved.
 * - Client errors, resets and half-finished requests never throw out of the server: every socket
 *   has an error handler and a failed side tears down the other.
 *
 * Caveats: Absolute `https://` URIs (TLS-terminating proxying) and protocol upgrades over plain HTTP are
 * refused with 400/501: use CONNECT. Usage counts live in memory and only count allowed uses.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { lookup } from 'node:dns/promises';
import { connect, isIP, type Socket } from 'node:net';
import { canonicalHost } from '@kars/policy-api';
import { formatHostPort, listenOn, parseListen, systemClock } from '@kars/kube-core';
import type { Clock, Timer } from '@kars/kube-core';
import { endToEndHeaders } from '../http/headers.js';
import type { Duplex } from 'node:stream';
import type { EgressEntry, SnapshotSource } from '../snapshot.js';
import { isAllowed, normalizeHost, pickAddress } from './allow.js';
import {
  answerHeaders,
  answerJson,
  connectFailure,
  connectTimeout,
  notAllowed,
  specialAddress,
  unresolvable,
  type EgressAnswer,
} from './answers.js';

import { cut } from '../decisions/record.js';
import type { DecisionRecorder } from '../decisions/recorder.js';
export { deniedMessage } from './answers.js';

/** How often open tunnels and forwarded requests are re-checked against the current policy. */
export const SWEEP_INTERVAL_MS = 200;

/** One egress decision, for logs and metrics. */
export interface EgressDecision {
  sandbox: string;
  host: string;
  port: number;
  via: 'CONNECT' | 'HTTP';
  allowed: boolean;
  /** The same as `allowed`, as a metrics label. */
  decision: 'allowed' | 'denied';
  /** The approval that allowed it; undefined for the baseline or a denial. */
  approval?: string;
}

export interface EgressProxyOptions {
  /** `host:port`, e.g. `127.0.0.1:3128` or `127.0.0.1:0` for a free port. */
  listen: string;
  snapshot: SnapshotSource;
  sandbox: string;
  /** `wallNow()` (epoch ms) is compared with `expiresAtMs`; the sweep runs on its timers. Default the system clock. */
  clock?: Clock;
  /** Called synchronously per decision; exceptions it throws are swallowed. */
  onDecision?: (d: EgressDecision) => void;
  /** Where each decision's record goes. */
  decisions?: DecisionRecorder;
  /**
   * Give up connecting to a target after this long (504): the TCP connect for CONNECT, the
   * connect and the response head for plain HTTP. Default 10 s.
   */
  connectTimeoutMs?: number;
  /**
   * Resolve a name to its addresses, in the resolver's order. Default `dns.lookup` with
   * `{all: true, verbatim: true}` (the system resolver, as `net.connect` would use).
   */
  lookup?: (host: string) => Promise<ReadonlyArray<{ address: string }>>;
}

export interface EgressProxy {
  /** `http://<host>:<port>`, usable as HTTP_PROXY/HTTPS_PROXY. */
  url: string;
  port: number;
  /** Allowed uses per `host:port` (normalised host; IPv6 in brackets) since start. A copy. */
  usage(): Record<string, number>;
  /** Stop listening and destroy every open connection and tunnel. */
  close(): Promise<void>;
}

const HOSTNAME = /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/i;

/**
 * A target host is a DNS name, an IPv4 literal or an IPv6 literal (no zone id), returned in
 * canonical form (`canonicalHost`); undefined otherwise.
 */
function validHost(raw: string): string | undefined {
  const h = normalizeHost(raw);
  if (h.length === 0 || h.length > 253) return undefined;
  if (!HOSTNAME.test(h) && !h.includes(':')) return undefined;
  const c = canonicalHost(h);
  if (c === undefined || c.kind === 'wildcard') return undefined;
  return c.host;
}

/** Parse a CONNECT authority `host:port` / `[v6]:port`. */
export function parseAuthority(target: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(target);
  if (m === null) return undefined;
  const host = validHost(m[1] ?? '');
  const port = Number(m[2]);
  if (host === undefined || port < 1 || port > 65535) return undefined;
  return { host, port };
}

function rawResponse(socket: Duplex, status: number, reason: string, error: string): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** Answer a CONNECT on its raw socket with an {@link EgressAnswer} (status, decision headers, body). */
function rawAnswer(socket: Duplex, a: EgressAnswer): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = answerJson(a);
  const head = Object.entries(answerHeaders(a, Buffer.byteLength(body)))
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(`HTTP/1.1 ${a.status} ${a.statusText}\r\n${head}connection: close\r\n\r\n${body}`);
}

/** Answer a plain HTTP request with an {@link EgressAnswer}. */
function sendAnswer(res: ServerResponse, a: EgressAnswer): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = answerJson(a);
  res.writeHead(a.status, answerHeaders(a, Buffer.byteLength(body)));
  res.end(body);
}

function jsonResponse(res: ServerResponse, status: number, error: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  parseListen(opts.listen, 'egress proxy listen address');
  const { sandbox } = opts;
  const clock = opts.clock ?? systemClock;
  const now = (): number => clock.wallNow();
  const connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  const resolve = opts.lookup ?? ((host: string) => lookup(host, { all: true, verbatim: true }));
  const counts = new Map<string, number>();
  const open = new Set<Duplex>();
  /** Admitted tunnels and forwarded requests, re-checked by the sweep. */
  const admitted = new Set<{ host: string; port: number; kill: () => void }>();
  let sweep: Timer | undefined;
  const sweepOnce = (): void => {
    sweep = clock.setTimeout(sweepOnce, SWEEP_INTERVAL_MS);
    if (admitted.size === 0) return;
    const entries = opts.snapshot().egress;
    const t = now();
    for (const a of admitted) {
      if (!isAllowed(entries, a.host, a.port, t).allowed) {
        admitted.delete(a);
        a.kill();
      }
    }
  };
  sweep = clock.setTimeout(sweepOnce, SWEEP_INTERVAL_MS);

  /** Track an admitted connection until `sockets` close; the sweep kills it when no longer allowed. */
  function admit(host: string, port: number, kill: () => void, closed: { once(event: 'close', fn: () => void): unknown }): void {
    const a = { host, port, kill };
    admitted.add(a);
    closed.once('close', () => admitted.delete(a));
  }

  /** Resolve `host` once and pick the address to connect to (`pickAddress`; see the module comment). */
  async function resolveChecked(
    host: string,
    port: number,
    admittedBy: EgressEntry,
  ): Promise<{ ok: true; address: string } | { ok: false; answer: EgressAnswer }> {
    if (isIP(host) !== 0) return { ok: true, address: host };
    let addrs: ReadonlyArray<{ address: string }>;
    try {
      addrs = await resolve(host);
    } catch (e) {
      return { ok: false, answer: unresolvable(host, port, (e as NodeJS.ErrnoException).code ?? String(e)) };
    }
    if (addrs.length === 0) return { ok: false, answer: unresolvable(host, port, 'no address') };
    const picked = pickAddress(opts.snapshot().egress, host, admittedBy, addrs);
    return picked.ok ? picked : { ok: false, answer: specialAddress(host, port, picked.why) };
  }

  function track(s: Duplex): void {
    open.add(s);
    s.once('close', () => open.delete(s));
  }

  function decide(host: string, port: number, via: 'CONNECT' | 'HTTP'): { allowed: true; entry: EgressEntry } | { allowed: false } {
    const snapshot = opts.snapshot();
    const v = isAllowed(snapshot.egress, host, port, now());
    const d: EgressDecision = v.allowed
      ? {
          sandbox,
          host,
          port,
          via,
          allowed: true,
          decision: 'allowed',
          ...(v.entry.approval === undefined ? {} : { approval: v.entry.approval }),
        }
      : { sandbox, host, port, via, allowed: false, decision: 'denied' };
    if (v.allowed) {
      const key = formatHostPort(host, port);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    try {
      opts.onDecision?.(d);
    } catch {
      // an observer must not change the decision
    }
    const rec = opts.decisions;
    if (rec?.enabled === true)
      rec.record({
        kind: 'egress',
        requestId: rec.nextRequestId(),
        snapshot,
        target: { host: cut(host), port, via },
        decision: v.allowed ? 'allow' : 'deny',
        reason: v.allowed ? (v.entry.approval === undefined ? 'baseline' : 'approval') : 'denied',
      });
    return v.allowed ? { allowed: true, entry: v.entry } : { allowed: false };
  }

  function onConnect(req: IncomingMessage, client: Duplex, head: Buffer): void {
    track(client);
    client.on('error', () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    if (target === undefined) {
      rawResponse(client, 400, 'Bad Request', `CONNECT target "${String(req.url).slice(0, 300)}" is not host:port`);
      return;
    }
    const d = decide(target.host, target.port, 'CONNECT');
    if (!d.allowed) {
      rawAnswer(client, notAllowed(sandbox, target.host, target.port));
      return;
    }
    client.pause();
    void resolveChecked(target.host, target.port, d.entry).then((r) => {
      if (client.destroyed) return;
      if (!r.ok) {
        rawAnswer(client, r.answer);
        return;
      }
      client.resume();
      tunnel(client, head, target, r.address);
    });
  }

  function tunnel(client: Duplex, head: Buffer, target: { host: string; port: number }, address: string): void {
    const upstream: Socket = connect({ host: address, port: target.port });
    track(upstream);
    admit(
      target.host,
      target.port,
      () => {
        upstream.destroy();
        client.destroy();
      },
      client,
    );
    let established = false;
    upstream.setTimeout(connectTimeoutMs, () => {
      if (!established) {
        upstream.destroy();
        rawAnswer(client, connectTimeout(target.host, target.port, connectTimeoutMs));
      }
    });
    upstream.once('connect', () => {
      established = true;
      upstream.setTimeout(0);
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (!established) rawAnswer(client, connectFailure(target.host, target.port, err, connectTimeoutMs));
      else client.destroy();
    });
    upstream.on('close', (hadError) => {
      if (hadError && established) client.destroy();
    });
    client.on('close', () => upstream.destroy());
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      jsonResponse(
        res,
        400,
        `this is the egress forward proxy of sandbox ${sandbox}: send an absolute http:// URI, or CONNECT host:port for anything else`,
      );
      return;
    }
    if (url.protocol !== 'http:') {
      jsonResponse(
        res,
        400,
        `the egress proxy forwards only absolute http:// URIs; use CONNECT ${url.hostname}:${url.port === '' ? 443 : url.port} for ${url.protocol}`,
      );
      return;
    }
    const host = validHost(url.hostname);
    const port = url.port === '' ? 80 : Number(url.port);
    if (host === undefined) {
      jsonResponse(res, 400, `request target host "${url.hostname.slice(0, 300)}" is not a valid host`);
      return;
    }
    const d = decide(host, port, 'HTTP');
    if (!d.allowed) {
      req.resume();
      sendAnswer(res, notAllowed(sandbox, host, port));
      return;
    }
    req.pause();
    void resolveChecked(host, port, d.entry).then((r) => {
      if (res.destroyed) return;
      if (!r.ok) {
        req.resume();
        sendAnswer(res, r.answer);
        return;
      }
      forwardHttp(req, res, url, host, port, r.address);
    });
  }

  function forwardHttp(req: IncomingMessage, res: ServerResponse, url: URL, host: string, port: number, address: string): void {
    const headers = endToEndHeaders(req.headers);
    headers['host'] = url.host;
    const up = httpRequest({
      host: address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      agent: false,
      timeout: connectTimeoutMs,
    });
    admit(
      host,
      port,
      () => {
        up.destroy();
        res.destroy();
      },
      res,
    );
    up.on('socket', (s) => track(s));
    let timedOut = false;
    up.on('timeout', () => {
      timedOut = true;
      up.destroy();
    });
    up.on('response', (upRes) => {
      up.setTimeout(0);
      upRes.on('error', () => res.destroy());
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage ?? '', endToEndHeaders(upRes.headers));
      upRes.pipe(res);
    });
    up.on('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent) res.destroy();
      else sendAnswer(res, timedOut ? connectTimeout(host, port, connectTimeoutMs) : connectFailure(host, port, err, connectTimeoutMs));
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  }

  const server = createServer(onRequest);
  server.on('connect', onConnect);
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    track(socket);
    socket.on('error', () => socket.destroy());
    rawResponse(socket, 501, 'Not Implemented', 'protocol upgrades are not proxied over plain HTTP; use CONNECT host:port');
  });
  server.on('connection', (s: Socket) => {
    track(s);
    s.on('error', () => s.destroy());
  });
  server.on('clientError', (_err, socket: Duplex) => {
    if (socket.writable) rawResponse(socket, 400, 'Bad Request', 'malformed HTTP request');
    else socket.destroy();
  });

  const bound = await listenOn(server, opts.listen, 'egress proxy listen address');

  return {
    url: bound.boundUrl,
    port: bound.port,
    usage: () => Object.fromEntries(counts),
    close: () =>
      new Promise<void>((resolve) => {
        sweep?.cancel();
        server.close(() => resolve());
        for (const s of open) s.destroy();
        server.closeAllConnections();
      }),
  };
}
