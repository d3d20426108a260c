/**
 * One limit on a request's head (target URL plus headers) for both protocols, and a status line
 * for a request that passes it, where Node would otherwise drop the connection or reset the stream.
 *
 * - HTTP/1.1: the parser's limit is set to {@link MAX_HEADER_BYTES} (the request line counts);
 *   on overflow ('clientError' HPE_HEADER_OVERFLOW) the server writes `431 Request Header Fields
 *   Too Large` and closes gracefully: it half-closes and keeps reading (discarding, up to
 *   {@link LINGER_BYTES} or {@link LINGER_MS}) so the client's unread upload cannot turn the close
 *   into a TCP reset that destroys the status line before the client reads it. Other parse errors
 *   get `400 Bad Request`, as Node's default does.
 * - HTTP/2: nghttp2 takes header blocks somewhat past 64 KiB; {@link refuseLargeHead} answers 431
 *   to a stream whose head is over the limit before anything else runs. Past nghttp2's own limit
 *   the session is still torn down by nghttp2 (caveat below).
 *
 * Why 431 for a long URL too (not 414): kube-apiserver is a Go server, and Go counts the request
 * line in its header limit and answers 431 on both HTTP/1.1 and HTTP/2 (ADR 0028).
 *
 * Caveats: the limit is 64 KiB, not Go's 1 MiB default (nghttp2 in Node cannot take 1 MiB header
 * blocks); an HTTP/2 header block far past 64 KiB (~100 KiB+) still ends the session without a
 * status.
 */
import type { Http2SecureServer } from 'node:http2';
import type { Duplex } from 'node:stream';

/** Largest request head accepted: the target URL plus all header names and values, in bytes. */
export const MAX_HEADER_BYTES = 64 * 1024;
/** Most bytes read and discarded after a refused head before the socket is destroyed. */
export const LINGER_BYTES = 1024 * 1024;
/** Longest a refused connection lingers before it is destroyed. */
export const LINGER_MS = 5000;

const STATUS: Record<string, string> = {
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
};

/** Install the HTTP/1.1 limit and the 'clientError' answer on the server (its HTTP/1 fallback). */
export function installHeadLimits(server: Http2SecureServer): void {
  // The HTTP/1 fallback parser reads its limit from the server object.
  (server as unknown as { maxHeaderSize: number }).maxHeaderSize = MAX_HEADER_BYTES;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as unknown as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (!socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    const status = STATUS[err.code ?? ''] ?? '400 Bad Request';
    const body = `${status}\n`;
    // Stop the HTTP parser (it would report every later chunk as another error), then linger.
    socket.removeAllListeners('data');
    let discarded = 0;
    socket.on('data', (c: Buffer) => {
      discarded += c.length;
      if (discarded > LINGER_BYTES) socket.destroy();
    });
    socket.on('end', () => socket.destroy());
    socket.on('error', () => undefined);
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.on('close', () => clearTimeout(timer));
    socket.resume();
    socket.end(
      `HTTP/1.1 ${status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

/** Bytes of a request head as counted for the limit: every raw header name and value (HTTP/2 pseudo-headers, so `:path`, included). */
export function headBytes(rawHeaders: readonly string[]): number {
  let n = 0;
  for (const h of rawHeaders) n += Buffer.byteLength(h);
  return n;
}

interface MinimalReq {
  rawHeaders: string[];
}
interface MinimalRes {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  end(body: string): unknown;
}

/** Answer 431 to a request (HTTP/2 in practice) whose head is over the limit; true when it did. */
export function refuseLargeHead(req: MinimalReq, res: MinimalRes): boolean {
  if (headBytes(req.rawHeaders) <= MAX_HEADER_BYTES) return false;
  const body = '431 Request Header Fields Too Large\n';
  res.writeHead(431, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  return true;
}
