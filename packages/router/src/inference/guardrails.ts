/**
 * Guardrail stages of an InferencePolicy (issue 9 item 1, evaluation): each stage sends text to an
 * OpenAI-compatible moderation endpoint (`POST <guardrail-url>/v1/moderations`, body
 * `{"input": [..texts]}`), and the first stage whose answer has `results[].flagged: true` blocks
 * the call. Stages with `applyTo` `input` or `both` judge the request's message texts before it is
 * forwarded; `output` or `both` judge the answer's texts before it is sent on.
 *
 * Fail closed: a stage with no backend configured on this router → 503 `guardrail_misconfigured`
 * (the contract's code; `kars router --guardrail-url` configures it); a backend that cannot be
 * reached, answers non-2xx, or answers something unreadable → 503 `guardrail_unavailable`.
 *
 * The API key, when set, is `OPENAI_MODERATION_API_KEY`, else `OPENAI_API_KEY` (read by the CLI,
 * passed in `apiKey`), sent as `Authorization: Bearer`.
 */
import { readBody } from '@kars/kube-core';
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

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The texts of a chat request: every string `content`, and every `text` part of a content list. */
export function requestTexts(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  const msgs = body['messages'];
  if (!Array.isArray(msgs)) return out;
  for (const m of msgs) {
    if (!isObj(m)) continue;
    const c = m['content'];
    if (typeof c === 'string') out.push(c);
    else if (Array.isArray(c)) for (const p of c) if (isObj(p) && typeof p['text'] === 'string') out.push(p['text']);
  }
  return out;
}

/** The texts of a chat answer: `choices[].message.content` (JSON) or the joined `choices[].delta.content` (stream chunks). */
export function answerTexts(docs: readonly unknown[]): string[] {
  const byChoice = new Map<number, string>();
  for (const d of docs) {
    if (!isObj(d) || !Array.isArray(d['choices'])) continue;
    for (const ch of d['choices'] as unknown[]) {
      if (!isObj(ch)) continue;
      const i = typeof ch['index'] === 'number' ? ch['index'] : 0;
      const msg = isObj(ch['message']) ? ch['message'] : isObj(ch['delta']) ? ch['delta'] : undefined;
      const c = msg?.['content'];
      if (typeof c === 'string') byChoice.set(i, (byChoice.get(i) ?? '') + c);
    }
  }
  return [...byChoice.values()].filter((t) => t !== '');
}

/** Ask the backend about `texts` through the router's upstream client. Never rejects. */
export async function moderate(backend: GuardrailBackend, texts: readonly string[], client: UpstreamClient): Promise<ModerationOutcome> {
  if (texts.length === 0) return { kind: 'clean' };
  const base = backend.url.href.endsWith('/') ? backend.url.href.slice(0, -1) : backend.url.href;
  const target = new URL(`${base}/v1/moderations`);
  const body = Buffer.from(JSON.stringify({ input: texts }));
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
  const results = isObj(doc) ? doc['results'] : undefined;
  if (!Array.isArray(results) || results.length === 0 || !results.every((r) => isObj(r) && typeof r['flagged'] === 'boolean')) {
    return { kind: 'unavailable', detail: 'moderation answer has no results[].flagged' };
  }
  const flagged = (results as Array<Record<string, unknown>>).filter((r) => r['flagged'] === true);
  if (flagged.length === 0) return { kind: 'clean' };
  const cats = new Set<string>();
  for (const r of flagged) if (isObj(r['categories'])) for (const [k, v] of Object.entries(r['categories'])) if (v === true) cats.add(k);
  return { kind: 'flagged', categories: [...cats].sort() };
}
