/**
 * The OpenAI stub's embeddings answers (`POST /v1/embeddings` and its Azure forms), as a pure
 * builder. Input is a string, a list of strings, a token list or a list of token lists, as the real
 * API takes; each gets a deterministic unit vector derived from its text (the same input always
 * embeds the same), of the request's `dimensions` (default {@link DEFAULT_EMBEDDING_DIMENSIONS}),
 * as floats or, with `encoding_format: "base64"`, as the base64 of little-endian float32s (what
 * the `openai` SDK asks for by default and decodes).
 */

/** Vector length when the request does not set `dimensions`. */
export const DEFAULT_EMBEDDING_DIMENSIONS = 16;
/** Largest `dimensions` the stub accepts (text-embedding-3-large's). */
export const MAX_EMBEDDING_DIMENSIONS = 3072;
/** Most inputs in one request (the real API's limit). */
export const MAX_EMBEDDING_INPUTS = 2048;
/** Most floats in one answer (inputs × dimensions): the stub's own bound, so one request cannot make it build a 100 MB answer. */
export const MAX_EMBEDDING_FLOATS = 1 << 20;

/** An answer: status and body. */
export interface EmbeddingsAnswer {
  status: number;
  body: Record<string, unknown>;
}

function invalid(message: string, param: string): EmbeddingsAnswer {
  return { status: 400, body: { error: { message, type: 'invalid_request_error', param, code: null } } };
}

/** The inputs as texts to embed, or undefined when `input` has none of the accepted shapes. */
function inputs(input: unknown): string[] | undefined {
  const isTokens = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t));
  if (typeof input === 'string') return [input];
  if (isTokens(input)) return [input.join(' ')];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  if (input.every((x) => typeof x === 'string')) return input as string[];
  if (input.every(isTokens)) return input.map((t) => t.join(' '));
  return undefined;
}

/** A unit vector of `dims` floats from `text` (FNV-1a seeded xorshift; deterministic, not semantic). */
export function embedText(text: string, dims: number): Float32Array {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  const v = new Float32Array(dims);
  let x = h || 1;
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    const f = x / 0xffffffff - 0.5;
    v[i] = f;
    norm += f * f;
  }
  const n = Math.sqrt(norm) || 1;
  for (let i = 0; i < dims; i++) v[i] = (v[i] ?? 0) / n;
  return v;
}

/**
 * Answer an embeddings request body. `usage` is reported as both `prompt_tokens` and
 * `total_tokens` (left out when `omitUsage`).
 */
export function embeddingsAnswer(doc: Record<string, unknown>, model: string, usage: number, omitUsage: boolean): EmbeddingsAnswer {
  const texts = inputs(doc['input']);
  if (texts === undefined) return invalid("Invalid 'input': expected a string, an array of strings, or an array of token arrays.", 'input');
  if (texts.length > MAX_EMBEDDING_INPUTS) return invalid(`Invalid 'input': at most ${MAX_EMBEDDING_INPUTS} inputs.`, 'input');
  const d = doc['dimensions'];
  if (d !== undefined && !(typeof d === 'number' && Number.isInteger(d) && d >= 1 && d <= MAX_EMBEDDING_DIMENSIONS))
    return invalid(`Invalid 'dimensions': expected an integer from 1 to ${MAX_EMBEDDING_DIMENSIONS}.`, 'dimensions');
  const format = doc['encoding_format'] ?? 'float';
  if (format !== 'float' && format !== 'base64')
    return invalid("Invalid 'encoding_format': expected 'float' or 'base64'.", 'encoding_format');
  const dims = typeof d === 'number' ? d : DEFAULT_EMBEDDING_DIMENSIONS;
  if (texts.length * dims > MAX_EMBEDDING_FLOATS)
    return invalid(`kars OpenAI stub: at most ${MAX_EMBEDDING_FLOATS} floats per answer (inputs × dimensions).`, 'input');
  const data = texts.map((t, index) => {
    const v = embedText(t, dims);
    const embedding = format === 'base64' ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : Array.from(v);
    return { object: 'embedding', index, embedding };
  });
  const body: Record<string, unknown> = { object: 'list', data, model };
  if (!omitUsage) body['usage'] = { prompt_tokens: usage, total_tokens: usage };
  return { status: 200, body };
}
