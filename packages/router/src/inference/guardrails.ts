/**
 * Guardrail stages of an InferencePolicy (issue 9 item 1, evaluation): each stage sends text to an
 * OpenAI-compatible moderation endpoint (`POST <guardrail-url>/v1/moderations`, body
 * `{"input": [..texts]}`), and the first stage whose answer has `results[].flagged: true` blocks
 * the call. Stages with `applyTo` `input` or `both` judge the request's texts before it is
 * forwarded; `output` or `both` judge the answer's texts before it is sent on. Which texts those
 * are, and what cannot be judged, is `moderation-text.ts` (ADR 0026).
 *
 * Nothing is clean without asking: with no text at all, the backend is asked about `[""]`, so a
 * backend that is down still fails the call closed, and the verdict is the backend's.
 *
 * Fail closed: a stage with no backend configured on this router → 503 `guardrail_misconfigured`
 * (the contract's code; `kars router --guardrail-url` configures it); a backend that cannot be
 * reached, answers non-2xx, answers something unreadable, or answers another number of `results`
 * than it was sent inputs → 503 `guardrail_unavailable`.
 *
 * The API key, when set, is `OPENAI_MODERATION_API_KEY`, else `OPENAI_API_KEY` (read by the CLI,
 * passed in `apiKey`), sent as `Authorization: Bearer`.
 */
import { readBody, isObject } from '@kars/kube-core';
import type { UpstreamClient } from '../http/upstream.js';

/** A configured moderation backend. */
export interface GuardrailBackend {
  /** Base URL; requests go to `<url>/v1/moderations`. */
  url: URL;
  apiKey?: string;
  /** Time allowed for one moderation answer (default 10 s). */
  timeoutMs?: number;
}

export type ModerationOutcome = { kind: 'clean' } | { kind: 'flagged'; categories: string[] } | { kind: 'unavailable'; detail: string };

const MAX_ANSWER_BYTES = 1024 * 1024;

/** Ask the backend about `texts` (`[""]` when there are none) through the router's upstream client. Never rejects. */
export async function moderate(backend: GuardrailBackend, texts: readonly string[], client: UpstreamClient): Promise<ModerationOutcome> {
  const base = backend.url.href.endsWith('/') ? backend.url.href.slice(0, -1) : backend.url.href;
  const target = new URL(`${base}/v1/moderations`);
  const input = texts.length === 0 ? [''] : texts;
  const body = Buffer.from(JSON.stringify({ input }));
  const timeoutMs = backend.timeoutMs ?? 10_000;
  let status: number;
  let read: Awaited<ReturnType<typeof readBody>>;
  try {
    const res = await client.request({
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(backend.apiKey ? { authorization: `Bearer ${backend.apiKey}` } : {}),
      },
      body,
      headersTimeoutMs: timeoutMs,
      bodyTimeoutMs: timeoutMs,
      // A moderation call is a read: repeating it on a stale connection is harmless.
      retryStale: true,
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    read = await readBody(res.body, MAX_ANSWER_BYTES);
    if (!read.ok) res.body.destroy();
  } catch (err: unknown) {
    const e = err as { code?: unknown; name?: unknown; message?: unknown };
    const detail = e.name === 'TimeoutError' ? 'moderation endpoint timed out' : typeof e.code === 'string' ? e.code : String(e.message);
    return { kind: 'unavailable', detail };
  }
  if (!read.ok)
    return { kind: 'unavailable', detail: read.reason === 'too_large' ? 'moderation answer too large' : 'moderation answer cut short' };
  if (status < 200 || status >= 300) return { kind: 'unavailable', detail: `moderation endpoint answered HTTP ${status}` };
  let doc: unknown;
  try {
    doc = JSON.parse(read.body.toString('utf8'));
  } catch {
    return { kind: 'unavailable', detail: 'moderation answer is not JSON' };
  }
  const results = isObject(doc) ? doc['results'] : undefined;
  if (!Array.isArray(results) || results.length === 0 || !results.every((r) => isObject(r) && typeof r['flagged'] === 'boolean')) {
    return { kind: 'unavailable', detail: 'moderation answer has no results[].flagged' };
  }
  // One result per input (the OpenAI shape): a backend that judged fewer left the rest unjudged.
  if (results.length !== input.length)
    return { kind: 'unavailable', detail: `moderation answered ${results.length} results for ${input.length} inputs` };
  const flagged = (results as Array<Record<string, unknown>>).filter((r) => r['flagged'] === true);
  if (flagged.length === 0) return { kind: 'clean' };
  const cats = new Set<string>();
  for (const r of flagged) if (isObject(r['categories'])) for (const [k, v] of Object.entries(r['categories'])) if (v === true) cats.add(k);
  return { kind: 'flagged', categories: [...cats].sort() };
}
