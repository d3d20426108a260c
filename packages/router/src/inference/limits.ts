/**
 * The request as the router will forward it, and the most tokens it can cost: a pure function of
 * the parsed body and the policy's per-request cap (issue 9 item 3).
 *
 * Rules:
 * - `max_tokens` and `max_completion_tokens`, when present, must be integers from 1 to
 *   {@link MAX_TOKEN_LIMIT}; `n`, when present, an integer from 1 to {@link MAX_N}. Anything else
 *   (a string, a float, a negative, a huge number, null, a boolean, an object) is refused with
 *   400 `invalid_token_limit`, naming the field.
 * - The per-choice maximum is the **larger** of the two limit fields when both are set (an
 *   upstream may honour either), and the request's maximum is `n × per-choice`.
 * - With a cap: a request above it is refused (429 `per_request_tokens_exceeded`); a request
 *   without a limit gets `max_tokens = floor(cap / n)` written into the forwarded body (refused
 *   when that is 0).
 * - `stream: true` sets `stream_options.include_usage = true`, so the upstream reports usage in
 *   its last chunk (an existing `stream_options` must be an object).
 *
 * Guarantees: pure, never throws, never mutates its input (the forwarded body is a new object).
 */

/** Largest accepted `max_tokens` / `max_completion_tokens` (2³¹ − 1). Larger values are malformed. */
export const MAX_TOKEN_LIMIT = 2_147_483_647;
/** Largest accepted `n` (the OpenAI API's own bound). */
export const MAX_N = 128;

/** A request the router will forward, with the most completion tokens it may produce. */
export interface NormalizedRequest {
  /** The body to forward (re-serialised by the caller). */
  body: Record<string, unknown>;
  /** `n` (1 when absent). */
  n: number;
  /** Per-choice completion maximum; undefined when the request sets none and there is no cap. */
  perChoice: number | undefined;
  /** `n × perChoice`: the most completion tokens the request may produce; undefined when unbounded. */
  maxCompletion: number | undefined;
}

export type LimitsRefusal =
  | { kind: 'invalid'; field: string; message: string }
  | { kind: 'unsupported'; field: string; message: string }
  | { kind: 'over_cap'; requested: number; cap: number; message: string };

export type LimitsResult = { ok: true; request: NormalizedRequest } | { ok: false; refusal: LimitsRefusal };

/** A value as a refusal names it (`the string "10"`, `null`, `a list`). */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'number') return String(v);
  return typeof v === 'object' ? (Array.isArray(v) ? 'a list' : 'an object') : `a ${typeof v}`;
}

/** `body[field]` when it is an integer from 1 to `max`, undefined when absent; else a refusal naming `where`. */
export function intField(
  body: Record<string, unknown>,
  field: string,
  max: number,
  where = field,
): { ok: true; value: number | undefined } | { ok: false; refusal: LimitsRefusal } {
  if (!Object.hasOwn(body, field)) return { ok: true, value: undefined };
  const v = body[field];
  if (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= max) return { ok: true, value: v };
  return {
    ok: false,
    refusal: { kind: 'invalid', field: where, message: `${where} must be an integer from 1 to ${max}, got ${describe(v)}` },
  };
}

/** Normalise `body` for forwarding under per-request cap `cap` (null: no cap). See the module comment. */
export function normalizeRequest(body: Record<string, unknown>, cap: number | null): LimitsResult {
  const mct = intField(body, 'max_completion_tokens', MAX_TOKEN_LIMIT);
  if (!mct.ok) return mct;
  const mt = intField(body, 'max_tokens', MAX_TOKEN_LIMIT);
  if (!mt.ok) return mt;
  const nf = intField(body, 'n', MAX_N);
  if (!nf.ok) return nf;
  const n = nf.value ?? 1;
  const out: Record<string, unknown> = { ...body };

  let perChoice = mct.value === undefined ? mt.value : mt.value === undefined ? mct.value : Math.max(mct.value, mt.value);
  if (cap !== null) {
    if (perChoice === undefined) {
      perChoice = Math.floor(cap / n);
      if (perChoice < 1)
        return {
          ok: false,
          refusal: {
            kind: 'over_cap',
            requested: n,
            cap,
            message: `n=${n} choices cannot fit InferencePolicy tokenBudget.perRequestTokens=${cap} (at least 1 token each)`,
          },
        };
      out['max_tokens'] = perChoice;
    } else if (n * perChoice > cap) {
      const requested = n * perChoice;
      const what = n === 1 ? `max_tokens=${perChoice}` : `n=${n} × max_tokens=${perChoice} = ${requested}`;
      return {
        ok: false,
        refusal: {
          kind: 'over_cap',
          requested,
          cap,
          message: `Requested ${what} exceeds InferencePolicy tokenBudget.perRequestTokens=${cap}`,
        },
      };
    }
  }

  const stream = body['stream'];
  // A lax upstream may read `"true"` or `1` as true and stream without the usage chunk the router
  // asks for only on a boolean: the billed tokens would go uncharged.
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
    return { ok: false, refusal: { kind: 'invalid', field: 'stream', message: `stream must be a boolean, got ${describe(stream)}` } };
  }
  if (stream === true) {
    const so = body['stream_options'];
    if (so !== undefined && so !== null && (typeof so !== 'object' || Array.isArray(so))) {
      return {
        ok: false,
        refusal: { kind: 'invalid', field: 'stream_options', message: `stream_options must be an object, got ${describe(so)}` },
      };
    }
    out['stream_options'] = { ...(so ?? {}), include_usage: true };
  }
  return { ok: true, request: { body: out, n, perChoice, maxCompletion: perChoice === undefined ? undefined : n * perChoice } };
}

/** Tokens reserved for a request with no completion bound (no cap and no limit in the body). */
export const UNBOUNDED_COMPLETION_RESERVE = 4096;

/**
 * Prompt tokens estimated from the forwarded body: **one token per byte** (ADR 0027). This is an
 * upper bound for every byte-level BPE tokenizer (OpenAI's o200k_base and cl100k_base, and the
 * tiktoken-style ones of other providers): each token stands for at least one byte of text, and
 * the JSON body has at least as many bytes as the text it carries (quotes, keys and escapes only
 * add bytes). So the reservation is never below the prompt's real count, in any script; the old
 * bytes / 4 came out 1.3–3× low for CJK and emoji, and up to 4× low for adversarial ASCII.
 *
 * It is 3–5× above the real count of English prose and code: a large prompt holds more of the
 * budget while it is in flight, and is then settled at the usage the upstream reports. A real
 * tokenizer was measured and not used on the request path: loading o200k_base costs about 1.5 s
 * and 68 MB of RSS, and counting a 10 MiB body about 3.6 s of event-loop time (ADR 0027).
 *
 * Not covered: image, audio and file parts, which providers bill by their size in pixels or
 * seconds, not by the bytes of their URL.
 */
export function estimatePromptTokens(bodyBytes: number): number {
  return bodyBytes;
}

/** What the budget ledger reserves before forwarding: estimated prompt plus the completion maximum. */
export function reservationFor(req: NormalizedRequest, bodyBytes: number): number {
  return estimatePromptTokens(bodyBytes) + (req.maxCompletion ?? UNBOUNDED_COMPLETION_RESERVE);
}

/**
 * What a 2xx answer without usage is charged: the prompt estimate plus one token per 4 bytes of
 * the answer body as relayed (for a stream that includes its SSE framing, so it over-estimates
 * English; an answer is the model's own text, not the agent's, so it is not bounded per byte).
 */
export function estimateUsage(promptBytes: number, answerBytes: number): number {
  return estimatePromptTokens(promptBytes) + Math.ceil(answerBytes / 4);
}
