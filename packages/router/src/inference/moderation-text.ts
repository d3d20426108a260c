/**
 * What a guardrail stage judges (ADR 0026): every text of a chat-completions request the model
 * could read, and every text of an answer the agent could read. Pure: no I/O, never throws.
 *
 * **Request** ({@link requestTexts}): every string value and every object key, at any depth, of
 * the body as it is forwarded. Not a list of the fields the chat API defines (message content,
 * names, tool calls, tool and schema descriptions, `response_format`, `prediction`, …), because
 * an upstream may read a field that list forgets, and a string the moderation never sees is a
 * hole; enum values and keys such as `"role"` cost one short input each (texts are deduplicated).
 * What a text moderator cannot judge is reported in `unjudgeable` instead, and the caller refuses
 * the request (fail closed):
 * - a part of `messages[].content` or `prediction.content` whose `type` is not a text type
 *   (`text`, `input_text`, `output_text`, `refusal`): `image_url`, `input_audio`, `file`,
 *   `video_url`, an unknown or missing type; or a part of any type that carries a media key
 *   (`image_url`, `input_audio`, `file`, …) beside its text;
 * - a message's `audio` (an earlier spoken answer, referenced by id);
 * - any string that is a base64 `data:` URL, wherever it is.
 *
 * **Answer** ({@link answerTexts}): the parsed JSON body, or the parsed `data:` events of a stream.
 * Under `choices[].message` / `choices[].delta` each string is accumulated per choice (its `index`)
 * and per path, array elements keyed by their own `index` when they have one (streamed
 * `tool_calls`), so a streamed `content`, `refusal`, `function_call.arguments`, tool call name or
 * arguments, `audio.transcript` or `reasoning_content` is judged whole, as the agent reassembles
 * it, not fragment by fragment. Every other string and key of the answer is judged as it stands.
 * `unjudgeable`: a body or event that is not JSON, audio data (`audio.data`), a base64 `data:` URL.
 *
 * Texts are returned distinct, in first-seen order, without the empty string.
 */

/** What to send a moderation backend, and what it could not be sent. */
export interface ModerationInput {
  /** Distinct non-empty texts, first-seen order. */
  texts: string[];
  /** Where the message holds something a text moderator cannot judge (`messages[0].content[1] (image_url)`); empty when nothing. */
  unjudgeable: string[];
}

/** Content-part types whose payload is text. */
const TEXT_PART_TYPES: ReadonlySet<string> = new Set(['text', 'input_text', 'output_text', 'refusal']);

/** Keys that carry media in a content part, whatever its `type` says. */
const MEDIA_KEYS: readonly string[] = [
  'image_url',
  'image',
  'input_image',
  'input_audio',
  'audio',
  'audio_url',
  'file',
  'input_file',
  'video_url',
  'video',
];

/** A base64 `data:` URL (an image, a PDF, audio … in a string). */
const DATA_URL = /^\s*data:[^,]{0,256};base64,/i;

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Why a content part cannot be judged, or undefined when it is text. */
function partProblem(part: unknown): string | undefined {
  if (!isObj(part)) return undefined; // a string (or number) in a content list is judged as text
  const type = part['type'];
  if (typeof type !== 'string' || !TEXT_PART_TYPES.has(type)) return typeof type === 'string' ? type : 'part without a type';
  const media = MEDIA_KEYS.find((k) => k in part);
  return media === undefined ? undefined : `${type} part carrying ${media}`;
}

/** Every string value and key under `v`, into `out`; a data URL goes to `bad` instead. */
function collect(v: unknown, path: string, out: Set<string>, bad: string[]): void {
  if (typeof v === 'string') {
    if (DATA_URL.test(v)) bad.push(`${path} (base64 data URL)`);
    else if (v !== '') out.add(v);
  } else if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) collect(v[i], `${path}[${i}]`, out, bad);
  } else if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (k !== '') out.add(k);
      collect(x, path === '' ? k : `${path}.${k}`, out, bad);
    }
  }
}

/** The parts of a `content` value that cannot be judged. */
function contentProblems(content: unknown, path: string, bad: string[]): void {
  if (Array.isArray(content)) {
    content.forEach((p, i) => {
      const why = partProblem(p);
      if (why !== undefined) bad.push(`${path}[${i}] (${why})`);
    });
  } else if (isObj(content)) {
    // Not the chat API's shape; an upstream that reads it as one part must not get media past the moderation.
    const why = partProblem(content);
    if (why !== undefined) bad.push(`${path} (${why})`);
  }
}

/** The texts of a chat-completions request body for an input stage. See the module comment. */
export function requestTexts(body: Record<string, unknown>): ModerationInput {
  const texts = new Set<string>();
  const unjudgeable: string[] = [];
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    messages.forEach((m, i) => {
      if (!isObj(m)) return;
      contentProblems(m['content'], `messages[${i}].content`, unjudgeable);
      if (m['audio'] !== undefined && m['audio'] !== null) unjudgeable.push(`messages[${i}].audio (spoken audio)`);
    });
  }
  const prediction = body['prediction'];
  if (isObj(prediction)) contentProblems(prediction['content'], 'prediction.content', unjudgeable);
  collect(body, '', texts, unjudgeable);
  return { texts: [...texts], unjudgeable };
}

/** Accumulates the streamed (or whole) strings of one answer, per choice and path. */
class AnswerCollector {
  readonly #acc = new Map<string, string>();
  readonly #other = new Set<string>();
  readonly unjudgeable: string[] = [];

  doc(d: unknown, n: number): void {
    if (d === undefined) {
      this.unjudgeable.push(n === 0 ? 'the answer (not JSON)' : `event ${n} (not JSON)`);
      return;
    }
    if (!isObj(d)) return collect(d, `answer`, this.#other, this.unjudgeable);
    for (const [k, v] of Object.entries(d)) {
      this.#other.add(k);
      if (k === 'choices' && Array.isArray(v)) v.forEach((ch, i) => this.#choice(ch, i));
      else collect(v, k, this.#other, this.unjudgeable);
    }
  }

  #choice(ch: unknown, position: number): void {
    if (!isObj(ch)) return collect(ch, `choices[${position}]`, this.#other, this.unjudgeable);
    const index = Number.isInteger(ch['index']) ? (ch['index'] as number) : position;
    for (const [k, v] of Object.entries(ch)) {
      this.#other.add(k);
      if (k === 'message' || k === 'delta') this.#acc1(v, [String(index)], `choices[${index}].${k}`);
      else collect(v, `choices[${index}].${k}`, this.#other, this.unjudgeable);
    }
  }

  /** Accumulate `v` at `path` (the key of the map), `where` naming it for a refusal. */
  #acc1(v: unknown, path: string[], where: string): void {
    if (typeof v === 'string') {
      const key = JSON.stringify(path);
      this.#acc.set(key, (this.#acc.get(key) ?? '') + v);
    } else if (Array.isArray(v)) {
      v.forEach((el, j) => {
        const id = isObj(el) && Number.isInteger(el['index']) ? `#${el['index'] as number}` : String(j);
        this.#acc1(el, [...path, id], `${where}[${id}]`);
      });
    } else if (isObj(v)) {
      for (const [k, x] of Object.entries(v)) {
        this.#other.add(k);
        if (k === 'data' && path.at(-1) === 'audio' && x !== undefined && x !== null) {
          if (!this.unjudgeable.includes(`${where}.data (audio)`)) this.unjudgeable.push(`${where}.data (audio)`);
          continue;
        }
        this.#acc1(x, [...path, k], `${where}.${k}`);
      }
    }
  }

  result(): ModerationInput {
    const texts = new Set<string>();
    for (const t of this.#acc.values()) {
      if (DATA_URL.test(t)) this.unjudgeable.push('a base64 data URL in the answer');
      else if (t !== '') texts.add(t);
    }
    for (const t of this.#other) if (t !== '') texts.add(t);
    return { texts: [...texts], unjudgeable: this.unjudgeable };
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
