/** The OpenAI stub's embeddings API, driven directly by the official `openai` SDK (OpenAI and AzureOpenAI clients). */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { AzureOpenAI } from 'openai';
import { startOpenAIStub, type OpenAIStub } from './openai.js';
import { DEFAULT_EMBEDDING_DIMENSIONS, embedText } from './openai-embeddings.js';
import { postJson } from '../testing/http.js';

const norm = (v: readonly number[]): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('OpenAI stub: embeddings through the openai SDK', () => {
  let stub: OpenAIStub;
  let client: OpenAI;
  before(async () => {
    stub = await startOpenAIStub();
    client = new OpenAI({ apiKey: 'sk-test', baseURL: new URL('/v1', stub.url).toString(), maxRetries: 0 });
  });
  after(async () => stub.close());
  beforeEach(() => stub.reset());

  it('answers a list of strings with one unit vector each, in order, decoded by the SDK from the base64 it asks for', async () => {
    const r = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
    assert.equal(r.object, 'list');
    assert.equal(r.model, 'text-embedding-3-small');
    assert.deepEqual(r.usage, { prompt_tokens: 30, total_tokens: 30 });
    assert.deepEqual(
      r.data.map((d) => [d.object, d.index]),
      [
        ['embedding', 0],
        ['embedding', 1],
      ],
    );
    const [a, b] = r.data.map((d) => d.embedding);
    assert.equal(a!.length, DEFAULT_EMBEDDING_DIMENSIONS);
    assert.ok(Math.abs(norm(a!) - 1) < 1e-5);
    assert.notDeepEqual(a, b);
    assert.deepEqual(a, Array.from(embedText('alpha', DEFAULT_EMBEDDING_DIMENSIONS)));
    // The SDK asked for base64 (its default) and decoded it; the stub recorded that request.
    assert.equal((stub.requests[0]!.body as { encoding_format: string }).encoding_format, 'base64');
    assert.equal(stub.requests[0]!.api, 'embeddings');
  });

  it('answers floats for encoding_format float, honours dimensions, and is deterministic', async () => {
    const one = await client.embeddings.create({ model: 'm', input: 'same text', encoding_format: 'float', dimensions: 5 });
    const two = await client.embeddings.create({ model: 'm', input: 'same text', encoding_format: 'float', dimensions: 5 });
    assert.equal(one.data[0]!.embedding.length, 5);
    assert.deepEqual(one.data[0]!.embedding, two.data[0]!.embedding);
    const raw = await postJson(new URL('/v1/embeddings', stub.url), { model: 'm', input: 'same text', dimensions: 5 });
    assert.ok(Array.isArray(raw.json.data[0].embedding), 'no encoding_format means floats on the wire');
    const b64 = await postJson(new URL('/v1/embeddings', stub.url), {
      model: 'm',
      input: 'same text',
      dimensions: 5,
      encoding_format: 'base64',
    });
    assert.equal(typeof b64.json.data[0].embedding, 'string');
    assert.equal(Buffer.from(b64.json.data[0].embedding, 'base64').length, 5 * 4);
  });

  it('takes usage from the behaviour, omits it when told, and refuses malformed input as invalid_request_error', async () => {
    const counted = await client.embeddings.create({ model: 'm', input: 'x' }, { headers: { 'x-stub-usage': '7' } });
    assert.deepEqual(counted.usage, { prompt_tokens: 7, total_tokens: 7 });
    const bare = await postJson(new URL('/v1/embeddings', stub.url), { model: 'm', input: 'x' }, { 'x-stub-omit-usage': '1' });
    assert.equal(bare.json.usage, undefined);
    await assert.rejects(client.embeddings.create({ model: 'm', input: [] }), OpenAI.BadRequestError);
    await assert.rejects(client.embeddings.create({ model: 'm', input: 'x', dimensions: 0 }), OpenAI.BadRequestError);
    await assert.rejects(
      client.embeddings.create({ model: 'm', input: Array.from({ length: 400 }, (_, i) => `t${i}`), dimensions: 3072 }),
      OpenAI.BadRequestError,
      'the stub bounds inputs × dimensions',
    );
    const tokens = await client.embeddings.create({ model: 'm', input: [[1, 2, 3], [4]], encoding_format: 'float' });
    assert.equal(tokens.data.length, 2);
    await assert.rejects(
      client.embeddings.create({ model: 'm', input: 'x' }, { headers: { 'x-stub-status': '429' } }),
      OpenAI.RateLimitError,
    );
  });

  it('serves the Azure forms: /openai/deployments/{d}/embeddings and /openai/v1/embeddings', async () => {
    const azure = new AzureOpenAI({ endpoint: stub.url.origin, apiKey: 'azure-key', apiVersion: '2024-10-21', maxRetries: 0 });
    const r = await azure.embeddings.create({ model: 'emb-dep', input: 'hi' });
    assert.equal(r.model, 'emb-dep');
    assert.equal(stub.requests[0]!.path, '/openai/deployments/emb-dep/embeddings?api-version=2024-10-21');
    assert.equal(stub.requests[0]!.deployment, 'emb-dep');
    assert.equal(stub.requests[0]!.headers['api-key'], 'azure-key');
    const v1 = new OpenAI({ apiKey: 'k', baseURL: new URL('/openai/v1', stub.url).toString(), maxRetries: 0 });
    assert.equal((await v1.embeddings.create({ model: 'emb-v1', input: 'hi' })).data.length, 1);
    assert.equal(stub.requests[1]!.path, '/openai/v1/embeddings');
  });
});
