/**
 * The decision log: a {@link DecisionSink} that appends records as JSON lines to files in one
 * directory, hash-chained (`chain.ts`), off the request path, rotated by size and bounded on disk.
 *
 * - `write()` only pushes the record on a bounded in-memory queue; a drain scheduled with
 *   `setImmediate` serialises the queue (adding `seq` and `prev`), hashes each line and appends the
 *   batch with one asynchronous write.
 * - When the queue is full the record is dropped and counted (`kars_router_decisions_dropped_total`);
 *   the next batch ends with a `gap` record carrying the count, so a gap is always in the chain
 *   (ADR 0040).
 * - Files are `decisions-<seq of the first line, 12 digits>.jsonl`; a new one starts when the current
 *   one has reached `maxBytes`, and the oldest are deleted beyond `files`. A new file's first line
 *   links to the previous file's last (the chain runs through rotation).
 * - At open, the log continues the chain of what is in the directory: a new file whose first line
 *   is a `start` record linked to the last complete line found (and saying whether the file before
 *   ended in a partial line).
 * - {@link DecisionLog.subscribe} hears each line once it is written; {@link DecisionLog.files}
 *   lists what is on disk (the admin listener's `/decisions`, `stream.ts`, uses both).
 * - A failed write (disk full) loses its batch: counted as dropped, and the chain on disk then
 *   skips those lines, which `kars audit verify` reports as removed records.
 *
 * Caveats: one process per directory (the data-dir lock of ADR 0024 gives that under `kars up`);
 * a crash loses the queue (at most `queue` records, the last moments), which the next start record
 * shows as a chain that continues from the last line on disk.
 */
import { closeSync, fstatSync, mkdirSync, openSync, readSync, readdirSync, unlinkSync, write } from 'node:fs';
import { join } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import { lineHash } from './chain.js';
import type { ChainEvent, DecisionRecord } from './record.js';

/** Where decision records go. */
export interface DecisionSink {
  /** Take one record; must not block or throw (the request path calls it). */
  write(r: DecisionRecord): void;
  /** Write what is queued and stop. */
  close(): Promise<void>;
}

export interface DecisionLogOptions {
  dir: string;
  sandbox: string;
  instance: string;
  /** Start a new file once the current one holds this many bytes (default 64 MiB). */
  maxBytes?: number;
  /** Files kept, the current one included (default 8). */
  files?: number;
  /** Records queued before they are dropped and counted (default 10,000). */
  queue?: number;
  /** Wall time (epoch ms) for the log's own records. */
  wallNow: () => number;
  /** Where the counters register (none: unregistered). */
  registry?: Registry;
}

/** Decision log files in `dir`, oldest first. */
export function logFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => /^decisions-\d{12}\.jsonl$/.test(n)).sort();
}

function fileName(seq: number): string {
  return `decisions-${String(seq).padStart(12, '0')}.jsonl`;
}

/** The last complete line of a file (read from its end), and whether the file ends in a partial line. */
function lastLine(path: string): { line: string | undefined; partial: boolean } {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return { line: undefined, partial: false };
    let chunk = 64 * 1024;
    for (;;) {
      const start = Math.max(0, size - chunk);
      const buf = Buffer.alloc(size - start);
      readSync(fd, buf, 0, buf.length, start);
      const text = buf.toString('utf8');
      const partial = !text.endsWith('\n');
      const body = partial ? text.slice(0, text.lastIndexOf('\n') + 1) : text;
      const lines = body.split('\n');
      lines.pop();
      // With the whole file read, or a complete line inside the chunk, the answer is here.
      if (lines.length >= (start === 0 ? 0 : 2) || start === 0) return { line: lines[lines.length - 1], partial };
      chunk *= 4;
    }
  } finally {
    closeSync(fd);
  }
}

const MAX_BATCH_LINES = 4096;

/** The router's decision log (see the module comment). */
export class DecisionLog implements DecisionSink {
  readonly #o: Required<Omit<DecisionLogOptions, 'registry'>>;
  #queue: DecisionRecord[] = [];
  #dropped = 0;
  #seq = 0;
  #prev: string | null = null;
  #fd = -1;
  #bytes = 0;
  #writing = false;
  #scheduled = false;
  #closed = false;
  #idle: Array<() => void> = [];
  readonly #subscribers = new Set<(line: string, seq: number) => void>();
  readonly #droppedTotal: Counter | undefined;
  readonly #writtenTotal: Counter | undefined;

  constructor(opts: DecisionLogOptions) {
    this.#o = {
      dir: opts.dir,
      sandbox: opts.sandbox,
      instance: opts.instance,
      maxBytes: opts.maxBytes ?? 64 * 1024 * 1024,
      files: Math.max(1, opts.files ?? 8),
      queue: Math.max(1, opts.queue ?? 10_000),
      wallNow: opts.wallNow,
    };
    if (opts.registry !== undefined) {
      this.#droppedTotal = new Counter({
        name: 'kars_router_decisions_dropped_total',
        help: 'Decision records dropped because the decision log could not keep up; each run of drops is also a gap record in the chain (ADR 0040).',
        registers: [opts.registry],
      });
      this.#writtenTotal = new Counter({
        name: 'kars_router_decisions_written_total',
        help: 'Decision-log lines written (decisions, gap and start records).',
        registers: [opts.registry],
      });
    }
    mkdirSync(this.#o.dir, { recursive: true });
    const existing = logFiles(this.#o.dir);
    let truncatedTail = false;
    const newest = existing[existing.length - 1];
    if (newest !== undefined) {
      // Continue the chain from the last complete line on disk (an older file if the newest is empty).
      for (let i = existing.length - 1; i >= 0; i--) {
        const { line, partial } = lastLine(join(this.#o.dir, existing[i] as string));
        if (i === existing.length - 1) truncatedTail = partial;
        if (line === undefined) continue;
        try {
          const seq = (JSON.parse(line) as { seq?: unknown }).seq;
          if (typeof seq === 'number' && Number.isSafeInteger(seq)) {
            this.#seq = seq + 1;
            this.#prev = lineHash(line);
          }
        } catch {
          // an unreadable last line: the new file starts a fresh chain (verify will say where)
        }
        break;
      }
    }
    this.#rotate(this.#seq);
    const start: ChainEvent = {
      type: 'start',
      time: new Date(this.#o.wallNow()).toISOString(),
      sandbox: this.#o.sandbox,
      instance: this.#o.instance,
      ...(truncatedTail ? { truncatedTail: true } : {}),
    };
    this.#enqueueLine(start);
  }

  /** The next line's `seq` and the hash the next line will name as `prev` (the head of what is serialised). */
  head(): { seq: number; hash: string | null } {
    return { seq: this.#seq, hash: this.#prev };
  }

  /** The directory the files are in. */
  get dir(): string {
    return this.#o.dir;
  }

  write(r: DecisionRecord): void {
    if (this.#closed) return;
    if (this.#queue.length >= this.#o.queue) {
      this.#dropped++;
      this.#droppedTotal?.inc();
      return;
    }
    this.#queue.push(r);
    this.#schedule();
  }

  /** Be told of each line once it is written (`seq` is the line's). Returns the unsubscribe function. */
  subscribe(fn: (line: string, seq: number) => void): () => void {
    this.#subscribers.add(fn);
    return () => this.#subscribers.delete(fn);
  }

  /** The files on disk, oldest first (full paths). */
  files(): string[] {
    return logFiles(this.#o.dir).map((n) => join(this.#o.dir, n));
  }

  /** Resolves once everything queued so far is written. */
  flushed(): Promise<void> {
    if (!this.#writing && !this.#scheduled && this.#queue.length === 0 && this.#pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  async close(): Promise<void> {
    await this.flushed();
    this.#closed = true;
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }

  /** Lines serialised but not yet handed to a write (the start record before the first drain). */
  #pending: Array<{ line: string; seq: number }> = [];

  #line(body: DecisionRecord | ChainEvent): { line: string; seq: number } {
    const seq = this.#seq++;
    const line = JSON.stringify({ seq, prev: this.#prev, ...body });
    this.#prev = lineHash(line);
    return { line, seq };
  }

  #enqueueLine(body: ChainEvent): void {
    this.#pending.push(this.#line(body));
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing) return;
    this.#scheduled = true;
    setImmediate(() => this.#drain());
  }

  /** Start the file whose first line is `firstSeq`, and delete the oldest beyond the bound. */
  #rotate(firstSeq: number): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = openSync(join(this.#o.dir, fileName(firstSeq)), 'a');
    this.#bytes = 0;
    const all = logFiles(this.#o.dir);
    for (const old of all.slice(0, Math.max(0, all.length - this.#o.files))) {
      try {
        unlinkSync(join(this.#o.dir, old));
      } catch {
        // already gone
      }
    }
  }

  #drain(): void {
    this.#scheduled = false;
    if (this.#fd < 0) return;
    const batch = this.#pending;
    this.#pending = [];
    const take = this.#queue.length <= MAX_BATCH_LINES ? this.#queue : this.#queue.slice(0, MAX_BATCH_LINES);
    this.#queue = take === this.#queue ? [] : this.#queue.slice(MAX_BATCH_LINES);
    for (const r of take) batch.push(this.#line(r));
    // Every drop since the last drain happened after every record now taken (drops happen only while
    // the queue is full, and only a drain empties it): the gap goes right after them.
    if (this.#dropped > 0 && this.#queue.length === 0) {
      batch.push(
        this.#line({
          type: 'gap',
          time: new Date(this.#o.wallNow()).toISOString(),
          sandbox: this.#o.sandbox,
          instance: this.#o.instance,
          dropped: this.#dropped,
        }),
      );
      this.#dropped = 0;
    }
    if (batch.length === 0) return this.#settle();
    if (this.#bytes >= this.#o.maxBytes) {
      // A new file starts with this batch's first line: its name says that line's seq.
      this.#rotate((batch[0] as { seq: number }).seq);
    }
    let text = '';
    for (const b of batch) text += `${b.line}\n`;
    const buf = Buffer.from(text, 'utf8');
    this.#writing = true;
    const fd = this.#fd;
    const done = (err: NodeJS.ErrnoException | null, written: number): void => {
      if (err === null && written < buf.length) {
        write(fd, buf, written, buf.length - written, null, done);
        return;
      }
      this.#writing = false;
      if (err !== null) {
        // Lost lines: the chain on disk now skips them, which `kars audit verify` reports as removed.
        this.#droppedTotal?.inc(batch.length);
      } else {
        this.#bytes += buf.length;
        this.#writtenTotal?.inc(batch.length);
      }
      if (err === null)
        for (const b of batch)
          for (const fn of this.#subscribers)
            try {
              fn(b.line, b.seq);
            } catch {
              // a failing reader must not stop the log
            }
      if (this.#queue.length > 0 || this.#pending.length > 0 || this.#dropped > 0) this.#schedule();
      else this.#settle();
    };
    write(fd, buf, 0, buf.length, null, done);
  }

  #settle(): void {
    if (this.#writing || this.#scheduled) return;
    const idle = this.#idle;
    this.#idle = [];
    for (const fn of idle) fn();
  }
}
