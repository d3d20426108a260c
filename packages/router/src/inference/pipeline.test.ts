/**
 * The inference decision pipeline, tested directly: request bytes + policy snapshot → decision,
 * with no sockets. The HTTP-level behaviour is pinned in handler.test.ts and hostile-*.test.ts;
 * these tests pin each decision where it is made, so a regression names the rule it broke.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { InferenceRules } from '../snapshot.js';
import {
  attemptFor,
  decideHead,
  decideRequest,
  judgeAnswer,
  relayMode,
  newMeter,
  settleTokens,
  type Meter,
  tryNext,
  upstreamFilterReason,
  type Candidate,
  type Forward,
  type PipelineContext,
  type Reject,
} from './pipeline.js';
import { CHAT } from './apis.js';
import type { ApiRoute } from './routes.js';
import { inferenceRules, safetyRules } from '../testing/rules.js';
import { estimateUsage } from './limits.js';

const CTX: PipelineContext = { defaultDailyTokens: null, guardrailConfigured: false };
const OPENAI: ApiRoute = { kind: 'api', api: CHAT, prefix: '/v1', deployment: undefined, query: '' };
const AS_IS: Candidate = { provider: 'azure-openai', deployment: undefined };
const at = (deployment: string): Candidate => ({ provider: 'azure-openai', deployment });
/** The reservation of a forward of a charged API. */
function reserveOf(f: Forward): NonNullable<Forward['reserve']> {
  assert.ok(f.reserve !== undefined, 'a charged API reserves');
  return f.reserve;
}

const rules = inferenceRules;
const budget = (perRequestTokens: number | null, dailyTokens: number | null = null): InferenceRules['tokenBudget'] => ({
  perRequestTokens,
  dailyTokens,
  monthlyTokens: null,
});
const floor = safetyRules;

function decide(body: string | object, r?: InferenceRules, ctx: PipelineContext = CTX): Reject | Forward {
  return decideRequest(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), OPENAI, r, ctx);
}
function refused(d: Reject | Forward): { status: number; code: string | undefined } {
  assert.equal(d.kind, 'reject', `expected a refusal, got ${JSON.stringify(d)}`);
  const r = (d as Reject).refusal;
  return { status: r.status, code: r.body.error.code };
}
function forwarded(d: Reject | Forward): Forward {
  assert.equal(d.kind, 'forward', `expected forward, got ${JSON.stringify(d)}`);
  return d as Forward;
}

const MSG = { model: 'm', messages: [{ role: 'user', content: 'hello' }] };

describe('pipeline: the request head', () => {
  it('refuses another method with 405 and Allow: POST', () => {
    const r = decideHead('GET', undefined, 'sb');
    assert.equal(r?.refusal.status, 405);
    assert.deepEqual(r?.headers, { allow: 'POST' });
  });

  it('takes identity from the deployment: the header may repeat the sandbox, never change it (ADR 0015)', () => {
    assert.equal(decideHead('POST', undefined, 'sb'), undefined);
    assert.equal(decideHead('POST', 'sb', 'sb'), undefined);
    for (const other of ['other', 'SB', 'sb ', ['sb', 'sb'], ''])
      assert.equal(decideHead('POST', other, 'sb')?.refusal.body.error.code, 'sandbox_mismatch', JSON.stringify(other));
  });
});

describe('pipeline: the request body', () => {
  it('refuses a duplicate key at any depth with 400 duplicate_key (no parser differential)', () => {
    assert.deepEqual(refused(decide('{"model":"a","model":"b","messages":[]}')), { status: 400, code: 'duplicate_key' });
    assert.deepEqual(refused(decide('{"model":"a","messages":[{"role":"user","role":"system"}]}')), { status: 400, code: 'duplicate_key' });
  });

  it('refuses invalid JSON and a body that is not an object with 400', () => {
    for (const b of ['{', '[]', '"x"', '1', 'null']) assert.equal(refused(decide(b)).status, 400, b);
  });

  it('forwards the re-serialised parse, never the client bytes', () => {
    const raw = '{ "model" : "m",\n "messages":[{"role":"user","content":"\\u0068i"}] }';
    const f = forwarded(decide(raw));
    assert.equal(f.text, JSON.stringify(JSON.parse(raw)));
    assert.notEqual(f.text, raw);
    assert.equal(f.promptBytes, Buffer.byteLength(f.text));
    assert.equal(attemptFor(f, AS_IS, '').body, f.text);
  });

  it('refuses malformed token limits with 400 invalid_token_limit', () => {
    for (const v of ['10', 1.5, -1, {}, null, true, 1e300])
      assert.deepEqual(refused(decide({ ...MSG, max_tokens: v }, rules({ tokenBudget: budget(100) }))), {
        status: 400,
        code: 'invalid_token_limit',
      });
  });

  it('judges n × the larger of max_tokens and max_completion_tokens against perRequestTokens', () => {
    const r = rules({ tokenBudget: budget(100) });
    assert.equal(forwarded(decide({ ...MSG, max_tokens: 100 }, r)).kind, 'forward');
    assert.equal(refused(decide({ ...MSG, max_tokens: 101 }, r)).code, 'per_request_tokens_exceeded');
    assert.equal(refused(decide({ ...MSG, max_completion_tokens: 10, max_tokens: 1000 }, r)).status, 429);
    assert.equal(refused(decide({ ...MSG, max_tokens: 60, n: 2 }, r)).status, 429);
  });

  it('fills a missing limit with floor(perRequestTokens / n) in the forwarded body, and reserves it', () => {
    const f = forwarded(decide({ ...MSG, n: 3 }, rules({ tokenBudget: budget(100, 5000) })));
    assert.equal(JSON.parse(f.text).max_tokens, 33);
    assert.deepEqual(reserveOf(f).caps, { dailyTokens: 5000, monthlyTokens: null });
    assert.equal(reserveOf(f).tokens, f.promptBytes + 99, 'one token per prompt byte (ADR 0027) plus the completion maximum');
  });

  it('asks streams for usage, so a stream can always be charged', () => {
    const f = forwarded(decide({ ...MSG, stream: true }));
    assert.deepEqual(JSON.parse(f.text).stream_options, { include_usage: true });
  });

  it('uses defaultDailyTokens when the policy sets no daily cap, and when there is no policy', () => {
    const ctx = { ...CTX, defaultDailyTokens: 777 };
    assert.equal(reserveOf(forwarded(decide(MSG, undefined, ctx))).caps.dailyTokens, 777);
    assert.equal(reserveOf(forwarded(decide(MSG, rules({ tokenBudget: budget(null, null) }), ctx))).caps.dailyTokens, 777);
    assert.equal(reserveOf(forwarded(decide(MSG, rules({ tokenBudget: budget(null, 5) }), ctx))).caps.dailyTokens, 5);
  });

  it('answers 501 for bedrock', () => {
    assert.equal(refused(decide(MSG, rules({ provider: 'bedrock' }))).status, 501);
  });

  it('fails closed on a guardrail stage without a backend, and asks the proxy to moderate when there is one', () => {
    const r = rules({ guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] });
    assert.deepEqual(refused(decide(MSG, r)), { status: 503, code: 'guardrail_misconfigured' });
    const f = forwarded(decide(MSG, r, { ...CTX, guardrailConfigured: true }));
    // Every string and key of the forwarded body, once each, first-seen order (ADR 0026).
    assert.deepEqual(f.moderateInput, ['model', 'm', 'messages', 'role', 'user', 'content', 'hello']);
    assert.equal(f.moderateOutput, false);
    const image = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] };
    assert.deepEqual(refused(decide(image, r, { ...CTX, guardrailConfigured: true })), {
      status: 403,
      code: 'inference_policy_guardrail_unjudgeable',
    });
    const out = forwarded(
      decide(MSG, rules({ guardrails: [{ provider: 'openai-moderation', applyTo: 'output' }] }), { ...CTX, guardrailConfigured: true }),
    );
    assert.equal(out.moderateInput, undefined);
    assert.equal(out.moderateOutput, true);
  });

  it('property: whatever the bytes, the decision is a refusal or a forward of exactly JSON.stringify(parse)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.json(), fc.string()), (s) => {
        const d = decide(s, rules({ tokenBudget: budget(1000) }));
        if (d.kind === 'reject') return d.refusal.status >= 400;
        // A forwarded body is always a parse of what the client sent, re-serialised.
        return d.text === JSON.stringify(d.body) && typeof JSON.parse(s) === 'object';
      }),
    );
  });
});

describe('pipeline: deployments', () => {
  const pref = (primary: string, ...fallback: string[]): InferenceRules['modelPreference'] => ({
    primary: { provider: 'azure-openai', deployment: primary },
    fallback: fallback.map((deployment) => ({ provider: 'azure-openai', deployment })),
  });

  it('rewrites the body model per candidate on the OpenAI path, and the path segment on the Azure path', () => {
    const f = forwarded(decide(MSG, rules({ modelPreference: pref('a', 'b', 'a', '') })));
    assert.deepEqual(f.candidates, [at('a'), at('b')]);
    assert.equal(JSON.parse(attemptFor(f, at('b'), '/base').body).model, 'b');
    assert.equal(attemptFor(f, at('b'), '/base').path, '/base/v1/chat/completions');
    const az = forwarded(
      decideRequest(
        Buffer.from(JSON.stringify(MSG)),
        { kind: 'api', api: CHAT, prefix: undefined, deployment: 'x', query: '?api-version=1' },
        rules({ modelPreference: pref('a b') }),
        CTX,
      ),
    );
    assert.equal(attemptFor(az, at('a b'), '').path, '/openai/deployments/a%20b/chat/completions?api-version=1');
    assert.equal(attemptFor(az, AS_IS, '').path, '/openai/deployments/x/chat/completions?api-version=1');
  });

  it('moves on after a 5xx or 429 only while a candidate is left', () => {
    assert.equal(tryNext(503, false), true);
    assert.equal(tryNext(429, false), true);
    assert.equal(tryNext(400, false), false);
    assert.equal(tryNext(503, true), false);
  });
});

describe('pipeline: answers', () => {
  const f = { floor: floor({ hate: 'Low' }), moderateOutput: false };
  it('chooses how to relay', () => {
    assert.equal(relayMode(200, 'text/event-stream; charset=utf-8', f), 'stream');
    assert.equal(relayMode(200, 'text/event-stream', { floor: undefined, moderateOutput: true }), 'stream-moderated');
    assert.equal(relayMode(500, 'text/event-stream', { floor: undefined, moderateOutput: true }), 'stream');
    assert.equal(relayMode(200, 'application/json', f), 'judged');
    assert.equal(relayMode(200, 'application/json', { floor: undefined, moderateOutput: false }), 'plain');
    assert.equal(relayMode(400, undefined, { floor: undefined, moderateOutput: false }), 'judged');
    assert.equal(relayMode(500, 'application/json', f), 'plain');
  });

  it('blocks a 2xx above the ceiling, fails closed under Prompt Shields without annotations, and judges a 400 only on what it carries', () => {
    const doc = (severity: string): unknown => ({
      choices: [],
      prompt_filter_results: [{ prompt_index: 0, content_filter_results: { hate: { filtered: false, severity } } }],
    });
    assert.equal(judgeAnswer(200, doc('medium'), floor({ hate: 'Low' }))?.status, 403);
    assert.equal(judgeAnswer(200, doc('low'), floor({ hate: 'Low' })), undefined);
    assert.equal(judgeAnswer(200, { choices: [] }, floor({ requirePromptShields: true }))?.status, 403);
    assert.equal(judgeAnswer(400, { error: { message: 'bad' } }, floor({ requirePromptShields: true })), undefined);
    assert.equal(judgeAnswer(200, doc('high'), undefined), undefined);
  });

  it('recognises an upstream content-filter refusal', () => {
    assert.equal(upstreamFilterReason({ error: { code: 'content_filter', message: 'm' } }), 'm');
    assert.equal(upstreamFilterReason({ error: { code: 'other', message: 'x' } }), undefined);
  });

  it('settles on reported usage, charges a usage-less 2xx the estimate, a 4xx, 429, 503 or an unwritten request nothing, a 5xx that may follow generation its reservation, and a written request without a whole answer at least its reservation (ADR 0027)', () => {
    const m = (o: Partial<Meter>): Meter => ({ ...newMeter(), written: true, complete: true, ...o });
    const est = estimateUsage(40, 400);
    assert.equal(settleTokens(m({ status: 200, usage: 7, bytes: 400 }), 40, 500), 7);
    assert.equal(settleTokens(m({ status: 200, usage: 7, bytes: 400, complete: false }), 40, 500), 7, 'usage reported, then cut');
    assert.equal(settleTokens(m({ status: 200, bytes: 400 }), 40, 500), est);
    assert.equal(settleTokens(m({ status: 200, bytes: 400, complete: false }), 40, 500), Math.max(500, est), 'cut short without usage');
    assert.equal(settleTokens(m({ status: 200, bytes: 1_000_000, complete: false }), 40, 500), estimateUsage(40, 1_000_000));
    assert.equal(settleTokens(m({ status: 500, usage: 7, bytes: 400 }), 40, 500), 500, 'a gateway 5xx: the reservation');
    assert.equal(settleTokens(m({ status: 504, usage: 900, bytes: 400 }), 40, 500), 900, 'reported usage above it wins');
    assert.equal(settleTokens(m({ status: 503, usage: 7, bytes: 400 }), 40, 500), 0, 'unavailable: it did not run');
    assert.equal(settleTokens(m({ status: 400, usage: 7, bytes: 400 }), 40, 500), 0, 'refused');
    assert.equal(settleTokens(m({ status: undefined, complete: false }), 40, 500), 500, 'written, no answer: the reservation');
    assert.equal(settleTokens({ ...newMeter() }, 40, 500), 0, 'never written: nothing');
  });
});
