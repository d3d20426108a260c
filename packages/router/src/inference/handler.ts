/**
 * The chat-completions route: enforces a sandbox's InferencePolicy on every request and forwards it
 * upstream (kars-wire-contract.md §5.3; the AGT governance step is the tools gateway's, not this).
 *
 * Paths: `POST /v1/chat/completions` and
 * `POST /openai/deployments/{deployment}/chat/completions[?api-version=…]` (Azure form). Any other
 * path is not handled (the handler resolves `false`); another method on these paths gets 405.
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
 * 7. Forwarding uses `node:http(s)` with one keep-alive agent per handler. Response headers must
 *    arrive within `fetchTimeoutMs`; no answer at all → 502 `proxy_error`.
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
import http from 'node:http';
import https from 'node:https';
import type { ClientRequest, IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { InferenceRules, SnapshotSource } from '../snapshot.js';
import { parseStrictJson } from '../json/strict.js';
import type { Reservation, TokenBudgetTracker } from './budget.js';
import {
  budgetExceeded,
  duplicateKey,
  guardrailFlagged,
  guardrailMisconfigured,
  guardrailUnavailable,
  invalidTokenLimit,
  sandboxMismatch,
  contentPolicyViolation,
  decisionHeaders,
  invalidJson,
  methodNotAllowed,
  perRequestTokensExceeded,
  providerUnimplemented,
  proxyError,
  refusalHeaders,
  refusalJson,
  requestTooLarge,
  sendRefusal,
  streamRefusalFrames,
  type InferenceRefusal,
} from './errors.js';
import { evaluateSafety, extractAnnotations, isFloorActive, type ContentSafetyRules } from './safety.js';
import { SseGate, usageFromJsonTail, usageTotal } from './sse.js';
import { eventData, splitEvents } from '../http/sse.js';
import { endToEndHeaders } from '../http/headers.js';
import { readBody } from '@kars/kube-core';
import { estimateUsage, normalizeRequest, reservationFor } from './limits.js';
import { answerTexts, moderate, requestTexts, type GuardrailBackend } from './guardrails.js';

/** Largest request body accepted (10 MiB). */
export const MAX_REQUEST_BODY_BYTES = 10 * 1024 * 1024;
/** Largest upstream body the route buffers to judge; a larger one is refused (floor active) or passed unjudged. */
export const MAX_BUFFERED_RESPONSE_BYTES = 16 * 1024 * 1024;
/** Default time allowed for upstream response headers. */
export const DEFAULT_FETCH_TIMEOUT_MS = 300_000;

/** Header that may repeat the router's sandbox identity (never change it). It is not forwarded upstream. */
export const SANDBOX_HEADER = 'x-kars-sandbox';

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
  onDecision?: (d: InferenceDecision) => void;
}

/** The request handler; `close()` drops the upstream keep-alive connections. */
export type InferenceHandler = ((req: IncomingMessage, res: ServerResponse) => Promise<boolean>) & { close(): void };

/** A matched inference path. `deployment` is the raw (still percent-encoded) Azure path segment. */
export type InferenceRoute = { kind: 'openai'; query: string } | { kind: 'azure'; deployment: string; query: string };

const AZURE_PREFIX = '/openai/deployments/';
const AZURE_SUFFIX = '/chat/completions';

/** Match a request URL against the inference paths. */
export function matchInferencePath(url: string): InferenceRoute | undefined {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  if (path === '/v1/chat/completions') return { kind: 'openai', query };
  if (path.length > AZURE_PREFIX.length + AZURE_SUFFIX.length && path.startsWith(AZURE_PREFIX) && path.endsWith(AZURE_SUFFIX)) {
    const deployment = path.slice(AZURE_PREFIX.length, path.length - AZURE_SUFFIX.length);
    if (!deployment.includes('/')) return { kind: 'azure', deployment, query };
  }
  return undefined;
}

function isAlnum(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39);
}

/** Whether `s` is an RFC 1123 DNS label: 1–63 chars of `[a-z0-9-]`, starting and ending alphanumeric. */
export function isDnsLabel(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > 63) return false;
  if (!isAlnum(s.charCodeAt(0)) || !isAlnum(s.charCodeAt(n - 1))) return false;
  for (let i = 1; i < n - 1; i++) {
    const c = s.charCodeAt(i);
    if (!isAlnum(c) && c !== 0x2d) return false;
  }
  return true;
}

/**
 * Whether a request's identity header agrees with the router's sandbox (module comment, step 2):
 * absent, or exactly `sandbox`. A list of values, another name, or a spelling variant disagrees.
 */
export function headerAgrees(header: string | string[] | undefined, sandbox: string): boolean {
  return header === undefined || header === sandbox;
}

const KNOWN_PROVIDERS = new Set(['azure-openai', 'anthropic', 'ollama', 'bedrock']);

/** The provider and ordered deployment candidates of a policy (empty: send the request as it is). */
export function routePlan(rules: InferenceRules | undefined): { provider: string; deployments: string[] } {
  const mp = rules?.modelPreference ?? null;
  const primaryProvider = mp?.primary.provider;
  const provider =
    primaryProvider !== undefined && KNOWN_PROVIDERS.has(primaryProvider) ? primaryProvider : (rules?.provider ?? 'azure-openai');
  const deployments: string[] = [];
  if (mp !== null) {
    if (mp.primary.deployment !== '') deployments.push(mp.primary.deployment);
    for (const f of mp.fallback) {
      if (f.deployment === '' || f.provider === 'bedrock' || deployments.includes(f.deployment)) continue;
      deployments.push(f.deployment);
    }
  }
  return { provider, deployments };
}

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

function responseHeaders(up: IncomingMessage, dropLength: boolean): OutgoingHttpHeaders {
  return endToEndHeaders(up.headers, dropLength ? CONTENT_LENGTH : undefined);
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Counts what one upstream answer used, for settling the reservation. */
interface Meter {
  /** Status of the answer relayed to the client; undefined when none was. */
  status: number | undefined;
  /** `usage.total_tokens` when the answer carried it. */
  usage: number | undefined;
  /** Answer bytes relayed or judged. */
  bytes: number;
}

function tryParse(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

const UPSTREAM_FILTER_CODES = new Set(['content_filter', 'responsible_ai_policy_violation', 'ResponsibleAIPolicyViolation']);

/** When an upstream 400/403 is a content-filter refusal, its reason (for the decision headers). */
function upstreamFilterReason(parsed: unknown): string | undefined {
  const err = isObj(parsed) ? parsed['error'] : undefined;
  if (!isObj(err)) return undefined;
  const code = typeof err['code'] === 'string' ? err['code'] : '';
  const message = typeof err['message'] === 'string' ? err['message'] : '';
  if (
    UPSTREAM_FILTER_CODES.has(code) ||
    code.startsWith('inference_policy_') ||
    message.includes('content management policy') ||
    message.includes('Responsible AI')
  ) {
    return message !== '' ? message : code;
  }
  return undefined;
}

/** The upstream sent no response headers within the allowed time. */
export class UpstreamTimeoutError extends Error {
  readonly code = 'KARS_UPSTREAM_TIMEOUT';
  constructor(timeoutMs: number, path: string) {
    super(`upstream sent no response headers for POST ${path} within ${timeoutMs} ms; check the upstream or raise fetchTimeoutMs`);
    this.name = 'UpstreamTimeoutError';
  }
}

/** Create the chat-completions handler. See the module comment for what it enforces. */
export function createInferenceHandler(opts: InferenceHandlerOptions): InferenceHandler {
  const upstream = opts.upstream;
  const secure = upstream.protocol === 'https:';
  if (!secure && upstream.protocol !== 'http:')
    throw new TypeError(`inference upstream must be an http: or https: URL, got "${upstream.href}"`);
  const transport = secure ? https : http;
  const agent = secure ? new https.Agent({ keepAlive: true, scheduling: 'lifo' }) : new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const hostname = upstream.hostname.startsWith('[') ? upstream.hostname.slice(1, -1) : upstream.hostname;
  const port = upstream.port === '' ? (secure ? 443 : 80) : Number(upstream.port);
  const basePath = upstream.pathname.endsWith('/') ? upstream.pathname.slice(0, -1) : upstream.pathname;
  const timeoutMs = opts.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const { budget, onDecision, sandbox } = opts;
  const defaultDaily = opts.defaultDailyTokens ?? null;

  /** One upstream attempt; resolves with the response once its headers arrive. `fresh` skips the keep-alive pool. */
  function send(
    path: string,
    headers: OutgoingHttpHeaders,
    body: Buffer,
    track: (r: ClientRequest | undefined) => void,
    fresh = false,
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const r = transport.request({
        host: hostname,
        port,
        method: 'POST',
        path,
        headers: { ...headers, 'content-length': body.length },
        agent: fresh ? false : agent,
      });
      track(r);
      const timer = setTimeout(() => r.destroy(new UpstreamTimeoutError(timeoutMs, path)), timeoutMs);
      r.once('response', (up) => {
        clearTimeout(timer);
        resolve(up);
      });
      // Kept for the life of the request: a late socket error must never go unhandled.
      r.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      r.end(body);
    });
  }

  /**
   * `send`, retried once on a new connection when a pooled keep-alive socket turned out to be
   * closed by the upstream (its idle timeout raced our reuse). Nothing reached the upstream then,
   * so the retry cannot duplicate a completion; other pooled sockets may be just as stale, hence
   * the new connection.
   */
  async function sendRetrying(
    path: string,
    headers: OutgoingHttpHeaders,
    body: Buffer,
    track: (r: ClientRequest | undefined) => void,
  ): Promise<IncomingMessage> {
    let req: ClientRequest | undefined;
    try {
      return await send(path, headers, body, (r) => {
        req = r;
        track(r);
      });
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (req?.reusedSocket === true && (code === 'ECONNRESET' || code === 'EPIPE')) return send(path, headers, body, track, true);
      throw e;
    }
  }

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    route: InferenceRoute,
    decide: (decision: 'allow' | 'deny', code?: string) => void,
  ): Promise<void> {
    // Step 1: one snapshot for the whole request.
    const rules = opts.snapshot().inference;

    const refuse = (r: InferenceRefusal, extra?: OutgoingHttpHeaders): void => {
      decide('deny', r.body.error.code);
      sendRefusal(res, r, extra);
    };

    if (req.method !== 'POST') {
      req.resume();
      refuse(methodNotAllowed(req.method ?? ''), { allow: 'POST' });
      return;
    }

    if (!headerAgrees(req.headers[SANDBOX_HEADER], sandbox)) {
      req.resume();
      refuse(sandboxMismatch(sandbox));
      return;
    }

    const read = await readBody(req, MAX_REQUEST_BODY_BYTES, req.headers['content-length']);
    if (!read.ok) {
      if (read.reason === 'too_large') {
        req.resume();
        refuse(requestTooLarge(MAX_REQUEST_BODY_BYTES), { connection: 'close' });
      } else {
        res.destroy();
      }
      return;
    }
    const strict = parseStrictJson(read.body.toString('utf8'));
    if (!strict.ok) {
      refuse(strict.code === 'duplicate_key' ? duplicateKey(strict.message) : invalidJson(strict.message));
      return;
    }
    if (!isObj(strict.value)) {
      refuse(invalidJson('the body must be a JSON object'));
      return;
    }
    const tb = rules?.tokenBudget ?? null;

    // Step 4: token limits, normalised into the body that will be forwarded.
    const norm = normalizeRequest(strict.value, tb?.perRequestTokens ?? null);
    if (!norm.ok) {
      const r = norm.refusal;
      refuse(r.kind === 'invalid' ? invalidTokenLimit(r.message) : perRequestTokensExceeded(r.message));
      return;
    }
    const body = norm.request.body;
    const text = JSON.stringify(body);
    const bodyBytes = Buffer.byteLength(text);

    // Step 6 (before reserving, so a refusal holds nothing): provider and deployment candidates.
    const plan = routePlan(rules);
    if (plan.provider === 'bedrock') {
      refuse(providerUnimplemented(plan.provider));
      return;
    }

    // Guardrail stages (guardrails.ts): input stages judge the request now; output stages the answer.
    const stages = rules?.guardrails ?? [];
    if (stages.length > 0 && opts.guardrail === undefined) {
      refuse(guardrailMisconfigured(stages[0]?.provider ?? 'openai-moderation'));
      return;
    }
    if (opts.guardrail !== undefined && stages.some((g) => g.applyTo !== 'output')) {
      const m = await moderate(opts.guardrail, requestTexts(body));
      if (m.kind !== 'clean') {
        refuse(m.kind === 'flagged' ? guardrailFlagged('input', m.categories) : guardrailUnavailable(m.detail));
        return;
      }
    }
    const guardOutput = opts.guardrail !== undefined && stages.some((g) => g.applyTo !== 'input') ? opts.guardrail : undefined;

    // Step 5: reserve the request's maximum against the daily / monthly budget.
    const reserved = budget.reserve(
      sandbox,
      { dailyTokens: tb?.dailyTokens ?? defaultDaily, monthlyTokens: tb?.monthlyTokens ?? null },
      reservationFor(norm.request, bodyBytes),
    );
    if (!reserved.ok) {
      refuse(budgetExceeded(reserved.message));
      return;
    }
    const meter: Meter = { status: undefined, usage: undefined, bytes: 0 };
    try {
      const floor = isFloorActive(rules?.contentSafety) ? (rules?.contentSafety ?? undefined) : undefined;
      await forward(req, res, route, body, text, plan.deployments, floor, guardOutput, meter, decide);
    } finally {
      settle(reserved.reservation, meter, bodyBytes);
    }
  }

  /** Replace a reservation with what the answer used (module comment, step 8). */
  function settle(r: Reservation, m: Meter, promptBytes: number): void {
    const ok = m.status !== undefined && m.status >= 200 && m.status < 300;
    r.settle(!ok ? 0 : (m.usage ?? estimateUsage(promptBytes, m.bytes)));
  }

  /** The path and the (re-serialised) body of one attempt at `deployment`. */
  function attemptFor(
    route: InferenceRoute,
    body: Record<string, unknown>,
    text: string,
    deployment: string | undefined,
  ): { path: string; body: Buffer } {
    if (route.kind === 'azure') {
      const seg = deployment === undefined ? route.deployment : encodeURIComponent(deployment);
      return { path: `${basePath}${AZURE_PREFIX}${seg}${AZURE_SUFFIX}${route.query}`, body: Buffer.from(text) };
    }
    const path = `${basePath}/v1/chat/completions${route.query}`;
    return {
      path,
      body: Buffer.from(deployment === undefined || body['model'] === deployment ? text : JSON.stringify({ ...body, model: deployment })),
    };
  }

  async function forward(
    req: IncomingMessage,
    res: ServerResponse,
    route: InferenceRoute,
    body: Record<string, unknown>,
    text: string,
    deployments: string[],
    floor: ContentSafetyRules | undefined,
    guardOutput: GuardrailBackend | undefined,
    meter: Meter,
    decide: (decision: 'allow' | 'deny', code?: string) => void,
  ): Promise<void> {
    const headers = forwardRequestHeaders(req.headers, upstream.host);
    let inflight: ClientRequest | undefined;
    let upRes: IncomingMessage | undefined;
    let clientGone = false;
    const onClose = (): void => {
      if (res.writableFinished) return;
      clientGone = true;
      inflight?.destroy();
      upRes?.destroy();
    };
    res.once('close', onClose);

    const candidates: Array<string | undefined> = deployments.length > 0 ? deployments : [undefined];
    for (let i = 0; i < candidates.length; i++) {
      if (clientGone) return;
      const last = i === candidates.length - 1;
      const attempt = attemptFor(route, body, text, candidates[i]);
      let up: IncomingMessage;
      try {
        up = await sendRetrying(attempt.path, headers, attempt.body, (r) => (inflight = r));
      } catch {
        if (clientGone) return;
        if (!last) continue;
        decide('allow', 'proxy_error');
        sendRefusal(res, proxyError());
        return;
      }
      const status = up.statusCode ?? 502;
      if (!last && (status === 429 || status >= 500)) {
        up.on('error', () => undefined);
        up.resume();
        continue;
      }
      upRes = up;
      meter.status = status;
      up.on('error', () => undefined);
      const ct = up.headers['content-type'];
      const ok2xx = status >= 200 && status < 300;
      if (typeof ct === 'string' && ct.toLowerCase().startsWith('text/event-stream')) {
        if (guardOutput !== undefined && ok2xx) await relayStreamGuarded(up, res, status, meter, floor, guardOutput, decide);
        else await relayStream(up, res, status, meter, floor, decide);
      } else if (status === 400 || status === 403 || ((floor !== undefined || guardOutput !== undefined) && ok2xx)) {
        await relayJudged(up, res, status, meter, floor, decide, guardOutput);
      } else {
        await relayPlain(up, res, status, meter, decide);
      }
      return;
    }
  }

  /** Resolve when `up` has ended or failed, or the client went away. */
  function settled(up: IncomingMessage, res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => resolve();
      up.once('end', done);
      up.once('error', done);
      up.once('close', done);
      res.once('close', done);
    });
  }

  /** Relay `up` to the client with backpressure, handing each chunk to `onChunk` (which returns what to write). */
  function pump(up: IncomingMessage, res: ServerResponse, onChunk: (c: Buffer) => Buffer | undefined): void {
    up.on('data', (c: Buffer) => {
      const out = onChunk(c);
      if (out === undefined || out.length === 0 || res.destroyed) return;
      if (!res.write(out)) {
        up.pause();
        res.once('drain', () => up.resume());
      }
    });
  }

  /** No judging: stream the body straight through; record usage of a 2xx JSON body at the end. */
  async function relayPlain(
    up: IncomingMessage,
    res: ServerResponse,
    status: number,
    meter: Meter,
    decide: (d: 'allow' | 'deny', code?: string) => void,
  ): Promise<void> {
    decide('allow');
    res.writeHead(status, responseHeaders(up, false));
    const ok = status >= 200 && status < 300;
    const chunks: Buffer[] = [];
    let size = 0;
    pump(up, res, (c) => {
      meter.bytes += c.length;
      if (ok && size <= MAX_BUFFERED_RESPONSE_BYTES) {
        chunks.push(c);
        size += c.length;
      }
      return c;
    });
    up.once('end', () => {
      res.end();
      if (ok && size <= MAX_BUFFERED_RESPONSE_BYTES) {
        const total = usageFromJsonTail(Buffer.concat(chunks, size));
        if (total !== undefined) meter.usage = total;
      }
    });
    up.once('error', () => res.destroy());
    await settled(up, res);
  }

  /**
   * The whole upstream body to judge, or undefined once the client is gone or the refusal is sent:
   * an upstream cut short, or too large to judge (already cut upstream), fails closed.
   */
  async function bufferToJudge(
    up: IncomingMessage,
    res: ServerResponse,
    meter: Meter,
    decide: (d: 'allow' | 'deny', code?: string) => void,
  ): Promise<Buffer | undefined> {
    const buffered = await bufferUpstream(up, res, meter);
    if (res.destroyed || res.headersSent) return undefined;
    if (buffered === 'incomplete' || buffered === 'too_large') {
      decide('allow', 'proxy_error');
      sendRefusal(res, proxyError());
      return undefined;
    }
    return buffered;
  }

  /** Buffer the whole body, judge it, and send it (or the refusal). */
  async function relayJudged(
    up: IncomingMessage,
    res: ServerResponse,
    status: number,
    meter: Meter,
    floor: ContentSafetyRules | undefined,
    decide: (d: 'allow' | 'deny', code?: string) => void,
    guardOutput?: GuardrailBackend,
  ): Promise<void> {
    const body = await bufferToJudge(up, res, meter, decide);
    if (body === undefined) return;
    const doc = tryParse(body);
    const ok = status >= 200 && status < 300;
    if (ok) {
      const total = usageTotal(doc);
      if (total !== undefined) meter.usage = total;
    }
    if (floor !== undefined && (ok || status === 400)) {
      const annotations = extractAnnotations(doc, status);
      // A 400 is judged on the severities it carries; Prompt Shields only gate model output.
      const v = ok || annotations.length > 0 ? evaluateSafety(floor, annotations) : undefined;
      if (v?.blocked === true) {
        const r = contentPolicyViolation(v.code, v.message);
        decide('deny', r.body.error.code);
        sendRefusal(res, r);
        return;
      }
    }
    if (guardOutput !== undefined && ok) {
      const m = await moderate(guardOutput, answerTexts([doc]));
      if (m.kind !== 'clean') {
        const r = m.kind === 'flagged' ? guardrailFlagged('output', m.categories) : guardrailUnavailable(m.detail);
        decide('deny', r.body.error.code);
        if (!res.destroyed) sendRefusal(res, r);
        return;
      }
    }
    const headers = responseHeaders(up, true);
    headers['content-length'] = body.length;
    if (status === 400 || status === 403) {
      const reason = upstreamFilterReason(doc);
      if (reason !== undefined) Object.assign(headers, decisionHeaders('UpstreamContentFilter', reason));
    }
    decide('allow');
    res.writeHead(status, headers);
    res.end(body);
  }

  /** Relay an SSE stream through the content-safety gate; record usage from its last usage chunk. */
  async function relayStream(
    up: IncomingMessage,
    res: ServerResponse,
    status: number,
    meter: Meter,
    floor: ContentSafetyRules | undefined,
    decide: (d: 'allow' | 'deny', code?: string) => void,
  ): Promise<void> {
    const gate = new SseGate(floor);
    const headers = responseHeaders(up, true);
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
      up.destroy();
    };
    if (!gate.gating) {
      decide('allow');
      head();
    }
    pump(up, res, (c) => {
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
    up.once('end', () => {
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
    up.once('error', () => {
      if (!blocked) res.destroy();
    });
    await settled(up, res);
    if (!blocked) decide('allow');
  }

  /**
   * A stream under an output guardrail: buffered whole (up to the judging limit), moderated, then
   * passed through the content-safety gate and sent — or refused with a plain JSON 403/503, since
   * nothing has been sent yet. Latency: the client sees the stream only when it has ended upstream.
   */
  async function relayStreamGuarded(
    up: IncomingMessage,
    res: ServerResponse,
    status: number,
    meter: Meter,
    floor: ContentSafetyRules | undefined,
    guard: GuardrailBackend,
    decide: (d: 'allow' | 'deny', code?: string) => void,
  ): Promise<void> {
    const all = await bufferToJudge(up, res, meter, decide);
    if (all === undefined) return;
    const docs: unknown[] = [];
    for (const ev of splitEvents(all)) {
      const data = eventData(ev.toString('utf8'))?.trim();
      if (data !== undefined && data !== '' && data !== '[DONE]') docs.push(tryParse(Buffer.from(data)));
    }
    const m = await moderate(guard, answerTexts(docs));
    if (m.kind !== 'clean') {
      const r = m.kind === 'flagged' ? guardrailFlagged('output', m.categories) : guardrailUnavailable(m.detail);
      decide('deny', r.body.error.code);
      if (!res.destroyed) sendRefusal(res, r);
      return;
    }
    const gate = new SseGate(floor);
    const g1 = gate.push(all);
    const g2 = g1.blocked === undefined ? gate.end() : g1;
    const usage = gate.usage();
    if (usage !== undefined) meter.usage = usage;
    const headers = responseHeaders(up, true);
    const blocked = g1.blocked ?? g2.blocked;
    if (blocked !== undefined) {
      decide('deny', blocked.body.error.code);
      res.writeHead(status, { ...headers, ...decisionHeaders('InferencePolicy', blocked.body.error.message) });
      res.end(streamRefusalFrames(blocked));
      return;
    }
    decide('allow');
    res.writeHead(status, headers);
    res.end(Buffer.concat([g1.out, g2 === g1 ? Buffer.alloc(0) : g2.out]));
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const route = matchInferencePath(req.url ?? '');
    if (route === undefined) return false;
    let reported = false;
    const decide = (decision: 'allow' | 'deny', code?: string): void => {
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
  return Object.assign(handle, { close: (): void => agent.destroy() });
}

/**
 * Read a whole upstream body to judge it, up to MAX_BUFFERED_RESPONSE_BYTES (counted into
 * `meter.bytes`): the body, or 'too_large' (the upstream is cut at the limit), or 'incomplete'
 * (the upstream failed or the client went away first).
 */
function bufferUpstream(up: IncomingMessage, res: ServerResponse, meter: Meter): Promise<Buffer | 'too_large' | 'incomplete'> {
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: Buffer | 'too_large' | 'incomplete'): void => {
      if (done) return;
      done = true;
      resolve(r);
    };
    up.on('data', (c: Buffer) => {
      if (done) return;
      size += c.length;
      meter.bytes += c.length;
      if (size > MAX_BUFFERED_RESPONSE_BYTES) {
        up.destroy();
        finish('too_large');
        return;
      }
      chunks.push(c);
    });
    up.once('end', () => finish(Buffer.concat(chunks, size)));
    up.once('error', () => finish('incomplete'));
    up.once('close', () => finish(up.complete ? Buffer.concat(chunks, size) : 'incomplete'));
    res.once('close', () => finish('incomplete'));
  });
}
