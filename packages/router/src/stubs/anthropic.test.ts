/**
 * The Anthropic stub, driven directly by the official `@anthropic-ai/sdk`, so router tests can rely
 * on it answering as the real Messages API does.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startAnthropicStub, type AnthropicStub } from './anthropic.js';
import { postJson } from '../testing/http.js';

const USER = [{ role: 'user' as const, content: 'hi' }];

/** The SSE frames of a raw answer, as [event, data] pairs. */
function frames(text: string): [string, any][] {
  return text
    .split('\n\n')
    .filter((f) => f !== '')
    .map((f) => {
      const [ev, data] = f.split('\n');
      return [ev!.slice('event: '.length), JSON.parse(data!.slice('data: '.length))];
    });
}

describe('Anthropic stub through @anthropic-ai/sdk', () => {
  let stub: AnthropicStub;
  let client: Anthropic;
  before(async () => {
    stub = await startAnthropicStub();
    client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: stub.url.toString(), maxRetries: 0 });
  });
  after(async () => stub.close());
  beforeEach(() => stub.reset());

  it('answers messages.create with a Message and usage, and records the key, version and beta headers', async () => {
    const m = await client.messages.create(
      { model: 'claude-sonnet-4-5', max_tokens: 100, messages: USER },
      { headers: { 'anthropic-beta': 'a-2025-01-01, b-2025-02-02' } },
    );
    assert.match(m.id, /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, 'claude-sonnet-4-5');
    assert.deepEqual(m.content, [{ type: 'text', text: 'Hello from the kars Anthropic stub.' }]);
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual(m.usage, { input_tokens: 15, output_tokens: 15, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    const got = stub.requests[0]!;
    assert.equal(got.route, 'messages');
    assert.equal(got.path, '/v1/messages');
    // @anthropic-ai/sdk 1.x sends its apiKey as a bearer token, and its own anthropic-version.
    assert.equal(got.bearer, 'sk-ant-test');
    assert.equal(got.apiKey, undefined);
    assert.match(got.version ?? '', /^\d{4}-\d{2}-\d{2}$/);
    assert.deepEqual(got.beta, ['a-2025-01-01', 'b-2025-02-02']);
    assert.deepEqual(got.body, { model: 'claude-sonnet-4-5', max_tokens: 100, messages: USER });
  });

  it('cuts an answer longer than max_tokens: stop_reason max_tokens, output_tokens the limit', async () => {
    const m = await client.messages.create(
      { model: 'm', max_tokens: 2, messages: USER },
      { headers: { 'x-stub-content': 'one two three' } },
    );
    assert.deepEqual(m.content, [{ type: 'text', text: 'one two' }]);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.usage.output_tokens, 2);
    const fits = await client.messages.create({ model: 'm', max_tokens: 10, messages: USER });
    assert.equal(fits.stop_reason, 'end_turn');
    assert.equal(fits.usage.output_tokens, 10, 'output_tokens never exceeds max_tokens');
  });

  it('refuses a request without max_tokens as the real API does: 400 invalid_request_error, a typed BadRequestError', async () => {
    const raw = await postJson(new URL('/v1/messages', stub.url), { model: 'm', messages: USER }, { 'anthropic-version': '2023-06-01' });
    assert.equal(raw.status, 400);
    assert.equal(raw.json.type, 'error');
    assert.deepEqual(Object.keys(raw.json.error).sort(), ['message', 'type']);
    assert.equal(raw.json.error.type, 'invalid_request_error');
    assert.match(raw.json.error.message, /^max_tokens: Field required/);
    assert.match(raw.headers.get('request-id') ?? '', /^req_/);
    await assert.rejects(
      client.messages.create({ model: 'm', messages: USER } as unknown as Anthropic.MessageCreateParamsNonStreaming),
      (e: unknown) => e instanceof Anthropic.BadRequestError && e.type === 'invalid_request_error' && /max_tokens/.test(e.apiMessage ?? ''),
    );
    for (const max_tokens of ['5', 0, 1.5, -1])
      assert.equal(
        (await postJson(new URL('/v1/messages', stub.url), { model: 'm', messages: USER, max_tokens })).status,
        400,
        String(max_tokens),
      );
  });

  it('raises RateLimitError for 429 (with retry-after), and the typed error of each injected status', async () => {
    await assert.rejects(
      client.messages.create({ model: 'm', max_tokens: 5, messages: USER }, { headers: { 'x-stub-status': '429' } }),
      (e: unknown) =>
        e instanceof Anthropic.RateLimitError &&
        e.type === 'rate_limit_error' &&
        e.headers?.get('retry-after') === '1' &&
        /^req_/.test(e.requestID ?? ''),
    );
    await assert.rejects(
      client.messages.create(
        { model: 'm', max_tokens: 5, messages: USER },
        { headers: { 'x-stub-status': '403', 'x-stub-error-type': 'permission_error' } },
      ),
      Anthropic.PermissionDeniedError,
    );
    await assert.rejects(
      client.messages.create({ model: 'm', max_tokens: 5, messages: USER }, { headers: { 'x-stub-status': '529' } }),
      (e: unknown) => e instanceof Anthropic.InternalServerError && e.type === 'overloaded_error',
    );
    stub.setModelBehaviour('broken', { status: 500 });
    await assert.rejects(client.messages.create({ model: 'broken', max_tokens: 5, messages: USER }), Anthropic.InternalServerError);
    assert.equal((await client.messages.create({ model: 'fine', max_tokens: 5, messages: USER })).type, 'message');
  });

  it('streams the real API’s events in order, and messages.stream’s finalMessage carries the usage', async () => {
    const raw = await postJson(
      new URL('/v1/messages', stub.url),
      { model: 'm', max_tokens: 50, messages: USER, stream: true },
      { 'x-stub-content': 'a b c', 'x-stub-input-tokens': '11', 'x-stub-output-tokens': '6' },
    );
    assert.match(raw.headers.get('content-type') ?? '', /^text\/event-stream/);
    const f = frames(raw.text);
    assert.deepEqual(
      f.map(([e]) => e),
      [
        'message_start',
        'content_block_start',
        'ping',
        'content_block_delta',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    );
    for (const [e, d] of f) assert.equal(d.type, e, 'each data carries its event name as type');
    assert.deepEqual(f[0]![1].message.usage, {
      input_tokens: 11,
      output_tokens: 1,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
    assert.deepEqual(f[0]![1].message.content, []);
    assert.deepEqual(
      f.filter(([e]) => e === 'content_block_delta').map(([, d]) => d.delta),
      [
        { type: 'text_delta', text: 'a' },
        { type: 'text_delta', text: ' b' },
        { type: 'text_delta', text: ' c' },
      ],
    );
    assert.deepEqual(f[7]![1], {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 6 },
    });

    const stream = client.messages.stream(
      { model: 'claude-haiku-4-5', max_tokens: 50, messages: USER },
      { headers: { 'x-stub-chunk-bytes': '5' } },
    );
    const texts: string[] = [];
    stream.on('text', (t) => texts.push(t));
    const final = await stream.finalMessage();
    assert.equal(texts.join(''), 'Hello from the kars Anthropic stub.');
    assert.deepEqual(final.content, [{ type: 'text', text: 'Hello from the kars Anthropic stub.' }]);
    assert.equal(final.stop_reason, 'end_turn');
    assert.equal(final.usage.input_tokens, 15);
    assert.equal(final.usage.output_tokens, 15);

    const truncated = await client.messages.create({ model: 'm', max_tokens: 2, messages: USER, stream: true });
    const events = [];
    for await (const e of truncated) events.push(e);
    const delta = events.find((e) => e.type === 'message_delta');
    assert.ok(delta?.type === 'message_delta');
    assert.equal(delta.delta.stop_reason, 'max_tokens');
    assert.equal(delta.usage.output_tokens, 2);
  });

  it('ends a stream as told: an error event (typed APIError), a cut connection, or a clean end without message_stop', async () => {
    const body = { model: 'm', max_tokens: 50, messages: USER };
    const content = { 'x-stub-content': 'one two three four' };
    await assert.rejects(
      client.messages.stream(body, { headers: { ...content, 'x-stub-stream-end': 'error' } }).finalMessage(),
      (e: unknown) => e instanceof Anthropic.APIError && e.type === 'overloaded_error',
    );
    const cut = await postJson(
      new URL('/v1/messages', stub.url),
      { ...body, stream: true },
      { ...content, 'x-stub-stream-end': 'cut' },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(cut instanceof Error, 'reading a cut stream fails');
    await assert.rejects(client.messages.stream(body, { headers: { ...content, 'x-stub-stream-end': 'cut' } }).finalMessage());
    const eof = await postJson(new URL('/v1/messages', stub.url), { ...body, stream: true }, { ...content, 'x-stub-stream-end': 'eof' });
    const names = frames(eof.text).map(([e]) => e);
    assert.equal(names.filter((e) => e === 'content_block_delta').length, 2);
    assert.ok(!names.includes('message_delta') && !names.includes('message_stop'));
  });

  it('sends the full cumulative usage in message_delta when told, which the SDK takes without double counting', async () => {
    const headers = { 'x-stub-delta-usage': 'full', 'x-stub-input-tokens': '12', 'x-stub-output-tokens': '5' };
    const raw = await postJson(new URL('/v1/messages', stub.url), { model: 'm', max_tokens: 50, messages: USER, stream: true }, headers);
    assert.deepEqual(frames(raw.text).find(([e]) => e === 'message_delta')![1].usage, {
      input_tokens: 12,
      output_tokens: 5,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
    const final = await client.messages.stream({ model: 'm', max_tokens: 50, messages: USER }, { headers }).finalMessage();
    assert.equal(final.usage.input_tokens, 12);
    assert.equal(final.usage.output_tokens, 5);
  });

  it('omits usage when told (JSON and both stream events carrying it)', async () => {
    const json = await postJson(
      new URL('/v1/messages', stub.url),
      { model: 'm', max_tokens: 9, messages: USER },
      { 'x-stub-omit-usage': '1' },
    );
    assert.equal(json.json.usage, undefined);
    const s = await postJson(
      new URL('/v1/messages', stub.url),
      { model: 'm', max_tokens: 9, messages: USER, stream: true },
      { 'x-stub-omit-usage': '1' },
    );
    const f = frames(s.text);
    assert.equal(f[0]![1].message.usage, undefined);
    assert.equal(f.find(([e]) => e === 'message_delta')![1].usage, undefined);
  });

  it('answers tool_use blocks, JSON and streamed as input_json_delta pieces the SDK reassembles', async () => {
    stub.setBehaviour({ toolUse: [{ name: 'get_weather', input: { city: 'Paris', days: 3 } }] });
    const m = await client.messages.create({ model: 'm', max_tokens: 100, messages: USER });
    assert.equal(m.stop_reason, 'tool_use');
    const block = m.content[0];
    assert.ok(block?.type === 'tool_use');
    assert.equal(block.name, 'get_weather');
    assert.deepEqual(block.input, { city: 'Paris', days: 3 });
    assert.match(block.id, /^toolu_/);
    const stream = client.messages.stream({ model: 'm', max_tokens: 100, messages: USER });
    const pieces: string[] = [];
    stream.on('inputJson', (partial) => pieces.push(partial));
    const final = await stream.finalMessage();
    assert.ok(pieces.length > 2, 'the input arrives in pieces');
    const streamed = final.content[0];
    assert.ok(streamed?.type === 'tool_use');
    assert.deepEqual(streamed.input, { city: 'Paris', days: 3 });
    assert.equal(final.stop_reason, 'tool_use');
  });

  it('answers a thinking block first when thinking is set, and validates budget_tokens as the real API does', async () => {
    const thinking = { type: 'enabled' as const, budget_tokens: 1024 };
    const m = await client.messages.create({ model: 'm', max_tokens: 2048, messages: USER, thinking });
    assert.equal(m.content[0]?.type, 'thinking');
    assert.equal(m.content[1]?.type, 'text');
    const stream = client.messages.stream({ model: 'm', max_tokens: 2048, messages: USER, thinking });
    const thoughts: string[] = [];
    stream.on('thinking', (t) => thoughts.push(t));
    const final = await stream.finalMessage();
    const block = final.content[0];
    assert.ok(block?.type === 'thinking');
    assert.equal(block.thinking, 'The user greeted me, so I greet them back.');
    assert.equal(thoughts.join(''), block.thinking);
    assert.ok(block.signature.length > 0, 'the signature_delta arrived');
    assert.deepEqual(final.content[1], { type: 'text', text: 'Hello from the kars Anthropic stub.' });
    await assert.rejects(
      client.messages.create({ model: 'm', max_tokens: 1024, messages: USER, thinking }),
      (e: unknown) => e instanceof Anthropic.BadRequestError && /budget_tokens/.test(e.apiMessage ?? ''),
    );
    await assert.rejects(
      client.messages.create({ model: 'm', max_tokens: 4096, messages: USER, thinking: { type: 'enabled', budget_tokens: 100 } }),
      Anthropic.BadRequestError,
    );
    const off = await client.messages.create({ model: 'm', max_tokens: 100, messages: USER, thinking: { type: 'disabled' } });
    assert.equal(off.content[0]?.type, 'text');
  });

  it('counts tokens, lists models, and answers 404 in Anthropic’s shape elsewhere', async () => {
    const c = await client.messages.countTokens({ model: 'm', messages: USER }, { headers: { 'x-stub-input-tokens': '42' } });
    assert.deepEqual(c, { input_tokens: 42 });
    assert.equal(stub.requests[0]!.route, 'count_tokens');
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids, ['claude-sonnet-4-5', 'claude-haiku-4-5']);
    assert.equal((await client.models.retrieve('claude-haiku-4-5')).display_name, 'Claude Haiku 4 5');
    await assert.rejects(client.models.retrieve('nope'), Anthropic.NotFoundError);
    const other = await postJson(new URL('/v1/messages/batches', stub.url), {});
    assert.equal(other.status, 404);
    assert.equal(other.json.type, 'error');
    assert.equal(other.json.error.type, 'not_found_error');
    const wrongMethod = await fetch(new URL('/v1/messages', stub.url));
    assert.equal(wrongMethod.status, 405);
  });

  it('requires anthropic-version and the API key only when told to', async () => {
    stub.setBehaviour({ requireVersion: true, apiKey: 'sk-ant-test' });
    assert.equal((await client.messages.create({ model: 'm', max_tokens: 5, messages: USER })).type, 'message');
    const noVersion = await postJson(
      new URL('/v1/messages', stub.url),
      { model: 'm', max_tokens: 5, messages: USER },
      { 'x-api-key': 'sk-ant-test' },
    );
    assert.equal(noVersion.status, 400);
    assert.match(noVersion.json.error.message, /anthropic-version/);
    const byHeader = await postJson(
      new URL('/v1/messages', stub.url),
      { model: 'm', max_tokens: 5, messages: USER },
      { 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' },
    );
    assert.equal(byHeader.status, 200, 'x-api-key is accepted as the key');
    assert.equal(stub.requests.at(-1)!.apiKey, 'sk-ant-test');
    assert.equal(stub.requests.at(-1)!.version, '2023-06-01');
    const wrongKey = new Anthropic({ apiKey: 'other', baseURL: stub.url.toString(), maxRetries: 0 });
    await assert.rejects(wrongKey.messages.create({ model: 'm', max_tokens: 5, messages: USER }), Anthropic.AuthenticationError);
    assert.equal(stub.requests.at(-1)!.bearer, 'other', 'what arrived is recorded even when refused');
  });
});
