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

/** Most time one YAML body may take to decode before the thread is replaced and the request refused. */
const DECODE_TIMEOUT_MS = 10_000;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout;
}

/**
 * Decodes YAML request bodies off the event loop, on one worker thread, so that no YAML body,
 * however hostile or slow to parse, delays other requests (`/healthz` included). The thread
 * applies the depth and alias limits of `limits.ts` before building anything, has its own heap
 * limit, and is replaced if it dies or a body takes longer than 10 s.
 *
 * A body that is JSON (YAML's subset most clients send, e.g. kubectl's apply patches) is decoded on
 * the event loop instead, with the JSON depth check, since JSON.parse is fast and linear.
 *
 * Caveats: one thread, so YAML bodies queue behind each other; a hostile sender slows other YAML
 * senders, never the rest of the server.
 */
export class YamlDecoder {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();

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
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(badRequest(`error decoding YAML: the body took more than ${DECODE_TIMEOUT_MS / 1000} s to decode`));
        this.restart(new Error('decode timed out'));
      }, DECODE_TIMEOUT_MS);
      timer.unref();
      this.pending.set(id, { resolve, reject, timer });
      if (this.pending.size === 1) w.ref(); // keep the process alive only while a body is being decoded
      w.postMessage({ id, text } satisfies YamlRequest);
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./yaml-worker.js', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: 512 } });
    w.on('message', (m: YamlReply) => {
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
    return w;
  }

  /** Fail what is pending on the old thread; the next body starts a new one. */
  private restart(cause: Error): void {
    const w = this.worker;
    this.worker = undefined;
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
