import type { KubeObject, Status } from '@kars/kube-core';
import type { WatchDelivery } from '../watch/cache.js';
import type { Res } from './compat.js';

/** Lines of one event-loop turn are written together up to this many bytes (a burst goes out in such pieces). */
const COALESCE_BYTES = 64 * 1024;

/** Default {@link WatchStreamOptions.maxBufferedBytes}: 16 MiB per watch. */
export const DEFAULT_WATCH_BUFFER_BYTES = 16 * 1024 * 1024;

/** Options of one watch response. */
export interface WatchStreamOptions {
  /** The server's deadline for this watch (timeoutSeconds). */
  timeoutMs: number;
  /** Send BOOKMARK events (allowWatchBookmarks). */
  bookmarks: boolean;
  bookmarkIntervalMs: number;
  /** The current revision, for bookmarks. */
  currentRv: () => number;
  /** apiVersion and kind stamped on bookmark objects. */
  apiVersion: string;
  kind: string;
  /** Turn a delivery into the object sent (version conversion, tables). */
  render: (d: WatchDelivery) => string;
  /**
   * Most bytes held for a slow client (queued in the response plus waiting here) before the watch
   * is dropped (kube drops slow watchers too). Counted in bytes, not events, so large objects or
   * per-watcher renderings (tables, other versions) cannot make the server hold unbounded memory.
   */
  maxBufferedBytes: number;
}

/**
 * One watch response: newline-delimited JSON events with bookmarks, a deadline and backpressure.
 * `freeze()` makes it silent forever without closing it, as a dropped load-balancer flow looks.
 */
export class WatchStream {
  /**
   * Lines of this event-loop turn not yet written: they go out as one write when the turn ends
   * (or at once past {@link COALESCE_BYTES}), so events that arrive together share one HTTP/2 DATA
   * frame or HTTP/1.1 chunk, as kube-apiserver flushes a watch only once no further event is queued.
   */
  private pending = '';
  private pendingBytes = 0;
  private flushScheduled = false;
  private buffered: string[] = [];
  private bufferedBytes = 0;
  private waitingDrain = false;
  private frozen = false;
  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly cleanups: Array<() => void> = [];

  constructor(
    private readonly res: Res,
    private readonly opts: WatchStreamOptions,
  ) {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    // Send the headers now, as kube-apiserver does: over HTTP/1.1 writeHead only queues them until the
    // first event, and clients wait for them before their watch is running (HTTP/2 sends them at once).
    const flush = (res as { flushHeaders?: () => void }).flushHeaders;
    if (typeof flush === 'function') flush.call(res);
    res.on('close', () => this.close());
    res.on('drain', () => this.flush());
    const every = setInterval(() => this.bookmark(), opts.bookmarkIntervalMs);
    every.unref();
    this.timers.push(every);
    if (opts.bookmarks && opts.timeoutMs > 2000) {
      const before = setTimeout(() => this.bookmark(), opts.timeoutMs - 2000);
      before.unref();
      this.timers.push(before);
    }
    const end = setTimeout(() => this.end(), opts.timeoutMs);
    end.unref();
    this.timers.push(end);
  }

  /** Register cleanup to run when the watch ends (unsubscribe). */
  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.cleanups.push(fn);
  }

  deliver(d: WatchDelivery): void {
    this.line(`{"type":"${d.type}","object":${this.opts.render(d)}}\n`);
  }

  /** A BOOKMARK at the current revision; `initialEventsEnd` marks the end of sendInitialEvents. */
  bookmark(initialEventsEnd = false): void {
    if (!this.opts.bookmarks) return;
    const obj: KubeObject = {
      apiVersion: this.opts.apiVersion,
      kind: this.opts.kind,
      metadata: { resourceVersion: String(this.opts.currentRv()) },
    };
    if (initialEventsEnd) obj.metadata.annotations = { 'k8s.io/initial-events-end': 'true' };
    this.line(`{"type":"BOOKMARK","object":${JSON.stringify(obj)}}\n`);
  }

  /** Send an ERROR event carrying a Status, then end the watch. */
  error(status: Status): void {
    this.line(`{"type":"ERROR","object":${JSON.stringify(status)}}\n`);
    this.end();
  }

  /** Stop writing forever but keep the stream open. */
  freeze(): void {
    this.frozen = true;
    this.pending = '';
    this.pendingBytes = 0;
    this.buffered = [];
    this.bufferedBytes = 0;
  }

  isFrozen(): boolean {
    return this.frozen;
  }

  private line(s: string): void {
    if (this.closed || this.frozen) return;
    const bytes = Buffer.byteLength(s);
    if (this.waitingDrain) {
      this.buffered.push(s);
      this.bufferedBytes += bytes;
      if (this.bufferedBytes + this.queuedInResponse() > this.opts.maxBufferedBytes) this.drop();
      return;
    }
    this.pending += s;
    this.pendingBytes += bytes;
    if (this.pendingBytes >= COALESCE_BYTES) this.writePending();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.writePending();
      });
    }
  }

  /** Write this turn's lines as one chunk (nothing when there are none, or the watch is over). */
  private writePending(): void {
    if (this.pending === '' || this.closed || this.frozen) return;
    // (Never while waiting for 'drain': lines go to `buffered` then, and `pending` is empty.)
    const s = this.pending;
    this.pending = '';
    this.pendingBytes = 0;
    if (!this.write(s)) this.waitingDrain = true;
  }

  /** Bytes the response itself still holds (HTTP/1.1: the socket's queue; HTTP/2: the stream's). */
  private queuedInResponse(): number {
    const r = this.res as { writableLength?: number; stream?: { writableLength?: number } };
    return r.stream?.writableLength ?? r.writableLength ?? 0;
  }

  /**
   * Drop a watcher that fell too far behind: reset its stream (or connection) at once, since a
   * graceful end would queue behind the data it is not reading, and free what was held for it.
   * The client resumes from its last resourceVersion, as after any dropped watch.
   */
  private drop(): void {
    this.pending = '';
    this.pendingBytes = 0;
    this.buffered = [];
    this.bufferedBytes = 0;
    const r = this.res as { destroy?: (err?: Error) => void; stream?: { close?: (code?: number) => void } };
    if (r.stream?.close)
      r.stream.close(0x8); // HTTP/2 CANCEL
    else r.destroy?.();
    this.close();
  }

  private flush(): void {
    this.waitingDrain = false;
    while (this.buffered.length > 0 && !this.waitingDrain && !this.closed && !this.frozen) {
      const s = this.buffered.shift() as string;
      this.bufferedBytes -= Buffer.byteLength(s);
      if (!this.write(s)) this.waitingDrain = true;
    }
  }

  private write(s: string): boolean {
    return (this.res as { write(chunk: string): boolean }).write(s);
  }

  /** End the watch cleanly (the client will resume from its last resourceVersion). */
  end(): void {
    if (this.closed) return;
    this.writePending();
    if (!this.frozen) this.res.end();
    this.close();
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const fn of this.cleanups.splice(0)) fn();
  }
}
