/**
 * The inference APIs the router governs, one descriptor each: what InferencePolicy action governs
 * it, which providers speak it, which fields limit its output and how they are capped, what a
 * guardrail stage cannot judge in its requests, where its usage is reported, and how its errors are
 * shaped. Everything that differs between chat completions, Responses, embeddings and Anthropic
 * Messages is here; the pipeline (`pipeline.ts`) and the relays are the same for all of them.
 *
 * Guarantees: every function is pure and total (bad input is a refusal, never a throw).
 */
import { isObject } from '@kars/kube-core';
import { fold } from '../json/fold.js';
import {
  MAX_N,
  MAX_TOKEN_LIMIT,
  describe,
  intField,
  normalizeRequest,
  type LimitsRefusal,
  type LimitsResult,
  type NormalizedRequest,
} from './limits.js';

/** The API of a route. */
export type ApiName = 'chat' | 'responses' | 'embeddings' | 'messages' | 'count_tokens';

/** The error envelope (and SDK family) of an API. */
export type Wire = 'openai' | 'anthropic';

/** The InferencePolicy `appliesTo.action` that governs a route (`image` governs no route: none is served). */
export type RouteAction = 'chat' | 'responses' | 'embeddings';

/** Providers a policy can route to (the wire contract's `provider` enum). */
export type Provider = 'azure-openai' | 'anthropic' | 'ollama' | 'bedrock';

/** How a usage figure is read from an answer (`usage.ts` runs it). */
export type UsageShape =
  /** `usage.total_tokens` of the body (read from its tail), or of the last stream chunk carrying it. */
  | 'openai-total'
  /** Responses: `usage` of the whole body; in a stream, `response.usage` of `response.completed|incomplete|failed`. */
  | 'responses'
  /** Anthropic: `usage` input + output (+ cache) tokens; in a stream, `message_start` plus the last `message_delta`. */
  | 'anthropic';

/** One governed API. */
export interface InferenceApi {
  readonly name: ApiName;
  /** A human name for messages ("OpenAI Responses"). */
  readonly title: string;
  readonly action: RouteAction;
  readonly wire: Wire;
  /** The API's path after its prefix (`/v1`, `/openai/v1`, `/openai/deployments/{d}`): `/chat/completions`. */
  readonly suffix: string;
  /** Providers that speak it; a candidate of another provider is skipped, and none left is a refusal. */
  readonly providers: ReadonlySet<Provider>;
  /** Whether a request spends tokens (reserved and settled against the budget). */
  readonly charged: boolean;
  /** Whether its answers can carry Azure content-filter annotations (the content-safety floor's evidence). */
  readonly annotated: boolean;
  /** Whether its answers hold text an agent reads (what an output guardrail stage judges). */
  readonly answersText: boolean;
  readonly usage: UsageShape;
  /** The field that bounds its output, written when a request sets none under a budget (undefined: it generates nothing). */
  readonly limitField: string | undefined;
  /** Validate and cap the limit fields (`cap`: `tokenBudget.perRequestTokens`, null for none). */
  normalize(body: Record<string, unknown>, cap: number | null): LimitsResult;
  /**
   * Where a request holds what a text moderator cannot judge (media, stored context the router
   * cannot read), for an input guardrail stage (ADR 0026); empty when everything is text.
   */
  unjudgeable(body: Record<string, unknown>): string[];
  /** Request fields that make the provider reach the network itself (ADR 0034); the request is refused. */
  providerTools(body: Record<string, unknown>): string[];
  /** Whether a model the agent names runs a provider tool by itself on this API (a search model); such a request is refused. */
  readonly toolRunningModel: (model: string) => boolean;
}

/**
 * OpenAI models that search the web on every request without a tool being asked for
 * (`gpt-4o-search-preview`, `gpt-4o-mini-search-preview`, `gpt-5-search-api`) and the deep-research
 * models (`o3-deep-research`, `o4-mini-deep-research`). Judged on the folded name, so case,
 * compatibility forms and invisible characters do not hide one.
 */
export function searchesByItself(model: string): boolean {
  return /(^|[-_./:])(search|deep-?research)([-_./:]|$)/.test(fold(model));
}

const noToolRunningModel = (): boolean => false;

function invalid(field: string, message: string): { ok: false; refusal: LimitsRefusal } {
  return { ok: false, refusal: { kind: 'invalid', field, message } };
}

function overCap(requested: number, cap: number, what: string): { ok: false; refusal: LimitsRefusal } {
  return {
    ok: false,
    refusal: { kind: 'over_cap', requested, cap, message: `Requested ${what} exceeds InferencePolicy tokenBudget.perRequestTokens=${cap}` },
  };
}

/**
 * Limit fields of another API: an upstream that reads one (a lax OpenAI-compatible server reading
 * `max_tokens` on Responses) would take a limit the router never capped, so each is refused.
 */
function foreignLimits(body: Record<string, unknown>, fields: readonly string[], api: string): LimitsResult | undefined {
  const f = fields.find((k) => Object.hasOwn(body, k));
  return f === undefined ? undefined : invalid(f, `${f} is not a field of the ${api} API; send its own limit field instead`);
}

function streamField(body: Record<string, unknown>): LimitsResult | undefined {
  const stream = body['stream'];
  // A lax upstream may read `"true"` as true; the router must know whether it streams.
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean')
    return invalid('stream', `stream must be a boolean, got ${describe(stream)}`);
  return undefined;
}

function normalized(body: Record<string, unknown>, perChoice: number | undefined): LimitsResult {
  const request: NormalizedRequest = { body, n: 1, perChoice, maxCompletion: perChoice };
  return { ok: true, request };
}

/** Responses: `max_output_tokens` (which bounds reasoning tokens too) capped; `background` refused. */
function normalizeResponses(body: Record<string, unknown>, cap: number | null): LimitsResult {
  const foreign = foreignLimits(body, ['max_tokens', 'max_completion_tokens', 'n', 'thinking'], 'Responses');
  if (foreign !== undefined) return foreign;
  const s = streamField(body);
  if (s !== undefined) return s;
  const bg = body['background'];
  if (bg !== undefined && bg !== null && bg !== false)
    return {
      ok: false,
      refusal: {
        kind: 'unsupported',
        field: 'background',
        message:
          'background responses are not served by kars router: they run and are billed after the request has ended, outside the budget; send the request without background',
      },
    };
  const reasoning = body['reasoning'];
  if (reasoning !== undefined && reasoning !== null && !isObject(reasoning))
    return invalid('reasoning', `reasoning must be an object, got ${describe(reasoning)}`);
  if (isObject(reasoning)) {
    const r = intField(reasoning, 'max_tokens', MAX_TOKEN_LIMIT, 'reasoning.max_tokens');
    if (!r.ok) return r;
    if (r.value !== undefined && cap !== null && r.value > cap) return overCap(r.value, cap, `reasoning.max_tokens=${r.value}`);
  }
  const motField = intField(body, 'max_output_tokens', MAX_TOKEN_LIMIT);
  if (!motField.ok) return motField;
  const mot = motField.value;
  if (cap === null) return normalized({ ...body }, mot);
  if (mot === undefined) return normalized({ ...body, max_output_tokens: cap }, cap);
  return mot > cap ? overCap(mot, cap, `max_output_tokens=${mot}`) : normalized({ ...body }, mot);
}

/** Embeddings: no output tokens; `input` must be text or token ids. */
function normalizeEmbeddings(body: Record<string, unknown>): LimitsResult {
  const foreign = foreignLimits(body, ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n', 'stream'], 'embeddings');
  if (foreign !== undefined) return foreign;
  return { ok: true, request: { body: { ...body }, n: 1, perChoice: 0, maxCompletion: 0 } };
}

/**
 * Anthropic Messages: `max_tokens` (required by the API) and `thinking.budget_tokens` capped. The
 * completion maximum is the larger of the two (with interleaved thinking a budget may exceed
 * `max_tokens`).
 */
function normalizeMessages(body: Record<string, unknown>, cap: number | null): LimitsResult {
  const foreign = foreignLimits(body, ['max_completion_tokens', 'max_output_tokens', 'n'], 'Anthropic Messages');
  if (foreign !== undefined) return foreign;
  const s = streamField(body);
  if (s !== undefined) return s;
  const mtField = intField(body, 'max_tokens', MAX_TOKEN_LIMIT);
  if (!mtField.ok) return mtField;
  const mt = mtField.value;
  const thinking = body['thinking'];
  if (thinking !== undefined && thinking !== null && !isObject(thinking))
    return invalid('thinking', `thinking must be an object, got ${describe(thinking)}`);
  let budget: number | undefined;
  if (isObject(thinking)) {
    const b = intField(thinking, 'budget_tokens', MAX_TOKEN_LIMIT, 'thinking.budget_tokens');
    if (!b.ok) return b;
    budget = b.value;
  }
  if (cap !== null && budget !== undefined && budget > cap) return overCap(budget, cap, `thinking.budget_tokens=${budget}`);
  if (cap !== null && mt !== undefined && mt > cap) return overCap(mt, cap, `max_tokens=${mt}`);
  const out = cap !== null && mt === undefined ? { ...body, max_tokens: cap } : { ...body };
  const maxTokens = (out['max_tokens'] as number | undefined) ?? undefined;
  const most = maxTokens === undefined ? budget : budget === undefined ? maxTokens : Math.max(maxTokens, budget);
  return normalized(out, most);
}

/** count_tokens: nothing is generated; the body is forwarded as parsed. */
function normalizeCount(body: Record<string, unknown>): LimitsResult {
  return { ok: true, request: { body: { ...body }, n: 1, perChoice: 0, maxCompletion: 0 } };
}

/** Top-level request fields some API reads or the router governs (limits, streaming, tools, stored context). */
const GOVERNED_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'input',
  'system',
  'instructions',
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'n',
  'stream',
  'stream_options',
  'thinking',
  'reasoning',
  'background',
  'tools',
  'tool_choice',
  'web_search_options',
  'mcp_servers',
  'container',
  'previous_response_id',
  'conversation',
  'prompt',
  'prediction',
  'audio',
  'modalities',
  'include',
  'store',
  // Fields of the limit objects (`stream_options`, `reasoning`, `thinking`).
  'include_usage',
  'budget_tokens',
  'effort',
  'type',
]);

/**
 * A top-level key a case-insensitive upstream would read as a governed field (or as another key of
 * the body) although the router reads it as a field of its own: `MAX_TOKENS` beside `max_tokens`,
 * `max_tokenſ`, `Stream`. Undefined when there is none.
 */
export function foldedAlias(body: Record<string, unknown>): string | undefined {
  const top = foldedKey(body);
  if (top !== undefined) return top;
  // The objects whose fields limit or meter a request are read by the same decoder.
  for (const k of ['stream_options', 'reasoning', 'thinking']) {
    const v = body[k];
    const inner = isObject(v) ? foldedKey(v) : undefined;
    if (inner !== undefined) return `${k}.${inner}`;
  }
  return undefined;
}

function foldedKey(body: Record<string, unknown>): string | undefined {
  const keys = Object.keys(body);
  const exact = new Set(keys);
  const seen = new Set<string>();
  for (const k of keys) {
    const f = fold(k);
    if (f !== k && (GOVERNED_FIELDS.has(f) || exact.has(f))) return k;
    if (seen.has(f)) return k;
    seen.add(f);
  }
  return undefined;
}

/** Content-part types whose payload is text, in every API. */
const TEXT_PARTS: ReadonlySet<string> = new Set(['text', 'input_text', 'output_text', 'refusal', 'summary_text', 'reasoning_text']);

/** Keys that carry media in a part, whatever its `type` says. */
const MEDIA_KEYS: readonly string[] = [
  'image_url',
  'image',
  'input_image',
  'input_audio',
  'audio',
  'audio_url',
  'file',
  'file_id',
  'file_data',
  'file_url',
  'input_file',
  'video_url',
  'video',
  'source',
];

function partProblem(part: unknown, allowed: ReadonlySet<string>): string | undefined {
  if (!isObject(part)) return undefined; // a string in a content list is text
  const type = part['type'];
  if (typeof type !== 'string' || !allowed.has(type)) return typeof type === 'string' ? type : 'part without a type';
  const folded = Object.keys(part).map(fold);
  const media = MEDIA_KEYS.find((k) => folded.includes(k));
  return media === undefined ? undefined : `${type} part carrying ${media}`;
}

/** The parts of a `content` value (a string, or a list of parts) a text moderator cannot judge. */
function contentProblems(content: unknown, path: string, out: string[], allowed: ReadonlySet<string> = TEXT_PARTS): void {
  if (Array.isArray(content)) {
    content.forEach((p, i) => {
      const why = partProblem(p, allowed);
      if (why !== undefined) out.push(`${path}[${i}] (${why})`);
    });
  } else if (isObject(content)) {
    const why = partProblem(content, allowed);
    if (why !== undefined) out.push(`${path} (${why})`);
  }
}

function chatUnjudgeable(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    messages.forEach((m, i) => {
      if (!isObject(m)) return;
      contentProblems(m['content'], `messages[${i}].content`, out);
      if (m['audio'] !== undefined && m['audio'] !== null) out.push(`messages[${i}].audio (spoken audio)`);
    });
  }
  const prediction = body['prediction'];
  if (isObject(prediction)) contentProblems(prediction['content'], 'prediction.content', out);
  return out;
}

/** Responses input item types whose content the router can read as text. */
const RESPONSES_TEXT_ITEMS: ReadonlySet<string> = new Set([
  'message',
  'function_call',
  'function_call_output',
  'custom_tool_call',
  'custom_tool_call_output',
  'reasoning',
]);

function responsesUnjudgeable(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  // Context the upstream holds and the router never sees: the model reads it, no stage judged it.
  for (const k of ['previous_response_id', 'conversation', 'prompt'] as const) {
    const v = body[k];
    if (v !== undefined && v !== null) out.push(`${k} (stored context the router cannot read)`);
  }
  const input = body['input'];
  if (Array.isArray(input)) {
    input.forEach((item, i) => {
      if (!isObject(item)) return;
      const type = item['type'] ?? (item['role'] !== undefined ? 'message' : undefined);
      if (typeof type !== 'string' || !RESPONSES_TEXT_ITEMS.has(type)) {
        out.push(`input[${i}] (${typeof type === 'string' ? type : 'item without a type'})`);
        return;
      }
      contentProblems(item['content'], `input[${i}].content`, out);
      // A tool's output may be a list of parts (text, image, file).
      contentProblems(item['output'], `input[${i}].output`, out);
    });
  } else if (isObject(input)) out.push('input (an object)');
  return out;
}

function embeddingsUnjudgeable(body: Record<string, unknown>): string[] {
  const input = body['input'];
  if (typeof input === 'string') return [];
  if (Array.isArray(input) && input.every((x) => typeof x === 'string')) return [];
  return ['input (token ids, not text)'];
}

/** Anthropic content blocks whose payload the router reads as text (provider-signed thinking included). */
const ANTHROPIC_TEXT_BLOCKS: ReadonlySet<string> = new Set(['text', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking']);
/** Blocks a tool result may hold. */
const ANTHROPIC_RESULT_BLOCKS: ReadonlySet<string> = new Set(['text']);

function anthropicBlocks(content: unknown, path: string, out: string[]): void {
  if (!Array.isArray(content)) {
    if (isObject(content)) out.push(`${path} (an object)`);
    return;
  }
  content.forEach((b, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(b)) return;
    const type = b['type'];
    if (typeof type !== 'string' || !ANTHROPIC_TEXT_BLOCKS.has(type)) {
      out.push(`${at} (${typeof type === 'string' ? type : 'block without a type'})`);
      return;
    }
    if (type === 'tool_result') contentProblems(b['content'], `${at}.content`, out, ANTHROPIC_RESULT_BLOCKS);
    else {
      const folded = Object.keys(b).map(fold);
      const media = MEDIA_KEYS.find((k) => folded.includes(k));
      if (media !== undefined) out.push(`${at} (${type} block carrying ${media})`);
    }
  });
}

function messagesUnjudgeable(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  const system = body['system'];
  if (Array.isArray(system)) contentProblems(system, 'system', out, ANTHROPIC_RESULT_BLOCKS);
  else if (isObject(system)) out.push('system (an object)');
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    messages.forEach((m, i) => {
      if (isObject(m)) anthropicBlocks(m['content'], `messages[${i}].content`, out);
    });
  }
  return out;
}

/** Responses tool types the agent runs itself; any other type is run by the provider. */
const RESPONSES_CLIENT_TOOLS: ReadonlySet<string> = new Set(['function', 'custom']);

/**
 * The `tools` entries whose `type` is not one of `clientTools` (the agent's own), as `tools[i] (type)`.
 * A single tool object (not a list) is read as one by a lax upstream; the router cannot tell whose it
 * is, so it is one problem, `tools (not a list)`.
 */
function nonClientTools(body: Record<string, unknown>, clientTools: ReadonlySet<string>): string[] {
  const tools = body['tools'];
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) return ['tools (not a list)'];
  const out: string[] = [];
  tools.forEach((t, i) => {
    const type = isObject(t) ? exactType(t) : undefined;
    if (typeof type !== 'string' || !clientTools.has(type))
      out.push(`tools[${i}] (${typeof type === 'string' ? type : 'a tool without a type'})`);
  });
  return out;
}

/** Responses tools the provider runs (any type but {@link RESPONSES_CLIENT_TOOLS}). */
function responsesProviderTools(body: Record<string, unknown>): string[] {
  return nonClientTools(body, RESPONSES_CLIENT_TOOLS);
}

/**
 * Anthropic tools the agent runs itself: custom tools (no `type`, or `custom`) and the client
 * tools whose calls come back to the agent (`bash_*`, `text_editor_*`, `computer_*`, `memory_*`).
 * Server tools (`web_search_*`, `web_fetch_*`, `code_execution_*`, …) run at the provider.
 */
function anthropicClientTool(type: unknown): boolean {
  if (type === undefined || type === 'custom') return true;
  return typeof type === 'string' && /^(bash|text_editor|computer|memory)_\d{8}$/.test(type);
}

function messagesProviderTools(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (body['mcp_servers'] !== undefined && body['mcp_servers'] !== null) out.push('mcp_servers (the MCP connector)');
  const tools = body['tools'];
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) out.push('tools (not a list)');
  if (Array.isArray(tools))
    tools.forEach((t, i) => {
      const type = isObject(t) ? exactType(t) : 'not an object';
      if (!anthropicClientTool(type)) out.push(`tools[${i}] (${typeof type === 'string' ? type : 'a tool without a type'})`);
    });
  return out;
}

/**
 * A tool's `type`, or a refusal's reason when another key folds onto it (`Type`, `TYPE`): the
 * router would read no type (a custom tool) where a case-insensitive decoder reads a server tool.
 */
function exactType(t: Record<string, unknown>): unknown {
  const keys = Object.keys(t).filter((k) => fold(k) === 'type');
  return keys.length === 0 || (keys.length === 1 && keys[0] === 'type') ? t['type'] : 'a type key in another case';
}

/**
 * A `tool_choice` that names a provider-run tool (`{"type": "web_search_preview"}`, `mcp`, or one
 * inside `allowed_tools`): no such tool can be listed on a route the router serves, so the request
 * cannot be the agent's own tools' and is refused rather than trusted to the upstream's check.
 */
function toolChoiceProblems(body: Record<string, unknown>, clientTools: ReadonlySet<string>): string[] {
  const choice = body['tool_choice'];
  if (!isObject(choice)) return []; // "auto", "none", "required"
  const type = exactType(choice);
  if (type === 'allowed_tools') {
    const listed = choice['tools'];
    if (!Array.isArray(listed)) return [];
    return listed.flatMap((t, i) => {
      const ty = isObject(t) ? exactType(t) : undefined;
      return typeof ty === 'string' && clientTools.has(ty)
        ? []
        : [`tool_choice.tools[${i}] (${typeof ty === 'string' ? ty : 'a tool without a type'})`];
    });
  }
  return typeof type === 'string' && clientTools.has(type)
    ? []
    : [`tool_choice (${typeof type === 'string' ? type : 'a choice without a type'})`];
}

/** Chat tool types the agent runs itself. */
const CHAT_CLIENT_TOOLS: ReadonlySet<string> = new Set(['function', 'custom']);

/**
 * Chat tools that are not the agent's own (`function`, `custom`): chat completions defines no
 * provider-run tool, so any other type is one an upstream or a gateway would run (or a spelling the
 * router cannot judge) and is refused, as on Responses.
 */
function chatTools(body: Record<string, unknown>): string[] {
  return nonClientTools(body, CHAT_CLIENT_TOOLS);
}

/**
 * Chat fields that make the provider reach the network: web search, and Azure OpenAI's "On Your
 * Data" `data_sources` (the old `dataSources` too), whose `endpoint`s (Azure AI Search,
 * Elasticsearch, Pinecone, MongoDB, …) the provider calls with the request's query, and whose
 * retrieved documents join the prompt unjudged and unreserved.
 */
function chatProviderTools(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  // Judged on the folded key: a case-insensitive decoder (ASP.NET's web defaults, Go's
  // encoding/json) reads `DataSources` or `DATA_SOURCES` as the field.
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue;
    const f = fold(k);
    if (f === 'web_search_options') out.push(`${k} (web search)`);
    else if (f === 'data_sources' || f === 'datasources') out.push(`${k} (Azure OpenAI On Your Data retrieval)`);
  }
  return out;
}

/**
 * The values of `o`'s keys that fold to `name` (`url`, `URL`, `Url`): a case-insensitive upstream
 * decoder reads any of them as the field.
 */
function foldedValues(o: Record<string, unknown>, name: string): unknown[] {
  const out: unknown[] = [];
  for (const [k, v] of Object.entries(o)) if (k === name || fold(k) === name) out.push(v);
  return out;
}

/** Whether `v` names something the provider would fetch: a URL of any scheme but `data:` (bytes in the request). */
function fetchedUrl(v: unknown): v is string {
  return typeof v === 'string' && !/^\s*data:/i.test(v);
}

/**
 * Media the provider fetches itself from a URL the agent chose: chat `image_url.url` (and the
 * `audio_url` / `video_url` extensions), Responses `image_url` and `file_url`, Anthropic
 * `source: {type: "url"}`. Each reaches a host of the agent's choosing from the provider, outside
 * the sandbox's egress policy, and is billed by the size of what it fetches, which the reservation
 * never saw. Media sent as bytes (`data:` URLs, base64 sources) or by a provider file id pass.
 */
function fetchedMedia(v: unknown, path: string, out: string[], depth = 0): void {
  if (depth > 64 || out.length >= 8) return;
  if (Array.isArray(v)) {
    v.forEach((x, i) => fetchedMedia(x, `${path}[${i}]`, out, depth + 1));
    return;
  }
  if (!isObject(v)) return;
  if (foldedValues(v, 'type').includes('url') && foldedValues(v, 'url').some(fetchedUrl))
    out.push(`${path === '' ? 'the body' : path} (a url source the provider fetches)`);
  for (const [k, x] of Object.entries(v)) {
    const at = path === '' ? k : `${path}.${k}`;
    const key = fold(k);
    if (key === 'image_url' || key === 'audio_url' || key === 'video_url' || key === 'file_url') {
      if (fetchedUrl(x) || (isObject(x) && foldedValues(x, 'url').some(fetchedUrl))) {
        out.push(`${at} (a URL the provider fetches)`);
        continue;
      }
    }
    // Tool schemas describe fields, they hold no media.
    if (key === 'tools' || key === 'functions' || key === 'response_format' || key === 'text') continue;
    fetchedMedia(x, at, out, depth + 1);
  }
}

/** `fetchedMedia` over a whole body. */
function mediaFetches(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  fetchedMedia(body, '', out);
  return out;
}

const OPENAI_PROVIDERS: ReadonlySet<Provider> = new Set(['azure-openai', 'ollama']);

/** Chat completions (`/v1/chat/completions`). */
export const CHAT: InferenceApi = {
  name: 'chat',
  title: 'OpenAI chat completions',
  action: 'chat',
  wire: 'openai',
  suffix: '/chat/completions',
  providers: OPENAI_PROVIDERS,
  charged: true,
  annotated: true,
  answersText: true,
  usage: 'openai-total',
  limitField: 'max_tokens',
  normalize: (body, cap) => {
    const foreign = foreignLimits(body, ['max_output_tokens', 'thinking'], 'chat completions');
    return foreign ?? normalizeRequest(body, cap);
  },
  unjudgeable: chatUnjudgeable,
  providerTools: (body) => [
    ...chatProviderTools(body),
    ...chatTools(body),
    ...toolChoiceProblems(body, CHAT_CLIENT_TOOLS),
    ...mediaFetches(body),
  ],
  toolRunningModel: searchesByItself,
};

/** OpenAI Responses (`/v1/responses`). */
export const RESPONSES: InferenceApi = {
  name: 'responses',
  title: 'OpenAI Responses',
  action: 'responses',
  wire: 'openai',
  suffix: '/responses',
  providers: new Set<Provider>(['azure-openai']),
  charged: true,
  annotated: false,
  answersText: true,
  usage: 'responses',
  limitField: 'max_output_tokens',
  normalize: normalizeResponses,
  unjudgeable: responsesUnjudgeable,
  providerTools: (body) => [...responsesProviderTools(body), ...toolChoiceProblems(body, RESPONSES_CLIENT_TOOLS), ...mediaFetches(body)],
  toolRunningModel: searchesByItself,
};

/** OpenAI embeddings (`/v1/embeddings`). */
export const EMBEDDINGS: InferenceApi = {
  name: 'embeddings',
  title: 'OpenAI embeddings',
  action: 'embeddings',
  wire: 'openai',
  suffix: '/embeddings',
  providers: OPENAI_PROVIDERS,
  charged: true,
  annotated: false,
  answersText: false,
  usage: 'openai-total',
  limitField: undefined,
  normalize: normalizeEmbeddings,
  unjudgeable: embeddingsUnjudgeable,
  providerTools: () => [],
  toolRunningModel: noToolRunningModel,
};

/** Anthropic Messages (`/v1/messages`), governed as chat. */
export const MESSAGES: InferenceApi = {
  name: 'messages',
  title: 'Anthropic Messages',
  action: 'chat',
  wire: 'anthropic',
  suffix: '/messages',
  providers: new Set<Provider>(['anthropic']),
  charged: true,
  annotated: false,
  answersText: true,
  usage: 'anthropic',
  limitField: 'max_tokens',
  normalize: normalizeMessages,
  unjudgeable: messagesUnjudgeable,
  providerTools: (body) => [...messagesProviderTools(body), ...mediaFetches(body)],
  toolRunningModel: noToolRunningModel,
};

/** Anthropic token counting (`/v1/messages/count_tokens`): allowed and never charged. */
export const COUNT_TOKENS: InferenceApi = {
  name: 'count_tokens',
  title: 'Anthropic token counting',
  action: 'chat',
  wire: 'anthropic',
  suffix: '/messages/count_tokens',
  providers: new Set<Provider>(['anthropic']),
  charged: false,
  annotated: false,
  answersText: false,
  usage: 'anthropic',
  limitField: undefined,
  normalize: normalizeCount,
  unjudgeable: () => [],
  // Counting a url source makes the provider fetch it, as a message would.
  providerTools: (body) => [...messagesProviderTools(body), ...mediaFetches(body)],
  toolRunningModel: noToolRunningModel,
};

/** Every governed API. */
export const APIS: readonly InferenceApi[] = [CHAT, RESPONSES, EMBEDDINGS, MESSAGES, COUNT_TOKENS];

/** The provider a route's requests go to when no policy names one. */
export function nativeProvider(api: InferenceApi): Provider {
  return api.wire === 'anthropic' ? 'anthropic' : 'azure-openai';
}

export { MAX_N, MAX_TOKEN_LIMIT };
