/**
 * A local Anthropic Messages upstream for tests, benchmarks and the `kars up` demo.
 *
 * Paths:
 *
 * | path | answer |
 * |---|---|
 * | `POST /v1/messages` | a Message (`msg_…`), or with `stream: true` its SSE events (`anthropic-messages.ts`) |
 * | `POST /v1/messages/count_tokens` | `{input_tokens}` (the behaviour's `inputTokens`) |
 * | `GET /v1/models`, `GET /v1/models/{id}` | Anthropic's model list (`data`, `has_more`, `first_id`, `last_id`) and one model |
 * | anything else | 404 `not_found_error`; 405 for another method on a known path |
 *
 * Requests are validated as the real API does where a router could get it wrong: `model`,
 * `messages` and (on `/v1/messages`) `max_tokens` are required, `max_tokens` ≥ 1,
 * `thinking.budget_tokens` ≥ 1024 and below `max_tokens`. A failure answers 400
 * `invalid_request_error`. Every error has Anthropic's shape,
 * `{"type":"error","error":{"type","message"},"request_id"}`, with a `request-id` header (and
 * `retry-after: 1` on 429), so the `@anthropic-ai/sdk` raises its typed errors.
 *
 * What it answers is an {@link AnthropicStubBehaviour}, layered from lowest to highest
 * precedence: the defaults, `setBehaviour(…)`, `setModelBehaviour(model, …)`, then per-request
 * headers:
 *
 * | header | effect |
 * |---|---|
 * | `x-stub-status: 529` | answer this status, with the error type Anthropic uses for it |
 * | `x-stub-error-type: permission_error` | the error type of an injected status |
 * | `x-stub-content: text` | the assistant's text |
 * | `x-stub-input-tokens: 12`, `x-stub-output-tokens: 7` | usage |
 * | `x-stub-omit-usage: 1` | leave `usage` out (JSON, `message_start` and `message_delta`) |
 * | `x-stub-delta-usage: full` | `message_delta.usage` also carries the (cumulative) input and cache counts |
 * | `x-stub-stream-end: cut` | how a stream ends: `complete`, `error`, `cut`, `eof` (see `AnthropicStreamEnd`) |
 * | `x-stub-delay-ms`, `x-stub-chunk-delay-ms`, `x-stub-chunk-bytes` | pacing, as on the OpenAI stub |
 *
 * Headers the real API reads are recorded, never trusted: `x-api-key`, the token of
 * `authorization: Bearer …` (how `@anthropic-ai/sdk` 1.x sends its `apiKey`), `anthropic-version`
 * and `anthropic-beta` (comma-separated) land in each {@link AnthropicStubRequest}. With
 * `requireVersion`, a request without `anthropic-version` answers 400; with `apiKey` set, a
 * request whose `x-api-key` and bearer token both differ from it answers 401 `authentication_error`.
 *
 * Caveats: no auth unless `apiKey` is set; tools only as canned `toolUse` (the request's `tools`
 * are not read); token counts are whatever it is told; no batches, files or other APIs.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { ANTHROPIC_STREAM_ENDS, messageJson, messageStream, readMessagesRequest, type MessagesBehaviour } from './anthropic-messages.js';
import {
  COMMON_STUB_HEADERS,
  headerBehaviour,
  Behaviours,
  bodyServer,
  runStub,
  sendRaw,
  header,
  sendJson,
  sleep,
  writeEvents,
} from './wire.js';
import type { HeaderTable, RunningStub } from './wire.js';
import { anthropicErrorType } from '../inference/errors.js';

export type { AnthropicStreamEnd, AnthropicStubToolUse } from './anthropic-messages.js';

/** What the Anthropic stub answers. */
export interface AnthropicStubBehaviour extends MessagesBehaviour {
  /** HTTP status (default 200); ≥ 400 answers an Anthropic error of the type for that status. */
  status: number;
  /** The error type of an injected status (default: the one Anthropic uses for it, e.g. 429 `rate_limit_error`). */
  errorType: string | undefined;
  /** Delay before response headers, ms. */
  delayMs: number;
  /** Delay between stream writes, ms. */
  chunkDelayMs: number;
  /** Write streams in pieces of this many bytes; 0 writes one event at a time. */
  chunkBytes: number;
  /** Answer `/v1/messages` with exactly this body instead of a generated one. */
  rawBody: string | undefined;
  /** Content type for `rawBody` (default `application/json`). */
  contentType: string | undefined;
  /** Answer 400 to a request without `anthropic-version`. */
  requireVersion: boolean;
  /** When set, `x-api-key` or the bearer token must equal it (else 401 `authentication_error`). */
  apiKey: string | undefined;
  /** The models `GET /v1/models` lists. */
  models: string[];
}

/** The behaviour before anything is set. */
export const DEFAULT_ANTHROPIC_BEHAVIOUR: Readonly<AnthropicStubBehaviour> = Object.freeze({
  status: 200,
  errorType: undefined,
  content: 'Hello from the kars Anthropic stub.',
  toolUse: undefined,
  thinking: 'The user greeted me, so I greet them back.',
  inputTokens: 15,
  outputTokens: 15,
  omitUsage: false,
  deltaUsage: 'output',
  streamEnd: 'complete',
  delayMs: 0,
  chunkDelayMs: 0,
  chunkBytes: 0,
  rawBody: undefined,
  contentType: undefined,
  requireVersion: false,
  apiKey: undefined,
  models: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
});

/** The routes the stub serves. */
export type AnthropicRoute = 'messages' | 'count_tokens' | 'models';

/** One request the Anthropic stub received. */
export interface AnthropicStubRequest {
  method: string;
  /** The route its path names; undefined for an unknown path. */
  route: AnthropicRoute | undefined;
  /** Path with query, as received. */
  path: string;
  /** The body's `model`, when a string. */
  model: string | undefined;
  /** The parsed body; undefined when it was not JSON (or there was none). */
  body: unknown;
  rawBody: string;
  headers: IncomingHttpHeaders;
  /** `x-api-key` as received. */
  apiKey: string | undefined;
  /** The token of `authorization: Bearer …` as received (the SDK's `apiKey` arrives here). */
  bearer: string | undefined;
  /** `anthropic-version` as received. */
  version: string | undefined;
  /** `anthropic-beta`, split on commas and trimmed (empty when absent). */
  beta: string[];
}

export interface AnthropicStubOptions {
  /** `host:port`; default `127.0.0.1:0` (a free port). */
  listen?: string;
}

/** A running Anthropic stub. */
export interface AnthropicStub extends RunningStub<AnthropicStubRequest, AnthropicStubBehaviour> {
  /** Override the behaviour for one model (undefined removes the override). */
  setModelBehaviour(model: string, b: Partial<AnthropicStubBehaviour> | undefined): void;
}

/** Most recorded requests kept; older ones are dropped. */
export const MAX_RECORDED = 10_000;
const MAX_BODY = 64 * 1024 * 1024;

/** Which `x-stub-*` header sets which behaviour field. */
const HEADERS: HeaderTable<AnthropicStubBehaviour> = {
  ...COMMON_STUB_HEADERS,
  errorType: ['x-stub-error-type', 'string'],
  inputTokens: ['x-stub-input-tokens', 'int'],
  outputTokens: ['x-stub-output-tokens', 'int'],
  deltaUsage: ['x-stub-delta-usage', ['output', 'full']],
  streamEnd: ['x-stub-stream-end', ANTHROPIC_STREAM_ENDS],
};

function routeOf(path: string): { route: AnthropicRoute; method: string; model?: string } | undefined {
  if (path === '/v1/messages') return { route: 'messages', method: 'POST' };
  if (path === '/v1/messages/count_tokens') return { route: 'count_tokens', method: 'POST' };
  if (path === '/v1/models') return { route: 'models', method: 'GET' };
  if (path.startsWith('/v1/models/') && path.length > '/v1/models/'.length && !path.slice('/v1/models/'.length).includes('/')) {
    let model = path.slice('/v1/models/'.length);
    try {
      model = decodeURIComponent(model);
    } catch {
      // Kept as sent.
    }
    return { route: 'models', method: 'GET', model };
  }
  return undefined;
}

/** The token of an `authorization: Bearer …` header. */
function bearerOf(h: IncomingHttpHeaders): string | undefined {
  const m = /^Bearer (.+)$/i.exec(header(h, 'authorization') ?? '');
  return m?.[1];
}

const displayName = (id: string): string =>
  id
    .split('-')
    .map((w) => (w === '' ? w : w[0]!.toUpperCase() + w.slice(1)))
    .join(' ');

const modelEntry = (id: string): Record<string, unknown> => ({
  type: 'model',
  id,
  display_name: displayName(id),
  created_at: '2025-01-01T00:00:00Z',
});

/** Start the Anthropic stub. See the module comment. */
export async function startAnthropicStub(opts: AnthropicStubOptions = {}): Promise<AnthropicStub> {
  const requests: AnthropicStubRequest[] = [];
  const behaviours = new Behaviours<AnthropicStubBehaviour>(() => ({ ...DEFAULT_ANTHROPIC_BEHAVIOUR }));
  let seq = 0;

  const fail = (res: ServerResponse, status: number, type: string, message: string): void => {
    const requestId = `req_stub${++seq}`;
    const extra: Record<string, string> = { 'request-id': requestId };
    if (status === 429) extra['retry-after'] = '1';
    sendJson(res, status, { type: 'error', error: { type, message: `${message} (kars Anthropic stub)` }, request_id: requestId }, extra);
  };

  async function answer(req: IncomingMessage, res: ServerResponse, raw: string): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? '';
    const route = routeOf(path);
    let body: unknown;
    try {
      body = raw === '' ? undefined : (JSON.parse(raw) as unknown);
    } catch {
      body = undefined;
    }
    const doc = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    const model = typeof doc?.['model'] === 'string' ? doc['model'] : undefined;
    const h = req.headers;
    const beta = header(h, 'anthropic-beta');
    requests.push({
      method,
      route: route?.route,
      path: url,
      model,
      body,
      rawBody: raw,
      headers: h,
      apiKey: header(h, 'x-api-key'),
      bearer: bearerOf(h),
      version: header(h, 'anthropic-version'),
      beta:
        beta === undefined
          ? []
          : beta
              .split(',')
              .map((s) => s.trim())
              .filter((s) => s !== ''),
    });
    if (requests.length > MAX_RECORDED) requests.splice(0, requests.length - MAX_RECORDED);

    const b: AnthropicStubBehaviour = { ...behaviours.for(model), ...headerBehaviour(h, HEADERS) };

    if (route === undefined) return fail(res, 404, 'not_found_error', `Not found: ${method} ${path}`);
    if (method !== route.method)
      return fail(res, 405, 'invalid_request_error', `Method ${method} not allowed on ${path}; use ${route.method}`);
    if (b.apiKey !== undefined && header(h, 'x-api-key') !== b.apiKey && bearerOf(h) !== b.apiKey)
      return fail(res, 401, 'authentication_error', 'invalid x-api-key');
    if (b.requireVersion && header(h, 'anthropic-version') === undefined)
      return fail(res, 400, 'invalid_request_error', 'anthropic-version: header is required');

    if (route.route === 'models') {
      if (route.model !== undefined) {
        if (!b.models.includes(route.model)) return fail(res, 404, 'not_found_error', `model: ${route.model}`);
        return sendJson(res, 200, modelEntry(route.model));
      }
      return sendJson(res, 200, {
        data: b.models.map(modelEntry),
        has_more: false,
        first_id: b.models[0] ?? null,
        last_id: b.models.at(-1) ?? null,
      });
    }

    if (b.delayMs > 0) await sleep(b.delayMs);
    if (res.destroyed) return;
    if (route.route === 'messages' && b.rawBody !== undefined) {
      await sendRaw(res, b, b.rawBody);
      return;
    }
    if (doc === undefined) return fail(res, 400, 'invalid_request_error', 'The request body is not a valid JSON object');
    if (b.status >= 400) return fail(res, b.status, b.errorType ?? anthropicErrorType(b.status), `injected status ${b.status}`);

    const r = readMessagesRequest(doc, route.route === 'count_tokens');
    if ('error' in r) return fail(res, 400, 'invalid_request_error', r.error);
    if (route.route === 'count_tokens') return sendJson(res, 200, { input_tokens: b.inputTokens });

    const id = `msg_stub${++seq}`;
    const headers = { 'request-id': `req_stub${seq}` };
    if (!r.stream) return sendJson(res, b.status, messageJson(b, r, id), headers);
    const s = messageStream(b, r, id);
    res.writeHead(b.status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
    await writeEvents(res, b, s.frames, s.finish);
  }

  const server = bodyServer(MAX_BODY, answer, (res) =>
    sendJson(
      res,
      413,
      { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed size (kars Anthropic stub)' } },
      { connection: 'close' },
    ),
  );
  const stub = await runStub(server, opts.listen, 'Anthropic stub', requests, behaviours);
  return { ...stub, setModelBehaviour: (model, b) => behaviours.setFor(model, b) };
}
