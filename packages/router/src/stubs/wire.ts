/**
 * Wire helpers shared by the upstream stubs: reading `x-stub-*` headers, answering JSON, and writing
 * a stream in timed or byte-sized pieces. No state; nothing happens at import.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
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

/** Wait `ms` on the system clock (the stubs simulate a remote model, so real time is the point). */
export const sleep = (ms: number): Promise<void> => sleepOn(systemClock, ms);

/** Answer `obj` as JSON with a content-length. */
export function sendJson(res: ServerResponse, status: number, obj: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
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
