import type { Clock, KubeObject, WatchEvent } from '@kars/kube-core';
import { traceHop } from './trace.js';

const NEWLINE = 0x0a;

/**
 * Splits a watch stream's bytes into events: one JSON object a line, a partial line kept (as bytes)
 * for the next chunk. It also stamps when bytes last arrived (`lastByteAt`, on `clock`), which the
 * watch's idle deadline reads.
 *
 * It reads the raw Buffers of the response (no `setEncoding`): only complete lines are decoded, so
 * a multi-byte UTF-8 character split between two chunks is decoded whole (a 0x0A byte never occurs
 * inside one), and a chunk that ends with a newline (the usual case: one DATA frame per event) is
 * decoded with one `toString()`. Lines are what they were with a StringDecoder: the same text, the
 * same blank-line skipping, the same `JSON.parse` and its SyntaxError for a malformed line.
 *
 * The whole per-chunk path is this one method on purpose (no helper per line): a watch calls it
 * for every DATA frame, and V8 compiles one small function sooner and more cheaply than a chain.
 */
export class LineSplitter<T extends KubeObject> {
  /** When bytes last arrived, on the clock's timeline. */
  lastByteAt: number;
  /** The bytes of an unfinished line, in arrival order (copies: the chunks' memory is not kept). */
  private partial: Buffer[] = [];

  /** `trace`: the resource, when hop tracing is on (each event then writes a HOP line). */
  constructor(
    private readonly clock: Clock,
    private readonly trace: string | undefined,
  ) {
    this.lastByteAt = clock.now();
  }

  /** The events of every complete line of `chunk` (after what was left over), in order; possibly none. */
  push(chunk: Buffer): Array<WatchEvent<T>> {
    this.lastByteAt = this.clock.now();
    const out: Array<WatchEvent<T>> = [];
    const n = chunk.length;
    if (n === 0) return out;
    // Everything up to `cut` is complete lines; the rest is the start of the next one.
    const cut = chunk[n - 1] === NEWLINE ? n : chunk.lastIndexOf(NEWLINE) + 1;
    if (cut === 0) {
      this.partial.push(Buffer.from(chunk));
      return out;
    }
    let text: string;
    if (this.partial.length > 0) {
      this.partial.push(chunk.subarray(0, cut));
      text = Buffer.concat(this.partial).toString('utf8');
      this.partial = [];
    } else text = cut === n ? chunk.toString() : chunk.toString('utf8', 0, cut);
    if (cut < n) this.partial.push(Buffer.from(chunk.subarray(cut)));
    // `text` ends with a newline.
    let start = 0;
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', start)) {
      const line = text.slice(start, i);
      start = i + 1;
      // JSON.parse skips surrounding whitespace itself; only a blank line needs skipping.
      if (line.length === 0 || (line.length < 3 && line.trim() === '')) continue;
      const ev = JSON.parse(line) as WatchEvent<T>;
      if (this.trace !== undefined) {
        const meta = (ev.object as Partial<KubeObject> | undefined)?.metadata;
        traceHop('cli.watch', { r: this.trace, type: ev.type, name: meta?.name, rv: meta?.resourceVersion });
      }
      out.push(ev);
    }
    return out;
  }
}
