import http2 from 'node:http2';
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { silentLogger, systemClock } from '@kars/kube-core';
import type { Clock, Logger, Timer } from '@kars/kube-core';
import type { Credentials } from './credentials.js';
import { ConnectionLostError } from './errors.js';
import type { ConnectionLossReason } from './errors.js';

export interface TransportOptions {
  credentials: Credentials;
  /** Send an HTTP/2 PING this often on an open connection; 0 turns periodic pings off. */
  pingIntervalMs: number;
  /** Declare the connection dead when a PING is not answered within this time. */
  pingTimeoutMs: number;
  /** Give up connecting after this long. Default 10 s. */
  connectTimeoutMs?: number;
  /** Default silent. */
  log?: Logger;
  /** Time source for PINGs and deadlines; default the system clock. */
  clock?: Clock;
}

/** A request whose response headers have arrived; the body is still streaming. */
export interface OpenStream {
  status: number;
  headers: IncomingHttpHeaders;
  stream: ClientHttp2Stream;
  /** Which connection carries it (a new id after every reconnect). */
  connectionId: number;
  /** Why its connection was declared dead, if it was. */
  lossReason(): ConnectionLossReason | undefined;
}

/** Fired when a connection is declared dead. */
export interface ConnectionLoss {
  connectionId: number;
  reason: ConnectionLossReason;
  error: Error | undefined;
}

interface Conn {
  id: number;
  session: ClientHttp2Session;
  pingTimer: Timer | undefined;
  lost: ConnectionLossReason | undefined;
  /** A PING probe in flight: new requests wait for its verdict instead of joining a suspect connection. */
  probing: Promise<boolean> | undefined;
}

/**
 * HTTP/2 flow-control windows this client grants the server: 4 MiB per stream and 32 MiB for the
 * connection (Go's HTTP/2 client, and so client-go, grants 4 MiB per stream). With HTTP/2's default
 * of 64 KiB, a burst bigger than that (100 echo Leases renewed at once) waits for a WINDOW_UPDATE
 * from this process's event loop every 64 KiB; kube-apiserver's watch cache meanwhile fills the
 * watcher's buffer and closes the watch. The windows still bound what a stalled reader buffers.
 */
export const STREAM_WINDOW_BYTES = 4 << 20;
export const CONNECTION_WINDOW_BYTES = 32 << 20;

/**
 * One multiplexed HTTP/2 connection to the API server at a time, with PING liveness.
 *
 * Guarantees: with `pingIntervalMs` > 0, a connection that stops answering (a silently dropped
 * flow: no FIN, no RST) is declared dead within pingInterval + pingTimeout, every stream on it
 * fails with {@link ConnectionLostError} (reason "ping"), and the next request opens a new
 * connection. Nothing is retried here; callers decide.
 *
 * Caveats: HTTP/2 only (kube-apiserver always offers it); close() must be called to let the
 * process exit, since an open session keeps the event loop alive.
 */
export class Http2Transport {
  private current: Promise<Conn> | undefined;
  private nextId = 1;
  private closed = false;
  private readonly listeners = new Set<(l: ConnectionLoss) => void>();
  private readonly log: Logger;
  /** The clock every timer of this transport (and of KubeClient's watches on it) runs on. */
  readonly clock: Clock;

  constructor(private readonly opts: TransportOptions) {
    this.log = opts.log ?? silentLogger;
    this.clock = opts.clock ?? systemClock;
  }

  get server(): URL {
    return this.opts.credentials.server;
  }

  /** Be told whenever a connection is declared dead. Returns the unsubscribe function. */
  onConnectionLost(fn: (l: ConnectionLoss) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private async connect(): Promise<Conn> {
    const tls = await this.opts.credentials.tls();
    const id = this.nextId++;
    const session = http2.connect(this.server.origin, {
      ...tls,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
    });
    session.once('connect', () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
    const conn: Conn = { id, session, pingTimer: undefined, lost: undefined, probing: undefined };
    session.on('error', (err) => this.kill(conn, conn.lost ?? 'reset', err));
    session.on('goaway', () => this.retire(conn, 'goaway'));
    session.on('close', () => this.retire(conn, conn.lost ?? 'closed'));
    await new Promise<void>((resolve, reject) => {
      const timer = this.clock.setTimeout(() => {
        this.kill(conn, 'connect', undefined);
        reject(new ConnectionLostError('connect', `connecting to ${this.server.origin} timed out`));
      }, this.opts.connectTimeoutMs ?? 10_000);
      session.once('connect', () => {
        timer.cancel();
        resolve();
      });
      session.once('error', (err) => {
        timer.cancel();
        reject(new ConnectionLostError('connect', `cannot connect to ${this.server.origin}: ${err.message}`, { cause: err }));
      });
    });
    if (this.opts.pingIntervalMs > 0) this.schedulePing(conn);
    this.log.debug({ connection: id, server: this.server.origin }, 'connection established');
    return conn;
  }

  /** Arm the next periodic PING (one timer at a time, re-armed after each PING is sent). */
  private schedulePing(conn: Conn): void {
    conn.pingTimer = this.clock.setTimeout(() => {
      if (conn.lost) return;
      this.schedulePing(conn);
      void this.ping(conn);
    }, this.opts.pingIntervalMs);
  }

  /** Send one PING; on timeout or error the connection is killed. Resolves true when answered. */
  private ping(conn: Conn): Promise<boolean> {
    if (conn.lost) return Promise.resolve(false);
    return new Promise((resolve) => {
      let settled = false;
      const timer = this.clock.setTimeout(() => {
        if (settled) return;
        settled = true;
        this.kill(conn, 'ping', new Error(`no PING answer within ${this.opts.pingTimeoutMs} ms`));
        resolve(false);
      }, this.opts.pingTimeoutMs);
      try {
        conn.session.ping((err) => {
          if (settled) return;
          settled = true;
          timer.cancel();
          if (err) this.kill(conn, 'ping', err);
          resolve(!err);
        });
      } catch (err) {
        settled = true;
        timer.cancel();
        this.kill(conn, 'ping', err instanceof Error ? err : new Error(String(err)));
        resolve(false);
      }
    });
  }

  /** Stop pinging `conn` and stop handing it out for new requests. */
  private forget(conn: Conn): void {
    conn.pingTimer?.cancel();
    conn.pingTimer = undefined;
    void this.current?.then(
      (c) => {
        if (c === conn) this.current = undefined;
      },
      () => undefined,
    );
  }

  /** Stop using a connection that is closing on its own (GOAWAY, close); streams may finish. */
  private retire(conn: Conn, reason: ConnectionLossReason): void {
    this.forget(conn);
    if (!conn.lost) {
      conn.lost = reason;
      this.notify(conn, reason, undefined);
    }
  }

  /** Declare a connection dead and destroy it, failing every stream on it. */
  private kill(conn: Conn, reason: ConnectionLossReason, err: Error | undefined): void {
    const first = !conn.lost;
    conn.lost ??= reason;
    this.forget(conn);
    if (!conn.session.destroyed)
      conn.session.destroy(
        new ConnectionLostError(
          conn.lost,
          `connection ${conn.id} to ${this.server.origin} lost (${conn.lost})${err ? `: ${err.message}` : ''}`,
          { cause: err },
        ),
      );
    if (first) {
      this.log.warn({ connection: conn.id, reason: conn.lost, err }, 'connection lost');
      this.notify(conn, conn.lost, err);
    }
  }

  private notify(conn: Conn, reason: ConnectionLossReason, error: Error | undefined): void {
    for (const fn of this.listeners) fn({ connectionId: conn.id, reason, error });
  }

  private async conn(): Promise<Conn> {
    if (this.closed) throw new ConnectionLostError('closed', 'the transport is closed');
    for (;;) {
      if (!this.current) {
        const p = this.connect();
        this.current = p;
        p.catch(() => {
          if (this.current === p) this.current = undefined;
        });
      }
      const c = await this.current;
      if (c.probing) await c.probing;
      if (!c.lost && !c.session.destroyed && !c.session.closed) return c;
      if (this.current !== undefined && (await this.current) === c) this.current = undefined;
    }
  }

  /**
   * Check the current connection with one PING now (used when a watch has gone quiet).
   * Resolves false, and kills the connection, when it does not answer in time.
   */
  async probe(connectionId?: number): Promise<boolean> {
    const cur = this.current ? await this.current.catch(() => undefined) : undefined;
    if (!cur || (connectionId !== undefined && cur.id !== connectionId)) return false;
    if (cur.probing) return cur.probing;
    const p = this.ping(cur).finally(() => {
      cur.probing = undefined;
    });
    cur.probing = p;
    return p;
  }

  /** Kill a connection by id (when a stream on it proved it dead some other way). */
  async drop(connectionId: number, reason: ConnectionLossReason): Promise<void> {
    const cur = this.current ? await this.current.catch(() => undefined) : undefined;
    if (cur && cur.id === connectionId) this.kill(cur, reason, undefined);
  }

  /**
   * Open a request and wait for its response headers. `onStream` is handed the stream as soon as it
   * exists (so a caller's deadline can destroy it without an AbortSignal per request).
   */
  async open(req: {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    signal?: AbortSignal;
    onStream?: (stream: ClientHttp2Stream) => void;
  }): Promise<OpenStream> {
    const conn = await this.conn();
    const auth = await this.opts.credentials.headers();
    const headers: http2.OutgoingHttpHeaders = {
      ':method': req.method,
      ':path': req.path,
      accept: 'application/json',
      ...auth,
      ...(req.headers ?? {}),
    };
    const stream = conn.session.request(headers, { endStream: req.body === undefined, ...(req.signal ? { signal: req.signal } : {}) });
    // Whoever reads the stream reports its errors (the listeners below, readAll's, a watch's). This
    // one keeps an abort or a destroy that lands after the body was read, before the stream's
    // 'close', from being an uncaught 'error' that ends the process.
    stream.on('error', ignoreLateError);
    req.onStream?.(stream);
    if (req.body !== undefined) stream.end(req.body);
    const responseHeaders = await new Promise<IncomingHttpHeaders>((resolve, reject) => {
      const onError = (err: Error): void => {
        cleanup();
        reject(conn.lost ? new ConnectionLostError(conn.lost, err.message, { cause: err }) : err);
      };
      const onClose = (): void => {
        cleanup();
        reject(new ConnectionLostError(conn.lost ?? 'closed', `the stream closed before a response (${req.method} ${req.path})`));
      };
      const onResponse = (h: IncomingHttpHeaders): void => {
        cleanup();
        resolve(h);
      };
      const cleanup = (): void => {
        stream.off('error', onError);
        stream.off('close', onClose);
        stream.off('response', onResponse);
      };
      stream.on('error', onError);
      stream.on('close', onClose);
      stream.on('response', onResponse);
    });
    return {
      status: Number(responseHeaders[':status'] ?? 0),
      headers: responseHeaders,
      stream,
      connectionId: conn.id,
      lossReason: () => conn.lost,
    };
  }

  /**
   * A whole request: send, then read the full body. It fails with ConnectionLostError("idle")
   * when it has not completed within `timeoutMs` (default 30 s), and the connection is probed, so
   * a silently dropped connection cannot hang a request even with periodic pings off.
   */
  async request(req: {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    signal?: AbortSignal;
    timeoutMs?: number;
  }): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
    // The deadline destroys the stream itself: an AbortController + AbortSignal per request (and
    // node:http2's abort listener on it) cost more than the rest of the request's bookkeeping.
    const timeoutMs = req.timeoutMs ?? 30_000;
    let timedOut = false;
    let stream: ClientHttp2Stream | undefined;
    const expire = (s: ClientHttp2Stream): void => {
      s.destroy(new Error(`${req.method} ${req.path}: deadline of ${timeoutMs} ms passed`));
    };
    const timer = this.clock.setTimeout(() => {
      timedOut = true;
      if (stream) expire(stream);
    }, timeoutMs);
    let connectionId: number | undefined;
    try {
      const open = await this.open({
        ...req,
        onStream: (s) => {
          stream = s;
          if (timedOut) expire(s);
        },
      });
      connectionId = open.connectionId;
      let body: Buffer;
      try {
        body = await readAll(open.stream);
      } catch (err) {
        const lost = open.lossReason();
        throw lost ? new ConnectionLostError(lost, err instanceof Error ? err.message : String(err), { cause: err }) : err;
      }
      return { status: open.status, headers: open.headers, body };
    } catch (err) {
      if (timedOut) {
        void this.probe(connectionId);
        throw new ConnectionLostError('idle', `${req.method} ${req.path} did not complete within ${timeoutMs} ms`, { cause: err });
      }
      throw err;
    } finally {
      timer.cancel();
    }
  }

  /** Close the connection and refuse further requests. */
  close(): void {
    this.closed = true;
    const cur = this.current;
    this.current = undefined;
    void cur?.then(
      (c) => {
        c.pingTimer?.cancel();
        c.lost ??= 'closed';
        c.session.destroy();
      },
      () => undefined,
    );
  }
}

/** See {@link Http2Transport.open}: an error nobody reads any more (the body was read already). */
function ignoreLateError(): void {}

/**
 * The whole body of a response stream. Rejects when the stream fails or closes before its end
 * (reset, destroyed by a deadline or an abort), like `for await` over it, with less per-chunk work.
 */
function readAll(stream: ClientHttp2Stream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    const onData = (c: Buffer): void => {
      chunks.push(c);
    };
    const onEnd = (): void => {
      ended = true;
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onClose = (): void => {
      if (ended) return;
      cleanup();
      reject(Object.assign(new Error('the stream closed before the end of the response'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    const cleanup = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    if (stream.destroyed && !stream.readableEnded) {
      reject(Object.assign(new Error('the stream closed before the end of the response'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
      return;
    }
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}
