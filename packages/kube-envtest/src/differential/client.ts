import { request as httpsRequest } from 'node:https';
import { Agent } from 'node:https';
import type { ClientRequest, IncomingMessage } from 'node:http';

/** The credential and trust a {@link Target} sends with a request. */
export interface Credential {
  ca: string;
  cert?: string;
  key?: string;
  token?: string;
}

/** A finished exchange: status, headers (lower-case) and the whole body. */
export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** What one request sends. */
export interface RawRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: Buffer;
  cred: Credential;
  timeoutMs?: number;
}

// One keep-alive pool per credential: a TLS handshake per request would dominate the run time.
const agents = new Map<string, Agent>();
function agentFor(c: Credential): Agent {
  const key = `${c.ca.length}:${c.ca.slice(-64)}:${c.cert?.slice(-64) ?? ''}`;
  let a = agents.get(key);
  if (!a) {
    a = new Agent({ keepAlive: true, maxSockets: 16, ca: c.ca, ...(c.cert !== undefined ? { cert: c.cert, key: c.key } : {}) });
    agents.set(key, a);
  }
  return a;
}

/** Close the pooled connections (at the end of a run). */
export function closeAgents(): void {
  for (const a of agents.values()) a.destroy();
  agents.clear();
}

function open(r: RawRequest, pooled = true): ClientRequest {
  const headers: Record<string, string> = { ...r.headers };
  if (r.cred.token !== undefined) headers['authorization'] = `Bearer ${r.cred.token}`;
  if (r.body !== undefined) headers['content-length'] = String(r.body.length);
  return httpsRequest(new URL(r.url), {
    method: r.method,
    headers,
    ca: r.cred.ca,
    ...(r.cred.cert !== undefined ? { cert: r.cred.cert, key: r.cred.key } : {}),
    agent: pooled ? agentFor(r.cred) : false,
    timeout: r.timeoutMs ?? 30_000,
  });
}

/** One request; resolves with whatever the server answered, rejects only when no answer came. */
export function send(r: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = open(r);
    req.on('timeout', () => req.destroy(new Error(`${r.method} ${r.url}: no answer within ${r.timeoutMs ?? 30_000} ms`)));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.end(r.body);
  });
}

/** An open watch: its response status and headers, and its events as they arrive. */
export class WatchStream {
  status = 0;
  headers: Record<string, string | string[] | undefined> = {};
  /** The parsed event lines; a line that is not JSON is kept as `{ raw }`. */
  readonly events: unknown[] = [];
  /** The body of a non-200 answer. */
  body = '';
  ended = false;
  error: string | undefined;
  private req: ClientRequest | undefined;
  private res: IncomingMessage | undefined;
  private waiters: Array<() => void> = [];

  /** Resolves once the response head arrived (or the request failed). */
  readonly ready: Promise<void>;

  constructor(r: RawRequest) {
    this.ready = new Promise<void>((resolve) => {
      const req = open({ ...r, timeoutMs: 120_000 }, false);
      this.req = req;
      req.on('error', (e) => {
        this.error ??= e.message;
        this.finish();
        resolve();
      });
      req.on('response', (res) => {
        this.res = res;
        this.status = res.statusCode ?? 0;
        this.headers = res.headers;
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => {
          if (this.status !== 200) {
            this.body += s;
            return;
          }
          buf += s;
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (line) this.push(line);
          }
        });
        res.on('end', () => {
          if (buf.trim()) this.push(buf.trim());
          this.finish();
        });
        res.on('error', () => this.finish());
        resolve();
      });
      req.end();
    });
  }

  private push(line: string): void {
    try {
      this.events.push(JSON.parse(line));
    } catch {
      this.events.push({ raw: line });
    }
    this.wake();
  }

  private finish(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Wait until `pred()` holds, the stream ends, or `timeoutMs` passes; says which. */
  async waitFor(pred: () => boolean, timeoutMs: number): Promise<'count' | 'closed' | 'timeout'> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (pred()) return 'count';
      if (this.ended) return 'closed';
      const left = deadline - Date.now();
      if (left <= 0) return 'timeout';
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Close the connection. */
  close(): void {
    this.res?.destroy();
    this.req?.destroy();
    this.ended = true;
  }
}
