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
 *   another pooled one, which may be just as stale).
 * - Written or not (ADR 0027): {@link UpstreamSink.onError} says whether the request was handed to
 *   a connection to be written. undici calls the handler's `onRequestStart` on the request's
 *   connection immediately before it writes the request head and body, in the same turn; a failure
 *   before it (connect refused or timed out, DNS) wrote nothing, and one after it may have reached
 *   the upstream whole. undici itself re-sends only requests it had queued and not written.
 *
 * Caveats: "had carried an earlier answer" is read from the socket's `bytesRead`. A stale-connection
 * failure always comes after the request was written (undici writes as soon as it has a
 * connection), so the retry cannot tell an upstream that closed the connection before reading the
 * request from one that read it and then crashed: it sends such a request twice. Callers therefore
 * set `retryStale` only for reads, where a repeat is harmless (a moderation call, an MCP
 * `tools/list`); never for a completion (ADR 0027) or an MCP `tools/call`. A connection the
 * upstream closed while idle is dropped by undici when it sees the close, before any request is
 * written to it.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { EventEmitter } from 'node:events';
import type { Dispatcher, buildConnector as BuildConnector } from 'undici';
import { Agent, Client, buildConnector } from './undici-parts.js';

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
  method: 'POST' | 'GET' | 'DELETE';
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

/**
 * Receives one upstream answer from {@link UpstreamClient.dispatch}, in order: `onHead`, any number
 * of `onData`, then `onEnd` or `onError`; or `onError` alone when no answer came. Exactly one of
 * `onEnd` / `onError` is called, once. The callbacks run inside undici's parser: they must not
 * throw (a throw aborts the request, and `onError` follows).
 */
export interface UpstreamSink {
  /** The response head (header names lower case, repeated headers as arrays); `call` is the request's. */
  onHead(status: number, headers: IncomingHttpHeaders, call: UpstreamCall): void;
  /** A body chunk; return false to pause the upstream until {@link UpstreamCall.resume}. */
  onData(chunk: Buffer): boolean;
  /** The body has ended. */
  onEnd(): void;
  /**
   * The request failed; `answered` says whether `onHead` had been called (the body was cut short),
   * `written` whether the request had been handed to a connection to be written (module comment):
   * false means the upstream cannot have seen it.
   */
  onError(err: Error, answered: boolean, written: boolean): void;
}

/** A request in flight from {@link UpstreamClient.dispatch}. */
export interface UpstreamCall {
  /** Continue after `onData` returned false. */
  resume(): void;
  /** Cut the request (before or after its head); the sink's `onError` follows unless it had ended. */
  abort(): void;
  /** Whether the request has been handed to a connection to be written (module comment). */
  readonly written: boolean;
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
  readonly #connect: BuildConnector.connector;
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
      const fresh = this.freshClient(r.origin);
      try {
        return await this.#send(fresh, r);
      } finally {
        // Closes once the answer has been read (or at once when the retry failed).
        void fresh.close().catch(() => undefined);
      }
    }
  }

  /**
   * Send `r` and hand its answer to `sink` as it arrives, with no stream or promise in between (the
   * inference hot path). The same pool, timeouts and stale-connection rule as {@link request};
   * `r.signal` is not used (call `abort()` on the result).
   */
  dispatch(r: UpstreamRequest, sink: UpstreamSink): UpstreamCall {
    const ex = new Exchange(this, r, sink);
    ex.send(this.#agent);
    return ex;
  }

  /** A client with a connection of its own, for the one retry after a stale pooled connection. */
  freshClient(origin: string): Client {
    return new Client(origin, {
      connect: this.#connect,
      headersTimeout: this.#opts.headersTimeoutMs,
      bodyTimeout: this.#opts.bodyTimeoutMs,
    });
  }

  /** undici dispatch options of `r`. */
  dispatchOptions(r: UpstreamRequest): Dispatcher.DispatchOptions {
    return {
      origin: r.origin,
      path: r.path,
      method: r.method,
      headers: r.headers as Record<string, string | string[]>,
      body: r.body ?? null,
      headersTimeout: r.headersTimeoutMs ?? this.#opts.headersTimeoutMs,
      bodyTimeout: r.bodyTimeoutMs ?? this.#opts.bodyTimeoutMs,
    };
  }

  async #send(d: Dispatcher, r: UpstreamRequest): Promise<UpstreamResponse> {
    const res = await d.request({ ...this.dispatchOptions(r), ...(r.signal !== undefined ? { signal: r.signal } : {}) });
    return { status: res.statusCode, headers: res.headers as IncomingHttpHeaders, body: res.body };
  }

  /** Close every pooled connection (requests in flight are cut). */
  async close(): Promise<void> {
    await this.#agent.destroy().catch(() => undefined);
  }
}

/**
 * One {@link UpstreamClient.dispatch}: an undici dispatch handler (undici 7's controller interface:
 * onRequestStart / onResponseStart / onResponseData / onResponseEnd / onResponseError, called by its
 * HTTP/1.1 parser) that feeds an {@link UpstreamSink}, applies the stale-connection retry, and is
 * the caller's {@link UpstreamCall}.
 */
class Exchange implements Dispatcher.DispatchHandler, UpstreamCall {
  readonly #client: UpstreamClient;
  readonly #r: UpstreamRequest;
  readonly #sink: UpstreamSink;
  #controller: Dispatcher.DispatchController | undefined = undefined;
  #answered = false;
  #written = false;
  #aborted = false;
  #settled = false;
  #retried = false;
  #fresh: Client | undefined = undefined;

  constructor(client: UpstreamClient, r: UpstreamRequest, sink: UpstreamSink) {
    this.#client = client;
    this.#r = r;
    this.#sink = sink;
  }

  send(d: Dispatcher): void {
    d.dispatch(this.#client.dispatchOptions(this.#r), this);
  }

  resume(): void {
    if (!this.#settled) this.#controller?.resume();
  }

  get written(): boolean {
    return this.#written;
  }

  abort(): void {
    if (this.#aborted || this.#settled) return;
    this.#aborted = true;
    // Before undici has handed the request a connection there is nothing to cut yet: onRequestStart does it.
    this.#controller?.abort(new Error('upstream request aborted'));
  }

  // ---- undici's dispatch handler ----

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // undici writes the request right after this returns, unless it was aborted here.
    if (this.#aborted) controller.abort(new Error('upstream request aborted'));
    else this.#written = true;
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    // 1xx informational heads (103 Early Hints) precede the answer; they are not it.
    if (status < 200) return;
    this.#answered = true;
    this.#sink.onHead(status, headers, this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#sink.onData(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#closeFresh();
    this.#sink.onEnd();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.#settled) return;
    if (!this.#answered && !this.#aborted && !this.#retried && this.#r.retryStale === true && isStaleConnectionError(err)) {
      // A connection of its own: the other pooled ones may be just as stale.
      this.#retried = true;
      this.#controller = undefined;
      this.#fresh = this.#client.freshClient(this.#r.origin);
      this.send(this.#fresh);
      return;
    }
    this.#settled = true;
    this.#closeFresh();
    this.#sink.onError(err, this.#answered, this.#written);
  }

  #closeFresh(): void {
    // Closes once its one request is done (or at once when it failed).
    if (this.#fresh !== undefined) void this.#fresh.close().catch(() => undefined);
  }
}
