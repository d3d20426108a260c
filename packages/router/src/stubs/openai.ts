/**
 * A local OpenAI-compatible upstream for tests, benchmarks and the `kars up` demo.
 *
 * Paths (any query; the deployment is the Azure path's, else the body's `model`):
 *
 * | API | paths |
 * |---|---|
 * | chat completions | `/v1/chat/completions`, `/openai/v1/chat/completions`, `/openai/deployments/{d}/chat/completions` |
 * | Responses | `/v1/responses`, `/openai/v1/responses`, `/openai/responses`, `/openai/deployments/{d}/responses` |
 * | embeddings | `/v1/embeddings`, `/openai/v1/embeddings`, `/openai/deployments/{d}/embeddings` |
 * | moderations | `/v1/moderations` |
 * | a stored Response | `GET` / `DELETE` `/v1/responses/{id}`, `/openai/v1/responses/{id}`, `/openai/responses/{id}` |
 *
 * All but the stored-Response paths are `POST`. A Response is kept for retrieval (the last
 * {@link MAX_STORED_RESPONSES}) unless the request set `store: false`; a stream's is kept when it
 * ended with a terminal event. `background: true` is not simulated: the answer is complete at
 * once, with `background: true` echoed. Moderations answer in OpenAI's moderation shape: one result per input, `flagged`
 * when the input contains a term of `moderationFlag`, default `kars-flag-me`; settable with
 * `setBehaviour`. Anything else answers 404 (405 for another method on those paths), OpenAI-shaped.
 *
 * Responses answers are built by `openai-responses.ts` (a Response object, or its named SSE
 * events; `max_output_tokens` honoured, stream ends chosen by `streamEnd`), embeddings by
 * `openai-embeddings.ts` (deterministic unit vectors, floats or base64). Errors (`status` ≥ 400)
 * have the same OpenAI/Azure shape on every API.
 *
 * Answers look like Azure OpenAI's: `id`, `object`, `created`, `model`, `choices[0].message`,
 * `usage{prompt_tokens, completion_tokens, total_tokens}` and `prompt_filter_results` (every
 * category `safe` unless told otherwise). With `stream: true` it sends SSE events
 * (`data: {…}\n\n`): the prompt-filter event, a role event, one event per word, a finish event, a
 * usage event, then `data: [DONE]\n\n`.
 *
 * What it answers is a {@link StubBehaviour}, layered from lowest to highest precedence:
 * the defaults, `setBehaviour(…)`, `setDeploymentBehaviour(deployment, …)`, then per-request
 * headers:
 *
 * | header | effect |
 * |---|---|
 * | `x-stub-status: 503` | answer this status (an OpenAI error body for ≥ 400) |
 * | `x-stub-filter: {"hate":"High"}` | severities in `prompt_filter_results[0].content_filter_results` (`{hate: {filtered: false, severity: "high"}}`); with status 400, an Azure content-filter error carrying them in `error.innererror.content_filter_result` |
 * | `x-stub-no-filter: 1` | omit the filter annotations entirely |
 * | `x-stub-usage: 123` | `usage.total_tokens` |
 * | `x-stub-content: text` | the assistant's message |
 * | `x-stub-delay-ms: 50` | wait before sending response headers |
 * | `x-stub-chunk-delay-ms: 5` | wait between stream writes |
 * | `x-stub-chunk-bytes: 7` | write the stream in pieces of this many bytes (tests SSE reassembly) |
 * | `x-stub-stream-usage: 0` | leave the usage event out of streams (Responses: `usage: null` in the terminal event) |
 * | `x-stub-omit-usage: 1` | leave usage out of every answer, JSON and streamed |
 * | `x-stub-stream-end: cut` | how a Responses stream ends: `completed`, `incomplete`, `failed`, `cut`, `eof` (see `ResponsesStreamEnd`) |
 *
 * With `toolCalls` set (by `setBehaviour`), the answer is those tool calls instead of a text:
 * JSON `message.tool_calls` with `content: null` and `finish_reason: "tool_calls"`; in a stream,
 * one `delta.tool_calls` event naming each call, then its `arguments` in pieces of at most 4
 * characters, one event each (so a word is split across events, as real models do). On Responses
 * they are `function_call` output items, streamed as `response.function_call_arguments.delta` pieces.
 *
 * Every request is recorded in `requests` (API, path, deployment, model, parsed body, headers).
 *
 * Caveats: no auth, tools only as canned `toolCalls` (the request's `tools` are not read), no `n > 1`; token counts are whatever it is told.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { systemClock } from '@kars/kube-core';
import { embeddingsAnswer } from './openai-embeddings.js';
import {
  readResponsesRequest,
  RESPONSES_STREAM_ENDS,
  responseJson,
  responseStream,
  responsesIds,
  type ResponsesStreamEnd,
} from './openai-responses.js';
import {
  COMMON_STUB_HEADERS,
  headerBehaviour,
  Behaviours,
  bodyServer,
  runStub,
  header,
  sendJson as sendJsonTo,
  sleep,
  writeEvents,
  sendRaw,
} from './wire.js';
import type { HeaderTable, RunningStub } from './wire.js';

/** The categories the stub annotates, in Azure's order. */
export type StubCategory = 'hate' | 'self_harm' | 'sexual' | 'violence';

/** What the stub answers. */
export interface StubBehaviour {
  /** HTTP status (default 200). */
  status: number;
  /** The assistant's message. */
  content: string;
  /** Severities to report, by category (case kept as given, lower-cased on the wire); unnamed categories are `safe`. */
  filter: Partial<Record<StubCategory, string>>;
  /** Leave `prompt_filter_results` out entirely. */
  noFilter: boolean;
  /** `usage.total_tokens` (split between prompt and completion). */
  usage: number;
  /** Delay before response headers, ms. */
  delayMs: number;
  /** Delay between stream writes, ms. */
  chunkDelayMs: number;
  /** Write streams in pieces of this many bytes; 0 writes one event at a time. */
  chunkBytes: number;
  /** Send the usage event in streams (Responses: `usage` in the terminal event's response). */
  streamUsage: boolean;
  /** Leave usage out of every answer: chat and embeddings without `usage`, Responses with `usage: null`. */
  omitUsage: boolean;
  /** How a Responses stream ends (default `completed`; see {@link ResponsesStreamEnd}). */
  streamEnd: ResponsesStreamEnd;
  /** Answer exactly this body instead of a generated one. */
  rawBody: string | undefined;
  /** Content type for `rawBody` (default `application/json`). */
  contentType: string | undefined;
  /** `POST /v1/moderations` flags an input that contains any of these (case-insensitive). */
  moderationFlag: string[];
  /** Answer with these function tool calls instead of `content` (see the module comment). */
  toolCalls: StubToolCall[] | undefined;
}

/** One canned function tool call of the stub's answer. */
export interface StubToolCall {
  name: string;
  /** The arguments, as the JSON text a model writes. */
  arguments: string;
}

/** The behaviour before anything is set. */
export const DEFAULT_STUB_BEHAVIOUR: Readonly<StubBehaviour> = Object.freeze({
  status: 200,
  content: 'Hello from the kars OpenAI stub.',
  filter: {},
  noFilter: false,
  usage: 30,
  delayMs: 0,
  chunkDelayMs: 0,
  chunkBytes: 0,
  streamUsage: true,
  omitUsage: false,
  streamEnd: 'completed',
  rawBody: undefined,
  contentType: undefined,
  moderationFlag: ['kars-flag-me'],
  toolCalls: undefined,
});

/** The APIs the stub serves. */
export type StubApi = 'chat' | 'responses' | 'embeddings' | 'moderations';

/** One request the stub received. */
export interface StubRequest {
  method: string;
  /** The API its path names; undefined for an unknown path. */
  api: StubApi | undefined;
  /** Path with query, as received. */
  path: string;
  /** The Azure deployment path's deployment (decoded); undefined on the other paths. */
  deployment: string | undefined;
  /** The body's `model`, when a string. */
  model: string | undefined;
  /** The deployment the request addressed: `deployment ?? model`. */
  target: string | undefined;
  /** The parsed body; undefined when it was not JSON. */
  body: unknown;
  rawBody: string;
  headers: IncomingHttpHeaders;
}

export interface OpenAIStubOptions {
  /** `host:port`; default `127.0.0.1:0` (a free port). */
  listen?: string;
}

/** A running stub. Clear `requests` with `requests.length = 0` or `reset()`. */
export interface OpenAIStub extends RunningStub<StubRequest, StubBehaviour> {
  /** Override the behaviour for one deployment (undefined removes the override). */
  setDeploymentBehaviour(deployment: string, b: Partial<StubBehaviour> | undefined): void;
}

const CATEGORIES: readonly StubCategory[] = ['hate', 'self_harm', 'sexual', 'violence'];
const AZURE_PREFIX = '/openai/deployments/';
const MAX_BODY = 64 * 1024 * 1024;
const SUFFIXES: readonly (readonly [Exclude<StubApi, 'moderations'>, string])[] = [
  ['chat', '/chat/completions'],
  ['responses', '/responses'],
  ['embeddings', '/embeddings'],
];

/** The API and Azure deployment a path names (see the module comment's table); undefined when none. */
export function routeOf(path: string): { api: StubApi; deployment: string | undefined; responseId?: string } | undefined {
  if (path === '/v1/moderations') return { api: 'moderations', deployment: undefined };
  if (path === '/openai/responses') return { api: 'responses', deployment: undefined };
  const stored = /^(?:\/v1|\/openai\/v1|\/openai)\/responses\/(resp_[A-Za-z0-9_-]+)$/.exec(path);
  if (stored) return { api: 'responses', deployment: undefined, responseId: stored[1] ?? '' };
  for (const [api, suffix] of SUFFIXES) {
    if (path === `/v1${suffix}` || path === `/openai/v1${suffix}`) return { api, deployment: undefined };
    if (path.startsWith(AZURE_PREFIX) && path.endsWith(suffix) && path.length > AZURE_PREFIX.length + suffix.length) {
      const seg = path.slice(AZURE_PREFIX.length, path.length - suffix.length);
      if (seg.includes('/')) continue;
      try {
        return { api, deployment: decodeURIComponent(seg) };
      } catch {
        return { api, deployment: seg };
      }
    }
  }
  return undefined;
}

/** The per-request overrides carried by `x-stub-*` headers. */
/** Which `x-stub-*` header sets which behaviour field (`x-stub-filter` is read by {@link filterHeader}). */
const HEADERS: HeaderTable<StubBehaviour> = {
  ...COMMON_STUB_HEADERS,
  noFilter: ['x-stub-no-filter', 'bool'],
  usage: ['x-stub-usage', 'int'],
  streamUsage: ['x-stub-stream-usage', 'bool'],
  streamEnd: ['x-stub-stream-end', RESPONSES_STREAM_ENDS],
};

/** The content-filter severities `x-stub-filter` asks for (a JSON object by category); a malformed one is ignored. */
function filterHeader(h: IncomingHttpHeaders): Partial<StubBehaviour> {
  const filter = header(h, 'x-stub-filter');
  if (filter === undefined) return {};
  try {
    const v = JSON.parse(filter) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    const f: Partial<Record<StubCategory, string>> = {};
    for (const c of CATEGORIES) {
      const s = (v as Record<string, unknown>)[c];
      if (typeof s === 'string') f[c] = s;
    }
    return { filter: f };
  } catch {
    return {};
  }
}

/** The behaviour a request's `x-stub-*` headers ask for. */
const requestBehaviour = (h: IncomingHttpHeaders): Partial<StubBehaviour> => ({ ...headerBehaviour(h, HEADERS), ...filterHeader(h) });

function filterResults(b: StubBehaviour): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of CATEGORIES) out[c] = { filtered: false, severity: (b.filter[c] ?? 'safe').toLowerCase() };
  out['jailbreak'] = { filtered: false, detected: false };
  return out;
}

function usageOf(total: number): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const prompt = Math.floor(total / 2);
  return { prompt_tokens: prompt, completion_tokens: total - prompt, total_tokens: total };
}

function errorBody(b: StubBehaviour): { body: Record<string, unknown>; headers: Record<string, string> } {
  const s = b.status;
  if (s === 400 && Object.keys(b.filter).length > 0) {
    return {
      headers: {},
      body: {
        error: {
          message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. (kars OpenAI stub)",
          type: null,
          param: 'prompt',
          code: 'content_filter',
          status: 400,
          innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: filterResults(b) },
        },
      },
    };
  }
  if (s === 429) {
    return {
      headers: { 'retry-after': '1' },
      body: {
        error: { code: '429', message: 'Rate limit exceeded (kars OpenAI stub); retry after 1 second.', type: 'rate_limit_exceeded' },
      },
    };
  }
  return {
    headers: {},
    body: {
      error: { message: `kars OpenAI stub: injected status ${s}`, type: s >= 500 ? 'server_error' : 'invalid_request_error', code: null },
    },
  };
}

/** Most recorded requests kept; older ones are dropped. */
export const MAX_RECORDED = 10_000;
/** Most Responses kept for retrieval; older ones are dropped. */
export const MAX_STORED_RESPONSES = 1000;

/** Start the stub. See the module comment. */
export async function startOpenAIStub(opts: OpenAIStubOptions = {}): Promise<OpenAIStub> {
  const requests: StubRequest[] = [];
  const behaviours = new Behaviours<StubBehaviour>(() => ({ ...DEFAULT_STUB_BEHAVIOUR, filter: {} }));
  /** Responses kept for `GET /v1/responses/{id}`, oldest first. */
  const stored = new Map<string, Record<string, unknown>>();
  let seq = 0;

  async function answer(req: IncomingMessage, res: ServerResponse, raw: string): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const route = routeOf(path);
    const api = route?.api;
    const deployment = route?.deployment;
    let body: unknown;
    try {
      body = JSON.parse(raw) as unknown;
    } catch {
      body = undefined;
    }
    const doc = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    const model = typeof doc?.['model'] === 'string' ? doc['model'] : undefined;
    const target = deployment ?? model;
    requests.push({ method: req.method ?? '', api, path: url, deployment, model, target, body, rawBody: raw, headers: req.headers });
    // Keep memory bounded under load (kars stub runs for long demos and benchmarks).
    if (requests.length > MAX_RECORDED) requests.splice(0, requests.length - MAX_RECORDED);

    const sendJson = (status: number, obj: unknown, extra: Record<string, string> = {}): void => {
      const text = JSON.stringify(obj);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
      res.end(text);
    };
    if (api === 'moderations' && req.method === 'POST') {
      // OpenAI moderation shape: one result per input, flagged when it contains a configured term.
      const input = doc?.['input'];
      const texts =
        typeof input === 'string' ? [input] : Array.isArray(input) ? input.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))) : [];
      if (texts.length === 0)
        return sendJson(400, {
          error: {
            message: 'kars OpenAI stub: input must be a string or a list of strings',
            type: 'invalid_request_error',
            code: 'invalid_input',
          },
        });
      const terms = behaviours.for(undefined).moderationFlag.map((t) => t.toLowerCase());
      const results = texts.map((t) => {
        const flagged = terms.some((term) => term !== '' && t.toLowerCase().includes(term));
        return {
          flagged,
          categories: { harassment: false, hate: false, 'self-harm': false, sexual: false, violence: flagged },
          category_scores: { harassment: 0, hate: 0, 'self-harm': 0, sexual: 0, violence: flagged ? 0.99 : 0 },
        };
      });
      return sendJson(200, { id: `modr-stub-${++seq}`, model: 'omni-moderation-latest', results });
    }
    if (api === undefined || api === 'moderations')
      return sendJson(404, {
        error: { message: `kars OpenAI stub: no route for ${path}`, type: 'invalid_request_error', code: 'not_found' },
      });
    if (route?.responseId !== undefined) return answerStored(req.method ?? '', route.responseId, sendJson);
    if (req.method !== 'POST')
      return sendJson(405, { error: { message: 'kars OpenAI stub: use POST', type: 'invalid_request_error', code: 'method_not_allowed' } });

    const b: StubBehaviour = { ...behaviours.for(target), ...requestBehaviour(req.headers) };
    if (b.delayMs > 0) await sleep(b.delayMs);
    if (res.destroyed) return;

    if (b.rawBody !== undefined) {
      await sendRaw(res, b, b.rawBody);
      return;
    }
    if (doc === undefined)
      return sendJson(400, {
        error: { message: 'kars OpenAI stub: body is not a JSON object', type: 'invalid_request_error', code: 'invalid_json' },
      });
    if (b.status >= 400) {
      const e = errorBody(b);
      return sendJson(b.status, e.body, e.headers);
    }
    if (api === 'embeddings') {
      const e = embeddingsAnswer(doc, target ?? 'text-embedding-3-small', b.usage, b.omitUsage);
      return sendJson(e.status === 200 ? b.status : e.status, e.body);
    }
    if (api === 'responses') return answerResponses(res, b, doc, target ?? 'gpt-4o-stub');

    const id = `chatcmpl-stub-${++seq}`;
    const created = Math.floor(systemClock.wallNow() / 1000);
    const name = target ?? 'gpt-4o-stub';
    const promptFilter = b.noFilter ? undefined : [{ prompt_index: 0, content_filter_results: filterResults(b) }];
    const choiceFilter = b.noFilter ? undefined : filterResults({ ...b, filter: {} });

    if (doc['stream'] !== true) {
      const out: Record<string, unknown> = {
        id,
        object: 'chat.completion',
        created,
        model: name,
        choices: [
          {
            index: 0,
            message:
              b.toolCalls === undefined
                ? { role: 'assistant', content: b.content }
                : {
                    role: 'assistant',
                    content: null,
                    tool_calls: b.toolCalls.map((c, i) => ({
                      id: `call_${seq}_${i}`,
                      type: 'function',
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  },
            finish_reason: b.toolCalls === undefined ? 'stop' : 'tool_calls',
            ...(choiceFilter ? { content_filter_results: choiceFilter } : {}),
          },
        ],
        ...(b.omitUsage ? {} : { usage: usageOf(b.usage) }),
        system_fingerprint: null,
      };
      if (promptFilter) out['prompt_filter_results'] = promptFilter;
      return sendJson(b.status, out);
    }

    res.writeHead(b.status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
    const chunk = (delta: Record<string, unknown>, finish: string | null): Record<string, unknown> => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: name,
      choices: [
        {
          index: 0,
          delta,
          finish_reason: finish,
          ...(choiceFilter && finish === null && delta['content'] !== '' ? { content_filter_results: choiceFilter } : {}),
        },
      ],
    });
    const events: string[] = [];
    if (promptFilter) events.push(frame({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: promptFilter }));
    if (b.toolCalls === undefined) {
      events.push(frame(chunk({ role: 'assistant', content: '' }, null)));
      const words = b.content.split(' ');
      for (let i = 0; i < words.length; i++) events.push(frame(chunk({ content: i === 0 ? words[i] : ` ${words[i] ?? ''}` }, null)));
      events.push(frame(chunk({}, 'stop')));
    } else {
      b.toolCalls.forEach((c, i) => {
        const call = { index: i, id: `call_${seq}_${i}`, type: 'function', function: { name: c.name, arguments: '' } };
        events.push(frame(chunk(i === 0 ? { role: 'assistant', content: null, tool_calls: [call] } : { tool_calls: [call] }, null)));
        for (let at = 0; at < c.arguments.length; at += 4)
          events.push(frame(chunk({ tool_calls: [{ index: i, function: { arguments: c.arguments.slice(at, at + 4) } }] }, null)));
      });
      events.push(frame(chunk({}, 'tool_calls')));
    }
    if (b.streamUsage && !b.omitUsage)
      events.push(frame({ id, object: 'chat.completion.chunk', created, model: name, choices: [], usage: usageOf(b.usage) }));
    events.push('data: [DONE]\n\n');
    await writeEvents(res, b, events, 'end');
  }

  /** A Responses API answer (`openai-responses.ts`): a 400 for a malformed limit, JSON, or the SSE stream. */
  async function answerResponses(res: ServerResponse, b: StubBehaviour, doc: Record<string, unknown>, model: string): Promise<void> {
    const r = readResponsesRequest(doc);
    if ('error' in r)
      return sendJsonTo(res, 400, {
        error: { message: r.error, type: 'invalid_request_error', param: 'max_output_tokens', code: 'invalid_value' },
      });
    const ids = responsesIds(++seq);
    const createdAt = Math.floor(systemClock.wallNow() / 1000);
    if (doc['stream'] !== true) {
      const out = responseJson(b, r, ids, model, createdAt);
      if (r.store) keep(ids.response, out);
      return sendJsonTo(res, b.status, out);
    }
    const s = responseStream(b, r, ids, model, createdAt);
    if (r.store && s.final !== undefined) keep(ids.response, s.final);
    res.writeHead(b.status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    await writeEvents(res, b, s.frames, s.finish);
  }

  /** Remember a Response for retrieval, dropping the oldest beyond {@link MAX_STORED_RESPONSES}. */
  function keep(id: string, response: Record<string, unknown>): void {
    stored.set(id, response);
    if (stored.size > MAX_STORED_RESPONSES) stored.delete(stored.keys().next().value ?? '');
  }

  /** `GET` (the stored Response) or `DELETE` (`{id, object: "response", deleted: true}`) of `/v1/responses/{id}`. */
  function answerStored(method: string, id: string, send: (status: number, obj: unknown) => void): void {
    const found = stored.get(id);
    if (method !== 'GET' && method !== 'DELETE')
      return send(405, {
        error: { message: 'kars OpenAI stub: use GET or DELETE', type: 'invalid_request_error', code: 'method_not_allowed' },
      });
    if (found === undefined)
      return send(404, {
        error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', param: 'response_id', code: null },
      });
    if (method === 'GET') return send(200, found);
    stored.delete(id);
    return send(200, { id, object: 'response', deleted: true });
  }

  const server = bodyServer(MAX_BODY, answer, (res) => res.writeHead(413, { connection: 'close' }).end());
  const stub = await runStub(server, opts.listen, 'OpenAI stub', requests, behaviours, () => stored.clear());
  return { ...stub, setDeploymentBehaviour: (deployment, b) => behaviours.setFor(deployment, b) };
}
