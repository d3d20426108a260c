/**
 * Properties of issue 25 item 1 ("Done when"), against a real router with the OpenAI stub as
 * upstream and moderation backend (flagging `kars-flag-me`):
 *
 * 1. Input: fast-check builds a random valid chat request (every message role, text parts,
 *    images now and then, tool calls, legacy function calls, names, refusals, tools with random
 *    nested JSON schemas, response_format json_schema, prediction, metadata, stop, an unknown
 *    extension field …) and puts the flagged text into one random string value or object key,
 *    at any depth. Under an input stage the request is refused with a guardrail code and the
 *    upstream receives nothing; the same request without the marker is forwarded (200), unless
 *    it holds a part the backend cannot judge (403 unjudgeable, upstream untouched as well).
 * 2. Output: a random answer (content, refusal, tool calls, function call, audio transcript,
 *    reasoning text) with the flagged text in one random string value or key, answered as JSON
 *    and — with the marker in a text field — as a stream cut into fragments of 1–5 characters, so
 *    the marker is split across events. Under an output stage the agent gets the refusal and none
 *    of the answer; the unmarked answer passes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { postChat as chat } from './testing/http.js';

const MARK = 'kars-flag-me';
// A marker written into a tool's `type` (or a tool_choice's) makes it a provider-run tool, refused
// before moderation: also a refusal the upstream never sees.
const GUARD_CODES = [
  'inference_policy_guardrail_flagged',
  'inference_policy_guardrail_unjudgeable',
  'inference_policy_provider_tool_refused',
];
const stage = (applyTo: 'input' | 'output') => budgetPolicy({}, { guardrails: [{ provider: 'openai-moderation', applyTo }] });
const completions = (s: OpenAIStub) => s.requests.filter((r) => r.path === '/v1/chat/completions');

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Step = string | number;

// ---- random valid chat requests ----

/** Short texts, ASCII and any UTF-16 (lone surrogates included): an attacker picks neither. */
const text = fc.oneof(fc.string({ maxLength: 10 }), fc.string({ unit: 'binary', maxLength: 6 }));
const ident = fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,8}$/);
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
/** A record whose optional (undefined) fields are left out, as JSON would. */
const rec = (r: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Json> =>
  fc.record(r).map((o) => JSON.parse(JSON.stringify(o)) as Json);

const textPart = rec({ type: fc.constantFrom('text', 'input_text'), text });
const imagePart = rec({
  type: fc.constant('image_url'),
  image_url: rec({ url: fc.constant('https://example.com/a.png'), detail: opt(fc.constant('low')) }),
});
const content = fc.oneof(text, fc.array(textPart, { minLength: 1, maxLength: 3 }));
const userContent = fc.oneof(
  { weight: 6, arbitrary: content },
  { weight: 1, arbitrary: fc.array(fc.oneof(textPart, imagePart), { minLength: 1, maxLength: 3 }) },
);
const args = fc.oneof(fc.json({ maxDepth: 2 }), text);
const toolCall = rec({ id: ident, type: fc.constant('function'), function: rec({ name: ident, arguments: args }) });

const message = fc.oneof(
  rec({ role: fc.constantFrom('system', 'developer'), content, name: opt(ident) }),
  rec({ role: fc.constant('user'), content: userContent, name: opt(text) }),
  rec({
    role: fc.constant('assistant'),
    content: fc.option(content),
    name: opt(text),
    refusal: opt(text),
    tool_calls: opt(fc.array(toolCall, { minLength: 1, maxLength: 2 })),
    function_call: opt(rec({ name: ident, arguments: args })),
  }),
  rec({ role: fc.constant('tool'), tool_call_id: ident, content }),
  rec({ role: fc.constant('function'), name: ident, content: text }),
);

/** Random JSON schemas: every place a model reads a string (descriptions, titles, enums, defaults, property names). */
const { schema } = fc.letrec<{ schema: Json; leaf: Json; object: Json; array: Json; anyOf: Json }>((tie) => ({
  schema: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('leaf'), tie('object'), tie('array'), tie('anyOf')),
  leaf: rec({
    type: fc.constantFrom('string', 'number', 'integer', 'boolean'),
    description: opt(text),
    title: opt(text),
    enum: opt(fc.array(text, { minLength: 1, maxLength: 3 })),
    default: opt(text),
    examples: opt(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 2 })),
  }),
  object: rec({
    type: fc.constant('object'),
    description: opt(text),
    properties: fc.dictionary(ident, tie('schema'), { maxKeys: 3 }),
    required: opt(fc.array(ident, { maxLength: 2 })),
    additionalProperties: opt(fc.boolean()),
  }),
  array: rec({ type: fc.constant('array'), description: opt(text), items: tie('schema') }),
  anyOf: rec({ anyOf: fc.array(tie('schema'), { minLength: 1, maxLength: 2 }), $comment: opt(text) }),
}));

const tool = rec({
  type: fc.constant('function'),
  function: rec({ name: ident, description: opt(text), parameters: schema, strict: opt(fc.boolean()) }),
});
const responseFormat = fc.oneof(
  rec({ type: fc.constantFrom('text', 'json_object') }),
  rec({ type: fc.constant('json_schema'), json_schema: rec({ name: ident, description: opt(text), schema, strict: opt(fc.boolean()) }) }),
);

const chatRequest = rec({
  model: fc.constantFrom('gpt-4o', 'gpt-4o-mini'),
  messages: fc.array(message, { minLength: 1, maxLength: 4 }),
  tools: opt(fc.array(tool, { minLength: 1, maxLength: 2 })),
  tool_choice: opt(
    fc.oneof(fc.constantFrom('auto', 'none', 'required'), rec({ type: fc.constant('function'), function: rec({ name: ident }) })),
  ),
  functions: opt(fc.array(rec({ name: ident, description: opt(text), parameters: schema }), { maxLength: 1 })),
  response_format: opt(responseFormat),
  prediction: opt(rec({ type: fc.constant('content'), content })),
  metadata: opt(fc.dictionary(ident, text, { maxKeys: 2 })),
  stop: opt(fc.oneof(text, fc.array(text, { maxLength: 2 }))),
  user: opt(text),
  temperature: opt(fc.double({ min: 0, max: 2, noNaN: true })),
  seed: opt(fc.integer()),
  stream: opt(fc.boolean()),
  // (`web_search_options` is refused before any stage: a provider-run tool, ADR 0034.)
  // An extension an OpenAI-compatible server may read (vLLM, Ollama …): unknown to the chat API.
  chat_template_kwargs: opt(fc.dictionary(ident, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 })),
});

// ---- placing the marker ----

/** Every string value (`kind: 'value'`) and object key (`kind: 'key'`) of `v`, by path. */
function slots(v: Json, path: Step[] = [], out: Array<{ kind: 'value' | 'key'; path: Step[] }> = []) {
  if (typeof v === 'string') out.push({ kind: 'value', path });
  else if (Array.isArray(v)) v.forEach((x, i) => slots(x, [...path, i], out));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      out.push({ kind: 'key', path: [...path, k] });
      slots(x, [...path, k], out);
    }
  return out;
}

/** A copy of `v` with MARK inserted at character `at` of the slot's string. */
function mark(v: Json, slot: { kind: 'value' | 'key'; path: Step[] }, at: number): Json {
  const copy = structuredClone(v);
  const put = (s: string) => s.slice(0, at % (s.length + 1)) + MARK + s.slice(at % (s.length + 1));
  let parent: any = copy;
  for (const s of slot.path.slice(0, -1)) parent = parent[s];
  const last = slot.path.at(-1) as Step;
  if (slot.kind === 'value') parent[last] = put(parent[last] as string);
  else {
    // Rename the key, keeping the others' order.
    const entries = Object.entries(parent as Record<string, Json>).map(([k, x]) => [k === last ? put(k) : k, x] as const);
    for (const k of Object.keys(parent)) delete parent[k];
    for (const [k, x] of entries) parent[k] = x;
  }
  return copy;
}

const hasImage = (req: Json): boolean => JSON.stringify(req).includes('"image_url"');

describe('property: no flagged text reaches the model past an input stage (issue 25 item 1)', () => {
  let stub: OpenAIStub;
  let router: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    router = await startDirRouter({ inference: stage('input') }, { upstream: stub.url, guardrail: { url: stub.url } });
  });
  after(async () => {
    await router.stop();
    await stub.close();
  });

  it('a marker in any string value or key of a random valid request is refused; the upstream never sees it', async () => {
    await fc.assert(
      fc.asyncProperty(chatRequest, fc.nat(), fc.nat(), async (req, pick, at) => {
        fc.pre(!JSON.stringify(req).toLowerCase().includes(MARK));
        const all = slots(req);
        const slot = all[pick % all.length]!;
        const marked = mark(req, slot, at);

        // Control: without the marker, the request goes to the model (or is refused as unjudgeable).
        stub.requests.length = 0;
        const plain = await chat(router.router.url, req);
        if (hasImage(req)) {
          assert.equal(plain.status, 403, plain.text);
          assert.equal(plain.json?.error?.code, 'inference_policy_guardrail_unjudgeable');
          assert.equal(completions(stub).length, 0);
        } else {
          assert.equal(plain.status, 200, plain.text);
          assert.equal(completions(stub).length, 1);
        }

        stub.requests.length = 0;
        const res = await chat(router.router.url, marked);
        assert.equal(res.status, 403, `${JSON.stringify(slot)}: ${res.text}`);
        assert.ok(GUARD_CODES.includes(res.json?.error?.code), res.text);
        assert.equal(completions(stub).length, 0, `the upstream received the request (${JSON.stringify(slot)})`);
      }),
      { numRuns: 150 },
    );
  });
});

// ---- random answers ----

const answerMessage = rec({
  role: fc.constant('assistant'),
  content: fc.option(text),
  refusal: opt(text),
  reasoning_content: opt(text),
  tool_calls: opt(
    fc.array(rec({ id: ident, type: fc.constant('function'), function: rec({ name: ident, arguments: args }) }), {
      minLength: 1,
      maxLength: 2,
    }),
  ),
  function_call: opt(rec({ name: ident, arguments: args })),
  audio: opt(rec({ id: ident, transcript: text, expires_at: fc.nat() })),
});
const answer = rec({
  id: ident,
  object: fc.constant('chat.completion'),
  created: fc.nat(),
  model: fc.constantFrom('gpt-4o', 'gpt-4o-2024-08-06'),
  system_fingerprint: opt(ident),
  choices: fc
    .array(answerMessage, { minLength: 1, maxLength: 2 })
    .map((ms) => ms.map((message, index) => ({ index, message, finish_reason: 'stop', logprobs: null }))),
  usage: fc.constant({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }),
});

/** Cut `s` into pieces of `size` characters (at least one piece). */
function cut(s: string, size: number): string[] {
  if (s === '') return [''];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

/**
 * The answer as an SSE stream the way a model streams it: per choice, the role, then every text
 * field in fragments of `size` characters (tool calls by `index`: id and type first, then name
 * and arguments in fragments), then the finish event and [DONE].
 */
function toStream(doc: any, size: number): string {
  const ev = (index: number, delta: Json): string =>
    `data: ${JSON.stringify({ id: doc.id, object: 'chat.completion.chunk', created: doc.created, model: doc.model, choices: [{ index, delta, finish_reason: null }] })}\n\n`;
  let out = '';
  for (const ch of doc.choices) {
    const m = ch.message;
    out += ev(ch.index, { role: m.role });
    for (const [k, v] of Object.entries(m) as Array<[string, any]>) {
      if (k === 'role' || v === null) continue;
      if (typeof v === 'string') for (const f of cut(v, size)) out += ev(ch.index, { [k]: f });
      else if (k === 'tool_calls')
        v.forEach((c: any, j: number) => {
          out += ev(ch.index, { tool_calls: [{ index: j, id: c.id, type: c.type, function: { name: '', arguments: '' } }] });
          for (const f of cut(c.function.name, size)) out += ev(ch.index, { tool_calls: [{ index: j, function: { name: f } }] });
          for (const f of cut(c.function.arguments, size)) out += ev(ch.index, { tool_calls: [{ index: j, function: { arguments: f } }] });
        });
      else if (k === 'function_call') {
        for (const f of cut(v.name, size)) out += ev(ch.index, { function_call: { name: f } });
        for (const f of cut(v.arguments, size)) out += ev(ch.index, { function_call: { arguments: f } });
      } else if (k === 'audio') {
        out += ev(ch.index, { audio: { id: v.id, expires_at: v.expires_at } });
        for (const f of cut(v.transcript, size)) out += ev(ch.index, { audio: { transcript: f } });
      }
    }
    out += `data: ${JSON.stringify({ id: doc.id, object: 'chat.completion.chunk', choices: [{ index: ch.index, delta: {}, finish_reason: 'stop' }] })}\n\n`;
  }
  return `${out}data: ${JSON.stringify({ id: doc.id, object: 'chat.completion.chunk', choices: [], usage: doc.usage })}\n\ndata: [DONE]\n\n`;
}

/** A slot the stream carries: a text field of a message (not a key, an id or a type), or the answer's id or model. */
function streamable(slot: { kind: 'value' | 'key'; path: Step[] }): boolean {
  const p = slot.path;
  if (slot.kind !== 'value') return false;
  if (p.length === 1) return p[0] === 'id' || p[0] === 'model';
  if (p[0] !== 'choices' || p[2] !== 'message') return false;
  switch (p[3]) {
    case 'content':
    case 'refusal':
    case 'reasoning_content':
    case 'function_call':
      return true;
    case 'tool_calls':
      return p[5] === 'function';
    case 'audio':
      return p[4] === 'transcript';
    default:
      return false;
  }
}

describe('property: no flagged text reaches the agent past an output stage (issue 25 item 1)', () => {
  let stub: OpenAIStub;
  let router: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    router = await startDirRouter({ inference: stage('output') }, { upstream: stub.url, guardrail: { url: stub.url } });
  });
  after(async () => {
    await router.stop();
    await stub.close();
  });

  it('a marker in any string or key of a random answer (JSON), or split across stream events, is refused whole', async () => {
    await fc.assert(
      fc.asyncProperty(answer, fc.nat(), fc.nat(), fc.integer({ min: 1, max: 5 }), async (doc, pick, at, size) => {
        fc.pre(!JSON.stringify(doc).toLowerCase().includes(MARK));
        const all = slots(doc);
        const slot = all[pick % all.length]!;
        const marked = mark(doc, slot, at);
        const ask = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] };

        stub.setBehaviour({ rawBody: JSON.stringify(doc), contentType: 'application/json' });
        const plain = await chat(router.router.url, ask);
        assert.equal(plain.status, 200, plain.text);
        assert.deepEqual(plain.json, doc);

        stub.setBehaviour({ rawBody: JSON.stringify(marked), contentType: 'application/json' });
        const res = await chat(router.router.url, ask);
        assert.equal(res.status, 403, `${JSON.stringify(slot)}: ${res.text}`);
        assert.equal(res.json?.error?.code, 'inference_policy_guardrail_flagged', res.text);
        assert.doesNotMatch(res.text, /choices/);

        if (!streamable(slot)) return;
        stub.setBehaviour({ rawBody: toStream(doc, size), contentType: 'text/event-stream' });
        const plainStream = await chat(router.router.url, { ...ask, stream: true });
        assert.equal(plainStream.status, 200, plainStream.text);
        assert.match(plainStream.text, /data: \[DONE\]/);

        stub.setBehaviour({ rawBody: toStream(marked, size), contentType: 'text/event-stream' });
        const streamed = await chat(router.router.url, { ...ask, stream: true });
        assert.equal(streamed.status, 403, `${JSON.stringify(slot)} in ${size}-char fragments: ${streamed.text}`);
        assert.equal(streamed.json?.error?.code, 'inference_policy_guardrail_flagged', streamed.text);
        assert.doesNotMatch(streamed.text, /choices|data:/);
      }),
      { numRuns: 150 },
    );
  });
});
