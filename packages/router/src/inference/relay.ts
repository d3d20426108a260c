/**
 * How the inference route passes one upstream answer to the client (steps 8 and 9 of the module
 * comment in `handler.ts`): four relays, one per {@link RelayMode}, each fed straight by the
 * upstream client's dispatch callbacks (`http/upstream.ts` {@link UpstreamSink}) with no stream or
 * promise per chunk in between.
 *
 * - `judged`: the whole body is buffered (up to {@link MAX_BUFFERED_RESPONSE_BYTES}), parsed once,
 *   judged by the floor (and moderated by an output stage), then sent in one write with its own
 *   `content-length`, or replaced by the refusal.
 * - `stream-moderated`: a stream under an output stage: buffered whole, moderated, gated, sent.
 * - `stream`: an SSE stream through the content-safety gate, chunk by chunk, with backpressure.
 * - `plain`: nothing to judge: passed through chunk by chunk with backpressure; usage is read from
 *   the tail of a 2xx body after it has been sent.
 *
 * Guarantees: each relay calls `done()` exactly once, after the meter holds everything the
 * settlement needs; a body that must be judged and is cut short or too large fails closed (502
 * `proxy_error`); a body passed through and cut short cuts the client off.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { endToEndHeaders } from '../http/headers.js';
import { parseStrictJson } from '../json/strict.js';
import { canonicalSse, eventData, splitEvents } from '../http/sse.js';
import type { UpstreamCall } from '../http/upstream.js';
import {
  decisionHeaders,
  guardrailFlagged,
  guardrailUnavailable,
  guardrailUnjudgeable,
  proxyError,
  sendRefusal,
  streamRefusalFrames,
} from './errors.js';
import type { InferenceRefusal } from './errors.js';
import { moderate, type GuardrailBackend } from './guardrails.js';
import { answerTexts } from './moderation-text.js';
import { judgeAnswer, upstreamFilterReason, type Meter, type RelayMode } from './pipeline.js';
import type { ContentSafetyRules } from './safety.js';
import { SseGate } from './sse.js';
import type { UpstreamClient } from '../http/upstream.js';
import type { Wire } from './apis.js';
import type { UsageReader } from './usage.js';

/** Largest upstream body the route buffers to judge; a larger one is refused (floor active) or passed unjudged. */
export const MAX_BUFFERED_RESPONSE_BYTES = 16 * 1024 * 1024;

/** Reports the request's decision once (`handler.ts`). */
export type Decide = (decision: 'allow' | 'deny', code?: string) => void;

/** What a relay needs: the client response, the answer's head, and where to report. */
export interface RelayTarget {
  res: ServerResponse;
  status: number;
  headers: IncomingHttpHeaders;
  meter: Meter;
  decide: Decide;
  /** The upstream request: resumed after backpressure, aborted when a body is too large to judge. */
  call: UpstreamCall;
  /** The relay is over (called once). */
  done: () => void;
  /** The envelope of the API answered (for the router's own refusals). */
  wire: Wire;
  /** Reads the usage the answer reports (fed every chunk of a 2xx answer). */
  usage: UsageReader;
}

/** The answer's body, as the upstream client delivers it. */
export interface BodyRelay {
  /** A chunk; false pauses the upstream until the client has drained. */
  onData(chunk: Buffer): boolean;
  onEnd(): void;
  /** The upstream body was cut short (or aborted). */
  onError(): void;
}

/** What the judging relays need beyond the target. */
export interface JudgeOptions {
  floor: ContentSafetyRules | undefined;
  /** The output stage's backend, when one judges this answer. */
  guard: GuardrailBackend | undefined;
  /** The client for the moderation call. */
  client: UpstreamClient;
}

const CONTENT_LENGTH: ReadonlySet<string> = new Set(['content-length']);

/**
 * The answer as JSON, or undefined when it is not JSON or holds a duplicate key: the raw bytes
 * are what is sent, and a client whose parser keeps the first of two keys would read a text the
 * judge (last key wins) never saw.
 */
function tryParse(b: Buffer): unknown {
  const r = parseStrictJson(b.toString('utf8'));
  return r.ok ? r.value : undefined;
}

/** Create the relay for `mode`. */
export function createRelay(mode: RelayMode, t: RelayTarget, j: JudgeOptions): BodyRelay {
  switch (mode) {
    case 'judged':
      return new JudgedRelay(t, j);
    case 'stream-moderated':
      return new ModeratedStreamRelay(t, j);
    case 'stream':
      return new StreamRelay(t, j.floor);
    case 'plain':
      return new PlainRelay(t);
  }
}

/** Refuse with `r` (unless the client is gone) and report the denial. */
function refuse(t: RelayTarget, r: InferenceRefusal): void {
  t.decide('deny', r.body.error.code);
  if (!t.res.destroyed) sendRefusal(t.res, r, undefined, t.wire);
}

/** Whether `t`'s answer is a 2xx (whose usage counts). */
function ok(t: RelayTarget): boolean {
  return t.status >= 200 && t.status < 300;
}

/** Record the usage the answer has reported so far, when it is a 2xx (ADR 0027). */
function recordUsage(t: RelayTarget): void {
  if (!ok(t)) return;
  const u = t.usage.total();
  if (u !== undefined) t.meter.usage = u;
}

/**
 * Moderate every text of an answer (`moderation-text.ts`: content, tool calls, function calls,
 * refusals, transcripts, streamed fragments joined); on anything but clean, or on something it
 * cannot judge (audio, a body that is not JSON), refuse and say so.
 */
async function refusedByOutputStage(t: RelayTarget, j: JudgeOptions, guard: GuardrailBackend, docs: unknown[]): Promise<boolean> {
  const a = answerTexts(docs);
  if (a.unjudgeable.length > 0) {
    refuse(t, guardrailUnjudgeable('output', a.unjudgeable));
    return true;
  }
  const m = await moderate(guard, a.texts, j.client);
  if (m.kind === 'clean') return false;
  refuse(t, m.kind === 'flagged' ? guardrailFlagged('output', m.categories) : guardrailUnavailable(m.detail));
  return true;
}

/**
 * Collects a whole body to judge, up to MAX_BUFFERED_RESPONSE_BYTES (counted into `meter.bytes`).
 * Cut short, or too large (the upstream is aborted at the limit): 502 `proxy_error`.
 */
abstract class BufferingRelay<Read> implements BodyRelay {
  protected readonly t: RelayTarget;
  protected readonly j: JudgeOptions;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #over = false;

  constructor(t: RelayTarget, j: JudgeOptions) {
    this.t = t;
    this.j = j;
  }

  onData(chunk: Buffer): boolean {
    if (this.#over) return true;
    this.#size += chunk.length;
    this.t.meter.bytes += chunk.length;
    if (ok(this.t)) this.t.usage.push(chunk);
    if (this.#size > MAX_BUFFERED_RESPONSE_BYTES) {
      this.#over = true;
      this.#chunks.length = 0;
      this.t.call.abort();
      this.#failClosed();
      return true;
    }
    this.#chunks.push(chunk);
    return true;
  }

  onEnd(): void {
    if (this.#over) return;
    const c = this.#chunks;
    const read = this.read(c.length === 1 ? (c[0] as Buffer) : Buffer.concat(c, this.#size));
    // The usage the upstream reports is what the provider bills: record it first, whether the
    // agent is still there, and whatever the judgement (ADR 0027).
    recordUsage(this.t);
    if (this.t.res.destroyed || this.t.res.headersSent) return this.t.done();
    this.judge(read);
  }

  /** Parse the whole body once: what the judgement needs. */
  protected abstract read(body: Buffer): Read;

  onError(): void {
    if (this.#over) return;
    this.#failClosed();
  }

  /** An answer that must be judged and cannot be: 502, never the unjudged bytes. */
  #failClosed(): void {
    const { res } = this.t;
    if (!res.destroyed && !res.headersSent) {
      this.t.decide('allow', 'proxy_error');
      sendRefusal(res, proxyError(), undefined, this.t.wire);
    }
    this.t.done();
  }

  /** Judge and answer the whole body; calls `done()` when finished. */
  protected abstract judge(read: Read): void;

  /**
   * Run `guard` (the output guardrail, if any) over `docs`, then `send()` unless it refused, and
   * call `done()`. Should moderation ever reject, fail closed (502).
   */
  protected sendUnlessRefused(guard: GuardrailBackend | undefined, docs: unknown[], send: () => void): void {
    const { t } = this;
    const finish = (refused: boolean): void => {
      if (!refused && !t.res.destroyed) send();
      t.done();
    };
    if (guard === undefined) return finish(false);
    refusedByOutputStage(t, this.j, guard, docs).then(finish, () => {
      // moderate() never rejects; should it, fail closed.
      if (!t.res.destroyed && !t.res.headersSent) sendRefusal(t.res, proxyError(), undefined, t.wire);
      t.done();
    });
  }
}

/** A JSON answer judged whole (floor, output stage), then sent in one write or refused. */
class JudgedRelay extends BufferingRelay<{ body: Buffer; doc: unknown }> {
  protected read(body: Buffer): { body: Buffer; doc: unknown } {
    return { body, doc: tryParse(body) };
  }

  protected judge({ body, doc }: { body: Buffer; doc: unknown }): void {
    const { t } = this;
    const { status } = t;
    const ok = status >= 200 && status < 300;
    const blocked = judgeAnswer(status, doc, this.j.floor);
    if (blocked !== undefined) {
      refuse(t, blocked);
      t.done();
      return;
    }
    // An error answer is not moderated: it carries no model output.
    this.sendUnlessRefused(ok ? this.j.guard : undefined, [doc], () => this.#send(body, doc));
  }

  #send(body: Buffer, doc: unknown): void {
    const { t } = this;
    const headers: OutgoingHttpHeaders = endToEndHeaders(t.headers, CONTENT_LENGTH);
    headers['content-length'] = body.length;
    if (t.status === 400 || t.status === 403) {
      const reason = upstreamFilterReason(doc);
      if (reason !== undefined) Object.assign(headers, decisionHeaders('UpstreamContentFilter', reason));
    }
    t.decide('allow');
    t.res.writeHead(t.status, headers);
    t.res.end(body);
  }
}

/**
 * A stream under an output guardrail: buffered whole (up to the judging limit), moderated, then
 * passed through the content-safety gate and sent, or refused with a plain JSON 403/503, since
 * nothing has been sent yet. Latency: the client sees the stream only when it has ended upstream.
 */
class ModeratedStreamRelay extends BufferingRelay<{ all: Buffer; text: string }> {
  protected read(raw: Buffer): { all: Buffer; text: string } {
    // Judged and sent in one canonical form (no BOM, LF line ends), so that no client can read
    // an event the judge did not: `id: 1\rdata: …` is one line to a reader that splits on LF only.
    const all = canonicalSse(raw);
    return { all, text: all.toString('utf8') };
  }

  protected judge({ all, text }: { all: Buffer; text: string }): void {
    const docs: unknown[] = [];
    for (const ev of splitEvents(all)) {
      const data = eventData(ev.toString('utf8'))?.trim();
      if (data !== undefined && data !== '' && data !== '[DONE]') docs.push(tryParse(Buffer.from(data)));
    }
    // A "stream" with bytes but no event a client would read as data (a JSON body labelled
    // text/event-stream): nothing to judge it by, so it cannot pass as clean.
    if (docs.length === 0 && text.trim() !== '' && !/^data:/m.test(text)) docs.push(undefined);
    this.sendUnlessRefused(this.j.guard, docs, () => this.#send(all));
  }

  #send(all: Buffer): void {
    const { t } = this;
    const gate = new SseGate(this.j.floor);
    const g1 = gate.push(all);
    const g2 = g1.blocked === undefined ? gate.end() : g1;
    // (The usage was recorded from the whole body when it ended.)
    const headers = endToEndHeaders(t.headers, CONTENT_LENGTH);
    const blocked = g1.blocked ?? g2.blocked;
    if (blocked !== undefined) {
      t.decide('deny', blocked.body.error.code);
      t.res.writeHead(t.status, { ...headers, ...decisionHeaders('InferencePolicy', blocked.body.error.message) });
      t.res.end(streamRefusalFrames(blocked));
      return;
    }
    t.decide('allow');
    t.res.writeHead(t.status, headers);
    t.res.end(g2 === g1 ? g1.out : Buffer.concat([g1.out, g2.out]));
  }
}

/** Writes to the client with backpressure: a full socket buffer pauses the upstream until `drain`. */
abstract class PassingRelay implements BodyRelay {
  protected readonly t: RelayTarget;
  #waiting = false;
  readonly #onDrain = (): void => {
    this.#waiting = false;
    this.t.call.resume();
  };

  constructor(t: RelayTarget) {
    this.t = t;
  }

  /** Write `out`; false when the client's buffer is full (the caller then pauses the upstream). */
  protected write(out: Buffer): boolean {
    const { res } = this.t;
    if (out.length === 0 || res.destroyed || res.write(out)) return true;
    if (!this.#waiting) {
      this.#waiting = true;
      res.once('drain', this.#onDrain);
    }
    return false;
  }

  abstract onData(chunk: Buffer): boolean;
  abstract onEnd(): void;
  abstract onError(): void;
}

/** No judging: stream the body straight through; the usage reader sees a 2xx body as it passes. */
class PlainRelay extends PassingRelay {
  readonly #ok: boolean;

  constructor(t: RelayTarget) {
    super(t);
    this.#ok = ok(t);
    t.decide('allow');
    t.res.writeHead(t.status, endToEndHeaders(t.headers));
  }

  onData(c: Buffer): boolean {
    this.t.meter.bytes += c.length;
    if (this.#ok) this.t.usage.push(c);
    return this.write(c);
  }

  onEnd(): void {
    const { t } = this;
    t.res.end();
    recordUsage(t);
    t.done();
  }

  onError(): void {
    this.t.res.destroy();
    this.t.done();
  }
}

/** An SSE stream through the content-safety gate; usage from its last usage chunk. */
class StreamRelay extends PassingRelay {
  readonly #gate: SseGate;
  readonly #headers: OutgoingHttpHeaders;
  #blocked = false;

  constructor(t: RelayTarget, floor: ContentSafetyRules | undefined) {
    super(t);
    this.#gate = new SseGate(floor);
    this.#headers = endToEndHeaders(t.headers, CONTENT_LENGTH);
    if (!this.#gate.gating) {
      t.decide('allow');
      this.#head();
    }
  }

  #head(extra?: Record<string, string>): void {
    const { res } = this.t;
    if (res.headersSent) return;
    res.writeHead(this.t.status, extra === undefined ? this.#headers : { ...this.#headers, ...extra });
  }

  #block(out: Buffer, r: InferenceRefusal): void {
    const { res } = this.t;
    this.#blocked = true;
    this.t.decide('deny', r.body.error.code);
    if (!res.headersSent) this.#head(out.length === 0 ? decisionHeaders('InferencePolicy', r.body.error.message) : undefined);
    if (out.length > 0) res.write(out);
    res.end(streamRefusalFrames(r));
    this.t.call.abort();
    this.t.done();
  }

  onData(c: Buffer): boolean {
    this.t.meter.bytes += c.length;
    if (ok(this.t)) this.t.usage.push(c);
    if (this.#blocked) return true;
    const g = this.#gate.push(c);
    if (g.blocked !== undefined) {
      this.#block(g.out, g.blocked);
      return true;
    }
    if (g.out.length > 0) this.#head();
    return this.write(g.out);
  }

  onEnd(): void {
    if (this.#blocked) return;
    const { t } = this;
    const g = this.#gate.end();
    if (g.blocked !== undefined) {
      this.#block(g.out, g.blocked);
      return;
    }
    t.decide('allow');
    this.#head();
    t.res.end(g.out.length > 0 ? g.out : undefined);
    recordUsage(t);
    t.done();
  }

  onError(): void {
    if (this.#blocked) return;
    // A stream cut after its usage event still reported what it used.
    recordUsage(this.t);
    this.t.res.destroy();
    this.t.decide('allow');
    this.t.done();
  }
}
