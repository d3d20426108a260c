/**
 * The OpenAI stub's Responses API, driven directly by the official `openai` SDK (OpenAI and
 * AzureOpenAI clients), so router tests can rely on the stub answering as the real API does.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { AzureOpenAI } from 'openai';
import { startOpenAIStub, type OpenAIStub } from './openai.js';
import { postJson } from '../testing/http.js';

const API_VERSION = '2025-04-01-preview';

describe('OpenAI stub: Responses API through the openai SDK', () => {
  let stub: OpenAIStub;
  let client: OpenAI;
  before(async () => {
    stub = await startOpenAIStub();
    client = new OpenAI({ apiKey: 'sk-test', baseURL: new URL('/v1', stub.url).toString(), maxRetries: 0 });
  });
  after(async () => stub.close());
  beforeEach(() => stub.reset());

  it('answers responses.create with a Response object, its output_text and usage, and records the request', async () => {
    const r = await client.responses.create({ model: 'gpt-4o', input: 'hi', instructions: 'be brief' });
    assert.match(r.id, /^resp_/);
    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed');
    assert.equal(r.model, 'gpt-4o');
    assert.equal(r.output_text, 'Hello from the kars OpenAI stub.');
    const msg = r.output[0];
    assert.ok(msg?.type === 'message');
    assert.equal(msg.role, 'assistant');
    assert.deepEqual(msg.content, [{ type: 'output_text', text: 'Hello from the kars OpenAI stub.', annotations: [], logprobs: [] }]);
    assert.deepEqual(r.usage, {
      input_tokens: 15,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 15,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 30,
    });
    assert.equal(r.instructions, 'be brief');
    assert.equal(stub.requests.length, 1);
    const got = stub.requests[0]!;
    assert.equal(got.api, 'responses');
    assert.equal(got.path, '/v1/responses');
    assert.equal(got.target, 'gpt-4o');
    assert.equal(got.headers['authorization'], 'Bearer sk-test');
    assert.deepEqual(got.body, { model: 'gpt-4o', input: 'hi', instructions: 'be brief' });
  });

  it('cuts an answer longer than max_output_tokens: status incomplete, reason max_output_tokens, output_tokens the limit', async () => {
    const r = await client.responses.create(
      { model: 'm', input: 'hi', max_output_tokens: 3 },
      { headers: { 'x-stub-content': 'one two three four five' } },
    );
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.output_text, 'one two three');
    assert.equal(r.usage?.output_tokens, 3);
    assert.equal(r.max_output_tokens, 3);
    assert.equal((stub.requests[0]!.body as { max_output_tokens: number }).max_output_tokens, 3);
    const fits = await client.responses.create({ model: 'm', input: 'hi', max_output_tokens: 10 });
    assert.equal(fits.status, 'completed');
    assert.equal(fits.usage?.output_tokens, 10, 'output_tokens never exceeds the limit');
    const bad = await postJson(new URL('/v1/responses', stub.url), { model: 'm', input: 'x', max_output_tokens: '9' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'max_output_tokens');
  });

  it('streams the named events of the real API in order, with sequence numbers and usage in response.completed', async () => {
    const stream = await client.responses.create(
      { model: 'gpt-4o', input: 'hi', stream: true },
      { headers: { 'x-stub-content': 'a b c', 'x-stub-usage': '9' } },
    );
    const events = [];
    for await (const e of stream) events.push(e);
    assert.deepEqual(
      events.map((e) => e.type),
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ],
    );
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    assert.deepEqual(deltas, ['a', ' b', ' c']);
    const last = events.at(-1);
    assert.ok(last?.type === 'response.completed');
    assert.equal(last.response.status, 'completed');
    assert.deepEqual(last.response.usage, {
      input_tokens: 4,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 9,
    });
    const first = events[0];
    assert.ok(first?.type === 'response.created');
    assert.equal(first.response.status, 'in_progress');
    assert.equal(first.response.usage, null);
  });

  it('is accepted by the SDK stream helper, whose finalResponse carries the text and usage', async () => {
    const stream = client.responses.stream({ model: 'gpt-4o', input: 'hi' }, { headers: { 'x-stub-chunk-bytes': '7' } });
    const texts: string[] = [];
    stream.on('response.output_text.delta', (e) => texts.push(e.delta));
    const final = await stream.finalResponse();
    assert.equal(final.output_text, 'Hello from the kars OpenAI stub.');
    assert.equal(texts.join(''), 'Hello from the kars OpenAI stub.');
    assert.equal(final.usage?.total_tokens, 30);
    assert.equal((stub.requests[0]!.body as { stream: boolean }).stream, true);
  });

  it('ends a truncated stream with response.incomplete, and streamEnd chooses incomplete, failed, cut or eof', async () => {
    const collect = async (
      headers: Record<string, string>,
      content = 'one two three four',
    ): Promise<{ types: string[]; last: any; error: unknown }> => {
      const types: string[] = [];
      let last: any;
      let error: unknown;
      try {
        const s = await client.responses.create(
          { model: 'm', input: 'hi', stream: true, max_output_tokens: 100 },
          { headers: { 'x-stub-content': content, ...headers } },
        );
        for await (const e of s) {
          types.push(e.type);
          last = e;
        }
      } catch (e) {
        error = e;
      }
      return { types, last, error };
    };
    const truncated = await collect({}, Array.from({ length: 120 }, (_, i) => `w${i}`).join(' '));
    assert.equal(truncated.types.filter((t) => t === 'response.output_text.delta').length, 100);
    assert.equal(truncated.last.type, 'response.incomplete');
    assert.deepEqual(truncated.last.response.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(truncated.last.response.usage.output_tokens, 100);

    const incomplete = await collect({ 'x-stub-stream-end': 'incomplete' });
    assert.equal(incomplete.last.type, 'response.incomplete');
    assert.equal(incomplete.last.response.output[0].content[0].text, 'one two');
    assert.equal(incomplete.last.response.usage.total_tokens, 30);

    const failed = await collect({ 'x-stub-stream-end': 'failed' });
    assert.equal(failed.error, undefined);
    assert.equal(failed.types.filter((t) => t === 'response.output_text.delta').length, 2);
    assert.equal(failed.last.type, 'response.failed');
    assert.equal(failed.last.response.status, 'failed');
    assert.equal(failed.last.response.error.code, 'server_error');
    assert.equal(failed.last.response.usage.total_tokens, 30, 'a failed response still reports usage');

    const cut = await collect({ 'x-stub-stream-end': 'cut' });
    assert.ok(cut.error instanceof Error, 'a stream cut mid-way fails the SDK iteration');
    assert.equal(cut.types.at(-1), 'response.output_text.delta');
    assert.equal(cut.types.filter((t) => t === 'response.output_text.delta').length, 2);

    const eof = await collect({ 'x-stub-stream-end': 'eof' });
    assert.equal(eof.error, undefined);
    assert.equal(eof.types.at(-1), 'response.output_text.delta', 'a clean end with no terminal event');
  });

  it('omits usage when told: usage null in JSON and in the stream’s terminal event', async () => {
    const json = await client.responses.create({ model: 'm', input: 'hi' }, { headers: { 'x-stub-omit-usage': '1' } });
    assert.equal(json.usage, null);
    stub.setBehaviour({ streamUsage: false });
    const s = await client.responses.create({ model: 'm', input: 'hi', stream: true });
    let last: any;
    for await (const e of s) last = e;
    assert.equal(last.type, 'response.completed');
    assert.equal(last.response.usage, null);
  });

  it('answers canned tool calls as function_call items, JSON and streamed', async () => {
    stub.setBehaviour({ toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const r = await client.responses.create({ model: 'm', input: 'weather?' });
    const call = r.output[0];
    assert.ok(call?.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.equal(call.arguments, '{"city":"Paris"}');
    assert.match(call.call_id, /^call_/);
    const stream = client.responses.stream({ model: 'm', input: 'weather?' });
    const pieces: string[] = [];
    stream.on('response.function_call_arguments.delta', (e) => pieces.push(e.delta));
    const final = await stream.finalResponse();
    assert.ok(pieces.length > 1, 'the arguments arrive in pieces');
    assert.equal(pieces.join(''), '{"city":"Paris"}');
    const item = final.output[0];
    assert.ok(item?.type === 'function_call');
    assert.equal(item.arguments, '{"city":"Paris"}');
  });

  it('keeps Responses for responses.retrieve and responses.delete, and none with store: false', async () => {
    const kept = await client.responses.create({ model: 'm', input: 'hi' });
    const again = await client.responses.retrieve(kept.id);
    assert.equal(again.id, kept.id);
    assert.equal(again.output_text, kept.output_text);
    const streamed = await client.responses.stream({ model: 'm', input: 'hi' }).finalResponse();
    assert.equal((await client.responses.retrieve(streamed.id)).status, 'completed', 'a finished stream’s Response is kept too');
    await client.responses.delete(kept.id);
    assert.equal(stub.requests.at(-1)!.method, 'DELETE');
    await assert.rejects(client.responses.retrieve(kept.id), OpenAI.NotFoundError);
    const unstored = await client.responses.create({ model: 'm', input: 'hi', store: false });
    assert.equal((stub.requests.at(-1)!.body as { store: boolean }).store, false);
    await assert.rejects(client.responses.retrieve(unstored.id), OpenAI.NotFoundError);
  });

  it('raises the SDK’s typed errors for injected statuses', async () => {
    await assert.rejects(
      client.responses.create({ model: 'm', input: 'x' }, { headers: { 'x-stub-status': '429' } }),
      OpenAI.RateLimitError,
    );
    await assert.rejects(
      client.responses.create({ model: 'm', input: 'x' }, { headers: { 'x-stub-status': '400', 'x-stub-filter': '{"hate":"High"}' } }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === 'content_filter',
    );
    await assert.rejects(
      client.responses.create({ model: 'm', input: 'x' }, { headers: { 'x-stub-status': '503' } }),
      OpenAI.InternalServerError,
    );
  });

  it('serves the Azure forms: /openai/responses, /openai/deployments/{d}/responses and /openai/v1/responses', async () => {
    const azure = new AzureOpenAI({ endpoint: stub.url.origin, apiKey: 'azure-key', apiVersion: API_VERSION, maxRetries: 0 });
    const a = await azure.responses.create({ model: 'my-dep', input: 'hi' });
    assert.equal(a.output_text, 'Hello from the kars OpenAI stub.');
    assert.equal(stub.requests[0]!.path, `/openai/responses?api-version=${API_VERSION}`);
    assert.equal(stub.requests[0]!.headers['api-key'], 'azure-key');
    assert.equal(stub.requests[0]!.target, 'my-dep');

    // AzureOpenAI sends /responses to /openai/responses even with `deployment` set; the deployment
    // path form is what a client with that base URL sends.
    const pinned = new OpenAI({
      apiKey: 'k',
      baseURL: new URL('/openai/deployments/pinned%20dep', stub.url).toString(),
      defaultQuery: { 'api-version': API_VERSION },
      maxRetries: 0,
    });
    const stream = pinned.responses.stream({ model: 'ignored', input: 'hi' });
    assert.equal((await stream.finalResponse()).model, 'pinned dep');
    assert.equal(stub.requests[1]!.deployment, 'pinned dep');
    assert.equal(stub.requests[1]!.path, `/openai/deployments/pinned%20dep/responses?api-version=${API_VERSION}`);

    const v1 = new OpenAI({ apiKey: 'k', baseURL: new URL('/openai/v1', stub.url).toString(), maxRetries: 0 });
    assert.equal((await v1.responses.create({ model: 'dep-v1', input: 'hi' })).model, 'dep-v1');
    assert.equal(stub.requests[2]!.path, '/openai/v1/responses');
    assert.equal(stub.requests[2]!.api, 'responses');
  });
});
