import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { listenOn, parseListen } from '@kars/kube-core';

/** One named condition `/readyz` requires, e.g. "the policy store has synced". */
export interface ReadinessCheck {
  name: string;
  /** Must be cheap and synchronous; a throw counts as not ok, with the error message as detail. */
  check(): { ok: boolean; detail?: string };
}

/** Options of {@link startHealthServer}. */
export interface HealthServerOptions {
  /** `HOST:PORT` (IPv6 as `[::1]:PORT`); port 0 picks a free port. */
  listen: string;
  /** Served at `/metrics`. */
  registry: Registry;
  /** Every check must pass for `/readyz` to answer 200. */
  readiness: ReadinessCheck[];
  /** Every check must pass for `/healthz` to answer 200 (default: none, so 200 while the process answers). */
  liveness?: ReadinessCheck[];
  /** Closes the server when aborted. */
  signal: AbortSignal;
}

/** A running health server. */
export interface HealthServer {
  /** Base URL, e.g. `http://127.0.0.1:39117`, with the port actually bound. */
  url: string;
  /** Stop listening and drop open connections; resolves once closed. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Serve `/healthz`, `/readyz` and `/metrics` over plain HTTP (GET or HEAD).
 *
 * - `/healthz`: 200 when every liveness check is ok (e.g. {@link eventLoopWatchdog},
 *   {@link reconcileWatchdog}), else 503 in the same line format as `/readyz` (`healthz check failed`).
 * - `/readyz`: 200 when every check is ok, else 503 with one line `[-]name: detail` per failing
 *   check; `?verbose` lists passing checks too (`[+]name ok`). The last line is
 *   `readyz check passed` or `readyz check failed`.
 * - `/metrics`: the registry in its own content type.
 *
 * Guarantees: the server closes when `signal` aborts; a throwing check or a failing collector
 * yields a 503/500 answer, never a crash.
 *
 * Caveats: no TLS and no authentication; bind it to a pod-local or cluster-internal address.
 * Rejects when the address cannot be bound or `signal` is already aborted.
 */
export async function startHealthServer(opts: HealthServerOptions): Promise<HealthServer> {
  parseListen(opts.listen, 'health server listen address');
  if (opts.signal.aborted) throw new Error(`health server on ${opts.listen} not started: its signal is already aborted`);
  const server = http.createServer((req, res) => {
    handle(req, res, opts).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`internal error: ${err instanceof Error ? err.message : String(err)}\n`);
    });
  });
  const { url } = await listenOn(server, opts.listen, 'health server listen address');

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      opts.signal.removeEventListener('abort', onAbort);
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return closing;
  };
  const onAbort = (): void => void close();
  opts.signal.addEventListener('abort', onAbort, { once: true });

  return { url, close };
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: HealthServerOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://health.invalid');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    reply(res, req, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
    return;
  }
  switch (url.pathname) {
    case '/healthz': {
      const live = opts.liveness ?? [];
      if (live.length === 0) return reply(res, req, 200, 'ok\n');
      const { ok, body } = runChecks(live, url.searchParams.has('verbose'), 'healthz');
      reply(res, req, ok ? 200 : 503, body);
      return;
    }
    case '/readyz': {
      const { ok, body } = runChecks(opts.readiness, url.searchParams.has('verbose'), 'readyz');
      reply(res, req, ok ? 200 : 503, body);
      return;
    }
    case '/metrics': {
      const text = await opts.registry.metrics();
      reply(res, req, 200, text, { 'content-type': opts.registry.contentType });
      return;
    }
    default:
      reply(res, req, 404, `not found: ${url.pathname}\n`);
  }
}

function runChecks(checks: ReadinessCheck[], verbose: boolean, what: 'readyz' | 'healthz'): { ok: boolean; body: string } {
  const lines: string[] = [];
  let ok = true;
  for (const c of checks) {
    let r: { ok: boolean; detail?: string };
    try {
      r = c.check();
    } catch (err: unknown) {
      r = { ok: false, detail: `check threw: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (r.ok) {
      if (verbose) lines.push(`[+]${c.name} ok`);
    } else {
      ok = false;
      lines.push(`[-]${c.name}: ${r.detail ?? 'not ready'}`);
    }
  }
  lines.push(ok ? `${what} check passed` : `${what} check failed`);
  return { ok, body: `${lines.join('\n')}\n` };
}

function reply(res: ServerResponse, req: IncomingMessage, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
