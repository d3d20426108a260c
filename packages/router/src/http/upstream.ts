/**
 * The router's one upstream HTTP client, on undici 7: inference, the MCP tool gateway and the
 * guardrail (moderation) calls all go through one {@link UpstreamClient}, so every upstream gets the
 * same keep-alive pool, timeouts and stale-connection rule.
 *
 * - Keep-alive: one undici `Agent` (a `Pool` per origin, connections reused LIFO by undici's
 *   scheduler). Idle connections are closed after `keepAliveTimeoutMs`, or earlier when the
 *   upstream's `Keep-Alive: timeout=` hint says so (undici honours it, minus 1 s), which avoids most
 *   races with the upstream's own idle timeout.
 * - Timeouts: connect (`connectTimeoutMs`), response headers (`headersTimeoutMs`, per request
 *   overridable), and the longest pause between two body chunks (`bodyTimeoutMs`). They run on
 *   undici's timer wheel, not one `setTimeout` per request.
 * - Stale pooled connection: a request marked `retryStale` that fails with a connection error
 *   (`UND_ERR_SOCKET`, `ECONNRESET`, `EPIPE`) before any response header, on a connection that had
 *   already carried an earlier answer, is sent once more on a new connection of its own (not on
 *   another pooled one, which may be just as stale). Nothing was answered, so for a request the
 *   upstream did not act on this cannot duplicate it.
 *
 * Caveats: "had carried an earlier answer" is read from the socket's `bytesRead`; an upstream that
 * crashes after reading a request on a reused connection gets that request twice. Callers therefore
 * set `retryStale` only where a repeat is harmless (a completion is charged once by the router's
 * ledger either way; a moderation call is a read; an MCP `tools/call` is never retried).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { EventEmitter } from 'node:events';
import { Agent, Client, buildConnector, type Dispatcher } from 'undici';

/** Settings of an {@link UpstreamClient}. */
export interface UpstreamClientOptions {
  /** Time to establish a connection (TCP and TLS); default 10 s. */
  connectTimeoutMs?: number;
  /** Time for the response headers; default 300 s (a completion may think for minutes). */
  headersTimeoutMs?: number;
  /** Longest pause between two response body chunks; default 300 s. */
  bodyTimeoutMs?: number;
  /** Idle time after which a pooled connection is closed; default 4 s. */
  keepAliveTimeoutMs?: number;
  /** Most connections per upstream origin; default unbounded. */
  connectionsPerOrigin?: number;
}

/** One request to an upstream. */
export interface UpstreamRequest {
  /** Scheme, host and port of the upstream (`URL.origin`). */
  origin: string;
  /** Path and query. */
  path: string;
  method: 'POST' | 'GET';
  /** End-to-end headers only (hop-by-hop ones are refused by undici). */
  headers: OutgoingHttpHeaders;
  /** The request body (a string is sent as UTF-8 without a copy into a Buffer first). */
  body?: Buffer | string;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** Retry once on a new connection when a pooled one turns out stale (module comment). */
  retryStale?: boolean;
  /**
   * Aborts the request (before or after its headers): an AbortSignal, or any EventEmitter that
   * emits `abort` (cheaper per request than an AbortController on the hot path).
   */
  signal?: AbortSignal | EventEmitter;
}

/** An upstream answer whose headers have arrived; `body` streams the rest (destroy it to abort). */
export interface UpstreamResponse {
  status: number;
  /** Lower-case names; repeated headers as arrays. */
  headers: IncomingHttpHeaders;
  body: Readable;
}

const STALE_CODES = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);
/** Set on a socket error by our connector: whether the socket had read bytes before it failed. */
const HAD_READ = Symbol('kars.upstream.hadRead');

/** Whether `err` is a connection failure on a connection that had already answered (module comment). */
export function isStaleConnectionError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; socket?: { bytesRead?: unknown }; [HAD_READ]?: boolean };
  if (typeof e.code !== 'string' || !STALE_CODES.has(e.code)) return false;
  if (e[HAD_READ] !== undefined) return e[HAD_READ];
  return typeof e.socket?.bytesRead === 'number' && e.socket.bytesRead > 0;
}

/** See the module comment. */
export class UpstreamClient {
  readonly #agent: Agent;
  readonly #connect: buildConnector.connector;
  readonly #opts: Required<Omit<UpstreamClientOptions, 'connectionsPerOrigin'>>;

  constructor(opts: UpstreamClientOptions = {}) {
    this.#opts = {
      connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
      headersTimeoutMs: opts.headersTimeoutMs ?? 300_000,
      bodyTimeoutMs: opts.bodyTimeoutMs ?? 300_000,
      keepAliveTimeoutMs: opts.keepAliveTimeoutMs ?? 4_000,
    };
    const base = buildConnector({ timeout: this.#opts.connectTimeoutMs });
    // Tag socket errors with whether the socket had carried bytes, for the stale-connection rule.
    this.#connect = (options, cb) =>
      base(options, (err, socket) => {
        if (err == null && socket != null)
          socket.prependListener('error', (e: Error & { [HAD_READ]?: boolean }) => {
            e[HAD_READ] ??= (socket as Socket).bytesRead > 0;
          });
        if (err != null) cb(err, null);
        else cb(null, socket as Socket);
      });
    this.#agent = new Agent({
      connect: this.#connect,
      keepAliveTimeout: this.#opts.keepAliveTimeoutMs,
      headersTimeout: this.#opts.headersTimeoutMs,
      bodyTimeout: this.#opts.bodyTimeoutMs,
      ...(opts.connectionsPerOrigin !== undefined ? { connections: opts.connectionsPerOrigin } : {}),
    });
  }

  /** Send `r`; resolves when the response headers have arrived, rejects on any failure before that. */
  async request(r: UpstreamRequest): Promise<UpstreamResponse> {
    try {
      return await this.#send(this.#agent, r);
    } catch (err) {
      if (r.retryStale !== true || (r.signal instanceof AbortSignal && r.signal.aborted) || !isStaleConnectionError(err)) throw err;
      // A connection of its own: the other pooled ones may be just as stale.
      const fresh = new Client(r.origin, {
        connect: this.#connect,
        headersTimeout: this.#opts.headersTimeoutMs,
        bodyTimeout: this.#opts.bodyTimeoutMs,
      });
      try {
        return await this.#send(fresh, r);
      } finally {
        // Closes once the answer has been read (or at once when the retry failed).
        void fresh.close().catch(() => undefined);
      }
    }
  }

  async #send(d: Dispatcher, r: UpstreamRequest): Promise<UpstreamResponse> {
    const res = await d.request({
      origin: r.origin,
      path: r.path,
      method: r.method,
      headers: r.headers as Record<string, string | string[]>,
      body: r.body ?? null,
      headersTimeout: r.headersTimeoutMs ?? this.#opts.headersTimeoutMs,
      bodyTimeout: r.bodyTimeoutMs ?? this.#opts.bodyTimeoutMs,
      ...(r.signal !== undefined ? { signal: r.signal } : {}),
    });
    return { status: res.statusCode, headers: res.headers as IncomingHttpHeaders, body: res.body };
  }

  /** Close every pooled connection (requests in flight are cut). */
  async close(): Promise<void> {
    await this.#agent.destroy().catch(() => undefined);
  }
}
