/**
 * What a guardrail stage judges (ADR 0026): every text of a chat-completions request the model
 * could read, and every text of an answer the agent could read. Pure: no I/O, never throws.
 *
 * **Request** ({@link requestTexts}): every string value and every object key, at any depth, of
 * the body as it is forwarded. Not a list of the fields the chat API defines (message content,
 * names, tool calls, tool and schema descriptions, `response_format`, `prediction`, …), because
 * an upstream may read a field that list forgets, and a string the moderation never sees is a
 * hole; enum values and keys such as `"role"` cost one short input each (texts are deduplicated).
 * What a text moderator cannot judge is refused (fail closed): media parts, spoken audio and
 * stored context, by each API's own rules (`apis.ts` `unjudgeable`: for chat, a part of
 * `messages[].content` or `prediction.content` whose `type` is not a text type, or that carries a
 * media key, and a message's `audio`); and, here, any string that is a base64 `data:` URL.
 *
 * **Answer** ({@link answerTexts}): the parsed JSON body, or the parsed `data:` events of a stream.
 * Every string value is accumulated per path across the events, array elements keyed by their
 * own `index` when they have one (streamed `choices` and `tool_calls`), so a streamed `content`,
 * `refusal`, `function_call.arguments`, tool call name or arguments, `audio.transcript` or
 * `reasoning_content` — or a field of a stream shape this module does not know — is judged whole,
 * as the agent reassembles it, not fragment by fragment. A path whose fragments are all the same
 * (`id`, `model`, repeated in every event) is judged once, not repeated. Every key is judged too.
 * `unjudgeable`: a body or event that is not JSON, audio data (`audio.data`), an image (`images`,
 * `image_url`, … keys), a base64 `data:` URL.
 *
 * Texts are returned distinct, in first-seen order, without the empty string; then, for each field
 * name with more than one string value, those values joined (with nothing, and with a space), so
 * that a phrase split across the parts, messages or tool calls sharing a field is judged as the
 * model reads it. Not caught: a phrase split across different fields, or spelled as numbers
 * (character codes in an enum), which are not judged.
 */
import { isObject } from '@kars/kube-core';

/** What to send a moderation backend, and what it could not be sent. */
export interface ModerationInput {
  /** Distinct non-empty texts, first-seen order. */
  texts: string[];
  /** Where the message holds something a text moderator cannot judge (`messages[0].content[1] (image_url)`); empty when nothing. */
  unjudgeable: string[];
}

/** A base64 `data:` URL (an image, a PDF, audio … in a string). */
const DATA_URL = /^\s*data:[^,]{0,256};base64,/i;

/**
 * `texts` plus, for each key whose string values number more than one, those values in document
 * order joined with nothing and with a space: a phrase split across the parts, messages or tool
 * calls that share a field (`text`, `content`, `arguments`, …) is read whole by the model, so it is
 * judged whole too (`"E"`, `"V"`, `"I"`, `"L"` in four text parts).
 */
function withJoined(texts: Set<string>, byKey: ReadonlyMap<string, string[]>): string[] {
  const out = new Set(texts);
  for (const values of byKey.values()) {
    if (values.length < 2) continue;
    for (const sep of ['', ' ']) out.add(values.join(sep));
  }
  return [...out];
}

/** Add `v` to the list `map` holds under `key`. */
function append(map: Map<string, string[]>, key: string, v: string): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [v]);
  else list.push(v);
}

/** The texts of a request found by {@link collect}. */
interface Collected {
  /** Every distinct string value and key. */
  texts: Set<string>;
  /** The string values in document order, grouped by the key that holds them (array positions skipped). */
  byKey: Map<string, string[]>;
  /** Where a string is a base64 data URL. */
  bad: string[];
}

/** Every string value and key under `v` (held by `key`), into `c`; a data URL goes to `c.bad` instead. */
function collect(v: unknown, path: string, key: string, c: Collected): void {
  if (typeof v === 'string') {
    if (DATA_URL.test(v)) c.bad.push(`${path} (base64 data URL)`);
    else if (v !== '') {
      c.texts.add(v);
      append(c.byKey, key, v);
    }
  } else if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) collect(v[i], `${path}[${i}]`, key, c);
  } else if (isObject(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (k !== '') c.texts.add(k);
      collect(x, path === '' ? k : `${path}.${k}`, k, c);
    }
  }
}

/**
 * The texts of a request body for an input stage: every string value and key. What a text
 * moderator cannot judge in an API's own shape (media parts, stored context) is each API's to say
 * (`apis.ts` `unjudgeable`); here only base64 data URLs, wherever they are.
 */
export function requestTexts(body: Record<string, unknown>): ModerationInput {
  const texts = new Set<string>();
  const unjudgeable: string[] = [];
  const c: Collected = { texts, byKey: new Map(), bad: unjudgeable };
  collect(body, '', '', c);
  return { texts: withJoined(texts, c.byKey), unjudgeable };
}

/** Keys under which an answer carries an image (`message.images`, an `image_url` part, …). */
const ANSWER_IMAGE_KEYS: ReadonlySet<string> = new Set(['images', 'image', 'image_url', 'output_image', 'video_url']);

/** Answer items and blocks whose payload is media (a Responses image generation's base64 `result`, an image block). */
const ANSWER_MEDIA_TYPES: ReadonlySet<string> = new Set(['image_generation_call', 'image', 'output_image', 'output_audio']);

/** One path's fragments across the events of an answer. */
interface Fragments {
  first: string;
  /** Every fragment so far equals `first`. */
  same: boolean;
  joined: string;
  /** The nearest object key on the path (array positions skipped): what the joined forms group by. */
  field: string;
}

/** Accumulates the strings of one answer (a JSON body, or a stream's events) per path. */
class AnswerCollector {
  readonly #acc = new Map<string, Fragments>();
  readonly #keys = new Set<string>();
  readonly unjudgeable: string[] = [];

  doc(d: unknown, n: number): void {
    if (d === undefined) this.unjudgeable.push(n === 0 ? 'the answer (not JSON)' : `event ${n} (not JSON)`);
    else this.#walk(d, [], '');
  }

  /** `path` keys the accumulation; `where` names the place in a refusal. */
  #walk(v: unknown, path: string[], where: string): void {
    if (typeof v === 'string') {
      const key = JSON.stringify(path);
      const f = this.#acc.get(key);
      if (f === undefined) {
        const field = [...path].reverse().find((p) => !p.startsWith('#') && !/^\d+$/.test(p)) ?? '';
        this.#acc.set(key, { first: v, same: true, joined: v, field });
      } else {
        f.same &&= v === f.first;
        f.joined += v;
      }
    } else if (Array.isArray(v)) {
      v.forEach((el, j) => {
        // Streamed choices and tool calls say which one a fragment belongs to.
        const id = isObject(el) && Number.isInteger(el['index']) ? `#${el['index'] as number}` : String(j);
        this.#walk(el, [...path, id], `${where}[${id.startsWith('#') ? id.slice(1) : id}]`);
      });
    } else if (isObject(v)) {
      const type = v['type'];
      if (typeof type === 'string' && ANSWER_MEDIA_TYPES.has(type)) {
        const at = `${where === '' ? 'the answer' : where} (${type})`;
        if (!this.unjudgeable.includes(at)) this.unjudgeable.push(at);
        return;
      }
      for (const [k, x] of Object.entries(v)) {
        this.#keys.add(k);
        const at = where === '' ? k : `${where}.${k}`;
        const media = k === 'data' && path.at(-1) === 'audio' ? 'audio' : ANSWER_IMAGE_KEYS.has(k) ? 'image' : undefined;
        if (media !== undefined && x !== undefined && x !== null) {
          if (!this.unjudgeable.includes(`${at} (${media})`)) this.unjudgeable.push(`${at} (${media})`);
          continue;
        }
        this.#walk(x, [...path, k], at);
      }
    }
  }

  result(): ModerationInput {
    const texts = new Set<string>();
    const byKey = new Map<string, string[]>();
    for (const f of this.#acc.values()) {
      // A field every event repeats (`id`, `model`) is judged once; any other is judged joined.
      const t = f.same ? f.first : f.joined;
      if (DATA_URL.test(t)) this.unjudgeable.push('a base64 data URL in the answer');
      else if (t !== '') {
        texts.add(t);
        append(byKey, f.field, t);
      }
    }
    for (const k of this.#keys) if (k !== '') texts.add(k);
    return { texts: withJoined(texts, byKey), unjudgeable: this.unjudgeable };
  }
}

/**
 * The texts of an answer for an output stage: `docs` is the parsed JSON body (one element), or the
 * parsed `data:` events of a stream in order (`undefined` for one that did not parse). See the
 * module comment.
 */
export function answerTexts(docs: readonly unknown[]): ModerationInput {
  const c = new AnswerCollector();
  docs.forEach((d, n) => c.doc(d, n));
  return c.result();
}
