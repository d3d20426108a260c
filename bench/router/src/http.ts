/** The benchmark's HTTP/1.1 client: a minimal keep-alive connection, prebuilt requests, one-off requests. */
import net from 'node:net';

import { APIS, type ApiSpec } from './apis.js';

/** Called once a whole response has arrived (`err` undefined), or with the error that ended it (status 0, empty body). */
export type ResponseCallback = (err: Error | undefined, status: number, body: Buffer) => void;

const EMPTY = Buffer.alloc(0);

/**
 * A minimal HTTP/1.1 keep-alive client connection: one request in flight, the request bytes
 * prebuilt, the response parsed only as far as status and length. It costs the load generator a
 * fraction of what node:http does, which matters when 3 processes share 2 cores.
 */
export class HttpConn {
  dead = false;
  private cb: ResponseCallback | undefined = undefined;
  private buf: Buffer | undefined = undefined;
  private hdrLen = -1;
  private bodyLen = -1;
  private chunked = false;
  private closeAfter = false;
  private status = 0;
  private readonly sock: net.Socket;

  constructor(host: string, port: number) {
    this.sock = net.connect({ host, port });
    this.sock.setNoDelay(true);
    this.sock.on('data', (c: Buffer) => this.onData(c));
    this.sock.on('error', (e) => this.fail(e));
    this.sock.on('close', () => this.fail(new Error('connection closed by peer')));
  }

  /** Send `reqBuf`; `cb(err, status, body)` once the whole response has arrived. */
  request(reqBuf: Buffer, cb: ResponseCallback): void {
    if (this.dead) {
      cb(new Error('connection is dead'), 0, EMPTY);
      return;
    }
    this.cb = cb;
    this.buf = undefined;
    this.hdrLen = -1;
    this.sock.write(reqBuf);
  }

  private onData(c: Buffer): void {
    this.buf = this.buf === undefined ? c : Buffer.concat([this.buf, c]);
    const b = this.buf;
    if (this.hdrLen < 0) {
      const he = b.indexOf('\r\n\r\n');
      if (he < 0) return;
      this.hdrLen = he + 4;
      const head = b.toString('latin1', 0, he);
      this.status = Number(head.slice(9, 12));
      const cl = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
      this.chunked = /\r\ntransfer-encoding:[ \t]*chunked/i.test(head);
      this.bodyLen = cl ? Number(cl[1]) : this.chunked || this.status === 204 || this.status === 304 ? (this.chunked ? -1 : 0) : -2;
      this.closeAfter = /\r\nconnection:[ \t]*close/i.test(head);
      if (this.bodyLen === -2) {
        this.fail(new Error(`response without content-length or chunked encoding (status ${this.status})`));
        return;
      }
    }
    let end: number;
    if (this.chunked) {
      // Good enough for these servers: the body ends with the zero-length chunk and no trailers.
      if (b.length < this.hdrLen + 5 || b.toString('latin1', b.length - 5) !== '0\r\n\r\n') return;
      end = b.length;
    } else {
      end = this.hdrLen + this.bodyLen;
      if (b.length < end) return;
    }
    const cb = this.cb;
    const body = b.subarray(this.hdrLen, end);
    const status = this.status;
    this.cb = undefined;
    this.buf = undefined;
    this.hdrLen = -1;
    if (this.closeAfter) {
      this.dead = true;
      this.sock.destroy();
    }
    cb?.(undefined, status, body);
  }

  private fail(e: Error): void {
    const wasDead = this.dead;
    this.dead = true;
    const cb = this.cb;
    this.cb = undefined;
    if (!wasDead) this.sock.destroy();
    cb?.(e, 0, EMPTY);
  }

  /** Close the connection; a request in flight gets no callback. */
  close(): void {
    this.dead = true;
    this.cb = undefined;
    this.sock.destroy();
  }
}

/** The request bytes for one request of `api` (default chat completions; see {@link APIS}). */
export function chatRequest(url: string, body: string, extraHeaders: Record<string, string> = {}, api: ApiSpec = APIS.chat): Buffer {
  const u = new URL(url);
  const payload = Buffer.from(body);
  const extra = Object.entries({ ...api.auth, ...extraHeaders })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const head = `POST ${api.path} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n${extra}Content-Length: ${payload.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), payload]);
}

/** One answer of {@link oneRequest}. */
export interface Answer {
  status: number;
  text: string;
}

/** One request on a fresh connection (sanity checks). */
export function oneRequest(url: string, body: string, headers: Record<string, string> = {}, api: ApiSpec = APIS.chat): Promise<Answer> {
  const u = new URL(url);
  const c = new HttpConn(u.hostname, Number(u.port));
  return new Promise((res, rej) => {
    c.request(chatRequest(url, body, headers, api), (e, status, b) => {
      c.close();
      if (e) rej(e);
      else res({ status, text: b.toString('utf8') });
    });
  });
}
