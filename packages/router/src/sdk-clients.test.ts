/**
 * The official SDKs through the real router (issue 20 item 8): `openai` (chat completions,
 * Responses, embeddings, and the AzureOpenAI client's paths) and `@anthropic-ai/sdk` (Messages,
 * token counting), against the kars stubs. The OpenAI cases run three ways: at `/v1`, with the
 * AzureOpenAI client on the deployment paths, and on Azure's `/openai/v1` paths. On each route: allowed; over the per-request cap;
 * budget exhausted; streamed, with the usage the upstream reported charged; guardrail flagged;
 * and a policy edit enforced. Every refusal must surface as the SDK's own typed error, carrying
 * the kars code where the SDK keeps one (`err.code` for OpenAI, `err.errorCode` for Anthropic).
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import OpenAI, { AzureOpenAI } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { until } from '@kars/kube-core/testing';
import { startAnthropicStub, startOpenAIStub, type AnthropicStub, type OpenAIStub } from './stubs/index.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';

let openaiStub: OpenAIStub;
let anthropicStub: AnthropicStub;

before(async () => {
  openaiStub = await startOpenAIStub();
  anthropicStub = await startAnthropicStub();
});
after(async () => {
  await openaiStub.close();
  await anthropicStub.close();
});
beforeEach(() => {
  openaiStub.reset();
  anthropicStub.reset();
});

/** A router for one test, with both upstreams and the stub as its moderation backend; stopped with the test. */
async function router(t: { after: (fn: () => Promise<void>) => void }, policy: Record<string, unknown> | undefined): Promise<DirRouter> {
  const r = await startDirRouter(policy === undefined ? {} : { inference: policy }, {
    upstream: openaiStub.url,
    upstreams: new Map([['anthropic', anthropicStub.url]]),
    guardrail: { url: openaiStub.url },
  });
  t.after(() => r.stop());
  return r;
}

const anthropic = (r: DirRouter): Anthropic => new Anthropic({ baseURL: r.router.url, apiKey: 'sk-ant-test', maxRetries: 0 });

/** The policy for an API family: Anthropic's routes need a policy whose provider speaks them. */
const forAnthropic = (p: Record<string, unknown>): Record<string, unknown> => ({ ...p, provider: 'anthropic' });

/** Assert `p` rejects with an instance of `type`, and return the error. */
async function raises<E>(p: Promise<unknown>, type: abstract new (...a: never[]) => E): Promise<E> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof type, `expected ${type.name}, got ${String(err)}`);
    return err;
  }
  assert.fail(`expected ${type.name}, but the call succeeded`);
}

/** Rewrite the router's InferencePolicy and wait until it enforces `perRequestTokens`. */
async function editCap(r: DirRouter, policy: Record<string, unknown>, cap: number): Promise<void> {
  writeFileSync(join(r.dir, 'inference', 'inference-policy.json'), JSON.stringify(policy));
  await until('the edit is loaded', () => r.router.state.current().inference?.tokenBudget?.perRequestTokens === cap);
}

/**
 * One way of reaching the OpenAI-shaped routes: the client an agent would build, and the upstream
 * path each API must arrive at (so a test also proves the route it went through).
 */
interface Flavour {
  name: string;
  client(r: DirRouter): OpenAI;
  paths: { chat: RegExp; responses: RegExp; embeddings: RegExp };
  /** The credential header the upstream must receive, when the flavour sends one of its own. */
  apiKey?: string;
}

const AZURE_VERSION = '2025-04-01-preview';
const FLAVOURS: Flavour[] = [
  {
    name: 'OpenAI at /v1',
    client: (r) => new OpenAI({ baseURL: `${r.router.url}/v1`, apiKey: 'sk-test', maxRetries: 0 }),
    paths: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/responses$/, embeddings: /^\/v1\/embeddings$/ },
  },
  {
    // AzureOpenAI puts chat and embeddings on the deployment path, and Responses on /openai/responses.
    name: 'AzureOpenAI on the deployment paths',
    client: (r) =>
      new AzureOpenAI({ endpoint: r.router.url, apiKey: 'az-key', apiVersion: AZURE_VERSION, deployment: 'gpt-4o', maxRetries: 0 }),
    paths: {
      chat: /^\/openai\/deployments\/gpt-4o\/chat\/completions\?api-version=/,
      responses: /^\/openai\/responses\?api-version=/,
      embeddings: /^\/openai\/deployments\/gpt-4o\/embeddings\?api-version=/,
    },
    apiKey: 'az-key',
  },
  {
    name: "OpenAI on Azure's v1 paths",
    client: (r) =>
      new OpenAI({ baseURL: `${r.router.url}/openai/v1`, apiKey: 'az-key', defaultHeaders: { 'api-key': 'az-key' }, maxRetries: 0 }),
    paths: { chat: /^\/openai\/v1\/chat\/completions$/, responses: /^\/openai\/v1\/responses$/, embeddings: /^\/openai\/v1\/embeddings$/ },
    apiKey: 'az-key',
  },
];

/** The last request the OpenAI stub received went to `path`, with the flavour's credential. */
function arrivedAt(f: Flavour, path: RegExp): void {
  const seen = openaiStub.requests.at(-1);
  assert.match(seen?.path ?? '', path);
  if (f.apiKey !== undefined) assert.equal(seen?.headers['api-key'], f.apiKey, 'api-key is forwarded');
}

const guardedBudget = (): Record<string, unknown> =>
  budgetPolicy({ perRequestTokens: 1000, dailyTokens: 500 }, { guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] });

for (const f of FLAVOURS) {
  describe(`the openai SDK through the router: ${f.name}`, () => {
    it('chat completions: allowed, over the cap, budget exhausted, streamed and charged, flagged, an edit enforced', async (t) => {
      const r = await router(t, guardedBudget());
      const c = f.client(r);
      const msg = (content: string) => [{ role: 'user' as const, content }];
      const ok = await c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 10 });
      assert.equal(ok.choices[0]?.message.content, 'Hello from the kars OpenAI stub.');
      arrivedAt(f, f.paths.chat);

      const over = await raises(
        c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 1001 }),
        OpenAI.RateLimitError,
      );
      assert.equal(over.code, 'per_request_tokens_exceeded');

      const flagged = await raises(
        c.chat.completions.create({ model: 'gpt-4o', messages: msg('please kars-flag-me'), max_tokens: 10 }),
        OpenAI.PermissionDeniedError,
      );
      assert.equal(flagged.code, 'inference_policy_guardrail_flagged');

      // A stream is charged what the upstream reported: 10, below any estimate of its bytes (so the
      // next request passes); then an answer reporting 1000 exhausts the budget of 500.
      openaiStub.setBehaviour({ usage: 10 });
      const stream = await c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 10, stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      assert.equal(text, 'Hello from the kars OpenAI stub.');
      arrivedAt(f, f.paths.chat);
      openaiStub.setBehaviour({ usage: 1000 });
      await c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 10 });
      const spent = await raises(
        c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 10 }),
        OpenAI.RateLimitError,
      );
      assert.equal(spent.code, 'budget_exceeded');

      await editCap(r, budgetPolicy({ perRequestTokens: 5 }), 5);
      const edited = await raises(
        c.chat.completions.create({ model: 'gpt-4o', messages: msg('hi'), max_tokens: 10 }),
        OpenAI.RateLimitError,
      );
      assert.equal(edited.code, 'per_request_tokens_exceeded');
      assert.match(edited.message, /perRequestTokens=5/);
    });

    it('Responses: allowed (the cap filled in), over the cap, budget exhausted, streamed and charged, flagged, an edit enforced', async (t) => {
      const r = await router(t, guardedBudget());
      const c = f.client(r);
      const ok = await c.responses.create({ model: 'gpt-4o', input: 'hi' });
      assert.equal(ok.output_text, 'Hello from the kars OpenAI stub.');
      arrivedAt(f, f.paths.responses);
      const sent = openaiStub.requests.at(-1)?.body as Record<string, unknown>;
      assert.equal(sent['max_output_tokens'], 1000, 'a request without a limit gets the cap');

      const over = await raises(c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 1001 }), OpenAI.RateLimitError);
      assert.equal(over.code, 'per_request_tokens_exceeded');
      const bg = await raises(c.responses.create({ model: 'gpt-4o', input: 'hi', background: true }), OpenAI.BadRequestError);
      assert.equal(bg.code, 'unsupported_parameter');
      const tool = await raises(
        c.responses.create({ model: 'gpt-4o', input: 'hi', tools: [{ type: 'web_search' }] }),
        OpenAI.PermissionDeniedError,
      );
      assert.equal(tool.code, 'inference_policy_provider_tool_refused');
      const searching = await raises(c.responses.create({ model: 'o3-deep-research', input: 'hi' }), OpenAI.PermissionDeniedError);
      assert.equal(searching.code, 'inference_policy_provider_tool_refused');
      const flagged = await raises(
        c.responses.create({ model: 'gpt-4o', instructions: 'kars-flag-me', input: 'hi' }),
        OpenAI.PermissionDeniedError,
      );
      assert.equal(flagged.code, 'inference_policy_guardrail_flagged');

      openaiStub.setBehaviour({ usage: 10 });
      const stream = await c.responses.create({ model: 'gpt-4o', input: 'hi', stream: true });
      let done: OpenAI.Responses.Response | undefined;
      for await (const ev of stream) if (ev.type === 'response.completed') done = ev.response;
      assert.equal(done?.usage?.total_tokens, 10);
      arrivedAt(f, f.paths.responses);
      openaiStub.setBehaviour({ usage: 1000 });
      await c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 900 });
      const spent = await raises(c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 10 }), OpenAI.RateLimitError);
      assert.equal(spent.code, 'budget_exceeded');

      await editCap(r, budgetPolicy({ perRequestTokens: 5 }), 5);
      const edited = await raises(c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 10 }), OpenAI.RateLimitError);
      assert.equal(edited.code, 'per_request_tokens_exceeded');
    });

    it('embeddings: allowed, flagged, token ids refused under a guardrail, budget exhausted by the reported input tokens, an edit of action enforced', async (t) => {
      // Embeddings generate nothing: no per-request cap applies and no stream exists.
      const r = await router(t, guardedBudget());
      const c = f.client(r);
      const model = 'text-embedding-3-small';
      openaiStub.setBehaviour({ usage: 400 });
      const ok = await c.embeddings.create({ model, input: ['a', 'b'] });
      assert.equal(ok.data.length, 2);
      arrivedAt(f, f.paths.embeddings);
      const flagged = await raises(c.embeddings.create({ model, input: ['fine', 'kars-flag-me'] }), OpenAI.PermissionDeniedError);
      assert.equal(flagged.code, 'inference_policy_guardrail_flagged');
      const ids = await raises(c.embeddings.create({ model, input: [[1, 2, 3]] }), OpenAI.PermissionDeniedError);
      assert.equal(ids.code, 'inference_policy_guardrail_unjudgeable');
      await c.embeddings.create({ model, input: 'a' });
      const spent = await raises(c.embeddings.create({ model, input: 'a' }), OpenAI.RateLimitError);
      assert.equal(spent.code, 'budget_exceeded');

      writeFileSync(
        join(r.dir, 'inference', 'inference-policy.json'),
        JSON.stringify({ ...budgetPolicy({}), appliesTo: { action: 'chat' } }),
      );
      await until('the edit is loaded', () => r.router.state.current().inference?.action === 'chat');
      const uncovered = await raises(c.embeddings.create({ model, input: 'a' }), OpenAI.PermissionDeniedError);
      assert.equal(uncovered.code, 'inference_policy_action_not_covered');
    });
  });
}

describe('the openai SDK through the router: the rest of the table', () => {
  it('a path outside the route table is a typed 404 that lists the routes, and never reaches the upstream', async (t) => {
    const r = await router(t, undefined);
    const err = await raises(
      new OpenAI({ baseURL: `${r.router.url}/v1`, apiKey: 'sk-test', maxRetries: 0 }).completions.create({ model: 'm', prompt: 'hi' }),
      OpenAI.NotFoundError,
    );
    assert.match(err.message, /\/v1\/responses/);
    assert.equal(openaiStub.requests.length, 0);
  });

  it('a previous_response_id chain is charged by the usage the upstream reports for the whole chain', async (t) => {
    const r = await router(t, budgetPolicy({ dailyTokens: 500 }));
    const c = new OpenAI({ baseURL: `${r.router.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
    openaiStub.setBehaviour({ usage: 10 });
    const first = await c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 20 });
    // The chained request is a few bytes; the upstream reports the chain's context (the stub keeps
    // half of `usage` as input, and caps the output at max_output_tokens): 620 tokens.
    openaiStub.setBehaviour({ usage: 1200 });
    const chained = await c.responses.create({ model: 'gpt-4o', input: 'and?', previous_response_id: first.id, max_output_tokens: 20 });
    assert.equal(chained.usage?.total_tokens, 620);
    assert.equal((openaiStub.requests.at(-1)?.body as Record<string, unknown>)['previous_response_id'], first.id, 'forwarded as sent');
    openaiStub.setBehaviour({ usage: 10 });
    const spent = await raises(c.responses.create({ model: 'gpt-4o', input: 'hi', max_output_tokens: 20 }), OpenAI.RateLimitError);
    assert.equal(spent.code, 'budget_exceeded');
  });

  it("a search model on chat completions is a provider tool, refused; through a policy deployment it is the operator's choice", async (t) => {
    const r = await router(t, budgetPolicy({ perRequestTokens: 100 }));
    const c = new OpenAI({ baseURL: `${r.router.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
    const err = await raises(
      c.chat.completions.create({ model: 'gpt-4o-search-preview', messages: [{ role: 'user', content: 'news?' }] }),
      OpenAI.PermissionDeniedError,
    );
    assert.equal(err.code, 'inference_policy_provider_tool_refused');
    assert.equal(openaiStub.requests.length, 0);
  });
});

describe('the Anthropic SDK through the router', () => {
  it('Messages: allowed, over the cap, budget exhausted, streamed and charged, flagged, an edit enforced', async (t) => {
    const policy = forAnthropic(
      budgetPolicy({ perRequestTokens: 1000, dailyTokens: 500 }, { guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] }),
    );
    const r = await router(t, policy);
    const c = anthropic(r);
    const msg = (content: string) => [{ role: 'user' as const, content }];
    const ok = await c.messages.create(
      { model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg('hi') },
      { headers: { 'x-api-key': 'sk-ant-header', 'anthropic-beta': 'kars-test-2026-12-01' } },
    );
    assert.equal(ok.content[0]?.type === 'text' ? ok.content[0].text : undefined, 'Hello from the kars Anthropic stub.');
    const seen = anthropicStub.requests.at(-1);
    assert.equal(seen?.bearer, 'sk-ant-test', 'the SDK key is forwarded');
    assert.equal(seen?.apiKey, 'sk-ant-header', 'x-api-key is forwarded');
    assert.deepEqual(seen?.beta, ['kars-test-2026-12-01'], 'anthropic-beta is forwarded');
    assert.ok(seen?.version !== undefined, 'anthropic-version is forwarded');

    const over = await raises(
      c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1001, messages: msg('hi') }),
      Anthropic.RateLimitError,
    );
    assert.equal(over.errorCode, 'per_request_tokens_exceeded');
    assert.equal(over.type, 'rate_limit_error');
    const thinking = await raises(
      c.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 100,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        messages: msg('hi'),
      }),
      Anthropic.RateLimitError,
    );
    assert.equal(thinking.errorCode, 'per_request_tokens_exceeded');
    const flagged = await raises(
      c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, system: 'kars-flag-me', messages: msg('hi') }),
      Anthropic.PermissionDeniedError,
    );
    assert.equal(flagged.errorCode, 'inference_policy_guardrail_flagged');
    const server = await raises(
      c.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 10,
        messages: msg('hi'),
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      }),
      Anthropic.PermissionDeniedError,
    );
    assert.equal(server.errorCode, 'inference_policy_provider_tool_refused');

    // Token counting is allowed and never charged.
    const counted = await c.messages.countTokens({ model: 'claude-sonnet-4-5', messages: msg('hi') });
    assert.equal(typeof counted.input_tokens, 'number');

    // A stream is charged what the upstream reported: 10, below any estimate of its bytes (so the
    // next request passes); then an answer reporting 1000 exhausts the budget of 500.
    anthropicStub.setBehaviour({ inputTokens: 5, outputTokens: 5 });
    const final = await c.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 50, messages: msg('hi') }).finalMessage();
    assert.equal(final.usage.input_tokens + final.usage.output_tokens, 10);
    anthropicStub.setBehaviour({ inputTokens: 600, outputTokens: 400 });
    await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg('hi') });
    const spent = await raises(
      c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg('hi') }),
      Anthropic.RateLimitError,
    );
    assert.equal(spent.errorCode, 'budget_exceeded');

    await editCap(r, forAnthropic(budgetPolicy({ perRequestTokens: 5 })), 5);
    const edited = await raises(
      c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg('hi') }),
      Anthropic.RateLimitError,
    );
    assert.equal(edited.errorCode, 'per_request_tokens_exceeded');
  });

  it('a policy that routes to a provider that does not speak Messages, or that covers another action, is a typed refusal', async (t) => {
    const r = await router(t, budgetPolicy({ perRequestTokens: 100 }, { provider: 'azure-openai' }));
    const c = anthropic(r);
    const err = await raises(
      c.messages.create({ model: 'claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      Anthropic.PermissionDeniedError,
    );
    assert.equal(err.errorCode, 'inference_policy_provider_mismatch');
    assert.equal(anthropicStub.requests.length, 0);
    const batch = await raises(c.messages.batches.create({ requests: [] }), Anthropic.BadRequestError);
    assert.equal(batch.errorCode, 'unsupported_route');
  });
});
