/**
 * What an upstream answer says it used, read as the answer passes (ADR 0027): one reader per
 * answer, fed every chunk by whichever relay carries it, asked for the total at the end. Each API
 * reports usage in its own place (`apis.ts` {@link UsageShape}):
 *
 * - `openai-total` (chat, embeddings): `usage.total_tokens` of a JSON body, read from its tail
 *   without parsing the rest; of a stream, from the last chunk that carries usage (its tail).
 * - `responses`: `usage` of the whole JSON body (parsed whole: the Response object echoes the
 *   request's `metadata` after its usage, so the last `"usage"` key may be the agent's); of a
 *   stream, `response.usage` of the terminal `response.completed`, `response.incomplete` or
 *   `response.failed` event, whatever its size (it echoes the instructions and every output).
 * - `anthropic`: `usage` input, output and cache tokens of the JSON body; of a stream, the input
 *   (and cache) tokens of `message_start` plus the output tokens of the last `message_delta`
 *   (cumulative), or the delta's input tokens when it reports them.
 *
 * Memory: a tail reader keeps its last {@link USAGE_TAIL_BYTES} (stream) or
 * {@link JSON_TAIL_BYTES} (body); a whole-body reader keeps at most
 * {@link MAX_USAGE_BODY_BYTES}, and an event reader holds one event at a time up to that bound:
 * past it the usage is unknown and the answer is charged as one without usage.
 *
 * Guarantees: pure bookkeeping, never throws; a figure is a finite number ≥ 0 or undefined.
 */
import { isObject } from '@kars/kube-core';
import type { UsageShape } from './apis.js';
import { parseStrictJson } from '../json/strict.js';
import { SseEventSplitter, eventData } from '../http/sse.js';
import { USAGE_TAIL_BYTES, usageFromJsonTail, usageFromSseText } from './sse.js';

/** Bytes of a JSON body's tail kept to find its usage (`openai-total`). */
export const JSON_TAIL_BYTES = 1024 * 1024;
/** The largest body (or stream event) parsed whole for its usage. */
export const MAX_USAGE_BODY_BYTES = 16 * 1024 * 1024;

/** Reads one answer's usage. */
export interface UsageReader {
  push(chunk: Buffer): void;
  /** The total tokens the answer reported so far (a stream cut after its usage event still reported it). */
  total(): number | undefined;
}

function count(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/** The total of an OpenAI Responses usage object: `total_tokens`, else input + output. */
export function responsesUsageTotal(u: unknown): number | undefined {
  if (!isObject(u)) return undefined;
  const total = count(u['total_tokens']);
  if (total !== undefined) return total;
  const i = count(u['input_tokens']);
  const o = count(u['output_tokens']);
  return i === undefined || o === undefined ? undefined : i + o;
}

/** Input tokens of an Anthropic usage object, cache writes and reads included. */
function anthropicInput(u: Record<string, unknown>): number | undefined {
  const i = count(u['input_tokens']);
  if (i === undefined) return undefined;
  return i + (count(u['cache_creation_input_tokens']) ?? 0) + (count(u['cache_read_input_tokens']) ?? 0);
}

/** The total of an Anthropic usage object: input (with cache) + output tokens. */
export function anthropicUsageTotal(u: unknown): number | undefined {
  if (!isObject(u)) return undefined;
  const i = anthropicInput(u);
  const o = count(u['output_tokens']);
  return i === undefined || o === undefined ? undefined : i + o;
}

function parse(b: Buffer): unknown {
  const r = parseStrictJson(b.toString('utf8'));
  return r.ok ? r.value : undefined;
}

/** Keeps the last `bound` bytes of what it is given. */
class Tail {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  constructor(readonly bound: number) {}
  push(c: Buffer): void {
    this.#chunks.push(c);
    this.#bytes += c.length;
    while (this.#chunks.length > 1 && this.#bytes - (this.#chunks[0]?.length ?? 0) >= this.bound)
      this.#bytes -= this.#chunks.shift()?.length ?? 0;
  }
  bytes(): Buffer {
    return this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks, this.#bytes);
  }
}

class JsonTailReader implements UsageReader {
  readonly #tail = new Tail(JSON_TAIL_BYTES);
  push(c: Buffer): void {
    this.#tail.push(c);
  }
  total(): number | undefined {
    return usageFromJsonTail(this.#tail.bytes());
  }
}

class SseTailReader implements UsageReader {
  readonly #tail = new Tail(USAGE_TAIL_BYTES);
  push(c: Buffer): void {
    this.#tail.push(c);
  }
  total(): number | undefined {
    return usageFromSseText(this.#tail.bytes().toString('utf8'));
  }
}

/** A whole JSON body, parsed at the end. */
class JsonWholeReader implements UsageReader {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #over = false;
  constructor(readonly pick: (doc: unknown) => number | undefined) {}
  push(c: Buffer): void {
    if (this.#over) return;
    this.#bytes += c.length;
    if (this.#bytes > MAX_USAGE_BODY_BYTES) {
      this.#over = true;
      this.#chunks.length = 0;
    } else this.#chunks.push(c);
  }
  total(): number | undefined {
    if (this.#over || this.#bytes === 0) return undefined;
    return this.pick(parse(Buffer.concat(this.#chunks, this.#bytes)));
  }
}

/** Every event of a stream, each handed (name, parsed data) to `see` when `wanted` says so. */
abstract class EventReader implements UsageReader {
  readonly #splitter = new SseEventSplitter();
  #lost = false;
  push(c: Buffer): void {
    if (this.#lost) return;
    for (const ev of this.#splitter.push(c)) this.#event(ev);
    if (this.#splitter.pending > MAX_USAGE_BODY_BYTES) {
      this.#splitter.drain();
      this.#lost = true;
    }
  }
  #event(ev: Buffer): void {
    const text = ev.toString('utf8');
    const name = /^event:[ ]?(.*)$/m.exec(text)?.[1]?.trim();
    if (!this.wanted(name, text)) return;
    const data = eventData(text);
    if (data !== undefined) this.see(parse(Buffer.from(data)));
  }
  protected abstract wanted(name: string | undefined, text: string): boolean;
  protected abstract see(data: unknown): void;
  abstract total(): number | undefined;
  /** Whether an event was too large to read (the usage is then unknown). */
  protected get lost(): boolean {
    return this.#lost;
  }
}

const RESPONSES_TERMINAL = /^(response\.completed|response\.incomplete|response\.failed)$/;

class ResponsesStreamReader extends EventReader {
  #total: number | undefined;
  protected wanted(name: string | undefined, text: string): boolean {
    return name !== undefined ? RESPONSES_TERMINAL.test(name) : /"type"\s*:\s*"response\.(completed|incomplete|failed)"/.test(text);
  }
  protected see(data: unknown): void {
    if (!isObject(data) || !isObject(data['response'])) return;
    const t = responsesUsageTotal(data['response']['usage']);
    if (t !== undefined) this.#total = t;
  }
  total(): number | undefined {
    return this.lost ? undefined : this.#total;
  }
}

class AnthropicStreamReader extends EventReader {
  #input: number | undefined;
  #output: number | undefined;
  /** A stream cut before its `message_delta` has not reported its output (message_start says 1). */
  #delta = false;
  protected wanted(name: string | undefined, text: string): boolean {
    if (name === 'message_start' || name === 'message_delta') return true;
    return name === undefined && /"type"\s*:\s*"message_(start|delta)"/.test(text);
  }
  protected see(data: unknown): void {
    if (!isObject(data)) return;
    if (data['type'] === 'message_start' && isObject(data['message']) && isObject(data['message']['usage'])) {
      const u = data['message']['usage'];
      this.#input = anthropicInput(u) ?? this.#input;
      this.#output = count(u['output_tokens']) ?? this.#output;
    } else if (data['type'] === 'message_delta' && isObject(data['usage'])) {
      const u = data['usage'];
      // The delta's counts are cumulative; newer versions report input tokens there too.
      const i = anthropicInput(u);
      if (i !== undefined) this.#input = Math.max(i, this.#input ?? 0);
      const o = count(u['output_tokens']);
      if (o !== undefined) {
        this.#output = o;
        this.#delta = true;
      }
    }
  }
  total(): number | undefined {
    if (this.lost || !this.#delta || this.#input === undefined || this.#output === undefined) return undefined;
    return this.#input + this.#output;
  }
}

/** A usage reader for an answer of `shape`, JSON or a stream. */
export function usageReader(shape: UsageShape, stream: boolean): UsageReader {
  switch (shape) {
    case 'openai-total':
      return stream ? new SseTailReader() : new JsonTailReader();
    case 'responses':
      return stream ? new ResponsesStreamReader() : new JsonWholeReader((d) => (isObject(d) ? responsesUsageTotal(d['usage']) : undefined));
    case 'anthropic':
      return stream ? new AnthropicStreamReader() : new JsonWholeReader((d) => (isObject(d) ? anthropicUsageTotal(d['usage']) : undefined));
  }
}
