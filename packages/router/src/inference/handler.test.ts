/**
 * The chat-completions route over real HTTP: a client (fetch / node:http) → an http.Server with the
 * handler mounted → the OpenAI stub (or a hand-made upstream where the stub cannot misbehave enough).
 */
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { EMPTY_SNAPSHOT, type InferenceRules, type PolicySnapshot } from '../snapshot.js';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.js';
import { TokenBudgetTracker } from './budget.js';
import { MAX_BUFFERED_RESPONSE_BYTES, createInferenceHandler, type InferenceDecision } from './handler.js';
import { inferenceRules, safetyRules } from '../testing/rules.js';
import { startStaleOnReuse } from '../testing/upstreams.js';
import { postJson, type JsonReply } from '../testing/http.js';

// ---------------------------------------------------------------------------------------------
// Rig

type Budget = NonNullable<InferenceRules['tokenBudget']>;
type Pref = NonNullable<InferenceRules['modelPreference']>;

const rules = inferenceRules;
const tokens = (over: Partial<Budget>): Budget => ({ perRequestTokens: null, dailyTokens: null, monthlyTokens: null, ...over });
const safety = safetyRules;
const prefer = (primary: string, ...fallback: string[]): Pref => ({
  primary: { provider: 'azure-openai', deployment: primary },
  fallback: fallback.map((deployment) => ({ provider: 'azure-openai', deployment })),
});

interface Rig {
  url: string;
  stub: OpenAIStub;
  budget: TokenBudgetTracker;
  decisions: InferenceDecision[];
  clock: FakeClock;
  snapshotCalls: () => number;
  setPolicy(r: InferenceRules | undefined): void;
}

interface RigOptions {
  inference?: InferenceRules;
  upstream?: URL;
  fetchTimeoutMs?: number;
  defaultDailyTokens?: number;
  now?: string;
}

async function listen(server: http.Server | net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function rig(t: TestContext, opts: RigOptions = {}): Promise<Rig> {
  const stub = await startOpenAIStub();
  const clock = new FakeClock(0, Date.parse(opts.now ?? '2025-03-14T12:00:00Z'));
  const budget = new TokenBudgetTracker({ clock });
  const decisions: InferenceDecision[] = [];
  let snap: PolicySnapshot = { ...EMPTY_SNAPSHOT, inference: opts.inference };
  let calls = 0;
  const handler = createInferenceHandler({
    snapshot: () => {
      calls++;
      return snap;
    },
    upstream: opts.upstream ?? stub.url,
    sandbox: 'sb-default',
    budget,
    ...(opts.fetchTimeoutMs !== undefined ? { fetchTimeoutMs: opts.fetchTimeoutMs } : {}),
    ...(opts.defaultDailyTokens !== undefined ? { defaultDailyTokens: opts.defaultDailyTokens } : {}),
    onDecision: (d) => decisions.push(d),
  });
  const server = http.createServer((req, res) => {
    handler(req, res).then(
      (handled) => {
        if (!handled) {
          res.writeHead(404, { 'content-type': 'text/plain' });
          res.end('not an inference path');
        }
      },
      () => res.destroy(),
    );
  });
  const port = await listen(server);
  t.after(async () => {
    handler.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await stub.close();
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stub,
    budget,
    decisions,
    clock,
    snapshotCalls: () => calls,
    setPolicy: (r) => {
      snap = { ...EMPTY_SNAPSHOT, inference: r };
    },
  };
}

/** POST to the handler's rig (or a URL) at `path`. */
function chat(r: Rig | string, body: unknown, headers: Record<string, string> = {}, path = '/v1/chat/completions'): Promise<JsonReply> {
  return postJson((typeof r === 'string' ? r : r.url) + path, body, headers);
}

const MSG = { model: 'client-model', messages: [{ role: 'user', content: 'hello' }] };
const STREAM = { ...MSG, stream: true };

function assertDecisionHeaders(h: Headers, reason: string, byKind = 'InferencePolicy'): void {
  assert.equal(h.get('x-kars-decision'), 'blocked');
  assert.equal(h.get('x-kars-decision-by-kind'), byKind);
  assert.equal(h.get('x-kars-decision-reason'), reason);
}

const errorFrames = (message: string, code: string): string =>
  `data: {"error":{"message":"${message}","type":"content_policy_violation","code":"${code}"}}\n\ndata: [DONE]\n\n`;
const HATE_HIGH_OVER_LOW = 'Response blocked: hate severity High exceeds InferencePolicy ceiling Low';
const SHIELDS =
  'Response blocked: InferencePolicy requires Prompt Shields but the upstream response carried no prompt_filter_results annotations';

/** An SSE text in Azure's shape, for byte-exact pass-through checks. */
function sse(hate: string | undefined, content = ['Hi', ' there'], total = 11): string {
  const f = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
  let s =
    hate === undefined
      ? ''
      : f({
          choices: [],
          created: 0,
          id: '',
          model: '',
          object: '',
          prompt_filter_results: [{ prompt_index: 0, content_filter_results: { hate: { filtered: false, severity: hate } } }],
        });
  s += f({
    id: 'c1',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
  });
  for (const c of content)
    s += f({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: c }, finish_reason: null }] });
  s += f({
    id: 'c1',
    object: 'chat.completion.chunk',
    choices: [],
    usage: { prompt_tokens: 5, completion_tokens: total - 5, total_tokens: total },
  });
  return `${s}data: [DONE]\n\n`;
}

// ---------------------------------------------------------------------------------------------

describe('inference route: paths, request checks and pass-through', { timeout: 30_000 }, () => {
  it('refuses every path outside its route table (404 listing the routes), and 405 for another method on a route', async (t) => {
    const r = await rig(t);
    for (const path of [
      '/v1/completions',
      '/openai/deployments//chat/completions',
      '/V1/chat/completions',
      '/v1/chat/completions/',
      '//v1/chat/completions',
      '/v1/chat%2Fcompletions',
      '/v1/%63hat/completions',
      '/v1/images/generations',
    ]) {
      const res = await chat(r, MSG, {}, path);
      assert.equal(res.status, 404, path);
      assert.equal(res.json.error.code, 'not_found', path);
      assert.match(res.json.error.message, /POST \/v1\/chat\/completions, \/v1\/responses/, path);
    }
    const bad = await chat(r, MSG, {}, '/openai/deployments/a%2F..%2Fb/chat/completions');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'invalid_deployment');
    const get = await fetch(`${r.url}/v1/chat/completions`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal(((await get.json()) as any).error.code, 'method_not_allowed');
    assert.equal(r.stub.requests.length, 0);
  });

  it('passes a request through, re-serialised, when no InferencePolicy is bound', async (t) => {
    const r = await rig(t);
    const sent = '{ "model": "client-model",  "messages": [{"role":"user","content":"hello"}], "max_tokens": 999999 }';
    const res = await chat(r, sent, { authorization: 'Bearer upstream-key', 'x-stub-filter': '{"hate":"High"}' });
    assert.equal(res.status, 200);
    assert.equal(res.json.choices[0].message.content, 'Hello from the kars OpenAI stub.');
    assert.equal(res.json.prompt_filter_results[0].content_filter_results.hate.severity, 'high');
    assert.equal(res.headers.get('x-kars-decision'), null);
    assert.equal(r.stub.requests.length, 1);
    const seen = r.stub.requests[0]!;
    assert.equal(seen.rawBody, JSON.stringify(JSON.parse(sent)), 'the body goes upstream as the router parsed it (issue 9 item 4)');
    assert.equal(seen.path, '/v1/chat/completions');
    assert.equal(seen.headers.authorization, 'Bearer upstream-key');
    assert.deepEqual(r.decisions, [{ sandbox: 'sb-default', decision: 'allow' }]);
  });

  it('forwards the Azure path form with its query, and records usage of the answer', async (t) => {
    const r = await rig(t);
    const res = await chat(
      r,
      { messages: [] },
      { 'x-stub-usage': '42' },
      '/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21',
    );
    assert.equal(res.status, 200);
    assert.equal(r.stub.requests[0]!.path, '/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21');
    assert.equal(r.stub.requests[0]!.deployment, 'gpt-4o');
    assert.equal(r.budget.usage('sb-default').dailyUsed, 42);
  });

  it('speaks for its own sandbox only: x-kars-sandbox may repeat it, any other value gets 403 sandbox_mismatch (issue 9 item 2)', async (t) => {
    const r = await rig(t);
    for (const h of [{}, { 'x-kars-sandbox': 'sb-default' }]) assert.equal((await chat(r, MSG, { ...h, 'x-stub-usage': '1' })).status, 200);
    for (const v of ['team-a1', 'SB-DEFAULT', 'sb-default.x', 'unknown', 'a'.repeat(64)]) {
      const res = await chat(r, MSG, { 'x-kars-sandbox': v });
      assert.equal(res.status, 403, JSON.stringify(v));
      assert.equal(res.json.error.code, 'sandbox_mismatch');
    }
    assert.equal(r.stub.requests.length, 2, 'refused requests never reached upstream');
    assert.ok(r.decisions.every((d) => d.sandbox === 'sb-default'));
    assert.equal(r.budget.usage('sb-default').dailyUsed, 2);
    assert.equal(r.stub.requests[1]!.headers['x-kars-sandbox'], undefined, 'the identity header is not forwarded upstream');
  });

  it('answers 400 invalid_request_error for malformed JSON and for a body that is not an object, without calling upstream', async (t) => {
    const r = await rig(t);
    const bad = await chat(r, '{"model": ');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.type, 'invalid_request_error');
    assert.equal(bad.json.error.code, 'invalid_json');
    assert.match(bad.json.error.message, /^Invalid JSON body: /);
    const arr = await chat(r, '[1,2]');
    assert.equal(arr.status, 400);
    assert.equal(arr.json.error.message, 'Invalid JSON body: the body must be a JSON object');
    assert.equal(r.stub.requests.length, 0);
    assert.deepEqual(
      r.decisions.map((d) => d.code),
      ['invalid_json', 'invalid_json'],
    );
  });

  it('answers 413 for a body over 10 MiB, declared or streamed', async (t) => {
    const r = await rig(t);
    const { port } = new URL(r.url);
    const declared = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json', 'content-length': 10 * 1024 * 1024 + 1 },
        },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.write('{"model":"x","pad":"');
    });
    assert.equal(declared.status, 413);
    assert.equal(JSON.parse(declared.body).error.code, 'request_too_large');

    const streamed = await new Promise<number>((resolve) => {
      const req = http.request(
        { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', () => undefined);
      const mib = Buffer.alloc(1024 * 1024, 0x61);
      for (let i = 0; i < 11; i++) req.write(mib);
      req.end();
    });
    assert.equal(streamed, 413);
    assert.equal(r.stub.requests.length, 0);
  });

  it('takes the policy snapshot exactly once per request', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    await chat(r, MSG);
    assert.equal(r.snapshotCalls(), 1);
    await chat(r, STREAM);
    assert.equal(r.snapshotCalls(), 2);
  });

  it('answers 502 proxy_error when the upstream is unreachable', async (t) => {
    const closed = net.createServer();
    const port = await listen(closed);
    await new Promise((res) => closed.close(res));
    const r = await rig(t, { upstream: new URL(`http://127.0.0.1:${port}`) });
    const res = await chat(r, MSG);
    assert.equal(res.status, 502);
    assert.equal(res.text, '{"error":{"message":"Failed to reach inference backend","type":"proxy_error"}}');
    assert.deepEqual(r.decisions, [{ sandbox: 'sb-default', decision: 'allow', code: 'proxy_error' }]);
  });

  it('answers 502 when the upstream sends no headers within fetchTimeoutMs', async (t) => {
    const r = await rig(t, { fetchTimeoutMs: 100 });
    const t0 = Date.now();
    const res = await chat(r, MSG, { 'x-stub-delay-ms': '2000' });
    assert.equal(res.status, 502);
    assert.ok(Date.now() - t0 < 1500, 'it did not wait for the upstream');
    assert.equal(res.json.error.type, 'proxy_error');
  });
});

describe('inference route: token budgets', { timeout: 30_000 }, () => {
  it('refuses the request after the one that reached the daily cap, with 429 budget_exceeded and the decision headers', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ dailyTokens: 100 }) }) });
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '60' })).status, 200);
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '60' })).status, 200, '60 < 100: still under the cap before this request');
    const third = await chat(r, MSG, { 'x-stub-usage': '60' });
    assert.equal(third.status, 429);
    const message = 'Daily token budget exhausted for sandbox "sb-default": 120 of 100 tokens used today; it resets at 00:00 UTC';
    assert.equal(third.text, JSON.stringify({ error: { message, type: 'token_budget_exceeded', code: 'budget_exceeded' } }));
    assertDecisionHeaders(third.headers, message);
    assert.equal(r.stub.requests.length, 2, 'the refused request never reached upstream');
    assert.deepEqual(r.decisions.at(-1), { sandbox: 'sb-default', decision: 'deny', code: 'budget_exceeded' });
  });

  it('refuses the second request when the first used the whole daily cap', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ dailyTokens: 100 }) }) });
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '100' })).status, 200);
    assert.equal((await chat(r, MSG)).status, 429);
  });

  it('gives the budget back at the next UTC day, but keeps counting the month', async (t) => {
    const r = await rig(t, {
      inference: rules({ tokenBudget: tokens({ dailyTokens: 100, monthlyTokens: 250 }) }),
      now: '2025-03-14T23:59:59.999Z',
    });
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '100' })).status, 200);
    assert.equal((await chat(r, MSG)).status, 429);
    r.clock.advance(Date.parse('2025-03-15T00:00:00.000Z') - r.clock.wallNow());
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '100' })).status, 200);
    r.clock.advance(Date.parse('2025-03-16T09:00:00Z') - r.clock.wallNow());
    assert.equal((await chat(r, MSG, { 'x-stub-usage': '100' })).status, 200);
    r.clock.advance(Date.parse('2025-03-17T09:00:00Z') - r.clock.wallNow());
    const monthly = await chat(r, MSG);
    assert.equal(monthly.status, 429);
    assert.match(monthly.json.error.message, /^Monthly token budget exhausted for sandbox "sb-default": 300 of 250/);
    r.clock.advance(Date.parse('2025-04-01T00:00:00Z') - r.clock.wallNow());
    assert.equal((await chat(r, MSG)).status, 200);
  });

  it("keeps one budget for the router's sandbox: another x-kars-sandbox does not get a fresh one", async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ dailyTokens: 10 }) }) });
    await chat(r, MSG, { 'x-stub-usage': '10' });
    assert.equal((await chat(r, MSG)).status, 429);
    assert.equal((await chat(r, MSG, { 'x-kars-sandbox': 'b' })).status, 403);
    assert.equal((await chat(r, MSG, { 'x-kars-sandbox': 'sb-default' })).status, 429);
  });

  it('counts usage from the final chunk of a stream', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ dailyTokens: 50 }) }) });
    assert.equal((await chat(r, STREAM, { 'x-stub-usage': '77' })).status, 200);
    assert.equal(r.budget.usage('sb-default').dailyUsed, 77);
    assert.equal((await chat(r, STREAM)).status, 429);
    assert.equal(
      r.stub.requests[0]!.body &&
        (r.stub.requests[0]!.body as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage,
      true,
      'the router asks for usage',
    );
  });

  it('charges a stream without a usage chunk the documented estimate (prompt bytes + answer bytes / 4, ADR 0027)', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ dailyTokens: 100_000 }) }) });
    const res = await chat(r, STREAM, { 'x-stub-stream-usage': '0' });
    assert.equal(res.status, 200);
    const sent = Buffer.byteLength(r.stub.requests[0]!.rawBody);
    assert.equal(r.budget.usage('sb-default').dailyUsed, sent + Math.ceil(Buffer.byteLength(res.text) / 4));
    assert.equal(r.budget.usage('sb-default').reserved, 0, 'the reservation was settled');
  });

  it('applies defaultDailyTokens when the policy sets no daily cap, and when there is no policy', async (t) => {
    const r = await rig(t, { defaultDailyTokens: 10 });
    await chat(r, MSG, { 'x-stub-usage': '10' });
    assert.equal((await chat(r, MSG)).status, 429);
    r.setPolicy(rules({ tokenBudget: tokens({ dailyTokens: 1000 }) }));
    assert.equal((await chat(r, MSG)).status, 200, 'the policy cap wins over the default');
  });

  it('refuses max_tokens above perRequestTokens with 429 per_request_tokens_exceeded, and lets equal through', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ perRequestTokens: 100 }) }) });
    const over = await chat(r, { ...MSG, max_tokens: 101 });
    assert.equal(over.status, 429);
    const message = 'Requested max_tokens=101 exceeds InferencePolicy tokenBudget.perRequestTokens=100';
    assert.equal(over.text, JSON.stringify({ error: { message, type: 'token_budget_exceeded', code: 'per_request_tokens_exceeded' } }));
    assertDecisionHeaders(over.headers, message);
    assert.equal(r.stub.requests.length, 0);
    assert.equal((await chat(r, { ...MSG, max_tokens: 100 })).status, 200);
    assert.equal((await chat(r, MSG)).status, 200, 'no requested maximum: the cap is filled in');
    assert.equal((r.stub.requests.at(-1)!.body as { max_tokens?: number }).max_tokens, 100);
  });

  it('judges max_completion_tokens and max_tokens by the larger of the two', async (t) => {
    const r = await rig(t, { inference: rules({ tokenBudget: tokens({ perRequestTokens: 100 }) }) });
    assert.equal((await chat(r, { ...MSG, max_completion_tokens: 50, max_tokens: 60 })).status, 200);
    for (const body of [
      { ...MSG, max_completion_tokens: 50, max_tokens: 500 },
      { ...MSG, max_completion_tokens: 500, max_tokens: 50 },
    ]) {
      const over = await chat(r, body);
      assert.equal(over.status, 429);
      assert.equal(over.json.error.message, 'Requested max_tokens=500 exceeds InferencePolicy tokenBudget.perRequestTokens=100');
    }
  });
});

describe('inference route: model preference and providers', { timeout: 30_000 }, () => {
  it('rewrites the body model to the primary deployment on /v1/chat/completions', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('primary-dep') }) });
    assert.equal((await chat(r, MSG)).status, 200);
    const seen = r.stub.requests[0]!;
    assert.equal(seen.model, 'primary-dep');
    assert.deepEqual((seen.body as any).messages, MSG.messages, 'the rest of the body is kept');
  });

  it('rewrites the Azure path deployment to the primary, keeping the query and the body', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('primary dep') }) });
    const sent = '{"messages":[]}';
    assert.equal((await chat(r, sent, {}, '/openai/deployments/mine/chat/completions?api-version=2024-10-21')).status, 200);
    const seen = r.stub.requests[0]!;
    assert.equal(seen.deployment, 'primary dep');
    assert.equal(seen.path, '/openai/deployments/primary%20dep/chat/completions?api-version=2024-10-21');
    assert.equal(seen.rawBody, sent);
  });

  it('falls back in order on 503', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('broken', 'also-broken', 'good', 'never') }) });
    r.stub.setDeploymentBehaviour('broken', { status: 503 });
    r.stub.setDeploymentBehaviour('also-broken', { status: 500 });
    const res = await chat(r, MSG);
    assert.equal(res.status, 200);
    assert.equal(res.json.model, 'good');
    assert.deepEqual(
      r.stub.requests.map((q) => q.target),
      ['broken', 'also-broken', 'good'],
    );
  });

  it('falls back on 429', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('limited', 'good') }) });
    r.stub.setDeploymentBehaviour('limited', { status: 429 });
    assert.equal((await chat(r, MSG, {}, '/openai/deployments/x/chat/completions')).status, 200);
    assert.deepEqual(
      r.stub.requests.map((q) => q.deployment),
      ['limited', 'good'],
    );
  });

  it('falls back for a streamed request before any byte reaches the client', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('broken', 'good') }) });
    r.stub.setDeploymentBehaviour('broken', { status: 503 });
    const res = await chat(r, STREAM);
    assert.equal(res.status, 200);
    assert.ok(res.text.endsWith('data: [DONE]\n\n'));
    assert.deepEqual(
      r.stub.requests.map((q) => q.target),
      ['broken', 'good'],
    );
  });

  it('returns the last deployment answer as it is when every candidate fails', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('broken', 'limited') }) });
    r.stub.setDeploymentBehaviour('broken', { status: 503 });
    r.stub.setDeploymentBehaviour('limited', { status: 429 });
    const res = await chat(r, MSG);
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.json.error.type, 'rate_limit_exceeded');
  });

  it('does not fall back on a 4xx other than 429', async (t) => {
    const r = await rig(t, { inference: rules({ modelPreference: prefer('bad', 'good') }) });
    r.stub.setDeploymentBehaviour('bad', { status: 404 });
    assert.equal((await chat(r, MSG)).status, 404);
    assert.equal(r.stub.requests.length, 1);
  });

  it('answers 501 for bedrock, whether set as provider or as a recognised primary provider', async (t) => {
    const r = await rig(t, { inference: rules({ provider: 'bedrock' }) });
    const res = await chat(r, MSG);
    assert.equal(res.status, 501);
    assert.equal(res.json.error.code, 'provider_unimplemented');
    assert.equal(res.headers.get('x-kars-decision'), 'blocked');
    r.setPolicy(
      rules({ provider: 'azure-openai', modelPreference: { primary: { provider: 'bedrock', deployment: 'claude' }, fallback: [] } }),
    );
    assert.equal((await chat(r, MSG)).status, 501);
    r.setPolicy(rules({ provider: 'bedrock', modelPreference: { primary: { provider: 'Foundry', deployment: 'd' }, fallback: [] } }));
    assert.equal((await chat(r, MSG)).status, 501, 'an unrecognised primary provider does not override');
    r.setPolicy(rules({ provider: 'bedrock', modelPreference: { primary: { provider: 'azure-openai', deployment: 'd' }, fallback: [] } }));
    assert.equal((await chat(r, MSG)).status, 200, 'a recognised primary provider wins over spec.provider');
    assert.equal(r.stub.requests.length, 1);
  });
});

describe('inference route: content-safety floor on whole responses', { timeout: 30_000 }, () => {
  it('blocks a severity strictly above the ceiling with 403 and the decision headers', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Medium' }) }) });
    const res = await chat(r, MSG, { 'x-stub-filter': '{"hate":"High"}', 'x-stub-usage': '9' });
    assert.equal(res.status, 403);
    const message = 'Response blocked: hate severity High exceeds InferencePolicy ceiling Medium';
    assert.equal(
      res.text,
      JSON.stringify({ error: { message, type: 'content_policy_violation', code: 'inference_policy_content_safety_exceeded' } }),
    );
    assertDecisionHeaders(res.headers, message);
    assert.equal(r.budget.usage('sb-default').dailyUsed, 9, 'the tokens were spent upstream, so they count');
    assert.deepEqual(r.decisions, [{ sandbox: 'sb-default', decision: 'deny', code: 'inference_policy_content_safety_exceeded' }]);
  });

  it('lets a severity equal to the ceiling through', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Medium' }) }) });
    const res = await chat(r, MSG, { 'x-stub-filter': '{"hate":"medium"}' });
    assert.equal(res.status, 200);
    assert.equal(res.json.choices[0].message.content, 'Hello from the kars OpenAI stub.');
  });

  it('reads severities case-insensitively and ignores unknown ones', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ violence: 'Low' }) }) });
    assert.equal((await chat(r, MSG, { 'x-stub-filter': '{"violence":"MEDIUM"}' })).status, 403);
    assert.equal((await chat(r, MSG, { 'x-stub-filter': '{"violence":"apocalyptic"}' })).status, 200);
  });

  it('reports the first category in hate, self_harm, sexual, violence order', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ selfHarm: 'Safe', violence: 'Safe' }) }) });
    const res = await chat(r, MSG, { 'x-stub-filter': '{"violence":"High","self_harm":"Low"}' });
    assert.equal(res.json.error.message, 'Response blocked: self_harm severity Low exceeds InferencePolicy ceiling Safe');
  });

  it('does not police a category without a ceiling, nor anything when the floor is inactive', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    assert.equal((await chat(r, MSG, { 'x-stub-filter': '{"sexual":"High"}' })).status, 200);
    r.setPolicy(rules({ contentSafety: safety({ requirePromptShields: false }) }));
    assert.equal((await chat(r, MSG, { 'x-stub-filter': '{"hate":"High"}' })).status, 200);
    assert.equal((await chat(r, MSG, { 'x-stub-no-filter': '1' })).status, 200);
  });

  it('fails closed when Prompt Shields are required and the response carries no annotations', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ requirePromptShields: true }) }) });
    const res = await chat(r, MSG, { 'x-stub-no-filter': '1' });
    assert.equal(res.status, 403);
    assert.equal(
      res.text,
      JSON.stringify({ error: { message: SHIELDS, type: 'content_policy_violation', code: 'inference_policy_prompt_shields_required' } }),
    );
    assertDecisionHeaders(res.headers, SHIELDS);
    assert.equal((await chat(r, MSG)).status, 200, 'annotated responses pass');
  });

  it('judges an upstream 400 content-filter error on its severities', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ sexual: 'Low' }) }) });
    const res = await chat(r, MSG, { 'x-stub-status': '400', 'x-stub-filter': '{"sexual":"High"}' });
    assert.equal(res.status, 403);
    assert.equal(res.json.error.message, 'Response blocked: sexual severity High exceeds InferencePolicy ceiling Low');
  });

  it('passes an upstream content-filter 400 through unchanged with the decision headers added', async (t) => {
    const r = await rig(t);
    const res = await chat(r, MSG, { 'x-stub-status': '400', 'x-stub-filter': '{"hate":"High"}' });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'content_filter');
    assert.equal(res.json.error.innererror.content_filter_result.hate.severity, 'high');
    assertDecisionHeaders(res.headers, res.json.error.message, 'UpstreamContentFilter');
  });

  it('does not turn a plain upstream 400 into a Prompt Shields refusal', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ requirePromptShields: true }) }) });
    const res = await chat(r, MSG, { 'x-stub-status': '400' });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.message, 'kars OpenAI stub: injected status 400');
    assert.equal(res.headers.get('x-kars-decision'), null);
  });

  it('passes malformed upstream output through when there is nothing to judge, and refuses it under Prompt Shields', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    r.stub.setBehaviour({ rawBody: '{"choices": [ oops' });
    const res = await chat(r, MSG);
    assert.equal(res.status, 200);
    assert.equal(res.text, '{"choices": [ oops');
    r.setPolicy(rules({ contentSafety: safety({ requirePromptShields: true }) }));
    assert.equal((await chat(r, MSG)).status, 403);
  });
});

describe('inference route: streams', { timeout: 30_000 }, () => {
  it('streams through byte for byte without a floor', async (t) => {
    const r = await rig(t);
    const text = sse('high');
    r.stub.setBehaviour({ rawBody: text, contentType: 'text/event-stream', chunkBytes: 7 });
    const res = await chat(r, STREAM);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    assert.equal(res.text, text);
    assert.equal(r.budget.usage('sb-default').dailyUsed, 11);
  });

  it('streams a clean response through byte for byte with a floor, however the upstream splits it', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low', requirePromptShields: true }) }) });
    const text = sse('low');
    for (const size of ['3', '50', '100000']) {
      r.stub.setBehaviour({ rawBody: text, contentType: 'text/event-stream', chunkBytes: Number(size) });
      const res = await chat(r, STREAM);
      assert.equal(res.status, 200);
      assert.equal(res.text, text);
      assert.equal(res.headers.get('x-kars-decision'), null);
    }
  });

  it('streams the stub answer through with a floor: prompt filter event, content, usage, [DONE]', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'High' }) }) });
    const res = await chat(r, STREAM, { 'x-stub-chunk-bytes': '9' });
    const events = res.text.split('\n\n').filter((e) => e !== '');
    assert.equal(events.at(-1), 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    assert.ok(chunks[0].prompt_filter_results);
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello from the kars OpenAI stub.');
    assert.deepEqual(r.decisions, [{ sandbox: 'sb-default', decision: 'allow' }]);
  });

  it('replaces a violating first annotated chunk with an error frame and [DONE], and sends nothing after', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const res = await chat(r, STREAM, { 'x-stub-filter': '{"hate":"High"}' });
    assert.equal(res.status, 200, 'the status stays the upstream one');
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    assert.equal(res.text, errorFrames(HATE_HIGH_OVER_LOW, 'inference_policy_content_safety_exceeded'));
    assertDecisionHeaders(res.headers, HATE_HIGH_OVER_LOW);
    assert.deepEqual(r.decisions, [{ sandbox: 'sb-default', decision: 'deny', code: 'inference_policy_content_safety_exceeded' }]);
    assert.ok(r.budget.usage('sb-default').dailyUsed > 0, 'the upstream generated tokens before the cut: the estimate is charged');
    assert.equal(r.budget.usage('sb-default').reserved, 0);
  });

  it('blocks the same way when the upstream splits the stream into tiny pieces', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const res = await chat(r, STREAM, { 'x-stub-filter': '{"hate":"High"}', 'x-stub-chunk-bytes': '5' });
    assert.equal(res.text, errorFrames(HATE_HIGH_OVER_LOW, 'inference_policy_content_safety_exceeded'));
  });

  it('lets events before the first annotated chunk through, then the error frame, then nothing', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const role = 'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n';
    const annotated =
      'data: {"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"high"}}}]}\n\n';
    const rest = 'data: {"choices":[{"index":0,"delta":{"content":"forbidden"}}]}\n\ndata: [DONE]\n\n';
    r.stub.setBehaviour({ rawBody: role + annotated + rest, contentType: 'text/event-stream', chunkBytes: 16 });
    const res = await chat(r, STREAM);
    assert.equal(res.text, role + errorFrames(HATE_HIGH_OVER_LOW, 'inference_policy_content_safety_exceeded'));
    assert.equal(res.headers.get('x-kars-decision'), null, 'headers had already gone when the block came');
  });

  it('fails a stream closed when Prompt Shields are required and its first data chunk has no annotations', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ requirePromptShields: true }) }) });
    const res = await chat(r, STREAM, { 'x-stub-no-filter': '1' });
    assert.equal(res.status, 200);
    assert.equal(res.text, errorFrames(SHIELDS, 'inference_policy_prompt_shields_required'));
    assert.ok(!res.text.includes('Hello'), 'no model output leaked');
  });

  it('survives garbage on a stream: passes it when there is nothing to judge, blocks it under Prompt Shields', async (t) => {
    const r = await rig(t, { inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const junk = 'data: {{{\n\n\u0000\u0001 not sse at all';
    r.stub.setBehaviour({ rawBody: junk, contentType: 'text/event-stream', chunkBytes: 4 });
    assert.equal((await chat(r, STREAM)).text, junk);
    r.setPolicy(rules({ contentSafety: safety({ requirePromptShields: true }) }));
    assert.equal((await chat(r, STREAM)).text, errorFrames(SHIELDS, 'inference_policy_prompt_shields_required'));
  });

  for (const bound of ['bytes', 'time'] as const) {
    it(`keeps reading a stream after the client went away, and cuts it at the ${bound === 'bytes' ? 'body limit' : 'upstream timeout'} (ADR 0027)`, async (t) => {
      let upstreamClosed!: () => void;
      const closedUpstream = new Promise<void>((resolve) => (upstreamClosed = resolve));
      let written = 0;
      const endless = http.createServer((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = `data: {"choices":[{"index":0,"delta":{"content":"${'x'.repeat(bound === 'bytes' ? 60_000 : 10)}"}}]}\n\n`;
        let open = true;
        const pump = (): void => {
          if (!open) return;
          written += event.length;
          if (res.write(event)) setImmediate(pump);
          else res.once('drain', pump);
        };
        pump();
        res.on('close', () => {
          open = false;
          upstreamClosed();
        });
      });
      const port = await listen(endless);
      t.after(() => {
        endless.closeAllConnections();
        endless.close();
      });
      const r = await rig(t, { upstream: new URL(`http://127.0.0.1:${port}`), ...(bound === 'time' ? { fetchTimeoutMs: 200 } : {}) });
      const ac = new AbortController();
      const res = await fetch(`${r.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ ...STREAM, max_tokens: 10 }),
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      ac.abort();
      await reader.read().catch(() => undefined);
      await closedUpstream;
      await until(() => r.budget.usage('sb-default').reserved === 0, 'the request settled');
      if (bound === 'bytes') assert.ok(written > MAX_BUFFERED_RESPONSE_BYTES, `the router read on after the client left: ${written} bytes`);
      assert.ok(r.budget.usage('sb-default').dailyUsed >= 10, 'a stream cut short is charged at least its reservation');
    });
  }
});

describe('inference route: broken upstreams', { timeout: 30_000 }, () => {
  /** An upstream that answers every request with `reply` and then drops the connection. */
  async function brokenUpstream(t: TestContext, reply: string): Promise<URL> {
    const server = net.createServer((sock) => {
      sock.once('data', () => {
        sock.write(reply);
        sock.destroy();
      });
      sock.on('error', () => undefined);
    });
    const port = await listen(server);
    t.after(() => server.close());
    return new URL(`http://127.0.0.1:${port}`);
  }

  it('does not fall back when a deployment drops the connection after reading the request (it may have run it): 502, sent once, charged (ADR 0027)', async (t) => {
    const seen: string[] = [];
    const flaky = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      if (req.url?.includes('/deployments/dead/')) {
        req.socket.destroy();
        return;
      }
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"choices":[],"usage":{"total_tokens":3}}');
    });
    const port = await listen(flaky);
    t.after(() => {
      flaky.closeAllConnections();
      flaky.close();
    });
    const r = await rig(t, {
      upstream: new URL(`http://127.0.0.1:${port}`),
      inference: rules({ modelPreference: prefer('dead', 'good') }),
    });
    const res = await chat(r, MSG, {}, '/openai/deployments/x/chat/completions');
    assert.equal(res.status, 502);
    assert.equal(res.json.error.type, 'proxy_error');
    assert.deepEqual(seen, ['/openai/deployments/dead/chat/completions'], 'not sent again to the fallback');
    assert.ok(r.budget.usage('sb-default').dailyUsed > 0, 'charged its reservation');
  });

  it('never sends a completion again when a pooled keep-alive connection drops it: 502 (ADR 0027)', async (t) => {
    // Each connection answers its first request, then drops the connection on the second: the race
    // between an upstream's idle timeout and the router reusing the socket.
    const stale = await startStaleOnReuse();
    t.after(() => stale.close());
    const r = await rig(t, { upstream: new URL(stale.origin) });
    // Two at once: two pooled connections, both now stale.
    assert.deepEqual(
      (await Promise.all([chat(r, MSG), chat(r, MSG)])).map((x) => x.status),
      [200, 200],
    );
    assert.equal((await chat(r, MSG)).status, 502, 'the dropped reuse was not sent again');
    assert.equal(stale.received(), 3, 'the upstream saw each request once');
  });

  it('answers 502 when the upstream speaks something that is not HTTP', async (t) => {
    const r = await rig(t, { upstream: await brokenUpstream(t, 'garbage\r\n\r\n') });
    assert.equal((await chat(r, MSG)).status, 502);
  });

  it('answers 502 when a body that must be judged is cut short, and stays up', async (t) => {
    const upstream = await brokenUpstream(t, 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"partial":');
    const r = await rig(t, { upstream, inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    assert.equal((await chat(r, MSG)).status, 502);
    assert.equal((await chat(r, MSG)).status, 502, 'the router still answers');
  });

  it('cuts the client off when a passed-through body is cut short, and stays up', async (t) => {
    const upstream = await brokenUpstream(t, 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"partial":');
    const r = await rig(t, { upstream });
    await assert.rejects(chat(r, MSG));
    await assert.rejects(chat(r, MSG));
  });
});

describe('inference route: the dispatch relay (ADR 0021)', { timeout: 30_000 }, () => {
  /** An http upstream on 127.0.0.1 answering with `handler`, closed after the test. */
  async function upstreamOf(t: TestContext, handler: http.RequestListener): Promise<URL> {
    const server = http.createServer(handler);
    const port = await listen(server);
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    return new URL(`http://127.0.0.1:${port}`);
  }

  it('pauses the upstream while the client does not read (backpressure), and cuts it when the client leaves', async (t) => {
    const total = 256 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    let upstreamClosed = false;
    const upstream = await upstreamOf(t, (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
      const pump = (): void => {
        while (sent < total) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => (upstreamClosed = true));
      pump();
    });
    const r = await rig(t, { upstream });
    const { port } = new URL(r.url);
    const client = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions' });
    client.end(JSON.stringify(MSG));
    const res = await new Promise<http.IncomingMessage>((resolve) => client.once('response', resolve));
    res.pause();
    assert.equal(res.statusCode, 200);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // Without backpressure the router keeps reading into memory (50 MiB in 1.5 s on a loaded 2-core
    // VM, far more on a quiet one); with it the upstream stalls once the socket buffers on the way
    // are full (~9 MiB measured; send buffers are capped at 4 MiB and a receive buffer that is not
    // read does not grow).
    assert.ok(sent < 32 * 1024 * 1024, `the upstream wrote ${sent} bytes while the client read nothing`);
    res.destroy();
    await until(() => upstreamClosed, 'the upstream request was cut after the client left');
  });

  it('judges the final answer, not a 103 Early Hints head before it', async (t) => {
    const blocked = JSON.stringify({
      choices: [{ index: 0, message: { content: 'x' } }],
      prompt_filter_results: [{ prompt_index: 0, content_filter_results: { hate: { filtered: false, severity: 'high' } } }],
      usage: { total_tokens: 3 },
    });
    const server = net.createServer((sock) => {
      sock.on('error', () => undefined);
      sock.once('data', () => {
        sock.write('HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n');
        sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(blocked)}\r\n\r\n${blocked}`);
      });
    });
    const port = await listen(server);
    t.after(() => server.close());
    const r = await rig(t, { upstream: new URL(`http://127.0.0.1:${port}`), inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const res = await chat(r, MSG);
    assert.equal(res.status, 403);
    assert.equal(res.json.error.code, 'inference_policy_content_safety_exceeded');
    assert.deepEqual(r.decisions.at(-1), { sandbox: 'sb-default', decision: 'deny', code: 'inference_policy_content_safety_exceeded' });
  });

  it('refuses with 502 a body to judge that grows past 16 MiB, and cuts the upstream', async (t) => {
    let upstreamClosed = false;
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const upstream = await upstreamOf(t, (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      let n = 0;
      const pump = (): void => {
        while (n++ < 64) if (!res.write(chunk)) return void res.once('drain', pump);
        res.end();
      };
      res.on('close', () => (upstreamClosed = true));
      pump();
    });
    const r = await rig(t, { upstream, inference: rules({ contentSafety: safety({ hate: 'Low' }) }) });
    const res = await chat(r, MSG);
    assert.equal(res.status, 502);
    assert.equal(res.json.error.type, 'proxy_error');
    await until(() => upstreamClosed, 'the upstream was cut at the limit');
  });

  it('a request whose client left before the answer holds its reservation until the upstream answers, then settles at its usage (ADR 0027)', async (t) => {
    let hanging: http.ServerResponse | undefined;
    const upstream = await upstreamOf(t, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (body.includes('hang')) {
          hanging = res;
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"choices":[],"usage":{"total_tokens":1}}');
      });
    });
    const r = await rig(t, { upstream, inference: rules({ tokenBudget: tokens({ dailyTokens: 100 }) }) });
    const ac = new AbortController();
    const gone = fetch(`${r.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...MSG, messages: [{ role: 'user', content: 'hang' }] }),
      signal: ac.signal,
    }).catch(() => undefined);
    await until(() => hanging !== undefined, 'the first request reached the upstream');
    assert.equal((await chat(r, MSG)).status, 429, 'the request in flight holds its reservation');
    ac.abort();
    await gone;
    assert.equal((await chat(r, MSG)).status, 429, 'still held: the upstream is still working on it');
    hanging!.writeHead(200, { 'content-type': 'application/json' });
    hanging!.end('{"choices":[],"usage":{"total_tokens":9}}');
    await until(() => r.budget.usage('sb-default').reserved === 0, 'the abandoned request settled');
    assert.equal(r.budget.usage('sb-default').dailyUsed, 9, 'charged the usage of the answer nobody read');
    assert.equal((await chat(r, MSG)).status, 200);
  });
});

/** Poll `cond` every 20 ms for up to 5 s. */
async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > 5000) throw new Error(`not within 5 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
