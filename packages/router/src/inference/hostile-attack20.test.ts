/**
 * Attacker's pass 20 over the inference listener (ADR 0027, 0034, 0049): ways an untrusted agent
 * gets around the provider-run-tool refusals, the settlement and the retry advice. Each test drives
 * the real code (the pure `decideRequest`, the budget ledger, or the real handler over HTTP); a test
 * marked `todo` documents a hole found and not fixed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { InferenceRules } from '../snapshot.js';
import { decideRequest, newMeter, settleTokens, type Forward, type PipelineContext, type Reject } from './pipeline.js';
import { CHAT, COUNT_TOKENS, MESSAGES, RESPONSES, type InferenceApi } from './apis.js';
import type { ApiRoute } from './routes.js';
import { inferenceRules } from '../testing/rules.js';
import { budgetPolicy, startDirRouter } from '../testing/policy-dir.js';
import { startOpenAIStub } from '../stubs/openai.js';
import { TokenBudgetTracker } from './budget.js';
import { budgetRetryHeaders } from './ratelimit.js';

const CTX: PipelineContext = { defaultDailyTokens: null, guardrailConfigured: true };
const route = (api: InferenceApi): ApiRoute => ({ kind: 'api', api, prefix: '/v1', deployment: undefined, query: '' });

function decide(api: InferenceApi, body: object, r: InferenceRules | undefined = undefined): Reject | Forward {
  return decideRequest(Buffer.from(JSON.stringify(body)), route(api), r, CTX);
}
function refused(d: Reject | Forward, code?: string): Reject {
  assert.equal(d.kind, 'reject', `expected a refusal, forwarded ${d.kind === 'forward' ? d.text.slice(0, 300) : ''}`);
  const r = d as Reject;
  if (code !== undefined) assert.equal(r.refusal.body.error.code, code, JSON.stringify(r.refusal.body));
  return r;
}

/** Every upper/lower-case spelling of `s` (as a fast-check arbitrary). */
const caseOf = (s: string): fc.Arbitrary<string> =>
  fc
    .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
    .map((up) => [...s].map((c, i) => (up[i] ? c.toUpperCase() : c)).join(''));

describe('hostile attack20: media the provider fetches, spelled another way', () => {
  // Anthropic's token counting reads url sources as a message does: the provider fetches the URL
  // (to count an image or a PDF), from a host of the agent's choosing, outside the sandbox's egress
  // policy. The route is uncharged, so the fetch costs the agent nothing and is unlimited.
  it('count_tokens: an image or document with a url source is refused as a provider fetch', () => {
    const body = {
      model: 'claude',
      messages: [
        {
          role: 'user',
          content: [{ type: 'document', source: { type: 'url', url: 'https://attacker.example/exfil?d=secret' } }],
        },
      ],
    };
    refused(decide(COUNT_TOKENS, body), 'inference_policy_provider_tool_refused');
    // Bytes in the request pass.
    const bytes = {
      ...body,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
    };
    assert.equal(decide(COUNT_TOKENS, bytes).kind, 'forward');
  });

  // The URL check read `url` (and `type`) exactly; a case-insensitive decoder (Go's encoding/json,
  // ASP.NET's web defaults) reads `URL` or `Url` as the same field, so the provider fetches it.
  it('property: chat image_url.{url in any case} with an http(s) URL is refused', () => {
    fc.assert(
      fc.property(caseOf('url'), caseOf('image_url'), (urlKey, partKey) => {
        const part = { type: 'image_url', [partKey]: { [urlKey]: 'https://attacker.example/x.png' } };
        refused(decide(CHAT, { model: 'm', messages: [{ role: 'user', content: [part] }] }), 'inference_policy_provider_tool_refused');
      }),
    );
  });
  it('property: an Anthropic source {type: url, URL in any case} is refused on Messages and count_tokens', () => {
    fc.assert(
      fc.property(caseOf('url'), caseOf('type'), (urlKey, typeKey) => {
        const source = { [typeKey]: 'url', [urlKey]: 'https://attacker.example/x.pdf' };
        const body = { model: 'c', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'document', source }] }] };
        refused(decide(MESSAGES, body), 'inference_policy_provider_tool_refused');
        refused(decide(COUNT_TOKENS, body), 'inference_policy_provider_tool_refused');
      }),
    );
  });
});

describe('hostile attack20: Azure On Your Data in another case', () => {
  // `data_sources` / `dataSources` were refused only in those exact spellings, and neither is a
  // governed field of the case-fold check, so `DataSources` or `DATA_SOURCES` reached an upstream
  // whose decoder matches keys without case: the provider calls the agent's search endpoint.
  it('property: any case of data_sources or dataSources is refused on chat', () => {
    fc.assert(
      fc.property(fc.oneof(caseOf('data_sources'), caseOf('datasources')), (key) => {
        const body = {
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          [key]: [{ type: 'azure_search', parameters: { endpoint: 'https://x' } }],
        };
        refused(decide(CHAT, body));
      }),
    );
  });
});

describe('hostile attack20: provider-run tools the tool checks did not read', () => {
  // Chat completions' `tools` were not looked at: a gateway or OpenAI-compatible upstream that
  // runs a hosted tool type (`web_search`, `mcp`, `file_search`) on chat would run it unrefused.
  it('chat: a tool type other than function or custom (or tools not a list) is refused', () => {
    const base = { model: 'm', messages: [{ role: 'user', content: 'x' }] };
    for (const tools of [[{ type: 'web_search' }], [{ type: 'mcp', server_url: 'https://x' }], [{ name: 'f' }], { type: 'web_search' }])
      refused(decide(CHAT, { ...base, tools }), 'inference_policy_provider_tool_refused');
    const fn = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } };
    assert.equal(decide(CHAT, { ...base, tools: [fn] }).kind, 'forward');
  });
  // A tool's `type` was read exactly: `{"name": "web_search", "Type": "web_search_20250305"}` had no
  // type (an Anthropic custom tool) for the router, and a server tool for a case-insensitive
  // decoder; `{"type": "function", "Type": "web_search"}` was a function on Responses.
  it("property: a second key folding onto a tool's type is refused (chat, Responses, Messages)", () => {
    fc.assert(
      fc.property(
        caseOf('type').filter((k) => k !== 'type'),
        fc.boolean(),
        (key, withExact) => {
          const extra = withExact ? { type: 'function' } : {};
          refused(decide(CHAT, { model: 'm', messages: [], tools: [{ ...extra, [key]: 'web_search', function: { name: 'f' } }] }));
          refused(decide(RESPONSES, { model: 'm', input: 'x', tools: [{ ...extra, [key]: 'web_search', name: 'f' }] }));
          const tool = { ...(withExact ? { type: 'custom' } : {}), [key]: 'web_search_20250305', name: 'web_search' };
          refused(decide(MESSAGES, { model: 'c', max_tokens: 5, messages: [], tools: [tool] }));
        },
      ),
    );
  });
});

describe('hostile attack20: a hosted tool named by tool_choice', () => {
  // `tool_choice` was not read: `{"type": "web_search_preview"}` (or `mcp`, or a hosted type in
  // `allowed_tools`) asks the provider to run a tool the `tools` check never saw.
  it('Responses and chat: a tool_choice naming a provider-run tool is refused; function, custom and the strings pass', () => {
    const fn = { type: 'function', name: 'f', parameters: { type: 'object', properties: {} } };
    for (const tool_choice of [
      { type: 'web_search_preview' },
      { type: 'mcp', server_label: 'x' },
      { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'file_search' }] },
      { Type: 'code_interpreter' },
    ]) {
      refused(decide(RESPONSES, { model: 'm', input: 'x', tools: [fn], tool_choice }), 'inference_policy_provider_tool_refused');
      refused(decide(CHAT, { model: 'm', messages: [], tool_choice }), 'inference_policy_provider_tool_refused');
    }
    for (const tool_choice of [
      'auto',
      'required',
      'none',
      { type: 'function', name: 'f' },
      { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'f' }] },
    ])
      assert.equal(decide(RESPONSES, { model: 'm', input: 'x', tools: [fn], tool_choice }).kind, 'forward', JSON.stringify(tool_choice));
    assert.equal(decide(CHAT, { model: 'm', messages: [], tool_choice: { type: 'function', function: { name: 'f' } } }).kind, 'forward');
  });
});

describe('hostile attack20: retry advice that lies', () => {
  // The daily cap was checked before the monthly one, and a daily cap filled only by reservations
  // in flight is "held" (retry-after 1, x-should-retry true) even when the month is already spent:
  // the SDK retries into the monthly refusal.
  it('a daily budget held by requests in flight while the month is exhausted advises no retry', () => {
    const budget = new TokenBudgetTracker();
    const caps = { dailyTokens: 10_000, monthlyTokens: 1000 };
    const a = budget.reserve('sb', caps, 100);
    const b = budget.reserve('sb', caps, 9000);
    assert.ok(a.ok && b.ok);
    a.reservation.settle(1200); // the month is now spent; b still holds most of the day
    const v = budget.reserve('sb', caps, 10);
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.held, false, v.message);
    assert.equal(v.period, 'monthly');
    assert.equal(budgetRetryHeaders(v, Date.now())['x-should-retry'], 'false');
    b.reservation.settle(0);
  });

  // `provider: bedrock` is answered 501 on every request; the SDKs retry any 5xx twice unless told
  // not to, so each call becomes three refused attempts.
  it('bedrock (501 provider_unimplemented) says x-should-retry: false', () => {
    const r = refused(decide(CHAT, { model: 'm', messages: [] }, inferenceRules({ provider: 'bedrock' })), 'provider_unimplemented');
    assert.equal(r.refusal.status, 501);
    assert.equal(r.headers?.['x-should-retry'], 'false');
  });
});

describe('hostile attack20: a passed-over 5xx that may have run', { timeout: 30_000 }, () => {
  // ADR 0027 (as amended by 0034) charges a written 500/502/504 at least its reservation: a gateway's
  // timeout does not stop the provider billing it. But a 5xx also moves on to the next candidate,
  // and only the last answer was settled: a 504 from the primary (billed) followed by a 400 from the
  // fallback settled at 0, so the agent's budget never saw the primary's generation.
  it('a 504 from the primary then a 400 from the fallback is charged at least the reservation', async (t) => {
    const up = await startOpenAIStub();
    const pref = {
      primary: { provider: 'azure-openai', deployment: 'slow' },
      fallback: [{ provider: 'azure-openai', deployment: 'strict' }],
    };
    // The first request reserves its prompt bytes + 500 > the day's 500, so once charged the next is refused.
    const r = await startDirRouter(
      { inference: budgetPolicy({ perRequestTokens: 500, dailyTokens: 500 }, { modelPreference: pref }) },
      { upstream: up.url },
    );
    t.after(async () => {
      await r.stop();
      await up.close();
    });
    up.setDeploymentBehaviour('slow', { status: 504 });
    up.setDeploymentBehaviour('strict', { status: 400 });
    const send = (): Promise<Response> =>
      fetch(`${r.router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'write at length' }] }),
      });
    const first = await send();
    await first.text();
    assert.equal(first.status, 400);
    assert.deepEqual(
      up.requests.map((q) => q.target),
      ['slow', 'strict'],
    );
    const second = await send();
    const text = await second.text();
    assert.equal(second.status, 429, `the first request was settled below its reservation: ${text}`);
    assert.match(text, /budget_exceeded/);
  });

  // Decided (ADR 0027 as amended): the 504 still moves on to the fallback (issue 20: fallback on a 5xx
  // stays deterministic), so the completion may be generated and billed twice; the settlement
  // charges the passed-over attempt its reservation on top of what the fallback reports.
  it('a 504 passed over for the fallback: the fallback runs it, and the charge covers both attempts', async (t) => {
    assert.equal(settleTokens({ ...newMeter(), written: true, status: 200, usage: 10, complete: true, ranBefore: 1 }, 90, 500), 510);
    assert.equal(settleTokens({ ...newMeter(), written: true, status: 200, usage: 10, complete: true, ranBefore: 2 }, 90, 500), 1010);
    const up = await startOpenAIStub();
    const pref = {
      primary: { provider: 'azure-openai', deployment: 'slow' },
      fallback: [{ provider: 'azure-openai', deployment: 'good' }],
    };
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 500 }, { modelPreference: pref }) }, { upstream: up.url });
    t.after(async () => {
      await r.stop();
      await up.close();
    });
    up.setDeploymentBehaviour('slow', { status: 504 });
    const res = await fetch(`${r.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    });
    await res.text();
    assert.equal(res.status, 200);
    assert.deepEqual(
      up.requests.map((q) => q.target),
      ['slow', 'good'],
    );
  });
});
