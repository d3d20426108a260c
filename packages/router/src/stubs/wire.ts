/**
 * Helpers shared by the upstream stubs: reading `x-stub-*` headers, answering JSON, writing a stream
 * in timed or byte-sized pieces, the behaviour a test sets (stub-wide and per model), and what every
 * running stub offers. Nothing happens at import.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOn, readBody } from '@kars/kube-core';
import { sleep as sleepOn, systemClock } from '@kars/kube-core';

/** The header's value when it arrived once, as a string. */
export function header(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return typeof v === 'string' ? v : undefined;
}

/** The header as a non-negative integer; undefined when absent or not one. */
export function intHeader(h: IncomingHttpHeaders, name: string): number | undefined {
  const v = header(h, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** The header as a flag: `1` or `true` (any case) is true, anything else false; undefined when absent. */
export function boolHeader(h: IncomingHttpHeaders, name: string): boolean | undefined {
  const v = header(h, name);
  if (v === undefined) return undefined;
  return v === '1' || v.toLowerCase() === 'true';
}

/**
 * How a behaviour field is read from its header: as a string, a non-negative integer, a flag, an
 * HTTP status (100–599), or one of a list of values. Anything else leaves the field unset.
 */
export type HeaderRead = 'string' | 'int' | 'bool' | 'status' | readonly string[];

/** Which header sets which behaviour field, and how it is read. */
export type HeaderTable<B> = { readonly [K in keyof B]?: readonly [header: string, read: HeaderRead] };

/** The behaviour fields every model stub lets a request set by header. */
export const COMMON_STUB_HEADERS = {
  status: ['x-stub-status', 'status'],
  content: ['x-stub-content', 'string'],
  delayMs: ['x-stub-delay-ms', 'int'],
  chunkDelayMs: ['x-stub-chunk-delay-ms', 'int'],
  chunkBytes: ['x-stub-chunk-bytes', 'int'],
  omitUsage: ['x-stub-omit-usage', 'bool'],
} as const;

/** Header `name` read as `read` says; undefined when absent or not such a value. */
function readHeader(h: IncomingHttpHeaders, name: string, read: HeaderRead): unknown {
  if (typeof read !== 'string') return read.find((e) => e === header(h, name));
  switch (read) {
    case 'string':
      return header(h, name);
    case 'bool':
      return boolHeader(h, name);
    case 'int':
      return intHeader(h, name);
    case 'status': {
      const n = intHeader(h, name);
      return n !== undefined && n >= 100 && n <= 599 ? n : undefined;
    }
  }
}

/** The behaviour a request's `x-stub-*` headers ask for, read by `table`. */
export function headerBehaviour<B>(h: IncomingHttpHeaders, table: HeaderTable<B>): Partial<B> {
  const out: Record<string, unknown> = {};
  for (const [field, entry] of Object.entries(table) as [string, readonly [string, HeaderRead] | undefined][]) {
    const v = entry === undefined ? undefined : readHeader(h, entry[0], entry[1]);
    if (v !== undefined) out[field] = v;
  }
  return out as Partial<B>;
}

/** Wait `ms` on the system clock (the stubs simulate a remote model, so real time is the point). */
export const sleep = (ms: number): Promise<void> => sleepOn(systemClock, ms);

/** Answer `obj` as JSON with a content-length. */
export function sendJson(res: ServerResponse, status: number, obj: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

/**
 * Answer exactly `body` with `b.status` and `b.contentType` (default JSON); an event-stream body is
 * written paced, as a stream would be.
 */
export async function sendRaw(
  res: ServerResponse,
  b: Pacing & { status: number; contentType: string | undefined },
  body: string,
): Promise<void> {
  const ct = b.contentType ?? 'application/json';
  if (ct.startsWith('text/event-stream')) {
    res.writeHead(b.status, { 'content-type': ct, 'cache-control': 'no-cache' });
    await writePaced(res, b, body);
    res.end();
    return;
  }
  res.writeHead(b.status, { 'content-type': ct, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** How a stream is paced. */
export interface Pacing {
  /** Write in pieces of this many bytes; 0 writes one event at a time. */
  chunkBytes: number;
  /** Wait between writes, ms. */
  chunkDelayMs: number;
}

/** Write `text` to `res`, paced as `p` says. */
export async function writePaced(res: ServerResponse, p: Pacing, text: string): Promise<void> {
  if (p.chunkBytes > 0) {
    const bytes = Buffer.from(text);
    for (let i = 0; i < bytes.length && !res.destroyed; i += p.chunkBytes) {
      res.write(bytes.subarray(i, i + p.chunkBytes));
      await sleep(p.chunkDelayMs);
    }
    return;
  }
  res.write(text);
  if (p.chunkDelayMs > 0) await sleep(p.chunkDelayMs);
}

/**
 * Write `events` (whole SSE frames) paced as `p` says, then finish: `end` ends the response
 * cleanly, `destroy` resets the connection after the last event written (a stream cut mid-way).
 */
export async function writeEvents(res: ServerResponse, p: Pacing, events: readonly string[], finish: 'end' | 'destroy'): Promise<void> {
  if (p.chunkBytes > 0) await writePaced(res, p, events.join(''));
  else for (const e of events) if (!res.destroyed) await writePaced(res, p, e);
  if (finish === 'destroy') {
    // Close the socket once the written bytes have left, without the chunked terminator: the
    // client sees the events so far, then a connection closed mid-answer.
    const socket = res.socket;
    if (socket) socket.destroySoon();
    else res.destroy();
  } else res.end();
}

/** The words of `text` as a model would stream them: the first bare, each later one with its leading space. */
export function wordPieces(text: string): string[] {
  if (text === '') return [];
  return text.split(' ').map((w, i) => (i === 0 ? w : ` ${w}`));
}

/** Split `s` into pieces of at most `n` characters (tool arguments arrive like this). */
export function piecesOf(s: string, n: number): string[] {
  const out: string[] = [];
  for (let at = 0; at < s.length; at += n) out.push(s.slice(at, at + n));
  return out;
}

/** What every running stub offers: where it listens, what it received, and the behaviour a test sets. */
export interface RunningStub<Req, B> {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: URL;
  /** Every request received, oldest first (bounded: the oldest are dropped). */
  readonly requests: Req[];
  /** Merge into the stub-wide behaviour. */
  setBehaviour(b: Partial<B>): void;
  /** Back to the defaults: no overrides, no recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

/** A stub's behaviour: stub-wide, with overrides per model (or deployment) merged over it. */
export class Behaviours<B extends object> {
  private base: B;
  private readonly overrides = new Map<string, Partial<B>>();

  constructor(private readonly defaults: () => B) {
    this.base = defaults();
  }

  /** The behaviour for a request naming `key` (the stub-wide one when undefined or without an override). */
  for(key: string | undefined): B {
    const o = key === undefined ? undefined : this.overrides.get(key);
    return o === undefined ? this.base : { ...this.base, ...o };
  }

  /** Merge into the stub-wide behaviour. */
  set(b: Partial<B>): void {
    this.base = { ...this.base, ...b };
  }

  /** Merge into the override for `key`; undefined removes it. */
  setFor(key: string, b: Partial<B> | undefined): void {
    if (b === undefined) this.overrides.delete(key);
    else this.overrides.set(key, { ...this.overrides.get(key), ...b });
  }

  /** Back to the defaults, without overrides. */
  reset(): void {
    this.base = this.defaults();
    this.overrides.clear();
  }
}

/**
 * Listen with `server` on `listen` (default a free port on 127.0.0.1) and give the parts every
 * stub shares: its URL, the recorded `requests`, the stub-wide behaviour, `reset` (which also
 * runs `onReset`, for what a stub stores of its own) and `close`.
 */
export async function runStub<Req, B extends object>(
  server: Server,
  listen: string | undefined,
  what: string,
  requests: Req[],
  behaviours: Behaviours<B>,
  onReset: () => void = () => {},
): Promise<RunningStub<Req, B>> {
  const url = new URL((await listenOn(server, listen ?? '127.0.0.1:0', `${what} listen address`)).boundUrl);
  return {
    url,
    requests,
    setBehaviour: (b) => behaviours.set(b),
    reset() {
      behaviours.reset();
      onReset();
      requests.length = 0;
    },
    close: () => closeServer(server),
  };
}

/** Close `server` and every connection it holds; resolves once it is closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * An HTTP server that reads each request's body (at most `maxBytes`) and hands it to `answer` as
 * text. A body over the limit gets `tooLarge(res)`; a client gone before its body ended, or an
 * answer that throws, has its connection dropped.
 */
export function bodyServer(
  maxBytes: number,
  answer: (req: IncomingMessage, res: ServerResponse, raw: string) => Promise<void>,
  tooLarge: (res: ServerResponse) => void,
): Server {
  return createServer((req, res) => {
    void readBody(req, maxBytes, req.headers['content-length']).then((r) => {
      if (r.ok) answer(req, res, r.body.toString('utf8')).catch(() => res.destroy());
      else if (r.reason === 'too_large') tooLarge(res);
      else res.destroy();
    });
  });
}
