/**
 * Server-sent-event handling for streamed chat completions: the content-safety gate on the first
 * annotated event (kars-wire-contract.md §5.3 step 6, streaming), and finding the final `usage`
 * chunk in a stream's tail (`usage.ts` keeps the tail). Pure: no I/O; the relays feed it bytes.
 *
 * The gate ({@link SseGate}):
 * - With an inactive floor it is open from the start and hands every chunk back unchanged.
 * - With an active floor it holds bytes back until whole events are seen, and passes events
 *   through until the first data event that contains `prompt_filter_results`, which it evaluates
 *   with {@link evaluateSafety}. After that event passes, the gate opens and later chunks flow
 *   through unchanged and unparsed.
 * - With `requirePromptShields`, the first data event must carry annotations, or the stream is
 *   blocked (fail closed).
 * - A blocked gate returns the refusal; the handler sends
 *   `data: {"error":{…}}\n\ndata: [DONE]\n\n` in place of the offending event and nothing after it.
 *
 * Caveats: only `\n\n` and `\r\n\r\n` end an event (a bare-CR stream is held until it ends, or
 * until 1 MiB is held, and is then judged as one event). Usage is read from the last 64 KiB of the
 * stream only.
 */
import { contentPolicyViolation, type InferenceRefusal } from './errors.js';
import { evaluateSafety, extractAnnotations, type ContentSafetyRules } from './safety.js';
import { SseEventSplitter, eventData } from '../http/sse.js';

export { SseEventSplitter, eventData };

/** How many trailing bytes of a stream are kept to find the final `usage` chunk. */
export const USAGE_TAIL_BYTES = 64 * 1024;

/** The most the gate holds back waiting for an event to end; beyond it the bytes are judged as one event. */
export const MAX_HELD_BYTES = 1024 * 1024;

/** `usage.total_tokens` of a parsed chunk or body, when it is a finite number ≥ 0. */
export function usageTotal(parsed: unknown): number | undefined {
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const usage = (parsed as Record<string, unknown>)['usage'];
  if (typeof usage !== 'object' || usage === null) return undefined;
  const t = (usage as Record<string, unknown>)['total_tokens'];
  return typeof t === 'number' && Number.isFinite(t) && t >= 0 ? t : undefined;
}

/**
 * `usage.total_tokens` of a JSON body, read from its last `"usage"` key without parsing the rest
 * (chat completions put `usage` near the end). A bare `"` cannot occur inside a JSON string, so the
 * match is always a key; the object after it is cut out by brace matching and parsed alone.
 * Undefined when there is no usage object or it does not parse.
 */
export function usageFromJsonTail(body: Buffer): number | undefined {
  const at = body.lastIndexOf('"usage"');
  if (at < 0) return undefined;
  let i = at + 7;
  const n = body.length;
  while (i < n && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  if (body[i] !== 0x3a) return undefined; // ':'
  i++;
  while (i < n && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  if (body[i] !== 0x7b) return undefined; // '{'
  const start = i;
  let depth = 0;
  let inString = false;
  for (; i < n; i++) {
    const c = body[i];
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return usageTotal({ usage: tryParse(body.toString('utf8', start, i + 1)) });
  }
  return undefined;
}

function tryParse(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return undefined;
  }
}

/** The total tokens of the last `data:` line in `text` that carries a usage object, if any. */
export function usageFromSseText(text: string): number | undefined {
  let at = text.lastIndexOf('"usage"');
  while (at >= 0) {
    const lineStart = text.lastIndexOf('\n', at) + 1;
    let lineEnd = text.indexOf('\n', at);
    if (lineEnd < 0) lineEnd = text.length;
    const line = text.slice(lineStart, lineEnd).trimEnd();
    if (line.startsWith('data:')) {
      const total = usageTotal(tryParse(line.slice(5).trimStart()));
      if (total !== undefined) return total;
    }
    at = lineStart > 0 ? text.lastIndexOf('"usage"', lineStart - 1) : -1;
  }
  return undefined;
}

/** What the handler should do with one upstream chunk. */
export interface GateOutput {
  /** Bytes to send to the client now (may be empty). */
  out: Buffer;
  /** Set when the stream is blocked: send its frames after `out` and end the response. */
  blocked?: InferenceRefusal;
}

const EMPTY = Buffer.alloc(0);
const NOTHING: GateOutput = Object.freeze({ out: EMPTY }) as GateOutput;

/** The streaming content-safety gate plus usage tail for one response. See the module comment. */
export class SseGate {
  readonly #rules: ContentSafetyRules | undefined;
  #state: 'gating' | 'open' | 'blocked';
  readonly #splitter = new SseEventSplitter();
  #dataEvents = 0;

  /** `rules` must be an active floor, or undefined for no floor. */
  constructor(rules: ContentSafetyRules | undefined) {
    this.#rules = rules;
    this.#state = rules === undefined ? 'open' : 'gating';
  }

  /** Whether the gate still holds bytes back. */
  get gating(): boolean {
    return this.#state === 'gating';
  }

  /** Feed one upstream chunk. */
  push(chunk: Buffer): GateOutput {
    if (this.#state === 'blocked') return NOTHING;
    if (this.#state === 'open') return { out: chunk };
    const events = this.#splitter.push(chunk);
    // An event that never ends is judged as it stands once it is too large to hold.
    if (this.#splitter.pending > MAX_HELD_BYTES) events.push(this.#splitter.drain());
    return this.#judge(events);
  }

  /** The upstream ended: flush (and judge) whatever is held back. */
  end(): GateOutput {
    if (this.#state !== 'gating') return NOTHING;
    const rest = this.#splitter.drain();
    return rest.length > 0 ? this.#judge([rest]) : NOTHING;
  }

  #judge(events: Buffer[]): GateOutput {
    const out: Buffer[] = [];
    for (const ev of events) {
      if (this.#state === 'gating') {
        const data = eventData(ev.toString('utf8'));
        const blocked = data === undefined ? undefined : this.#judgeData(data);
        if (blocked !== undefined) {
          this.#state = 'blocked';
          return { out: Buffer.concat(out), blocked };
        }
      }
      out.push(ev);
    }
    // Opened part-way: whatever was held back flows on unchanged.
    if (this.#state === 'open') out.push(this.#splitter.drain());
    return { out: out.length === 1 ? (out[0] ?? EMPTY) : Buffer.concat(out) };
  }

  /** Judge one data event while gating; opens the gate when it passes an annotated event. */
  #judgeData(data: string): InferenceRefusal | undefined {
    const rules = this.#rules;
    this.#dataEvents++;
    if (data.includes('prompt_filter_results')) {
      const v = evaluateSafety(rules, extractAnnotations(tryParse(data), 200));
      if (v.blocked) return contentPolicyViolation(v.code, v.message);
      this.#state = 'open';
      return undefined;
    }
    if (this.#dataEvents === 1 && rules?.requirePromptShields === true) {
      const v = evaluateSafety(rules, []);
      if (v.blocked) return contentPolicyViolation(v.code, v.message);
    }
    return undefined;
  }
}
