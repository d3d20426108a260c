/**
 * The chat-completions route: enforces a sandbox's InferencePolicy on every request and forwards it
 * upstream (kars-wire-contract.md §5.3; the AGT governance step is the tools gateway's, not this).
 *
 * Paths: `POST /v1/chat/completions` and
 * `POST /openai/deployments/{deployment}/chat/completions[?api-version=…]` (Azure form). Any other
 * path is not handled (the handler resolves `false`); another method on these paths gets 405.
 *
 * The decisions are pure functions in `pipeline.ts` (request + policy snapshot → refuse, or forward
 * this body with this reservation; answer → how to relay it); this module is the thin proxy that
 * reads the request, asks the pipeline, reserves, sends, relays and settles.
 *
 * Per request, in order:
 * 1. The policy snapshot is taken **once**; the whole request (a stream to its end) uses it.
 * 2. Sandbox identity is the router's `sandbox` (its deployment, `--sandbox`), never the agent's
 *    word: a request's `x-kars-sandbox` may repeat it but not change it (another value → 403
 *    `sandbox_mismatch`). Budgets are keyed by that identity (ADR 0015).
 * 3. The body is read (over 10 MiB → 413) and parsed strictly (not a JSON object → 400
 *    `invalid_json`; a duplicate key at any depth → 400 `duplicate_key`; nesting deeper than 128 →
 *    400 `invalid_json`).
 * 4. Token limits are normalised (`limits.ts`): malformed `max_tokens`, `max_completion_tokens`
 *    or `n` → 400 `invalid_token_limit`; `n × max(max_tokens, max_completion_tokens)` above
 *    `tokenBudget.perRequestTokens` → 429 `per_request_tokens_exceeded`; a missing limit is set to
 *    `floor(perRequestTokens / n)` in the forwarded body; streams ask for usage.
 * 5. Daily / monthly token budget: the request's maximum (prompt estimate + completion maximum) is
 *    **reserved** before forwarding (→ 429 `budget_exceeded` when usage plus reservations has
 *    reached a cap) and settled on the real usage afterwards. The daily cap falls back to
 *    `defaultDailyTokens` when the policy sets none.
 * 6. Model preference: the provider is `modelPreference.primary.provider` when recognised, else
 *    `provider`, else azure-openai; `bedrock` → 501. The candidates are the primary deployment then
 *    the fallbacks (empty names, duplicates and bedrock fallbacks skipped); each replaces the
 *    request's deployment (the Azure path segment, or the body's `model`). A 5xx, a 429 or a
 *    transport failure moves on to the next candidate; the last candidate's answer is returned as
 *    it is. The body forwarded is always the router's re-serialisation of what it parsed and
 *    decided on, never the client's bytes.
 * 7. Forwarding uses the router's shared undici client (`http/upstream.ts`: keep-alive pool, one
 *    retry on a new connection when a pooled one was stale). Response headers must arrive within
 *    `fetchTimeoutMs`; no answer at all → 502 `proxy_error`.
 * 8. Usage: `usage.total_tokens` of a 2xx body, or of the last stream chunk that carries usage,
 *    settles the reservation. Bodies nobody needs to judge are not parsed whole: usage is read
 *    from their tail (`usageFromJsonTail`), after the response has been sent. A 2xx answer without
 *    usage (or cut short) is charged an estimate: prompt bytes / 4 + answer bytes relayed / 4
 *    (`estimateUsage`). A non-2xx answer or no answer settles at 0.
 * 9. Content-safety floor (when active): a 2xx JSON body is judged whole and replaced by a 403 when
 *    blocked; a 400 carrying `error.innererror.content_filter_result` is judged on severities; a
 *    stream is judged at its first annotated event (see `sse.ts`), keeping the upstream status.
 *    An upstream 400/403 content-filter refusal passes through with the decision headers added.
 *
 * Guarantees: the handler never rejects and never throws; bad upstream output is passed on or
 * refused, never a crash. When the client goes away the upstream request is aborted.
 *
 * Caveats:
 * - One upstream URL serves every provider and deployment; `anthropic` / `ollama` do not change the
 *   upstream (the server wiring picks the URL).
 * - A 400 without content-filter annotations is not subject to `requirePromptShields`: it carries
 *   no model output to protect, and turning every client error into a 403 would hide it.
 * - A stream blocked mid-way is cut upstream too; it is charged the estimate.
 * - `stream_options.include_usage` is always set on streams, so clients also receive the final
 *   usage chunk (`choices: []`) even when they did not ask for it.
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { readBody } from '@kars/kube-core';
import type { SnapshotSource } from '../snapshot.js';
import type { TokenBudgetTracker } from './budget.js';
import {
  budgetExceeded,
  decisionHeaders,
  guardrailFlagged,
  guardrailUnavailable,
  proxyError,
  refusalHeaders,
  refusalJson,
  sendRefusal,
  streamRefusalFrames,
  type InferenceRefusal,
} from './errors.js';
import { SseGate, usageFromJsonTail, usageTotal } from './sse.js';
import { eventData, splitEvents } from '../http/sse.js';
import { endToEndHeaders } from '../http/headers.js';
import { UpstreamClient, type UpstreamResponse } from '../http/upstream.js';
import { answerTexts, moderate, type GuardrailBackend } from './guardrails.js';
import {
  MAX_REQUEST_BODY_BYTES,
  SANDBOX_HEADER,
  attemptFor,
  decideHead,
  decideRequest,
  judgeAnswer,
  matchInferencePath,
  relayMode,
  settleTokens,
  tooLarge,
  tryNext,
  upstreamFilterReason,
  type Forward,
  type Meter,
  type PipelineContext,
  type Reject,
} from './pipeline.js';
import type { ContentSafetyRules } from './safety.js';

export { MAX_REQUEST_BODY_BYTES, SANDBOX_HEADER, headerAgrees, isDnsLabel, matchInferencePath, routePlan } from './pipeline.js';
export type { InferenceRoute } from './pipeline.js';

/** Largest upstream body the route buffers to judge; a larger one is refused (floor active) or passed unjudged. */
export const MAX_BUFFERED_RESPONSE_BYTES = 16 * 1024 * 1024;
/** Default time allowed for upstream response headers. */
export const DEFAULT_FETCH_TIMEOUT_MS = 300_000;

/** Reported once per handled request. */
export interface InferenceDecision {
  sandbox: string;
  /**
   * `deny` when the router refused the request or blocked the response (policy, or a request it
   * cannot accept); `allow` when it forwarded it and passed the answer on — including an upstream
   * error, and the 502 when no upstream answered (`code: 'proxy_error'`).
   */
  decision: 'allow' | 'deny';
  /** The refusal's `error.code` (or `proxy_error`); absent on a plain allow. */
  code?: string;
}

export interface InferenceHandlerOptions {
  snapshot: SnapshotSource;
  /** Base URL of the OpenAI-compatible upstream; its path is prefixed to the request path. */
  upstream: URL;
  /** The sandbox this router serves (`--sandbox`): the identity of every request and its budget. */
  sandbox: string;
  budget: TokenBudgetTracker;
  /** Time allowed for upstream response headers, per attempt (default 300 s). */
  fetchTimeoutMs?: number;
  /** Daily cap used when the policy sets none (the contract's `TOKEN_BUDGET_DAILY`). */
  defaultDailyTokens?: number;
  /** The moderation backend for `guardrails` stages (`guardrails.ts`); without it a stage fails closed. */
  guardrail?: GuardrailBackend;
  /** The router's shared upstream client; by default the handler makes (and `close()` closes) its own. */
  client?: UpstreamClient;
  onDecision?: (d: InferenceDecision) => void;
}

/** The request handler; `close()` drops the upstream keep-alive connections of a client it owns. */
export type InferenceHandler = ((req: IncomingMessage, res: ServerResponse) => Promise<boolean>) & { close(): void };

type Decide = (decision: 'allow' | 'deny', code?: string) => void;

/** Request headers the route sets itself, or never forwards (the identity header is internal). */
const REQUEST_RECOMPUTED: ReadonlySet<string> = new Set(['host', 'content-length', 'expect', 'accept-encoding', SANDBOX_HEADER]);
const CONTENT_LENGTH: ReadonlySet<string> = new Set(['content-length']);

function forwardRequestHeaders(inh: IncomingHttpHeaders, host: string): OutgoingHttpHeaders {
  const out = endToEndHeaders(inh, REQUEST_RECOMPUTED);
  out['host'] = host;
  // The route reads response bodies (usage, annotations), so they must arrive uncompressed.
  out['accept-encoding'] = 'identity';
  return out;
}

function tryParse(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** One answer being relayed: the client response, the upstream answer, its meter and the decision reporter. */
interface Relay {
  res: ServerResponse;
  up: UpstreamResponse;
  status: number;
  meter: Meter;
  decide: Decide;
}

/** Create the chat-completions handler. See the module comment for what it enforces. */
export function createInferenceHandler(opts: InferenceHandlerOptions): InferenceHandler {
  const upstream = opts.upstream;
  if (upstream.protocol !== 'https:' && upstream.protocol !== 'http:')
    throw new TypeError(`inference upstream must be an http: or https: URL, got "${upstream.href}"`);
  const origin = upstream.origin;
  const host = upstream.host;
  const timeoutMs = opts.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const client = opts.client ?? new UpstreamClient({ headersTimeoutMs: timeoutMs });
  const { budget, onDecision, sandbox } = opts;
  const ctx: PipelineContext = {
    basePath: upstream.pathname.endsWith('/') ? upstream.pathname.slice(0, -1) : upstream.pathname,
    defaultDailyTokens: opts.defaultDailyTokens ?? null,
    guardrailConfigured: opts.guardrail !== undefined,
  };

  function refuse(res: ServerResponse, r: Reject | InferenceRefusal, decide: Decide): void {
    const refusal = 'kind' in r ? r.refusal : r;
    decide('deny', refusal.body.error.code);
    if (!res.destroyed) sendRefusal(res, refusal, 'kind' in r ? r.headers : undefined);
  }

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    route: NonNullable<ReturnType<typeof matchInferencePath>>,
    decide: Decide,
  ): Promise<void> {
    // Step 1: one snapshot for the whole request.
    const rules = opts.snapshot().inference;
    const head = decideHead(req.method, req.headers[SANDBOX_HEADER], sandbox);
    if (head !== undefined) {
      req.resume();
      refuse(res, head, decide);
      return;
    }
    const read = await readBody(req, MAX_REQUEST_BODY_BYTES, req.headers['content-length']);
    if (!read.ok) {
      if (read.reason === 'too_large') refuse(res, tooLarge(), decide);
      else res.destroy();
      return;
    }
    const d = decideRequest(read.body, route, rules, ctx);
    if (d.kind === 'reject') {
      refuse(res, d, decide);
      return;
    }
    if (d.moderateInput !== undefined && opts.guardrail !== undefined) {
      const m = await moderate(opts.guardrail, d.moderateInput, client);
      if (m.kind !== 'clean') {
        refuse(res, m.kind === 'flagged' ? guardrailFlagged('input', m.categories) : guardrailUnavailable(m.detail), decide);
        return;
      }
    }
    // Step 5: reserve the request's maximum against the daily / monthly budget.
    const reserved = budget.reserve(sandbox, d.reserve.caps, d.reserve.tokens);
    if (!reserved.ok) {
      refuse(res, budgetExceeded(reserved.message), decide);
      return;
    }
    const meter: Meter = { status: undefined, usage: undefined, bytes: 0 };
    try {
      await forward(req, res, d, meter, decide);
    } finally {
      reserved.reservation.settle(settleTokens(meter, d.promptBytes));
    }
  }

  async function forward(req: IncomingMessage, res: ServerResponse, d: Forward, meter: Meter, decide: Decide): Promise<void> {
    const headers = forwardRequestHeaders(req.headers, host);
    // An EventEmitter as the abort signal: an AbortController per request costs more on the hot path.
    const abort = new EventEmitter();
    let current: UpstreamResponse | undefined;
    let gone = false;
    const onClose = (): void => {
      if (res.writableFinished) return;
      gone = true;
      abort.emit('abort');
      current?.body.destroy();
    };
    res.once('close', onClose);
    const { candidates } = d;
    for (let i = 0; i < candidates.length; i++) {
      if (gone) return;
      const last = i === candidates.length - 1;
      const attempt = attemptFor(d, candidates[i], ctx.basePath);
      let up: UpstreamResponse;
      try {
        up = await client.request({
          origin,
          path: attempt.path,
          method: 'POST',
          headers,
          body: attempt.body,
          headersTimeoutMs: timeoutMs,
          retryStale: true,
          signal: abort,
        });
      } catch {
        if (gone) return;
        if (!last) continue;
        decide('allow', 'proxy_error');
        sendRefusal(res, proxyError());
        return;
      }
      up.body.on('error', () => undefined);
      if (tryNext(up.status, last)) {
        up.body.resume();
        continue;
      }
      current = up;
      meter.status = up.status;
      const relay: Relay = { res, up, status: up.status, meter, decide };
      switch (relayMode(up.status, up.headers['content-type'], d)) {
        case 'stream-moderated':
          await relayStreamModerated(relay, d.floor, opts.guardrail);
          return;
        case 'stream':
          await relayStream(relay, d.floor);
          return;
        case 'judged':
          await relayJudged(relay, d.floor, d.moderateOutput ? opts.guardrail : undefined);
          return;
        case 'plain':
          await relayPlain(relay);
          return;
      }
    }
  }

  /** Moderate an answer's texts; on anything but clean, refuse (when the client is still there) and say so. */
  async function refusedByOutputStage(x: Relay, guard: GuardrailBackend, docs: unknown[]): Promise<boolean> {
    const m = await moderate(guard, answerTexts(docs), client);
    if (m.kind === 'clean') return false;
    const r = m.kind === 'flagged' ? guardrailFlagged('output', m.categories) : guardrailUnavailable(m.detail);
    refuse(x.res, r, x.decide);
    return true;
  }

  /** Buffer the whole body, judge it (floor, output stage), and send it or the refusal. */
  async function relayJudged(x: Relay, floor: ContentSafetyRules | undefined, guard: GuardrailBackend | undefined): Promise<void> {
    const body = await bufferToJudge(x);
    if (body === undefined) return;
    const { res, status } = x;
    const doc = tryParse(body);
    const ok = status >= 200 && status < 300;
    if (ok) {
      const total = usageTotal(doc);
      if (total !== undefined) x.meter.usage = total;
    }
    const blocked = judgeAnswer(status, doc, floor);
    if (blocked !== undefined) {
      refuse(res, blocked, x.decide);
      return;
    }
    if (guard !== undefined && ok && (await refusedByOutputStage(x, guard, [doc]))) return;
    const headers = endToEndHeaders(x.up.headers, CONTENT_LENGTH);
    headers['content-length'] = body.length;
    if (status === 400 || status === 403) {
      const reason = upstreamFilterReason(doc);
      if (reason !== undefined) Object.assign(headers, decisionHeaders('UpstreamContentFilter', reason));
    }
    x.decide('allow');
    res.writeHead(status, headers);
    res.end(body);
  }

  /**
   * A stream under an output guardrail: buffered whole (up to the judging limit), moderated, then
   * passed through the content-safety gate and sent — or refused with a plain JSON 403/503, since
   * nothing has been sent yet. Latency: the client sees the stream only when it has ended upstream.
   */
  async function relayStreamModerated(x: Relay, floor: ContentSafetyRules | undefined, guard: GuardrailBackend | undefined): Promise<void> {
    const all = await bufferToJudge(x);
    if (all === undefined) return;
    const docs: unknown[] = [];
    for (const ev of splitEvents(all)) {
      const data = eventData(ev.toString('utf8'))?.trim();
      if (data !== undefined && data !== '' && data !== '[DONE]') docs.push(tryParse(Buffer.from(data)));
    }
    if (guard !== undefined && (await refusedByOutputStage(x, guard, docs))) return;
    const gate = new SseGate(floor);
    const g1 = gate.push(all);
    const g2 = g1.blocked === undefined ? gate.end() : g1;
    const usage = gate.usage();
    if (usage !== undefined) x.meter.usage = usage;
    const headers = endToEndHeaders(x.up.headers, CONTENT_LENGTH);
    const blocked = g1.blocked ?? g2.blocked;
    if (blocked !== undefined) {
      x.decide('deny', blocked.body.error.code);
      x.res.writeHead(x.status, { ...headers, ...decisionHeaders('InferencePolicy', blocked.body.error.message) });
      x.res.end(streamRefusalFrames(blocked));
      return;
    }
    x.decide('allow');
    x.res.writeHead(x.status, headers);
    x.res.end(g2 === g1 ? g1.out : Buffer.concat([g1.out, g2.out]));
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const route = matchInferencePath(req.url ?? '');
    if (route === undefined) return false;
    let reported = false;
    const decide: Decide = (decision, code) => {
      if (reported || onDecision === undefined) return;
      reported = true;
      try {
        onDecision(code === undefined ? { sandbox, decision } : { sandbox, decision, code });
      } catch {
        // A failing observer must not break the request.
      }
    };
    try {
      await serve(req, res, route, decide);
    } catch {
      if (!res.headersSent && !res.destroyed) {
        decide('allow', 'proxy_error');
        const r = proxyError();
        const text = refusalJson(r);
        res.writeHead(r.status, refusalHeaders(r, Buffer.byteLength(text)));
        res.end(text);
      } else {
        res.destroy();
      }
    }
    return true;
  };
  return Object.assign(handle, {
    close: (): void => {
      if (opts.client === undefined) void client.close();
    },
  });
}

/** Resolve when the upstream body has ended or failed, or the client went away. */
function settled(x: Relay): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => resolve();
    x.up.body.once('end', done);
    x.up.body.once('error', done);
    x.up.body.once('close', done);
    x.res.once('close', done);
  });
}

/** Relay the upstream body to the client with backpressure, handing each chunk to `onChunk` (which returns what to write). */
function pump(x: Relay, onChunk: (c: Buffer) => Buffer | undefined): void {
  const { up, res } = x;
  up.body.on('data', (c: Buffer) => {
    const out = onChunk(c);
    if (out === undefined || out.length === 0 || res.destroyed) return;
    if (!res.write(out)) {
      up.body.pause();
      res.once('drain', () => up.body.resume());
    }
  });
}

/** No judging: stream the body straight through; record usage of a 2xx JSON body at the end. */
async function relayPlain(x: Relay): Promise<void> {
  const { res, up, status, meter } = x;
  x.decide('allow');
  res.writeHead(status, endToEndHeaders(up.headers));
  const ok = status >= 200 && status < 300;
  const chunks: Buffer[] = [];
  let size = 0;
  pump(x, (c) => {
    meter.bytes += c.length;
    if (ok && size <= MAX_BUFFERED_RESPONSE_BYTES) {
      chunks.push(c);
      size += c.length;
    }
    return c;
  });
  up.body.once('end', () => {
    res.end();
    if (ok && size <= MAX_BUFFERED_RESPONSE_BYTES) {
      const total = usageFromJsonTail(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
      if (total !== undefined) meter.usage = total;
    }
  });
  up.body.once('error', () => res.destroy());
  await settled(x);
}

/** Relay an SSE stream through the content-safety gate; record usage from its last usage chunk. */
async function relayStream(x: Relay, floor: ContentSafetyRules | undefined): Promise<void> {
  const { res, up, status, meter, decide } = x;
  const gate = new SseGate(floor);
  const headers = endToEndHeaders(up.headers, CONTENT_LENGTH);
  let blocked = false;
  const head = (extra?: Record<string, string>): void => {
    if (res.headersSent) return;
    res.writeHead(status, extra === undefined ? headers : { ...headers, ...extra });
  };
  const block = (out: Buffer, r: InferenceRefusal): void => {
    blocked = true;
    decide('deny', r.body.error.code);
    if (!res.headersSent) head(out.length === 0 ? decisionHeaders('InferencePolicy', r.body.error.message) : undefined);
    if (out.length > 0) res.write(out);
    res.end(streamRefusalFrames(r));
    up.body.destroy();
  };
  if (!gate.gating) {
    decide('allow');
    head();
  }
  pump(x, (c) => {
    meter.bytes += c.length;
    if (blocked) return undefined;
    const g = gate.push(c);
    if (g.blocked !== undefined) {
      block(g.out, g.blocked);
      return undefined;
    }
    if (g.out.length > 0) head();
    return g.out;
  });
  up.body.once('end', () => {
    if (blocked) return;
    const g = gate.end();
    if (g.blocked !== undefined) {
      block(g.out, g.blocked);
      return;
    }
    decide('allow');
    head();
    res.end(g.out.length > 0 ? g.out : undefined);
    const total = gate.usage();
    if (total !== undefined) meter.usage = total;
  });
  up.body.once('error', () => {
    if (!blocked) res.destroy();
  });
  await settled(x);
  if (!blocked) decide('allow');
}

/**
 * The whole upstream body to judge, or undefined once the client is gone or the refusal is sent:
 * an upstream cut short, or too large to judge (already cut upstream), fails closed.
 */
async function bufferToJudge(x: Relay): Promise<Buffer | undefined> {
  const buffered = await bufferUpstream(x);
  if (x.res.destroyed || x.res.headersSent) return undefined;
  if (buffered === 'incomplete' || buffered === 'too_large') {
    x.decide('allow', 'proxy_error');
    sendRefusal(x.res, proxyError());
    return undefined;
  }
  return buffered;
}

/**
 * Read a whole upstream body to judge it, up to MAX_BUFFERED_RESPONSE_BYTES (counted into
 * `meter.bytes`): the body, or 'too_large' (the upstream is cut at the limit), or 'incomplete'
 * (the upstream failed or the client went away first).
 */
function bufferUpstream(x: Relay): Promise<Buffer | 'too_large' | 'incomplete'> {
  const { up, res, meter } = x;
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: Buffer | 'too_large' | 'incomplete'): void => {
      if (done) return;
      done = true;
      resolve(r);
    };
    up.body.on('data', (c: Buffer) => {
      if (done) return;
      size += c.length;
      meter.bytes += c.length;
      if (size > MAX_BUFFERED_RESPONSE_BYTES) {
        up.body.destroy();
        finish('too_large');
        return;
      }
      chunks.push(c);
    });
    up.body.once('end', () => finish(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)));
    up.body.once('error', () => finish('incomplete'));
    up.body.once('close', () => finish('incomplete'));
    res.once('close', () => finish('incomplete'));
  });
}
