/**
 * The relay for an answer whose agent has gone (ADR 0027): nothing is sent anywhere, the body is
 * read to its end only to learn what the upstream charged, so that an abandoned request is
 * charged like any other.
 *
 * - A 2xx answer: its usage read by the API's {@link UsageReader} (`usage.ts`), JSON or stream,
 *   whose memory bounds are its own.
 * - Anything else: read and dropped.
 *
 * Bounds (bytes and time) are the caller's (`handler.ts` aborts the upstream past them). It never
 * writes to the client.
 */
import type { Meter } from './pipeline.js';
import type { BodyRelay } from './relay.js';
import type { UsageReader } from './usage.js';

/** See the module comment. `done` is called once, at the end of the body or on its failure. */
export class DrainRelay implements BodyRelay {
  readonly #meter: Meter;
  readonly #done: () => void;
  readonly #ok: boolean;
  readonly #usage: UsageReader;

  /** `usage` is the reader for this answer's API and form (JSON or stream). */
  constructor(status: number, meter: Meter, usage: UsageReader, done: () => void) {
    this.#meter = meter;
    this.#done = done;
    this.#ok = status >= 200 && status < 300;
    this.#usage = usage;
  }

  onData(chunk: Buffer): boolean {
    this.#meter.bytes += chunk.length;
    if (this.#ok) this.#usage.push(chunk);
    return true;
  }

  #record(): void {
    if (!this.#ok) return;
    const usage = this.#usage.total();
    if (usage !== undefined) this.#meter.usage = usage;
  }

  onEnd(): void {
    this.#record();
    this.#done();
  }

  onError(): void {
    // A stream cut after its usage event still reported what it used.
    this.#record();
    this.#done();
  }
}
