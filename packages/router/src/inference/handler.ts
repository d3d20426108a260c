/**
 * The inference listener: enforces a sandbox's InferencePolicy on every request of every API an
 * agent speaks (chat completions, Responses, embeddings, Anthropic Messages; `apis.ts`) and
 * forwards it upstream (kars-wire-contract.md §5.3; the AGT governance step is the tools
 * gateway's, not this).
 *
 * Paths: the route table of `routes.ts`. Every other path is refused there (404 listing the
 * routes; nothing is passed through ungoverned); another method on a route gets 405. Refusals are
 * in the envelope of the route's API (OpenAI's or Anthropic's, `errors.ts`).
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
 * 6. Model preference (`routePlan`): the provider is `modelPreference.primary.provider` when
 *    recognised, else `provider`, else the API's own; `bedrock` → 501. The candidates are the
 *    primary deployment then the fallbacks, each with its provider (empty names, duplicates and
 *    bedrock fallbacks skipped), kept only when their provider speaks the route's API (none left:
 *    403). Each goes to its provider's upstream (`--upstream NAME=URL`, else the default) and
 *    replaces the request's deployment (the Azure path segment, or the body's `model`). A 5xx, a 429 or a
 *    transport failure before the request was written moves on to the next candidate (step 7); the
 *    last candidate's answer is returned as it is. The body forwarded is always the router's re-serialisation of what it parsed and
 *    decided on, never the client's bytes.
 * 7. Forwarding uses the router's shared undici client (`http/upstream.ts`: keep-alive pool).
 *    Response headers must arrive within `fetchTimeoutMs`; no answer at all → 502 `proxy_error`.
 *    A completion is never sent twice (ADR 0027): no retry on a stale pooled connection, and a
 *    transport failure moves on to the next candidate only when the request was not written (the
 *    connection could not be made); one that was written gets 502.
 * 8. Usage (ADR 0027): `usage.total_tokens` of a 2xx body, or of the last stream chunk that
 *    carries usage, settles the reservation. Bodies nobody needs to judge are not parsed whole:
 *    usage is read from their tail (`usageFromJsonTail`), after the response has been sent. A 2xx
 *    answer read to its end without usage is charged an estimate (`estimateUsage`). A request
 *    that was written and got no whole answer (none, or cut short without usage) is charged at
 *    least its reservation. A non-2xx answer, or a request never written, settles at 0, except a
 *    500, 502 or 504 (it may have run): at least the reservation, also when it was passed over for a
 *    fallback candidate. When the
 *    agent goes away after its request was written, the answer is still read (not relayed) to
 *    learn its usage: for at most `fetchTimeoutMs` more and MAX_BUFFERED_RESPONSE_BYTES of body;
 *    past either it is cut (and charged at least the reservation).
 * 9. Content-safety floor (when active): a 2xx JSON body is judged whole and replaced by a 403 when
 *    blocked; a 400 carrying `error.innererror.content_filter_result` is judged on severities; a
 *    stream is judged at its first annotated event (see `sse.ts`), keeping the upstream status.
 *    An upstream 400/403 content-filter refusal passes through with the decision headers added.
 *
 * Guarantees: the handler never rejects and never throws; bad upstream output is passed on or
 * refused, never a crash. When the client goes away before its request was written, the upstream
 * request is aborted (nothing is sent); after, it is read to its end within the bounds of step 8.
 *
 * Caveats:
 * - A provider without its own upstream (`upstreams`) is sent to the default one.
 * - A 400 without content-filter annotations is not subject to `requirePromptShields`: it carries
 *   no model output to protect, and turning every client error into a 403 would hide it.
 * - A stream blocked mid-way is cut upstream too; without usage it is charged at least the reservation.
 * - `stream_options.include_usage` is always set on streams, so clients also receive the final
 *   usage chunk (`choices: []`) even when they did not ask for it.
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { readBody, systemClock } from '@kars/kube-core';
import type { Clock, Timer } from '@kars/kube-core';
import type { SnapshotSource } from '../snapshot.js';
import type { TokenBudgetTracker } from './budget.js';
import {
  budgetExceeded,
  guardrailFlagged,
  guardrailUnavailable,
  methodNotAllowed,
  proxyError,
  refusalHeaders,
  refusalJson,
  routeRefused,
  sandboxMismatch,
  sendRefusal,
} from './errors.js';
import type { InferenceRefusal } from './errors.js';
import { endToEndHeaders } from '../http/headers.js';
import { UpstreamClient, type UpstreamCall, type UpstreamSink } from '../http/upstream.js';
import { moderate, type GuardrailBackend } from './guardrails.js';
import {
  MAX_REQUEST_BODY_BYTES,
  SANDBOX_HEADER,
  attemptFor,
  decideHead,
  decideRequest,
  headerAgrees,
  newMeter,
  passedOverMayHaveRun,
  relayMode,
  settleTokens,
  tooLarge,
  tryNext,
  type Candidate,
  type Forward,
  type Meter,
  type PipelineContext,
  type Reject,
} from './pipeline.js';
import { matchRoute, type ApiRoute, type ModelsRoute } from './routes.js';
import type { Wire } from './apis.js';
import { usageReader } from './usage.js';
import { MAX_BUFFERED_RESPONSE_BYTES, createRelay, type BodyRelay, type Decide } from './relay.js';
import { DrainRelay } from './drain.js';
import { budgetHeadroomHeaders, budgetRetryHeaders } from './ratelimit.js';
import { cut, type DecisionTokens, type InferenceTarget } from '../decisions/record.js';
import { scopeOf, type DecisionRecorder, type RequestScope } from '../decisions/recorder.js';
import { DryRunModerations, finishDryRun, judgeDryRun, type PendingDryRun } from './dry-run.js';

export { MAX_REQUEST_BODY_BYTES, SANDBOX_HEADER, headerAgrees, isDnsLabel, routePlan } from './pipeline.js';

export { MAX_BUFFERED_RESPONSE_BYTES } from './relay.js';
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
  /** Base URL of the default upstream (every provider without its own); its path is prefixed to the request path. */
  upstream: URL;
  /** Upstreams by provider (`azure-openai`, `anthropic`, `ollama`): `kars router --upstream NAME=URL`. */
  upstreams?: ReadonlyMap<string, URL>;
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
  /** Where each request's decision record goes, once the request is over (tokens settled). */
  decisions?: DecisionRecorder;
  /** The router's clock, for the bound on draining an abandoned answer (default the system clock). */
  clock?: Clock;
}

/** What one request's decision record needs, gathered while it is served. */
interface Facts {
  scope: RequestScope;
  decision: 'allow' | 'deny' | undefined;
  code: string | undefined;
  model: string | null;
  capped: boolean;
  tokens: DecisionTokens | null;
  meter: Meter | undefined;
  /** The would-be decisions of the snapshot's dry-run policies (ADR 0050), once the body was read. */
  dryRun: PendingDryRun[] | undefined;
}

/** The `model` of a refused body, for its record (read again only on this path; null when there is none to read). */
function modelOf(raw: Buffer): string | null {
  try {
    const v = JSON.parse(raw.toString('utf8')) as unknown;
    const m = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)['model'] : undefined;
    return typeof m === 'string' ? cut(m) : null;
  } catch {
    return null;
  }
}

/**
 * The record of one inference request, once it is over: `deny` with the refusal's code; `cap` when
 * the router set the completion limit; `allow` otherwise (`proxy_error` when no upstream answered).
 * A request that ended before any decision (the agent left while it was read) is `deny`
 * `request_incomplete` when nothing was sent upstream, else `allow` `client_gone`.
 */
function recordInference(rec: DecisionRecorder, route: ReturnType<typeof matchRoute>, f: Facts): void {
  const target = targetOf(route, f);
  const sent = f.meter?.written === true;
  const decision = f.decision ?? (sent ? 'allow' : 'deny');
  const verdict = decision === 'deny' ? 'deny' : f.capped ? 'cap' : 'allow';
  const reason =
    f.decision === undefined
      ? sent
        ? 'client_gone'
        : 'request_incomplete'
      : (f.code ?? (verdict === 'cap' ? 'completion_limit_set' : 'allowed'));
  rec.record({
    kind: 'inference',
    requestId: f.scope.requestId,
    snapshot: f.scope.snapshot,
    target,
    decision: verdict,
    reason,
    tokens: f.tokens,
  });
}

/** What an inference request was about, for its records: the API, the model asked, where it went. */
function targetOf(route: ReturnType<typeof matchRoute>, f: Facts): InferenceTarget {
  const c = f.meter?.candidate;
  return {
    api: route.kind === 'api' ? route.api.title : route.kind === 'models' ? 'models' : 'unrouted',
    model: f.model,
    provider: c?.provider ?? null,
    deployment: c?.deployment ?? null,
  };
}

/** Where one upstream is: the origin, the `host` header and the base path prefixed to every path. */
interface UpstreamTarget {
  origin: string;
  host: string;
  basePath: string;
}

/** The request handler (it answers every path: the route table's, or a refusal); `close()` drops the upstream keep-alive connections of a client it owns. */
export type InferenceHandler = ((req: IncomingMessage, res: ServerResponse) => Promise<boolean>) & { close(): void };

/**
 * Request headers the route sets itself, or never forwards: the identity header is internal; the
 * body is the router's own UTF-8 JSON, so its type and encoding are the router's; and headers that
 * some servers and gateways read as another target or method (`X-Original-URL`, `X-Rewrite-URL`,
 * `X-HTTP-Method-Override`, …) would send the governed body to a path the route table refuses.
 */
const REQUEST_RECOMPUTED: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'expect',
  'accept-encoding',
  SANDBOX_HEADER,
  'x-original-url',
  'x-rewrite-url',
  'x-original-uri',
  'x-forwarded-uri',
  'x-forwarded-path',
  'x-forwarded-prefix',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-method',
]);

function forwardRequestHeaders(inh: IncomingHttpHeaders, host: string, json = false): OutgoingHttpHeaders {
  const out = endToEndHeaders(inh, REQUEST_RECOMPUTED);
  out['host'] = host;
  if (json) out['content-type'] = 'application/json';
  // The route reads response bodies (usage, annotations), so they must arrive uncompressed.
  out['accept-encoding'] = 'identity';
  return out;
}

/** Create the chat-completions handler. See the module comment for what it enforces. */
export function createInferenceHandler(opts: InferenceHandlerOptions): InferenceHandler {
  const target = (u: URL): UpstreamTarget => {
    if (u.protocol !== 'https:' && u.protocol !== 'http:')
      throw new TypeError(`inference upstream must be an http: or https: URL, got "${u.href}"`);
    return { origin: u.origin, host: u.host, basePath: u.pathname.endsWith('/') ? u.pathname.slice(0, -1) : u.pathname };
  };
  const defaultTarget = target(opts.upstream);
  const named = new Map([...(opts.upstreams ?? new Map<string, URL>())].map(([name, u]) => [name, target(u)]));
  /** The upstream a provider's requests go to. */
  const upstreamOf = (provider: string): UpstreamTarget => named.get(provider) ?? defaultTarget;
  const timeoutMs = opts.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const client = opts.client ?? new UpstreamClient({ headersTimeoutMs: timeoutMs });
  const { budget, onDecision, sandbox } = opts;
  const clock = opts.clock ?? systemClock;
  const ctx: PipelineContext = {
    defaultDailyTokens: opts.defaultDailyTokens ?? null,
    guardrailConfigured: opts.guardrail !== undefined,
  };

  function refuse(res: ServerResponse, r: Reject | InferenceRefusal, decide: Decide, wire: Wire): void {
    const refusal = 'kind' in r ? r.refusal : r;
    decide('deny', refusal.body.error.code);
    if (!res.destroyed) sendRefusal(res, refusal, 'kind' in r ? r.headers : undefined, wire);
  }

  async function serve(req: IncomingMessage, res: ServerResponse, route: ApiRoute, decide: Decide, facts: Facts): Promise<void> {
    const wire = route.api.wire;
    // Step 1: one snapshot for the whole request (the one the front door bound, which its digest header names).
    const rules = facts.scope.snapshot.inference;
    const head = decideHead(req.method, req.headers[SANDBOX_HEADER], sandbox);
    if (head !== undefined) {
      req.resume();
      refuse(res, head, decide, wire);
      return;
    }
    const read = await readBody(req, MAX_REQUEST_BODY_BYTES, req.headers['content-length']);
    if (!read.ok) {
      if (read.reason === 'too_large') refuse(res, tooLarge(), decide, wire);
      else res.destroy();
      return;
    }
    // ADR 0050: each dry-run policy decides the same bytes; nothing it decides reaches this request.
    const dry = facts.scope.snapshot.dryRun?.inference;
    if (dry !== undefined && dry.length > 0) facts.dryRun = judgeDryRun(dry, read.body, route, ctx, budget, sandbox);
    const d = decideRequest(read.body, route, rules, ctx);
    if (d.kind === 'forward') {
      const model = d.body['model'];
      facts.model = typeof model === 'string' ? cut(model) : null;
      facts.capped = d.capped;
    }
    if (d.kind === 'reject') {
      facts.model = modelOf(read.body);
      refuse(res, d, decide, wire);
      return;
    }
    if (d.moderateInput !== undefined && opts.guardrail !== undefined) {
      const m = await moderate(opts.guardrail, d.moderateInput, client);
      if (m.kind !== 'clean') {
        refuse(res, m.kind === 'flagged' ? guardrailFlagged('input', m.categories) : guardrailUnavailable(m.detail), decide, wire);
        return;
      }
    }
    // The agent left while its request was read or moderated: nothing has been sent, nothing is.
    if (res.destroyed) return;
    const meter = newMeter();
    facts.meter = meter;
    if (d.reserve === undefined) {
      // An uncharged API (token counting): nothing is reserved or settled.
      await forward(req, res, d, meter, decide);
      return;
    }
    // Step 5: reserve the request's maximum against the daily / monthly budget.
    const reserved = budget.reserve(sandbox, d.reserve.caps, d.reserve.tokens);
    if (!reserved.ok) {
      refuse(
        res,
        { kind: 'reject', refusal: budgetExceeded(reserved.message), headers: budgetRetryHeaders(reserved, clock.wallNow()) },
        decide,
        wire,
      );
      return;
    }
    const headroom = budget.headroom(sandbox, d.reserve.caps);
    const tokens: DecisionTokens = { reserved: reserved.reservation.amount, charged: 0 };
    facts.tokens = tokens;
    try {
      await forward(req, res, d, meter, decide, headroom === undefined ? undefined : budgetHeadroomHeaders(headroom, clock.wallNow()));
    } finally {
      tokens.charged = settleTokens(meter, d.promptBytes, reserved.reservation.amount);
      reserved.reservation.settle(tokens.charged);
    }
  }

  /**
   * `GET /v1/models…`: a read, passed to the upstream of the API family asked (Anthropic's when
   * the request names an Anthropic version, else the default provider's); nothing is charged.
   */
  function models(req: IncomingMessage, res: ServerResponse, route: ModelsRoute, decide: Decide, facts: Facts): Promise<void> {
    req.resume();
    if (!headerAgrees(req.headers[SANDBOX_HEADER], sandbox)) {
      refuse(res, sandboxMismatch(sandbox), decide, route.wire);
      return Promise.resolve();
    }
    const rules = facts.scope.snapshot.inference;
    const t = upstreamOf(route.wire === 'anthropic' ? 'anthropic' : (rules?.provider ?? 'azure-openai'));
    return new Promise((resolve) => {
      const meter = newMeter();
      let relay: BodyRelay | undefined;
      const end = (): void => resolve();
      const call = client.dispatch(
        {
          origin: t.origin,
          path: `${t.basePath}${route.path}${route.query}`,
          method: 'GET',
          headers: forwardRequestHeaders(req.headers, t.host),
          headersTimeoutMs: timeoutMs,
          retryStale: true,
        },
        {
          onHead: (status, headers, c) => {
            meter.status = status;
            relay = createRelay(
              'plain',
              { res, status, headers, meter, decide, call: c, done: end, wire: route.wire, usage: usageReader('openai-total', false) },
              { floor: undefined, guard: undefined, client },
            );
          },
          onData: (chunk) => relay?.onData(chunk) ?? true,
          onEnd: () => relay?.onEnd(),
          onError: (_err, answered) => {
            if (answered) relay?.onError();
            else {
              decide('allow', 'proxy_error');
              if (!res.destroyed && !res.headersSent) sendRefusal(res, proxyError(), undefined, route.wire);
              end();
            }
          },
        },
      );
      res.once('close', () => {
        if (!res.writableFinished) call.abort();
      });
    });
  }

  /**
   * Send the request to each candidate in turn (step 6) and relay the answer that is not passed
   * over; resolves when the exchange is over and `meter` holds what the settlement needs.
   */
  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    d: Forward,
    meter: Meter,
    decide: Decide,
    budgetHeaders?: OutgoingHttpHeaders,
  ): Promise<void> {
    return new Promise((resolve) => new Exchange(req, res, d, meter, decide, resolve, budgetHeaders).next());
  }

  /**
   * One request's upstream exchange: the attempts at each candidate, each an {@link UpstreamSink}
   * fed straight by the upstream client, and the relay of the answer kept.
   */
  class Exchange {
    readonly #res: ServerResponse;
    readonly #d: Forward;
    readonly #meter: Meter;
    readonly #decide: Decide;
    /** The meter, for the attempt relayed. */
    get meter(): Meter {
      return this.#meter;
    }
    readonly #inHeaders: IncomingHttpHeaders;
    /** The budget's `x-ratelimit-*-tokens`, which replace the provider's on the answer relayed. */
    readonly #budgetHeaders: OutgoingHttpHeaders | undefined;
    readonly #resolve: () => void;
    #i = 0;
    /** The latest attempt: the one the client's going away aborts. */
    #attempt: Attempt | undefined = undefined;
    #gone = false;
    #over = false;
    #drainTimer: Timer | undefined = undefined;
    readonly #onClose = (): void => {
      if (this.#res.writableFinished) return;
      this.#gone = true;
      const call = this.#attempt?.call;
      if (call === undefined) return this.done();
      // Not yet written: nothing reached the upstream, so nothing is sent (the attempt hears of it
      // through its aborted request's onError and ends the exchange from there).
      if (!call.written) return call.abort();
      // Written: the upstream runs it and bills it whatever the agent does. Keep reading the answer
      // (ADR 0027), without the client's backpressure, for at most the upstream timeout; past it,
      // or past MAX_BUFFERED_RESPONSE_BYTES of answer, cut it (charged at least the reservation).
      call.resume();
      this.#drainTimer = clock.setTimeout(() => call.abort(), timeoutMs);
    };

    constructor(
      req: IncomingMessage,
      res: ServerResponse,
      d: Forward,
      meter: Meter,
      decide: Decide,
      resolve: () => void,
      budgetHeaders: OutgoingHttpHeaders | undefined,
    ) {
      this.#budgetHeaders = budgetHeaders;
      this.#res = res;
      this.#d = d;
      this.#meter = meter;
      this.#decide = decide;
      this.#resolve = resolve;
      this.#inHeaders = req.headers;
      res.once('close', this.#onClose);
    }

    /** The exchange is over (idempotent). */
    readonly done = (): void => {
      if (this.#over) return;
      this.#over = true;
      this.#drainTimer?.cancel();
      this.#res.off('close', this.#onClose);
      this.#resolve();
    };

    /** Send the attempt at the next candidate. */
    next(): void {
      if (this.#gone || this.#over) return this.done();
      const { candidates } = this.#d;
      const i = this.#i++;
      const last = i === candidates.length - 1;
      const c = candidates[i] as Candidate;
      const up = upstreamOf(c.provider);
      this.#meter.candidate = c;
      const target = attemptFor(this.#d, c, up.basePath);
      const a = new Attempt(this, last);
      this.#attempt = a;
      // (A failure inside dispatch() reaches a.onError first, which may already have moved on.)
      a.call = client.dispatch(
        {
          origin: up.origin,
          path: target.path,
          method: 'POST',
          headers: forwardRequestHeaders(this.#inHeaders, up.host, true),
          body: target.body,
          headersTimeoutMs: timeoutMs,
          // Never retried: a written completion may have run (ADR 0027).
          retryStale: false,
        },
        a,
      );
    }

    /** The answer of an attempt arrived: pass it over (step 6) or relay it (steps 8, 9). */
    head(status: number, headers: IncomingHttpHeaders, last: boolean, call: UpstreamCall): BodyRelay | undefined {
      this.#meter.written = true;
      if (this.#over) {
        call.abort();
        return undefined;
      }
      const ct = headers['content-type'];
      const sse = typeof ct === 'string' && ct.toLowerCase().startsWith('text/event-stream');
      const usage = usageReader(this.#d.route.api.usage, sse);
      if (this.#gone) {
        // The agent left while the upstream worked: read the answer only to charge it.
        this.#meter.status = status;
        return new DrainRelay(status, this.#meter, usage, this.done);
      }
      if (tryNext(status, last)) {
        // A 500, 502 or 504 passed over may have run and been billed: the settlement keeps at least the reservation.
        if (passedOverMayHaveRun(status)) this.#meter.ranBefore = (this.#meter.ranBefore ?? 0) + 1;
        // The unused answer's body is read to its end (the connection stays pooled) while the next attempt goes out.
        this.next();
        return undefined;
      }
      this.#meter.status = status;
      const mode = relayMode(status, headers['content-type'], this.#d);
      return createRelay(
        mode,
        {
          res: this.#res,
          status,
          headers: this.#budgetHeaders === undefined ? headers : { ...headers, ...(this.#budgetHeaders as IncomingHttpHeaders) },
          meter: this.#meter,
          decide: this.#decide,
          call,
          done: this.done,
          wire: this.#d.route.api.wire,
          usage,
        },
        { floor: this.#d.floor, guard: mode === 'judged' && !this.#d.moderateOutput ? undefined : opts.guardrail, client },
      );
    }

    /** Whether the agent has gone and the answer is read past the byte bound (the caller cuts it). */
    overDrained(): boolean {
      return this.#gone && this.#meter.bytes > MAX_BUFFERED_RESPONSE_BYTES;
    }

    /**
     * An attempt failed before its answer: the next candidate, or 502 after the last. A request
     * that was written is not sent again, to this candidate or another (ADR 0027): 502, charged.
     */
    failed(last: boolean, written: boolean): void {
      if (written) this.#meter.written = true;
      if (this.#gone || this.#over) return this.done();
      if (!last && !written) return this.next();
      this.#decide('allow', 'proxy_error');
      sendRefusal(this.#res, proxyError(), undefined, this.#d.route.api.wire);
      this.done();
    }
  }

  /** One attempt at one candidate: the sink its upstream request feeds. */
  class Attempt implements UpstreamSink {
    readonly #x: Exchange;
    readonly #last: boolean;
    #relay: BodyRelay | undefined = undefined;
    call: UpstreamCall | undefined = undefined;

    constructor(x: Exchange, last: boolean) {
      this.#x = x;
      this.#last = last;
    }

    onHead(status: number, headers: IncomingHttpHeaders, call: UpstreamCall): void {
      this.#relay = this.#x.head(status, headers, this.#last, call);
    }

    onData(chunk: Buffer): boolean {
      if (this.#relay === undefined) return true;
      const more = this.#relay.onData(chunk);
      if (this.#x.overDrained()) this.call?.abort();
      return more;
    }

    onEnd(): void {
      if (this.#relay === undefined) return;
      this.#x.meter.complete = true;
      this.#relay.onEnd();
    }

    onError(_err: Error, answered: boolean, written: boolean): void {
      if (!answered) this.#x.failed(this.#last, written);
      else this.#relay?.onError();
    }
  }

  const dryGuardrail = opts.guardrail === undefined ? undefined : { backend: opts.guardrail, client, slots: new DryRunModerations() };
  /** Settle and record the dry-run policies' would-be decisions, once the request is over (ADR 0050). */
  function finishDryRunOf(route: ReturnType<typeof matchRoute>, facts: Facts): void {
    // A dry-run policy is charged what the request used only where the enforced path sent it.
    const charged = facts.tokens?.charged ?? 0;
    const target = targetOf(route, facts);
    finishDryRun(facts.dryRun ?? [], charged, dryGuardrail, (o) =>
      opts.decisions?.recordDryRun(
        {
          kind: 'inference',
          requestId: facts.scope.requestId,
          snapshot: facts.scope.snapshot,
          target,
          decision: o.decision,
          reason: o.reason,
          tokens: o.tokens,
        },
        o.policy.refs,
      ),
    );
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const route = matchRoute(req.method, req.url ?? '/', req.headers['anthropic-version']);
    const wire = route.kind === 'api' ? route.api.wire : route.wire;
    const facts: Facts = {
      scope: scopeOf(req) ?? { requestId: opts.decisions?.nextRequestId() ?? '', snapshot: opts.snapshot() },
      decision: undefined,
      code: undefined,
      model: null,
      capped: false,
      tokens: null,
      meter: undefined,
      dryRun: undefined,
    };
    let reported = false;
    const decide: Decide = (decision, code) => {
      if (reported) return;
      reported = true;
      facts.decision = decision;
      facts.code = code;
      if (onDecision === undefined) return;
      try {
        onDecision(code === undefined ? { sandbox, decision } : { sandbox, decision, code });
      } catch {
        // A failing observer must not break the request.
      }
    };
    try {
      if (route.kind === 'api') await serve(req, res, route, decide, facts);
      else if (route.kind === 'models') {
        if (req.method !== 'GET') {
          req.resume();
          refuse(res, { kind: 'reject', refusal: methodNotAllowed(req.method ?? ''), headers: { allow: 'GET' } }, decide, wire);
        } else await models(req, res, route, decide, facts);
      } else {
        req.resume();
        refuse(res, routeRefused(route.status, route.code, route.message), decide, wire);
      }
    } catch {
      if (!res.headersSent && !res.destroyed) {
        decide('allow', 'proxy_error');
        const r = proxyError();
        const text = refusalJson(r, wire);
        res.writeHead(r.status, refusalHeaders(r, Buffer.byteLength(text)));
        res.end(text);
      } else {
        res.destroy();
      }
    }
    if (opts.decisions?.enabled === true) recordInference(opts.decisions, route, facts);
    if (facts.dryRun !== undefined) finishDryRunOf(route, facts);
    return true;
  };
  return Object.assign(handle, {
    close: (): void => {
      if (opts.client === undefined) void client.close();
    },
  });
}
