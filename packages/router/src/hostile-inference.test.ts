/**
 * Regression tests for issue 9 (items 2 and 3): token limits and identity, attacked the way a hostile
 * agent would, against a real router (policy directory) and the OpenAI stub, with real requests.
 * Each test names the hole it pins.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { chatBody, postChat, type JsonReply } from './testing/http.js';

/** POST a chat completion to the router of `r`. */
const chat = (r: DirRouter, body: unknown, headers: Record<string, string> = {}): Promise<JsonReply> =>
  postChat(r.router.url, body, headers);
const msg = (extra: Record<string, unknown> = {}): Record<string, unknown> => chatBody('hi', extra);

describe('hostile agent vs token limits (issue 9 item 3)', () => {
  let stub: OpenAIStub;
  before(async () => {
    stub = await startOpenAIStub();
  });
  after(async () => {
    await stub.close();
  });

  it('x-kars-sandbox cannot buy a fresh daily budget: the budget belongs to --sandbox (hole: changing x-kars-sandbox per request gave a fresh budget)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ dailyTokens: 50 }) }, { upstream: stub.url });
    try {
      let passed = 0;
      for (let i = 0; i < 6; i++) {
        const res = await chat(r, msg({ max_tokens: 5 }), { 'x-kars-sandbox': `other-${i}` });
        if (res.status === 200) passed++;
      }
      for (let i = 0; i < 3; i++) if ((await chat(r, msg({ max_tokens: 5 }))).status === 200) passed++;
      // The stub charges 30 tokens per answer: a 50-token budget allows two answers, whatever the header says.
      assert.ok(passed <= 2, `${passed} requests were served against a 50-token budget (30 tokens each)`);
      const other = await chat(r, msg({ max_tokens: 5 }), { 'x-kars-sandbox': 'someone-else' });
      assert.ok(other.status === 403 || other.status === 429, `a foreign x-kars-sandbox got ${other.status}`);
    } finally {
      await r.stop();
    }
  });

  it('a request without max_tokens is capped at perRequestTokens, and the forwarded body carries the cap (hole: omitting max_tokens skipped the cap)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      const res = await chat(r, msg());
      assert.equal(res.status, 200, res.text);
      const sent = stub.requests.at(-1)?.body as Record<string, unknown>;
      assert.equal(sent['max_tokens'], 100, `forwarded body: ${JSON.stringify(sent)}`);
    } finally {
      await r.stop();
    }
  });

  for (const value of ['true', 1, {}, [true]]) {
    it(`stream as ${JSON.stringify(value)} gets 400 and never reaches the upstream (attacker pass: a lax upstream streams it without the usage chunk)`, async () => {
      stub.reset();
      const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
      try {
        const res = await chat(r, msg({ stream: value }));
        assert.equal(res.status, 400, res.text);
        assert.match(res.json.error.message, /stream must be a boolean/);
        assert.equal(stub.requests.length, 0);
      } finally {
        await r.stop();
      }
    });
  }

  for (const [label, value] of [
    ['a string', '100000'],
    ['a float', 50.5],
    ['negative', -1],
    ['huge', 1e300],
    ['an object', { n: 1 }],
    ['null', null],
    ['a boolean', true],
  ] as const) {
    it(`max_tokens as ${label} gets 400 invalid_token_limit and never reaches the upstream (hole: a string or float max_tokens skipped the cap)`, async () => {
      stub.reset();
      const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
      try {
        const res = await chat(r, msg({ max_tokens: value }));
        assert.equal(res.status, 400, res.text);
        assert.equal(res.json?.error?.code, 'invalid_token_limit');
        assert.match(res.json.error.message, /max_tokens/);
        assert.equal(stub.requests.length, 0);
      } finally {
        await r.stop();
      }
    });
  }

  it('max_completion_tokens beside a huge max_tokens is judged by the larger one (hole: the small max_completion_tokens hid the huge max_tokens)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      const res = await chat(r, msg({ max_completion_tokens: 10, max_tokens: 100000 }));
      assert.equal(res.status, 429, res.text);
      assert.equal(res.json?.error?.code, 'per_request_tokens_exceeded');
      assert.equal(stub.requests.length, 0);
    } finally {
      await r.stop();
    }
  });

  it('a large n multiplies the request: n × max_tokens is judged against the cap (hole: a large n skipped the cap)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      const res = await chat(r, msg({ max_tokens: 100, n: 50 }));
      assert.equal(res.status, 429, res.text);
      assert.equal(res.json?.error?.code, 'per_request_tokens_exceeded');
      const bad = await chat(r, msg({ max_tokens: 10, n: '5' }));
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json?.error?.code, 'invalid_token_limit');
      // n without max_tokens: the filled cap is shared between the choices.
      const ok = await chat(r, msg({ n: 4 }));
      assert.equal(ok.status, 200, ok.text);
      assert.equal((stub.requests.at(-1)?.body as Record<string, unknown>)['max_tokens'], 25);
    } finally {
      await r.stop();
    }
  });

  it('a stream whose upstream never sends usage is still charged, and the router asks for usage (hole: a streamed answer without usage was never charged)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ dailyTokens: 60 }) }, { upstream: stub.url });
    try {
      let served = 0;
      for (let i = 0; i < 8; i++) {
        const res = await chat(r, msg({ stream: true, max_tokens: 20 }), { 'x-stub-stream-usage': '0' });
        if (res.status === 200) served++;
      }
      assert.ok(served < 8, 'every usage-less stream was served: none was charged');
      const sent = stub.requests[0]?.body as Record<string, any>;
      assert.equal(sent['stream_options']?.include_usage, true, `forwarded body: ${JSON.stringify(sent)}`);
    } finally {
      await r.stop();
    }
  });

  it('50 parallel requests cannot all pass a 100-token budget: the maximum is reserved before forwarding (hole: all 50 passed)', async () => {
    stub.reset();
    stub.setBehaviour({ delayMs: 150, usage: 30 });
    const r = await startDirRouter({ inference: budgetPolicy({ dailyTokens: 100 }) }, { upstream: stub.url });
    try {
      const results = await Promise.all(Array.from({ length: 50 }, () => chat(r, msg({ max_tokens: 10 }))));
      const ok = results.filter((x) => x.status === 200).length;
      const refused = results.filter((x) => x.status === 429 && x.json?.error?.code === 'budget_exceeded').length;
      assert.equal(ok + refused, 50, `unexpected statuses: ${results.map((x) => x.status).join(',')}`);
      // Each answer costs 30 tokens; overshooting by at most one request means at most (100 + 30) / 30 answers.
      assert.ok(ok * 30 <= 100 + 30, `${ok} requests were served (${ok * 30} tokens) against a 100-token budget`);
      assert.ok(ok >= 1);
    } finally {
      stub.setBehaviour({ delayMs: 0 });
      await r.stop();
    }
  });

  it('duplicate JSON keys are refused with 400 duplicate_key (hole: {"max_tokens":1,"max_tokens":99999} passed the check with one value)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      for (const body of [
        '{"model":"m","messages":[],"max_tokens":99999,"max_tokens":10}',
        '{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}',
        '{"model":"m","m\\u006fdel":"x","messages":[]}',
      ]) {
        const res = await chat(r, body);
        assert.equal(res.status, 400, `${body}: ${res.text}`);
        assert.equal(res.json?.error?.code, 'duplicate_key', body);
      }
      assert.equal(stub.requests.length, 0);
    } finally {
      await r.stop();
    }
  });

  it('forwards the body as the router parsed it, never the original bytes (hole: the original bytes went upstream)', async () => {
    stub.reset();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      const raw = '{ "model" : "gpt-4o",\n "messages": [ {"role":"user","content":"h\\u0069"} ], "max_tokens": 10 }';
      const res = await chat(r, raw);
      assert.equal(res.status, 200, res.text);
      const got = stub.requests.at(-1);
      assert.ok(got);
      assert.equal(got.rawBody, JSON.stringify(got.body), 'the upstream got exactly the re-serialised parse');
      assert.notEqual(got.rawBody, raw);
    } finally {
      await r.stop();
    }
  });
});
