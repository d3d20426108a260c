/**
 * The two pieces of HTTP server plumbing every kars server needs: where to listen, and how to read a
 * request body without letting a client grow the process. They live here, in the package every
 * other one may depend on (apiserver, kube-runtime, router, CLI), so there is one spelling of each.
 *
 * Neither does anything on import; `listenOn` binds only the server it is given.
 */
import type { Server } from 'node:net';
import type { Readable } from 'node:stream';

/** A listen address that is not `HOST:PORT` / `[IPv6]:PORT` with a port in 0–65535. */
export class ListenAddressError extends RangeError {
  readonly code = 'KARS_LISTEN_INVALID';
  constructor(
    readonly address: string,
    what = 'listen address',
  ) {
    super(`${what} must be HOST:PORT (IPv6 as [::1]:PORT) with port 0-65535, got "${address}"`);
    this.name = 'ListenAddressError';
  }
}

/**
 * Parse `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (host 127.0.0.1). `what` names the flag or server
 * in the error message. Throws {@link ListenAddressError}.
 */
export function parseListen(address: string, what?: string): { host: string; port: number } {
  const m = /^(?:\[([^\]\s]+)\]|([^:[\]\s]*)):(\d{1,5})$/.exec(address);
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || port > 65535) throw new ListenAddressError(address, what);
  const host = m[1] ?? m[2] ?? '';
  return { host: host === '' ? '127.0.0.1' : host, port };
}

/** The `http://host:port` URL of a bound address (IPv6 in brackets). */
export function urlOfAddress(host: string, port: number): string {
  return `http://${formatHostPort(host, port)}`;
}

/** `host:port`, with an IPv6 host in brackets: the inverse of {@link parseListen}. */
export function formatHostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Where {@link listenOn} bound a server. */
export interface Bound {
  /** The host as given (127.0.0.1 for an empty one). */
  host: string;
  /** The bound port (a free one for port 0). */
  port: number;
  /** `http://host:port` with the host as given. */
  url: string;
  /** `http://address:port` with the address the socket is bound to (e.g. 127.0.0.1 for localhost). */
  boundUrl: string;
}

/**
 * Bind `server` to `address` (see {@link parseListen}). Rejects when the address is malformed or
 * cannot be bound; the `error` listener it adds is removed once the server listens.
 */
export function listenOn(server: Server, address: string, what?: string): Promise<Bound> {
  let parsed: { host: string; port: number };
  try {
    parsed = parseListen(address, what);
  } catch (err) {
    return Promise.reject(err as Error);
  }
  const { host } = parsed;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(parsed.port, host, () => {
      server.off('error', reject);
      const a = server.address();
      const port = typeof a === 'object' && a !== null ? a.port : parsed.port;
      const bound = typeof a === 'object' && a !== null ? a.address : host;
      resolve({ host, port, url: urlOfAddress(host, port), boundUrl: urlOfAddress(bound, port) });
    });
  });
}

/** The outcome of {@link readBody}. */
export type BodyRead = { ok: true; body: Buffer } | { ok: false; reason: 'too_large' | 'aborted' };

const EMPTY = Buffer.alloc(0);

/**
 * Read a whole request body of at most `limit` bytes.
 *
 * - A declared `content-length` above `limit` is refused before a byte is read.
 * - A body that grows past `limit` is refused as soon as it does; nothing more is kept.
 * - On `too_large` the rest of the body is drained (discarded), so the caller can still answer 413
 *   (send `connection: close` with it); on `aborted` (the stream failed or closed before its end)
 *   there is nobody to answer.
 *
 * Memory: at most `limit` bytes are held. Never rejects.
 */
export function readBody(stream: Readable, limit: number, declaredLength?: string | number): Promise<BodyRead> {
  if (declaredLength !== undefined && Number(declaredLength) > limit) {
    stream.resume();
    return Promise.resolve({ ok: false, reason: 'too_large' });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (r: BodyRead): void => {
      if (done) return;
      done = true;
      stream.off('data', onData);
      resolve(r);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        finish({ ok: false, reason: 'too_large' });
        stream.resume();
        return;
      }
      chunks.push(c);
    };
    stream.on('data', onData);
    stream.once('end', () => finish({ ok: true, body: chunks.length === 1 ? (chunks[0] ?? EMPTY) : Buffer.concat(chunks, size) }));
    stream.once('error', () => finish({ ok: false, reason: 'aborted' }));
    stream.once('close', () => finish({ ok: false, reason: 'aborted' }));
  });
}
