/**
 * The relay for an answer whose agent has gone (ADR 0027): nothing is sent anywhere, the body is
 * read to its end only to learn what the upstream charged, so that an abandoned request is
 * charged like any other.
 *
 * - A 2xx SSE stream: usage from its last usage chunk (the {@link SseGate}'s bounded tail).
 * - A 2xx JSON body: usage from its tail ({@link usageFromJsonTail}); only the last
 *   {@link DRAIN_TAIL_BYTES} are kept.
 * - Anything else: read and dropped.
 *
 * Bounds (bytes and time) are the caller's (`handler.ts` aborts the upstream past them); this relay
 * keeps at most {@link DRAIN_TAIL_BYTES} of the body in memory. It never writes to the client.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Meter } from './pipeline.js';
import type { BodyRelay } from './relay.js';
import { SseGate, usageFromJsonTail } from './sse.js';

/** Bytes of a JSON answer's tail kept to find its usage. */
export const DRAIN_TAIL_BYTES = 1024 * 1024;

/** See the module comment. `done` is called once, at the end of the body or on its failure. */
export class DrainRelay implements BodyRelay {
  readonly #meter: Meter;
  readonly #done: () => void;
  readonly #ok: boolean;
  readonly #gate: SseGate | undefined;
  readonly #tail: Buffer[] = [];
  #tailBytes = 0;

  constructor(status: number, headers: IncomingHttpHeaders, meter: Meter, done: () => void) {
    this.#meter = meter;
    this.#done = done;
    this.#ok = status >= 200 && status < 300;
    const ct = headers['content-type'];
    this.#gate = typeof ct === 'string' && ct.toLowerCase().startsWith('text/event-stream') ? new SseGate(undefined) : undefined;
  }

  onData(chunk: Buffer): boolean {
    this.#meter.bytes += chunk.length;
    if (!this.#ok) return true;
    if (this.#gate !== undefined) {
      this.#gate.push(chunk);
      return true;
    }
    this.#tail.push(chunk);
    this.#tailBytes += chunk.length;
    while (this.#tail.length > 1 && this.#tailBytes - (this.#tail[0]?.length ?? 0) >= DRAIN_TAIL_BYTES)
      this.#tailBytes -= this.#tail.shift()?.length ?? 0;
    return true;
  }

  onEnd(): void {
    if (this.#ok) {
      const usage = this.#gate !== undefined ? this.#gate.usage() : usageFromJsonTail(Buffer.concat(this.#tail, this.#tailBytes));
      if (usage !== undefined) this.#meter.usage = usage;
    }
    this.#done();
  }

  onError(): void {
    if (this.#ok && this.#gate !== undefined) {
      // A stream cut after its usage chunk still reported what it used.
      const usage = this.#gate.usage();
      if (usage !== undefined) this.#meter.usage = usage;
    }
    this.#done();
  }
}
