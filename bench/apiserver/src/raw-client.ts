/** The group-commit phase's load generator: raw HTTP/1.1 over a fixed set of keep-alive TLS connections. */
import tls from 'node:tls';
import type { HttpAnswer } from '../../lib/dist/index.js';

/** A client of {@link makeRawClient}. */
export interface RawClient {
  /** Send one request (a string body as is, anything else as JSON); resolves with status and body text. */
  request(method: string, path: string, body?: unknown): Promise<HttpAnswer>;
  /** Destroy every connection. */
  close(): void;
}

/** One connection and the request it is answering, if any. */
interface Conn {
  sock: tls.TLSSocket;
  buf: Buffer;
  pending: { resolve: (a: HttpAnswer) => void; reject: (err: Error) => void } | undefined;
}

/**
 * A cheap load generator for the group-commit phase: `conns` keep-alive TLS connections speaking
 * raw HTTP/1.1 (request bytes built by hand, responses framed by Content-Length), so the
 * benchmark process spends far less CPU per request than with `node:https` and does not compete
 * with the server for the shared cores. Same interface as httpsJsonClient. A request waits for
 * a free connection; the server must answer with Content-Length (kars apiserver always does).
 */
export async function makeRawClient(url: string, ca: string, token: string, conns: number): Promise<RawClient> {
  const u = new URL(url);
  const head = (method: string, path: string, len?: number): string =>
    `${method} ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nAccept: application/json\r\n` +
    (len === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${len}\r\n\r\n`);
  const free: Conn[] = [];
  const waiting: Array<(c: Conn) => void> = [];
  const all: Conn[] = [];
  const open = (): Promise<Conn> =>
    new Promise((resolve, reject) => {
      const sock = tls.connect({ host: u.hostname, port: Number(u.port), ca, ALPNProtocols: ['http/1.1'] }, () => resolve(c));
      const c: Conn = { sock, buf: Buffer.alloc(0), pending: undefined };
      sock.setNoDelay(true);
      sock.on('error', (err) => {
        c.pending?.reject(err);
        c.pending = undefined;
        reject(err);
      });
      sock.on('close', () => {
        c.pending?.reject(new Error('connection closed'));
        c.pending = undefined;
      });
      sock.on('data', (chunk: Buffer) => {
        c.buf = c.buf.length === 0 ? chunk : Buffer.concat([c.buf, chunk]);
        const p = c.pending;
        if (!p) return;
        const end = c.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const headText = c.buf.toString('latin1', 0, end);
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(headText);
        if (!m) {
          p.reject(new Error(`response without content-length: ${headText.slice(0, 200)}`));
          c.pending = undefined;
          sock.destroy();
          return;
        }
        const total = end + 4 + Number(m[1]);
        if (c.buf.length < total) return;
        const status = Number(headText.slice(9, 12));
        const text = c.buf.toString('utf8', end + 4, total);
        c.buf = c.buf.subarray(total);
        c.pending = undefined;
        release(c);
        p.resolve({ status, text });
      });
      all.push(c);
    });
  const release = (c: Conn): void => {
    const w = waiting.shift();
    if (w) w(c);
    else free.push(c);
  };
  for (let i = 0; i < conns; i++) free.push(await open());
  function request(method: string, path: string, body?: unknown): Promise<HttpAnswer> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const send = (c: Conn): void => {
        c.pending = { resolve, reject };
        const bytes = payload === undefined ? head(method, path) : head(method, path, Buffer.byteLength(payload)) + payload;
        c.sock.write(bytes);
      };
      const c = free.pop();
      if (c) send(c);
      else waiting.push(send);
    });
  }
  return { request, close: () => all.forEach((c) => c.sock.destroy()) };
}
