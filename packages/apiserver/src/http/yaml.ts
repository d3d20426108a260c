import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { ApiError, badRequest } from '@kars/kube-core';
import { checkJsonDepth } from './limits.js';

/** A body sent to the YAML thread. */
export interface YamlRequest {
  id: number;
  text: string;
}

/** The YAML thread's answer. */
export type YamlReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; status: number; message: string };

/** What the YAML thread sends: its Linux thread id once at start (0 where unknown), then replies. */
export type YamlThreadMessage = YamlReply | { tid: number };

/** Options of {@link YamlDecoder}. */
export interface YamlDecoderOptions {
  /**
   * Most CPU time the YAML thread may spend, from when a body is handed to it until it answers, before
   * the thread is replaced and the request refused. Default 10000.
   */
  cpuBudgetMs?: number;
  /** Most wall time a body may wait for its answer, however little CPU the thread got. Default 60000. */
  wallCapMs?: number;
  /** CPU time (ms) a thread of this process has used, by Linux thread id; default from /proc (tests replace it). */
  threadCpuMs?: (tid: number) => number | undefined;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout;
  /** The thread's CPU time when the body was sent; undefined until a starting thread says its id. */
  cpuAt: number | undefined;
  sentAt: number;
}

/** Linux reports thread CPU times in clock ticks of 1/USER_HZ s; USER_HZ is 100 on every Linux ABI. */
const USER_HZ = 100;

/** CPU time (user + system, ms) thread `tid` of this process has used; undefined where /proc cannot say. */
function threadCpuMs(tid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
    const ticks = Number(f[11]) + Number(f[12]); // fields 14 and 15: utime, stime
    return Number.isFinite(ticks) ? (ticks * 1000) / USER_HZ : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Decodes YAML request bodies off the event loop, on one worker thread, so that no YAML body,
 * however hostile or slow to parse, delays other requests (`/healthz` included). The thread
 * applies the depth and alias limits of `limits.ts` before building anything, has its own heap
 * limit, and is replaced if it dies or a body costs it more than 10 s of CPU.
 *
 * The limit is on the thread's CPU time (read from /proc on Linux), not on wall time: on a loaded
 * machine a body that needs 0.8 s of CPU (the 1 MiB alias bomb) took over 10 s of wall time at load
 * 15, and a wall-time limit refused it, and any honest body as costly, as a timeout. A body still
 * gets its answer within 60 s of wall time however starved the thread is; where /proc cannot report
 * the thread's CPU time, 10 s of wall time is the limit, as before.
 *
 * A body that is JSON (YAML's subset most clients send, e.g. kubectl's apply patches) is decoded on
 * the event loop instead, with the JSON depth check, since JSON.parse is fast and linear.
 *
 * Caveats: one thread, so YAML bodies queue behind each other; a hostile sender slows other YAML
 * senders, never the rest of the server.
 */
export class YamlDecoder {
  private worker: Worker | undefined;
  /** The current thread's Linux thread id: undefined until it has said, 0 where it cannot know. */
  private tid: number | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly cpuBudgetMs: number;
  private readonly wallCapMs: number;
  private readonly threadCpuMs: (tid: number) => number | undefined;

  constructor(opts: YamlDecoderOptions = {}) {
    this.cpuBudgetMs = opts.cpuBudgetMs ?? 10_000;
    this.wallCapMs = opts.wallCapMs ?? 60_000;
    this.threadCpuMs = opts.threadCpuMs ?? threadCpuMs;
  }

  async decode(text: string): Promise<unknown> {
    const start = text.trimStart();
    if (start.startsWith('{')) {
      checkJsonDepth(text);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        // Not JSON after all: YAML flow syntax or a document with comments; the thread decides.
      }
    }
    const w = this.ensureWorker();
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const p: Pending = {
        resolve,
        reject,
        timer: setTimeout(() => this.check(id), this.cpuBudgetMs),
        cpuAt: this.tid === undefined ? undefined : this.tid > 0 ? this.threadCpuMs(this.tid) : 0,
        sentAt: performance.now(),
      };
      p.timer.unref();
      this.pending.set(id, p);
      if (this.pending.size === 1) w.ref(); // keep the process alive only while a body is being decoded
      w.postMessage({ id, text } satisfies YamlRequest);
    });
  }

  /**
   * The budget's worth of wall time has passed for body `id`: refuse it if the thread has spent the
   * CPU budget since it was sent (or /proc cannot tell, or the wall cap is reached), else look again
   * once the rest of the budget could have been spent.
   */
  private check(id: number): void {
    const p = this.pending.get(id);
    if (!p) return;
    // A thread that has not said its id yet is still starting: it has spent nothing on the body.
    const cpu = this.tid === undefined ? 0 : this.tid > 0 ? this.threadCpuMs(this.tid) : undefined;
    const used = cpu === undefined ? undefined : cpu - (p.cpuAt ?? 0);
    const waited = performance.now() - p.sentAt;
    if (used !== undefined && used < this.cpuBudgetMs && waited < this.wallCapMs) {
      p.timer = setTimeout(() => this.check(id), Math.min(Math.max(10, this.cpuBudgetMs - used), this.wallCapMs - waited));
      p.timer.unref();
      return;
    }
    this.pending.delete(id);
    const what =
      used === undefined
        ? `more than ${this.cpuBudgetMs / 1000} s`
        : used >= this.cpuBudgetMs
          ? `more than ${this.cpuBudgetMs / 1000} s of CPU`
          : `more than ${this.wallCapMs / 1000} s`;
    p.reject(badRequest(`error decoding YAML: the body took ${what} to decode`));
    this.restart(new Error('decode timed out'));
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./yaml-worker.js', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: 512 } });
    w.on('message', (m: YamlThreadMessage) => {
      if ('tid' in m) {
        if (this.worker !== w) return;
        this.tid = m.tid;
        // It says its id before it reads any body: what it spent starting is not charged to them.
        const base = m.tid > 0 ? (this.threadCpuMs(m.tid) ?? 0) : 0;
        for (const p of this.pending.values()) p.cpuAt ??= base;
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      if (this.pending.size === 0) w.unref();
      if (m.ok) p.resolve(m.value);
      else p.reject(new ApiError(m.status, m.status === 413 ? 'RequestEntityTooLarge' : 'BadRequest', m.message));
    });
    w.on('error', (err) => this.restart(err));
    w.on('exit', () => {
      if (this.worker === w) this.restart(new Error('the YAML thread exited'));
    });
    w.unref(); // idle; after the listeners, since adding a 'message' listener refs the worker again
    this.worker = w;
    this.tid = undefined;
    return w;
  }

  /** Fail what is pending on the old thread; the next body starts a new one. */
  private restart(cause: Error): void {
    const w = this.worker;
    this.worker = undefined;
    this.tid = undefined;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.reject(badRequest(`error decoding YAML: ${cause.message}`, cause));
    }
    if (w) void w.terminate();
  }

  /** Stop the thread (it does not keep the process alive, but tests stop it explicitly). */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}

/** The process-wide decoder: one thread however many servers run in the process. */
let shared: YamlDecoder | undefined;

/** Decode a YAML body off the event loop (see {@link YamlDecoder}). */
export function decodeYaml(text: string): Promise<unknown> {
  shared ??= new YamlDecoder();
  return shared.decode(text);
}
