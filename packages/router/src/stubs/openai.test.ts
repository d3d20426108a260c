import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startOpenAIStub, type OpenAIStub } from './openai.js';
import { postJson, type JsonReply } from '../testing/http.js';

/** POST `body` as JSON to `path` on the stub. */
function post(stub: OpenAIStub, path: string, body: object, headers: Record<string, string> = {}): Promise<JsonReply> {
  return postJson(new URL(path, stub.url), body, headers);
}

const events = (text: string): string[] =>
  text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => e.slice('data: '.length));

describe('OpenAI stub', () => {
  let stub: OpenAIStub;
  before(async () => {
    stub = await startOpenAIStub();
  });
  after(async () => stub.close());
  beforeEach(() => stub.reset());

  it('answers a realistic chat completion with usage and safe prompt filter results, and records the request', async () => {
    const r = await post(stub, '/v1/chat/completions', { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200);
    const b = JSON.parse(r.text);
    assert.match(b.id, /^chatcmpl-/);
    assert.equal(b.object, 'chat.completion');
    assert.equal(b.model, 'gpt-4o');
    assert.equal(b.choices[0].message.content, 'Hello from the kars OpenAI stub.');
    assert.deepEqual(b.usage, { prompt_tokens: 15, completion_tokens: 15, total_tokens: 30 });
    assert.deepEqual(b.prompt_filter_results[0].content_filter_results.hate, { filtered: false, severity: 'safe' });
    assert.equal(stub.requests.length, 1);
    assert.equal(stub.requests[0]!.model, 'gpt-4o');
    assert.equal(stub.requests[0]!.target, 'gpt-4o');
    assert.equal(stub.requests[0]!.deployment, undefined);
    assert.deepEqual((stub.requests[0]!.body as any).messages, [{ role: 'user', content: 'hi' }]);
  });

  it('serves the Azure deployment path and records the deployment and query', async () => {
    const r = await post(stub, '/openai/deployments/my%20dep/chat/completions?api-version=2024-10-21', { messages: [] });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.text).model, 'my dep');
    assert.equal(stub.requests[0]!.deployment, 'my dep');
    assert.equal(stub.requests[0]!.path, '/openai/deployments/my%20dep/chat/completions?api-version=2024-10-21');
  });

  it('streams SSE chunks ending in a usage chunk and [DONE]', async () => {
    const r = await post(stub, '/v1/chat/completions', { model: 'm', stream: true }, { 'x-stub-usage': '7', 'x-stub-content': 'a b c' });
    assert.equal(r.headers.get('content-type'), 'text/event-stream');
    const ev = events(r.text);
    assert.equal(ev.at(-1), '[DONE]');
    const parsed = ev.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(parsed[0].prompt_filter_results, 'the first event carries the prompt filter results');
    assert.equal(parsed.map((p) => p.choices[0]?.delta?.content ?? '').join(''), 'a b c');
    assert.equal(parsed.at(-1).usage.total_tokens, 7);
    assert.equal(parsed.at(-2).choices[0].finish_reason, 'stop');
  });

  it('takes status, filter severities, no-filter and usage from request headers', async () => {
    const filtered = JSON.parse(
      (
        await post(
          stub,
          '/v1/chat/completions',
          { model: 'm' },
          { 'x-stub-filter': '{"hate":"High","violence":"Medium"}', 'x-stub-usage': '123' },
        )
      ).text,
    );
    const cfr = filtered.prompt_filter_results[0].content_filter_results;
    assert.deepEqual(cfr.hate, { filtered: false, severity: 'high' });
    assert.deepEqual(cfr.violence, { filtered: false, severity: 'medium' });
    assert.deepEqual(cfr.sexual, { filtered: false, severity: 'safe' });
    assert.equal(filtered.usage.total_tokens, 123);
    const bare = JSON.parse((await post(stub, '/v1/chat/completions', { model: 'm' }, { 'x-stub-no-filter': '1' })).text);
    assert.equal(bare.prompt_filter_results, undefined);
    assert.equal(bare.choices[0].content_filter_results, undefined);
    const failed = await post(stub, '/v1/chat/completions', { model: 'm' }, { 'x-stub-status': '500' });
    assert.equal(failed.status, 500);
    assert.equal(JSON.parse(failed.text).error.type, 'server_error');
  });

  it('answers status 400 with filter severities as an Azure content-filter error', async () => {
    const r = await post(stub, '/v1/chat/completions', { model: 'm' }, { 'x-stub-status': '400', 'x-stub-filter': '{"sexual":"High"}' });
    assert.equal(r.status, 400);
    const e = JSON.parse(r.text).error;
    assert.equal(e.code, 'content_filter');
    assert.deepEqual(e.innererror.content_filter_result.sexual, { filtered: false, severity: 'high' });
  });

  it('layers defaults, setBehaviour, per-deployment overrides and headers in that order', async () => {
    stub.setBehaviour({ content: 'global', usage: 5 });
    stub.setDeploymentBehaviour('broken', { status: 503 });
    stub.setDeploymentBehaviour('special', { content: 'special' });
    assert.equal((await post(stub, '/openai/deployments/broken/chat/completions', {})).status, 503);
    assert.equal((await post(stub, '/v1/chat/completions', { model: 'broken' })).status, 503);
    assert.equal((await post(stub, '/v1/chat/completions', { model: 'broken' }, { 'x-stub-status': '200' })).status, 200);
    const special = JSON.parse((await post(stub, '/v1/chat/completions', { model: 'special' })).text);
    assert.equal(special.choices[0].message.content, 'special');
    assert.equal(special.usage.total_tokens, 5);
    stub.setDeploymentBehaviour('broken', undefined);
    assert.equal((await post(stub, '/v1/chat/completions', { model: 'broken' })).status, 200);
  });

  it('answers 429 with retry-after, a raw body verbatim, and 404 for unknown paths', async () => {
    const limited = await post(stub, '/v1/chat/completions', { model: 'm' }, { 'x-stub-status': '429' });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('retry-after'), '1');
    stub.setBehaviour({ rawBody: 'not json', contentType: 'text/plain' });
    assert.equal((await post(stub, '/v1/chat/completions', {})).text, 'not json');
    assert.equal((await post(stub, '/v2/other', {})).status, 404);
  });

  it('writes a stream in pieces of the requested size', async () => {
    const whole = await post(stub, '/v1/chat/completions', { model: 'm', stream: true });
    const pieces = await post(stub, '/v1/chat/completions', { model: 'm', stream: true }, { 'x-stub-chunk-bytes': '5' });
    const norm = (t: string): string => t.replace(/chatcmpl-stub-\d+/g, 'ID').replace(/"created":\d+/g, '"created":0');
    assert.equal(norm(pieces.text), norm(whole.text));
  });
});
