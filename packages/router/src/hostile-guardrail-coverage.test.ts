/**
 * Issue 25 item 1: guardrails saw only part of what the model reads and writes. Each case is a
 * hole found against a real router (the OpenAI stub as upstream and as the moderation backend,
 * flagging `kars-flag-me`); each failed before the fix (a 200, the marker at the model or the agent).
 *
 * Input cases run under an input-only stage and check both the refusal and that the upstream never
 * received the marker; output cases run under an output-only stage and check that the agent never
 * receives any of the answer's bytes.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { postChat as chat, postJson } from './testing/http.js';

const MARK = 'kars-flag-me';
const moderations = (s: OpenAIStub): number => s.requests.filter((r) => r.path === '/v1/moderations').length;
const completions = (s: OpenAIStub) => s.requests.filter((r) => r.path === '/v1/chat/completions');
const stage = (applyTo: 'input' | 'output') => budgetPolicy({}, { guardrails: [{ provider: 'openai-moderation', applyTo }] });

/** A valid request: a user turn, then whatever `extra` adds (messages appended, other fields merged). */
function req(extraMessages: unknown[] = [], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }, ...extraMessages], ...extra };
}

describe('guardrails see everything the model reads (issue 25 item 1, input)', () => {
  let stub: OpenAIStub;
  let input: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    input = await startDirRouter({ inference: stage('input') }, { upstream: stub.url, guardrail: { url: stub.url } });
  });
  after(async () => {
    await input.stop();
    await stub.close();
  });
  beforeEach(() => stub.reset());

  /** The request is refused by the input stage, and nothing carrying the marker reached the model. */
  async function refusedBeforeTheModel(body: unknown, code = 'inference_policy_guardrail_flagged'): Promise<void> {
    const res = await chat(input.router.url, body);
    assert.equal(res.status, 403, res.text);
    assert.equal(res.json?.error?.code, code, res.text);
    assert.equal(res.headers.get('x-kars-decision'), 'blocked');
    assert.equal(completions(stub).filter((r) => r.rawBody.includes(MARK)).length, 0, 'the upstream never received the flagged text');
  }

  const call = (name: string, args: string) => ({ id: 'call_1', type: 'function', function: { name, arguments: args } });

  it("an assistant message's tool_calls[].function.arguments", () =>
    refusedBeforeTheModel(req([{ role: 'assistant', content: null, tool_calls: [call('lookup', `{"q":"${MARK}"}`)] }])));

  it("an assistant message's tool_calls[].function.name", () =>
    refusedBeforeTheModel(req([{ role: 'assistant', content: null, tool_calls: [call(`${MARK}_tool`, '{}')] }])));

  it('the legacy function_call arguments and name', async () => {
    await refusedBeforeTheModel(req([{ role: 'assistant', content: null, function_call: { name: 'f', arguments: `{"x":"${MARK}"}` } }]));
    await refusedBeforeTheModel(req([{ role: 'assistant', content: null, function_call: { name: MARK, arguments: '{}' } }]));
  });

  it('messages[].name and messages[].refusal', async () => {
    await refusedBeforeTheModel(req([{ role: 'user', name: MARK, content: 'hi' }]));
    await refusedBeforeTheModel(req([{ role: 'assistant', content: null, refusal: `I will not ${MARK}` }]));
  });

  it('a tool result and an input_text part', async () => {
    await refusedBeforeTheModel(
      req([
        { role: 'assistant', content: null, tool_calls: [call('lookup', '{}')] },
        { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: MARK }] },
      ]),
    );
    await refusedBeforeTheModel(req([{ role: 'user', content: [{ type: 'input_text', text: MARK }] }]));
  });

  it('tools[].function.description, a parameter description deep in its schema, and a property name', async () => {
    const tool = (parameters: unknown, description = 'Look something up') => ({
      type: 'function',
      function: { name: 'lookup', description, parameters },
    });
    await refusedBeforeTheModel(req([], { tools: [tool({ type: 'object', properties: {} }, `Always ${MARK}`)] }));
    const deep = {
      type: 'object',
      properties: { filter: { type: 'object', properties: { items: { type: 'array', items: { type: 'string', description: MARK } } } } },
    };
    await refusedBeforeTheModel(req([], { tools: [tool(deep)] }));
    await refusedBeforeTheModel(req([], { tools: [tool({ type: 'object', properties: { [MARK]: { type: 'string' } } })] }));
    await refusedBeforeTheModel(req([], { tools: [tool({ type: 'string', enum: ['a', MARK] })] }));
  });

  it("a response_format json_schema's descriptions and name", async () => {
    const rf = (name: string, schema: unknown) => ({ type: 'json_schema', json_schema: { name, schema } });
    await refusedBeforeTheModel(
      req([], { response_format: rf('answer', { type: 'object', properties: { a: { type: 'string', description: MARK } } }) }),
    );
    await refusedBeforeTheModel(req([], { response_format: rf(`${MARK}_schema`, { type: 'object' }) }));
  });

  it('prediction.content and a field the chat API does not define', async () => {
    await refusedBeforeTheModel(req([], { prediction: { type: 'content', content: MARK } }));
    await refusedBeforeTheModel(req([], { chat_template_kwargs: { system_suffix: MARK } }));
  });

  it('a part the backend cannot judge (image, audio, file, unknown type) fails closed with 403 inference_policy_guardrail_unjudgeable', async () => {
    for (const part of [
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
      { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } },
      { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } },
      { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } },
      { type: 'text', text: 'see this', image_url: { url: 'https://example.com/cat.png' } },
    ]) {
      stub.reset();
      await refusedBeforeTheModel(
        { model: 'gpt-4o', messages: [{ role: 'user', content: [part] }] },
        'inference_policy_guardrail_unjudgeable',
      );
      assert.equal(completions(stub).length, 0, `the model was never asked (${part.type})`);
    }
    await refusedBeforeTheModel(
      req([], { prediction: { type: 'content', content: 'data:image/png;base64,iVBORw0KGgo=' } }),
      'inference_policy_guardrail_unjudgeable',
    );
  });

  it('a body with no text at all is not clean without asking: the backend is asked', async () => {
    const res = await postJson(`${input.router.url}/v1/chat/completions`, {});
    assert.equal(moderations(stub), 1, res.text);
  });

  it('a duplicate key cannot show the moderation one text and the model another (400 duplicate_key)', async () => {
    const res = await chat(input.router.url, `{"model":"m","messages":[{"role":"user","content":"hi","content":"${MARK}"}]}`);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json?.error?.code, 'duplicate_key');
    assert.equal(completions(stub).length, 0);
  });

  it('a backend that answers fewer results than it was given inputs fails closed (503 guardrail_unavailable)', async () => {
    // It judges only the first input: with more, the rest would pass unjudged.
    const lazy = http.createServer((_req, res) => {
      _req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[{"flagged":false,"categories":{}}]}');
    });
    await new Promise<void>((r) => lazy.listen(0, '127.0.0.1', r));
    const r = await startDirRouter(
      { inference: stage('input') },
      { upstream: stub.url, guardrail: { url: new URL(`http://127.0.0.1:${(lazy.address() as AddressInfo).port}`) } },
    );
    try {
      const res = await chat(r.router.url, req([{ role: 'user', content: `later ${MARK}` }]));
      assert.equal(res.status, 503, res.text);
      assert.equal(res.json?.error?.code, 'guardrail_unavailable');
      assert.equal(completions(stub).length, 0);
    } finally {
      await r.stop();
      lazy.closeAllConnections();
      await new Promise((done) => lazy.close(done));
    }
  });

  it('a clean request with tools and tool calls still passes, and the moderation saw its tool texts', async () => {
    const res = await chat(
      input.router.url,
      req([{ role: 'assistant', content: null, tool_calls: [call('lookup', '{"q":"weather in Paris"}')] }], {
        tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up the weather', parameters: { type: 'object' } } }],
      }),
    );
    assert.equal(res.status, 200, res.text);
    const mod = stub.requests.find((r) => r.path === '/v1/moderations');
    const sent = (mod?.body as { input: string[] }).input;
    assert.ok(sent.includes('{"q":"weather in Paris"}'), JSON.stringify(sent));
    assert.ok(sent.includes('Look up the weather'), JSON.stringify(sent));
  });
});

describe('guardrails see everything the model writes (issue 25 item 1, output)', () => {
  let stub: OpenAIStub;
  let output: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    output = await startDirRouter({ inference: stage('output') }, { upstream: stub.url, guardrail: { url: stub.url } });
  });
  after(async () => {
    await output.stop();
    await stub.close();
  });
  beforeEach(() => stub.reset());

  /** The answer is refused (JSON 403: nothing had been sent) and none of it reached the agent. */
  async function refusedBeforeTheAgent(stream: boolean, leak: RegExp, code = 'inference_policy_guardrail_flagged'): Promise<void> {
    const res = await chat(output.router.url, req([], stream ? { stream: true } : {}));
    assert.equal(res.status, 403, res.text);
    assert.equal(res.json?.error?.code, code, res.text);
    assert.doesNotMatch(res.text, leak);
  }

  it('an answer that is only a tool call (JSON message.tool_calls): arguments and name', async () => {
    stub.setBehaviour({ toolCalls: [{ name: 'send_email', arguments: `{"body":"${MARK}"}` }] });
    await refusedBeforeTheAgent(false, /send_email|tool_calls/);
    stub.setBehaviour({ toolCalls: [{ name: `${MARK}_now`, arguments: '{}' }] });
    await refusedBeforeTheAgent(false, /tool_calls/);
  });

  it('a streamed tool call (delta.tool_calls, the marker split across events) is held until judged and never reaches the agent', async () => {
    stub.setBehaviour({ toolCalls: [{ name: 'send_email', arguments: `{"body":"please ${MARK} now"}` }] });
    await refusedBeforeTheAgent(true, /send_email|tool_calls|data:/);
    // The same call, clean, is relayed whole after judgement.
    stub.setBehaviour({ toolCalls: [{ name: 'send_email', arguments: '{"body":"hello there"}' }] });
    const ok = await chat(output.router.url, req([], { stream: true }));
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /send_email/);
  });

  /** The stub answers `body` as is. */
  function answer(body: unknown, contentType = 'application/json'): void {
    stub.setBehaviour({ rawBody: typeof body === 'string' ? body : JSON.stringify(body), contentType });
  }
  const completion = (message: Record<string, unknown>) => ({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'gpt-4o',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const sse = (deltas: Array<Record<string, unknown>>): string =>
    deltas
      .map(
        (d) =>
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: d, finish_reason: null }] })}\n\n`,
      )
      .join('') + 'data: [DONE]\n\n';

  it('an answer that is only a function_call, or only a refusal (JSON)', async () => {
    answer(completion({ content: null, function_call: { name: 'f', arguments: `{"a":"${MARK}"}` } }));
    await refusedBeforeTheAgent(false, /function_call/);
    answer(completion({ content: null, refusal: `I cannot ${MARK}` }));
    await refusedBeforeTheAgent(false, /refusal/);
  });

  it('a streamed function_call or refusal, split across events', async () => {
    answer(
      sse([{ role: 'assistant', function_call: { name: 'f', arguments: '{"a":"kars-' } }, { function_call: { arguments: 'flag-me"}' } }]),
      'text/event-stream',
    );
    await refusedBeforeTheAgent(true, /function_call/);
    answer(sse([{ role: 'assistant', refusal: 'no kars-fl' }, { refusal: 'ag-me' }]), 'text/event-stream');
    await refusedBeforeTheAgent(true, /refusal/);
  });

  it('an audio transcript is judged; audio the backend cannot hear fails closed', async () => {
    answer(completion({ content: null, audio: { id: 'audio_1', transcript: MARK, expires_at: 1 } }));
    await refusedBeforeTheAgent(false, /transcript/);
    answer(completion({ content: null, audio: { id: 'audio_1', data: 'UklGRg==', transcript: 'hello', expires_at: 1 } }));
    await refusedBeforeTheAgent(false, /UklGRg/, 'inference_policy_guardrail_unjudgeable');
  });

  // Found by an attacker's pass: framings an SSE client reads as data but a splitter on LF did not.
  for (const [label, body] of [
    ['a CR-only line end after an id line', `id: 1\rdata: ${JSON.stringify({ choices: [{ index: 0, delta: { content: MARK } }] })}\n\n`],
    ['a lone CR before the data line', `\rdata: ${JSON.stringify({ choices: [{ index: 0, delta: { content: MARK } }] })}\n\n`],
    [
      'a byte-order mark before the first event',
      `\uFEFFdata: ${JSON.stringify({ choices: [{ index: 0, delta: { content: MARK } }] })}\n\n`,
    ],
  ] as const) {
    it(`a streamed answer with ${label} is judged as a client reads it`, async () => {
      answer(body + 'data: [DONE]\n\n', 'text/event-stream');
      await refusedBeforeTheAgent(true, new RegExp(MARK));
    });
  }

  it('a JSON answer with a duplicate key (judged one way, read another) cannot pass as clean', async () => {
    answer(
      `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"${MARK}","content":"ok"},"finish_reason":"stop"}]}`,
    );
    await refusedBeforeTheAgent(false, new RegExp(MARK), 'inference_policy_guardrail_unjudgeable');
  });

  it('a 200 text/event-stream answer holding no event a client reads as data cannot pass as clean', async () => {
    answer(JSON.stringify(completion({ content: `a ${MARK}` })), 'text/event-stream');
    await refusedBeforeTheAgent(true, new RegExp(MARK), 'inference_policy_guardrail_unjudgeable');
  });

  it('a 200 answer that is not JSON cannot be judged and is not passed on', async () => {
    answer(`not json ${MARK}`, 'text/plain');
    await refusedBeforeTheAgent(false, /not json/, 'inference_policy_guardrail_unjudgeable');
  });
});
