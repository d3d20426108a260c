/**
 * The router's one server-sent-events splitter (inference streams, the MCP gateway's SSE answers).
 * Pure: it works on bytes handed to it.
 *
 * Caveats: only `\n\n` and `\r\n\r\n` end an event; a stream that ends its events with bare CRs
 * is held until it ends. Callers that need every spelling normalise line ends first.
 */

/** Index just past the first event terminator at or after `from`, or -1. */
function eventEnd(b: Buffer, from: number): number {
  const lf = b.indexOf('\n\n', from);
  const crlf = b.indexOf('\r\n\r\n', from);
  if (lf < 0) return crlf < 0 ? -1 : crlf + 4;
  if (crlf < 0 || lf < crlf) return lf + 2;
  return crlf + 4;
}

/**
 * Splits a byte stream into whole SSE events (each with its terminating blank line). It works on
 * bytes, not text: the terminators are ASCII, so an event never ends inside a UTF-8 sequence and
 * whatever is held back can be handed on unchanged.
 */
export class SseEventSplitter {
  #buf: Buffer = Buffer.alloc(0);

  /** Add bytes; returns the events they completed, in order. */
  push(chunk: Buffer): Buffer[] {
    const b = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: Buffer[] = [];
    let start = 0;
    for (let end = eventEnd(b, 0); end >= 0; end = eventEnd(b, start)) {
      out.push(b.subarray(start, end));
      start = end;
    }
    this.#buf = start === 0 ? b : b.subarray(start);
    return out;
  }

  /** Bytes held back (an incomplete event). */
  get pending(): number {
    return this.#buf.length;
  }

  /** Take whatever is held back (an incomplete event). */
  drain(): Buffer {
    const b = this.#buf;
    this.#buf = Buffer.alloc(0);
    return b;
  }
}

/** CRLF and lone CR as LF, on bytes (UTF-8 continuation bytes are never CR or LF). */
export function normaliseLineEnds(b: Buffer): Buffer {
  return b.includes(0x0d) ? Buffer.from(b.toString('latin1').replace(/\r\n?/g, '\n'), 'latin1') : b;
}

/**
 * A whole SSE body as every client reads it: a leading UTF-8 byte-order mark removed (the SSE
 * spec's decoders drop it) and every line end (CRLF, CR, LF) an LF. What a judge reads of these
 * bytes is what any client reads.
 */
export function canonicalSse(b: Buffer): Buffer {
  const noBom = b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? b.subarray(3) : b;
  return normaliseLineEnds(noBom);
}

/** The data of one event (its `data:` lines joined by `\n`), or undefined when it has none (a comment, a keep-alive). */
export function eventData(event: string): string | undefined {
  let data: string | undefined;
  let i = 0;
  while (i < event.length) {
    let nl = event.indexOf('\n', i);
    if (nl < 0) nl = event.length;
    let line = event.slice(i, nl);
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line.startsWith('data:')) {
      const v = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
      data = data === undefined ? v : `${data}\n${v}`;
    }
    i = nl + 1;
  }
  return data;
}

/** Every event of a whole SSE body, in order; a last event without its blank line is included as it stands. */
export function splitEvents(body: Buffer): Buffer[] {
  const s = new SseEventSplitter();
  const events = s.push(body);
  const rest = s.drain();
  if (rest.length > 0) events.push(rest);
  return events;
}
