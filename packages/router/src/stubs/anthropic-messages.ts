/**
 * The Anthropic stub's Messages answers, as pure builders: a validated request and a behaviour in,
 * a Message object or the SSE frames of its stream out.
 *
 * Tokens: each word of the canned text counts as one output token for `max_tokens`. An answer
 * longer than `max_tokens` is cut to that many words with `stop_reason: "max_tokens"` and
 * `output_tokens` equal to `max_tokens`; otherwise `output_tokens` is the behaviour's, never above
 * `max_tokens`.
 *
 * Streams follow the real API: `message_start` (the message with empty content, `usage.input_tokens`
 * and `output_tokens: 1`), per content block `content_block_start`, deltas (`text_delta` per word,
 * `thinking_delta` then `signature_delta`, `input_json_delta` in pieces of 4 characters) and
 * `content_block_stop`, a `ping` after the first block starts, `message_delta` (`delta.stop_reason`,
 * `usage.output_tokens` cumulative), `message_stop`. Each frame is `event: NAME\ndata: {"type":NAME,…}`.
 */
import { piecesOf, wordPieces } from './wire.js';

/** One canned `tool_use` block of the stub's answer. */
export interface AnthropicStubToolUse {
  name: string;
  /** The tool input, as the model would write it. */
  input: Record<string, unknown>;
}

/**
 * How a Messages stream ends: `complete` (normal), `error` (half the text deltas, then an
 * `event: error` frame with an `overloaded_error`, as the real API sends mid-stream), `cut` (half the
 * text deltas, then the connection closes mid-answer), `eof` (half the text deltas, then a clean end
 * with no `message_delta` or `message_stop`).
 */
export type AnthropicStreamEnd = 'complete' | 'error' | 'cut' | 'eof';

/** The stream ends {@link AnthropicStreamEnd} names, for header parsing. */
export const ANTHROPIC_STREAM_ENDS: readonly AnthropicStreamEnd[] = ['complete', 'error', 'cut', 'eof'];

/** What a Messages answer is made of (the part of the stub's behaviour a generated answer reads). */
export interface MessagesBehaviour {
  /** The assistant's text. */
  content: string;
  /** Answer with these `tool_use` blocks instead of `content` (`stop_reason: "tool_use"`). */
  toolUse: AnthropicStubToolUse[] | undefined;
  /** The thinking block's text, answered first when the request sets `thinking` (enabled or adaptive). */
  thinking: string;
  /** `usage.input_tokens` (also what count_tokens answers). */
  inputTokens: number;
  /** `usage.output_tokens` (never above the request's `max_tokens`). */
  outputTokens: number;
  /** Leave `usage` out of answers (the SDK cannot accumulate such a stream: it is for raw-HTTP tests). */
  omitUsage: boolean;
  /** `message_delta`'s usage: `output` (default, `{output_tokens}`) or `full` (input and cache counts too, cumulative: they must not be counted twice). */
  deltaUsage: 'output' | 'full';
  /** How a stream ends (default `complete`; see {@link AnthropicStreamEnd}). */
  streamEnd: AnthropicStreamEnd;
}

/** The request fields a Messages answer reads, after validation. */
export interface MessagesRequest {
  model: string;
  maxTokens: number;
  /** A thinking block is answered (`thinking.type` is `enabled` or `adaptive`). */
  thinking: boolean;
  stream: boolean;
}

/** Validate a Messages (or count_tokens, with `forCount`) body as the real API does; the error message on failure. */
export function readMessagesRequest(doc: Record<string, unknown>, forCount = false): MessagesRequest | { error: string } {
  const model = doc['model'];
  if (model === undefined) return { error: 'model: Field required' };
  if (typeof model !== 'string' || model === '') return { error: 'model: Input should be a valid string' };
  const messages = doc['messages'];
  if (messages === undefined) return { error: 'messages: Field required' };
  if (!Array.isArray(messages)) return { error: 'messages: Input should be a valid list' };
  const max = doc['max_tokens'];
  if (!forCount) {
    if (max === undefined) return { error: 'max_tokens: Field required' };
    if (!(typeof max === 'number' && Number.isInteger(max))) return { error: 'max_tokens: Input should be a valid integer' };
    if (max < 1) return { error: 'max_tokens: Input should be greater than or equal to 1' };
  }
  const maxTokens = typeof max === 'number' ? max : 0;
  const t = doc['thinking'];
  let thinking = false;
  if (t !== undefined && t !== null) {
    if (typeof t !== 'object' || Array.isArray(t)) return { error: 'thinking: Input should be an object' };
    const type = (t as Record<string, unknown>)['type'];
    if (type === 'enabled') {
      const budget = (t as Record<string, unknown>)['budget_tokens'];
      if (!(typeof budget === 'number' && Number.isInteger(budget))) return { error: 'thinking.enabled.budget_tokens: Field required' };
      if (budget < 1024) return { error: 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024' };
      if (!forCount && maxTokens <= budget) return { error: '`max_tokens` must be greater than `thinking.budget_tokens`' };
      thinking = true;
    } else if (type === 'adaptive') thinking = true;
    else if (type !== 'disabled') return { error: "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'" };
  }
  return { model, maxTokens, thinking, stream: doc['stream'] === true };
}

interface Plan {
  words: string[];
  truncated: boolean;
  output: number;
}

function plan(b: MessagesBehaviour, r: MessagesRequest): Plan {
  const all = wordPieces(b.content);
  const truncated = b.toolUse === undefined && all.length > r.maxTokens;
  return {
    words: truncated ? all.slice(0, r.maxTokens) : all,
    truncated,
    output: truncated ? r.maxTokens : Math.min(b.outputTokens, r.maxTokens),
  };
}

function usage(input: number, output: number): Record<string, unknown> {
  return { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

/** A stand-in for the signature the real API puts on a thinking block. */
const signature = (id: string): string => Buffer.from(`kars-stub-signature:${id}`).toString('base64');

function stopReason(b: MessagesBehaviour, p: Plan): string {
  if (b.toolUse !== undefined) return 'tool_use';
  return p.truncated ? 'max_tokens' : 'end_turn';
}

/** The non-streaming answer: a Message object. */
export function messageJson(b: MessagesBehaviour, r: MessagesRequest, id: string): Record<string, unknown> {
  const p = plan(b, r);
  const content: unknown[] = [];
  if (r.thinking) content.push({ type: 'thinking', thinking: b.thinking, signature: signature(id) });
  if (b.toolUse === undefined) content.push({ type: 'text', text: p.words.join('') });
  else b.toolUse.forEach((t, i) => content.push({ type: 'tool_use', id: `toolu_${id}_${i}`, name: t.name, input: t.input }));
  const out: Record<string, unknown> = {
    id,
    type: 'message',
    role: 'assistant',
    model: r.model,
    content,
    stop_reason: stopReason(b, p),
    stop_sequence: null,
  };
  if (!b.omitUsage) out['usage'] = usage(b.inputTokens, p.output);
  return out;
}

/** A stream: its SSE frames, and whether the connection is cut after the last one. */
export interface MessagesStream {
  frames: string[];
  finish: 'end' | 'destroy';
}

/** The streaming answer's frames (see the module comment and {@link AnthropicStreamEnd}). */
export function messageStream(b: MessagesBehaviour, r: MessagesRequest, id: string): MessagesStream {
  const p = plan(b, r);
  const frames: string[] = [];
  const emit = (type: string, data: Record<string, unknown> = {}): void => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  };
  const start: Record<string, unknown> = {
    id,
    type: 'message',
    role: 'assistant',
    model: r.model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
  };
  if (!b.omitUsage) start['usage'] = usage(b.inputTokens, 1);
  emit('message_start', { message: start });

  const early = b.streamEnd !== 'complete';
  let index = 0;
  let pinged = false;
  const block = (contentBlock: Record<string, unknown>, deltas: Record<string, unknown>[], stopAfter = deltas.length): boolean => {
    emit('content_block_start', { index, content_block: contentBlock });
    if (!pinged) {
      emit('ping');
      pinged = true;
    }
    for (const d of deltas.slice(0, stopAfter)) emit('content_block_delta', { index, delta: d });
    if (stopAfter < deltas.length) return false;
    emit('content_block_stop', { index });
    index++;
    return true;
  };

  let finished = true;
  if (r.thinking) {
    const thoughts = wordPieces(b.thinking).map((w) => ({ type: 'thinking_delta', thinking: w }));
    block({ type: 'thinking', thinking: '', signature: '' }, [...thoughts, { type: 'signature_delta', signature: signature(id) }]);
  }
  if (b.toolUse === undefined) {
    const deltas = p.words.map((w) => ({ type: 'text_delta', text: w }));
    finished = block({ type: 'text', text: '' }, deltas, early ? Math.ceil(deltas.length / 2) : deltas.length);
  } else {
    const calls = b.toolUse;
    const last = early ? Math.ceil(calls.length / 2) - 1 : calls.length - 1;
    for (let i = 0; i <= last && finished; i++) {
      const t = calls[i];
      if (t === undefined) break;
      const deltas = ['', ...piecesOf(JSON.stringify(t.input), 4)].map((s) => ({ type: 'input_json_delta', partial_json: s }));
      const stopAfter = early && i === last ? Math.ceil(deltas.length / 2) : deltas.length;
      finished = block({ type: 'tool_use', id: `toolu_${id}_${i}`, name: t.name, input: {} }, deltas, stopAfter);
    }
  }
  if (!early && finished) {
    const delta: Record<string, unknown> = { delta: { stop_reason: stopReason(b, p), stop_sequence: null } };
    if (!b.omitUsage) delta['usage'] = b.deltaUsage === 'full' ? usage(b.inputTokens, p.output) : { output_tokens: p.output };
    emit('message_delta', delta);
    emit('message_stop');
    return { frames, finish: 'end' };
  }
  if (b.streamEnd === 'error')
    emit('error', { error: { type: 'overloaded_error', message: 'Overloaded (kars Anthropic stub: injected stream error)' } });
  return { frames, finish: b.streamEnd === 'cut' ? 'destroy' : 'end' };
}
