/**
 * Guardrail stages evaluated (issue 9 item 1, evaluation side) against a real router with the
 * OpenAI stub as both the inference upstream and the moderation backend (`/v1/moderations`).
 * The hole: `guardrails` were compiled and echoed, but never evaluated.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { EMPTY_SNAPSHOT } from './snapshot.js';
import { TokenBudgetTracker } from './inference/budget.js';
import { createInferenceHandler } from './inference/handler.js';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { chatBody as ask, postChat as chat } from './testing/http.js';

const moderations = (s: OpenAIStub): number => s.requests.filter((r) => r.path === '/v1/moderations').length;
const completions = (s: OpenAIStub): number => s.requests.filter((r) => r.path === '/v1/chat/completions').length;

describe('guardrail stages (openai-moderation) on a real router', () => {
  let stub: OpenAIStub;
  let both: DirRouter;
  let output: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    both = await startDirRouter(
      { inference: budgetPolicy({}, { guardrails: [{ provider: 'openai-moderation', applyTo: null }] }) },
      { upstream: stub.url, guardrail: { url: stub.url } },
    );
    output = await startDirRouter(
      { inference: budgetPolicy({}, { guardrails: [{ provider: 'openai-moderation', applyTo: 'output' }] }) },
      { upstream: stub.url, guardrail: { url: stub.url } },
    );
  });
  after(async () => {
    await both.stop();
    await output.stop();
    await stub.close();
  });

  it('blocks a flagged request before it reaches the model, with 403 inference_policy_guardrail_flagged (hole: guardrails were never evaluated)', async () => {
    stub.reset();
    const res = await chat(both.router.url, ask('please kars-flag-me now'));
    assert.equal(res.status, 403, res.text);
    assert.equal(res.json.error.code, 'inference_policy_guardrail_flagged');
    assert.equal(completions(stub), 0, 'the model was never asked');
    assert.equal(moderations(stub), 1);
  });

  it('lets a clean request through after moderating both the request and the answer', async () => {
    stub.reset();
    const res = await chat(both.router.url, ask('hello'));
    assert.equal(res.status, 200, res.text);
    assert.equal(moderations(stub), 2, 'input and output were moderated');
  });

  it('blocks a flagged answer (JSON and stream) under an output stage', async () => {
    stub.reset();
    stub.setBehaviour({ content: 'here is kars-flag-me content' });
    try {
      const json = await chat(output.router.url, ask('hello'));
      assert.equal(json.status, 403, json.text);
      assert.equal(json.json.error.code, 'inference_policy_guardrail_flagged');
      assert.doesNotMatch(json.text, /here is/);
      const stream = await chat(output.router.url, ask('hello', { stream: true }));
      assert.equal(stream.status, 403, stream.text);
      assert.doesNotMatch(stream.text, /here is/);
      assert.equal(moderations(stub), 2, 'only output stages ran');
    } finally {
      stub.setBehaviour({ content: 'Hello from the kars OpenAI stub.' });
    }
    const clean = await chat(output.router.url, ask('hello', { stream: true }));
    assert.equal(clean.status, 200);
    assert.match(clean.text, /data: \[DONE\]/);
  });

  it('fails closed with 503 guardrail_unavailable when the moderation backend cannot answer', async () => {
    const dead = await startDirRouter(
      { inference: budgetPolicy({}, { guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] }) },
      { upstream: stub.url, guardrail: { url: new URL('http://127.0.0.1:9') } },
    );
    try {
      stub.reset();
      const res = await chat(dead.router.url, ask('hello'));
      assert.equal(res.status, 503, res.text);
      assert.equal(res.json.error.code, 'guardrail_unavailable');
      assert.equal(completions(stub), 0);
    } finally {
      await dead.stop();
    }
  });

  it('a stage without a backend fails closed with 503 guardrail_misconfigured (handler)', async () => {
    const handler = createInferenceHandler({
      snapshot: () => ({
        ...EMPTY_SNAPSHOT,
        inference: {
          action: null,
          tokenBudget: null,
          contentSafety: null,
          modelPreference: null,
          provider: null,
          guardrails: [{ provider: 'openai-moderation', applyTo: 'both' }],
          displayName: null,
          enforcement: 'Enforce',
        },
      }),
      upstream: stub.url,
      sandbox: 'sb',
      budget: new TokenBudgetTracker(),
    });
    const server = http.createServer((req, res) => void handler(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      stub.reset();
      const { port } = server.address() as { port: number };
      const res = await chat(`http://127.0.0.1:${port}`, ask('hello'));
      assert.equal(res.status, 503, res.text);
      assert.equal(res.json.error.code, 'guardrail_misconfigured');
      assert.equal(completions(stub), 0);
    } finally {
      handler.close();
      await new Promise((r) => server.close(r));
    }
  });
});
