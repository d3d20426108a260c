/** `kars stub openai|anthropic` as processes: each listens where told and answers its APIs. */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startKars, stopKars, type KarsChild } from '@kars/kube-envtest';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

describe('kars stub', () => {
  const children: KarsChild[] = [];
  after(async () => {
    await Promise.all(children.map((c) => stopKars(c)));
  });

  it('stub anthropic answers Messages, count_tokens and models, and Anthropic-shaped errors', async () => {
    const child = startKars('stub anthropic', ['stub', 'anthropic', '--listen', '127.0.0.1:0']);
    children.push(child);
    const base = (await child.url).replace(/\/$/, '');
    const msg = await post(`${base}/v1/messages`, { model: 'claude-x', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(msg.status, 200);
    assert.equal(msg.json.type, 'message');
    assert.equal(msg.json.content[0].text, 'Hello from the kars Anthropic stub.');
    assert.equal(msg.json.stop_reason, 'end_turn');
    const missing = await post(`${base}/v1/messages`, { model: 'claude-x', messages: [] });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.error.type, 'invalid_request_error');
    assert.deepEqual(await post(`${base}/v1/messages/count_tokens`, { model: 'claude-x', messages: [] }).then((r) => r.json), {
      input_tokens: 15,
    });
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { has_more: boolean; data: unknown[] };
    assert.equal(models.has_more, false);
    assert.ok(models.data.length > 0);
    await stopKars(child);
    assert.equal(child.proc.exitCode, 0, 'SIGTERM stops it cleanly');
  });

  it('stub openai answers the Responses API and embeddings beside chat', async () => {
    const child = startKars('stub openai', ['stub', 'openai', '--listen', '127.0.0.1:0']);
    children.push(child);
    const base = (await child.url).replace(/\/$/, '');
    const r = await post(`${base}/v1/responses`, { model: 'gpt-4o', input: 'hi' });
    assert.equal(r.status, 200);
    assert.equal(r.json.object, 'response');
    assert.equal(r.json.output[0].content[0].text, 'Hello from the kars OpenAI stub.');
    const e = await post(`${base}/openai/deployments/emb/embeddings?api-version=2024-10-21`, { input: ['a', 'b'] });
    assert.equal(e.status, 200);
    assert.equal(e.json.data.length, 2);
    assert.equal(e.json.model, 'emb');
    await stopKars(child);
    assert.equal(child.proc.exitCode, 0, 'SIGTERM stops it cleanly');
  });
});
