/**
 * The OpenAI stub's Responses API answers (`POST /v1/responses` and its Azure forms), as pure
 * builders: a request and a behaviour in, a Response object or the SSE frames of its stream out.
 *
 * Tokens: each word of the canned text counts as one output token for `max_output_tokens`. An
 * answer longer than the request's `max_output_tokens` is cut to that many words and comes back
 * `status: "incomplete"` with `incomplete_details.reason: "max_output_tokens"` and
 * `output_tokens` equal to the limit. Otherwise usage is the behaviour's total split in half
 * (input gets the smaller half), with `output_tokens` never above the request's limit.
 *
 * Streams follow the real API's named events, each data carrying `type` and a `sequence_number`
 * counted from 0: `response.created`, `response.in_progress`, then per output item
 * `response.output_item.added`, for a message `response.content_part.added`, one
 * `response.output_text.delta` per word, `response.output_text.done`, `response.content_part.done`
 * (for a function call, `response.function_call_arguments.delta` in pieces of 4 characters and
 * `response.function_call_arguments.done`), `response.output_item.done`, and last
 * `response.completed` (or `response.incomplete`) whose `response` carries `usage`.
 */
import type { StubToolCall } from './openai.js';
import { piecesOf, wordPieces } from './wire.js';

/**
 * How a Responses stream ends: `completed` (normal; `incomplete` by itself when the answer was cut
 * to `max_output_tokens`), `incomplete` (the text cut to half its words, then
 * `response.incomplete` with reason `max_output_tokens`), `failed` (half the text deltas, then
 * `response.failed` with `error.code: "server_error"`, usage kept), `cut` (half the text deltas,
 * then the connection closes mid-answer), `eof` (half the text deltas, then a clean end with no
 * terminal event).
 */
export type ResponsesStreamEnd = 'completed' | 'incomplete' | 'failed' | 'cut' | 'eof';

/** The stream ends {@link ResponsesStreamEnd} names, for header parsing. */
export const RESPONSES_STREAM_ENDS: readonly ResponsesStreamEnd[] = ['completed', 'incomplete', 'failed', 'cut', 'eof'];

/** What a Responses answer is made of (a slice of the stub's behaviour). */
export interface ResponsesBehaviour {
  content: string;
  toolCalls: StubToolCall[] | undefined;
  /** Total tokens, split between input and output. */
  usage: number;
  /** Leave usage out everywhere (`usage: null`). */
  omitUsage: boolean;
  /** Carry usage in the stream's terminal event (false: `usage: null` there). */
  streamUsage: boolean;
  streamEnd: ResponsesStreamEnd;
}

/** The request fields a Responses answer reads. */
export interface ResponsesRequest {
  maxOutputTokens: number | undefined;
  instructions: unknown;
  previousResponseId: unknown;
  background: unknown;
  /** Keep the answer for `GET /v1/responses/{id}` (the request's `store`, default true). */
  store: boolean;
}

/** Read the fields the stub uses from a request body; `error` when `max_output_tokens` is not a positive integer. */
export function readResponsesRequest(doc: Record<string, unknown>): ResponsesRequest | { error: string } {
  const max = doc['max_output_tokens'];
  if (max !== undefined && max !== null && !(typeof max === 'number' && Number.isInteger(max) && max >= 1))
    return { error: "Invalid 'max_output_tokens': expected a positive integer." };
  return {
    maxOutputTokens: typeof max === 'number' ? max : undefined,
    instructions: doc['instructions'] ?? null,
    previousResponseId: doc['previous_response_id'] ?? null,
    background: doc['background'] ?? false,
    store: doc['store'] !== false,
  };
}

interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

function usageOf(input: number, output: number): Usage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** The answer planned once, then rendered as JSON or as a stream. */
interface Plan {
  words: string[];
  truncated: boolean;
  input: number;
  output: number;
}

function plan(b: ResponsesBehaviour, r: ResponsesRequest): Plan {
  const all = wordPieces(b.content);
  const max = r.maxOutputTokens;
  const truncated = b.toolCalls === undefined && max !== undefined && all.length > max;
  const words = truncated ? all.slice(0, max) : all;
  const input = Math.floor(b.usage / 2);
  const rest = b.usage - input;
  const output = truncated ? (max ?? rest) : Math.min(rest, max ?? rest);
  return { words, truncated, input, output };
}

/** Ids of one answer, numbered by the stub's sequence. */
export interface ResponsesIds {
  response: string;
  message: string;
  call: (i: number) => { id: string; callId: string };
}

/** Ids for the answer numbered `n`. */
export function responsesIds(n: number): ResponsesIds {
  return {
    response: `resp_stub${n}`,
    message: `msg_stub${n}`,
    call: (i) => ({ id: `fc_stub${n}_${i}`, callId: `call_stub${n}_${i}` }),
  };
}

function envelope(
  ids: ResponsesIds,
  model: string,
  createdAt: number,
  r: ResponsesRequest,
  status: string,
  output: unknown[],
  usage: Usage | null,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: ids.response,
    object: 'response',
    created_at: createdAt,
    status,
    background: r.background,
    error: null,
    incomplete_details: null,
    instructions: r.instructions,
    max_output_tokens: r.maxOutputTokens ?? null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: r.previousResponseId,
    reasoning: { effort: null, summary: null },
    store: r.store,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: {},
    ...extra,
  };
}

const textPart = (text: string): Record<string, unknown> => ({ type: 'output_text', text, annotations: [], logprobs: [] });

function messageItem(ids: ResponsesIds, status: string, text: string | undefined): Record<string, unknown> {
  return { id: ids.message, type: 'message', status, role: 'assistant', content: text === undefined ? [] : [textPart(text)] };
}

function callItem(ids: ResponsesIds, i: number, c: StubToolCall, status: string, args: string): Record<string, unknown> {
  const { id, callId } = ids.call(i);
  return { id, type: 'function_call', status, arguments: args, call_id: callId, name: c.name };
}

const INCOMPLETE = { incomplete_details: { reason: 'max_output_tokens' } };

/** The non-streaming answer: a Response object. */
export function responseJson(
  b: ResponsesBehaviour,
  r: ResponsesRequest,
  ids: ResponsesIds,
  model: string,
  createdAt: number,
): Record<string, unknown> {
  const p = plan(b, r);
  const status = p.truncated ? 'incomplete' : 'completed';
  const output =
    b.toolCalls === undefined
      ? [messageItem(ids, status, p.words.join(''))]
      : b.toolCalls.map((c, i) => callItem(ids, i, c, 'completed', c.arguments));
  const usage = b.omitUsage ? null : usageOf(p.input, p.output);
  return envelope(ids, model, createdAt, r, status, output, usage, p.truncated ? INCOMPLETE : {});
}

/** A stream: its SSE frames, whether the connection is cut after the last one, and the Response its terminal event carried (none when it had none). */
export interface ResponsesStream {
  frames: string[];
  finish: 'end' | 'destroy';
  final: Record<string, unknown> | undefined;
}

/** The streaming answer's frames (see the module comment and {@link ResponsesStreamEnd}). */
export function responseStream(
  b: ResponsesBehaviour,
  r: ResponsesRequest,
  ids: ResponsesIds,
  model: string,
  createdAt: number,
): ResponsesStream {
  const p = plan(b, r);
  const frames: string[] = [];
  let seq = 0;
  const emit = (type: string, data: Record<string, unknown>): void => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
  };
  const started = envelope(ids, model, createdAt, r, 'in_progress', [], null);
  emit('response.created', { response: started });
  emit('response.in_progress', { response: started });

  const end = b.streamEnd;
  const early = end === 'failed' || end === 'cut' || end === 'eof';
  const forcedIncomplete = end === 'incomplete' && b.toolCalls === undefined;
  const incomplete = p.truncated || forcedIncomplete;
  const output: unknown[] = [];
  let stopped = false;

  if (b.toolCalls === undefined) {
    const words = forcedIncomplete ? p.words.slice(0, Math.ceil(p.words.length / 2)) : p.words;
    const stopAt = early ? Math.ceil(words.length / 2) : words.length;
    emit('response.output_item.added', { output_index: 0, item: messageItem(ids, 'in_progress', undefined) });
    const at = { item_id: ids.message, output_index: 0, content_index: 0 };
    emit('response.content_part.added', { ...at, part: textPart('') });
    for (const w of words.slice(0, stopAt)) emit('response.output_text.delta', { ...at, delta: w, logprobs: [] });
    if (early) stopped = true;
    else {
      const text = words.join('');
      emit('response.output_text.done', { ...at, text, logprobs: [] });
      emit('response.content_part.done', { ...at, part: textPart(text) });
      const item = messageItem(ids, incomplete ? 'incomplete' : 'completed', text);
      emit('response.output_item.done', { output_index: 0, item });
      output.push(item);
    }
  } else {
    const calls = b.toolCalls;
    const stopAfter = early ? Math.ceil(calls.length / 2) : calls.length;
    calls.slice(0, stopAfter).forEach((c, i) => {
      const item_id = ids.call(i).id;
      emit('response.output_item.added', { output_index: i, item: callItem(ids, i, c, 'in_progress', '') });
      const pieces = piecesOf(c.arguments, 4);
      const sent = early && i === stopAfter - 1 ? pieces.slice(0, Math.ceil(pieces.length / 2)) : pieces;
      for (const d of sent) emit('response.function_call_arguments.delta', { item_id, output_index: i, delta: d });
      if (early && i === stopAfter - 1) return;
      emit('response.function_call_arguments.done', { item_id, output_index: i, name: c.name, arguments: c.arguments });
      const item = callItem(ids, i, c, 'completed', c.arguments);
      emit('response.output_item.done', { output_index: i, item });
      output.push(item);
    });
    stopped = early;
  }

  const usage = b.omitUsage || !b.streamUsage ? null : usageOf(p.input, p.output);
  let final: Record<string, unknown> | undefined;
  if (stopped && end === 'failed') {
    const error = { code: 'server_error', message: 'kars OpenAI stub: injected failure (response.failed)' };
    final = envelope(ids, model, createdAt, r, 'failed', output, usage, { error });
    emit('response.failed', { response: final });
  } else if (!stopped) {
    final = incomplete
      ? envelope(ids, model, createdAt, r, 'incomplete', output, usage, INCOMPLETE)
      : envelope(ids, model, createdAt, r, 'completed', output, usage);
    emit(incomplete ? 'response.incomplete' : 'response.completed', { response: final });
  }
  return { frames, finish: stopped && end === 'cut' ? 'destroy' : 'end', final };
}
