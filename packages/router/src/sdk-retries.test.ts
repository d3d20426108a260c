/**
 * 429s that the official SDKs act on (issue 21 item 6, ADR 0049), through the real router: a
 * budget exhausted until its reset is not retried (`x-should-retry: false`, `retry-after` the
 * seconds to the reset); a budget held by a request in flight is retried after the advertised
 * second and then passes; an answer under a budget carries `x-ratelimit-*-tokens`. Each SDK keeps
 * its default of two retries, and a counting `fetch` sees every attempt it makes.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { readBody } from '@kars/kube-core';
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

/**
 * An upstream that holds every request until `open()`, then passes it to `target`: so a test can
 * keep a request in flight (its reservation held) for exactly as long as it needs.
 */
interface Gate {
  url: URL;
  /** Requests received so far. */
  arrived: number;
  open(): void;
  close(): Promise<void>;
}

async function startGate(target: URL): Promise<Gate> {
  let release!: () => void;
  const opened = new Promise<void>((r) => (release = r));
  const gate: Gate = { url: target, arrived: 0, open: () => release(), close: () => Promise.resolve() };
  const server: Server = createServer((req, res) => {
    gate.arrived++;
    void (async () => {
      const read = await readBody(req, 1 << 20, req.headers['content-length']);
      await opened;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
      const init: RequestInit = { method: req.method ?? 'POST', headers };
      if (read.ok) init.body = read.body;
      const r = await fetch(new URL(req.url ?? '/', target), init);
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await r.arrayBuffer()));
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  gate.url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  gate.close = () => new Promise((r) => server.close(() => r()));
  return gate;
}

/** A `fetch` that records each attempt's start time and status, and can act on an answer before the SDK sees it. */
function countingFetch(onAnswer?: (status: number, attempt: number) => Promise<void>): {
  fetch: typeof fetch;
  attempts: { at: number; status: number }[];
} {
  const attempts: { at: number; status: number }[] = [];
  const f: typeof fetch = async (input, init) => {
    const a = { at: performance.now(), status: 0 };
    attempts.push(a);
    const r = await fetch(input, init);
    a.status = r.status;
    await onAnswer?.(r.status, attempts.length);
    return r;
  };
  return { fetch: f, attempts };
}

async function router(
  t: { after: (fn: () => Promise<void>) => void },
  policy: Record<string, unknown>,
  upstreams: { openai: URL; anthropic: URL },
): Promise<DirRouter> {
  const r = await startDirRouter(
    { inference: policy },
    { upstream: upstreams.openai, upstreams: new Map([['anthropic', upstreams.anthropic]]) },
  );
  t.after(() => r.stop());
  return r;
}

const stubs = (): { openai: URL; anthropic: URL } => ({ openai: openaiStub.url, anthropic: anthropicStub.url });

/** The seconds a `retry-after` sent between `before` and `after` (epoch ms) may say until the next UTC midnight. */
function toMidnight(before: number, after: number): [number, number] {
  const midnight = (ms: number): number => (Math.floor(ms / 86_400_000) + 1) * 86_400_000;
  return [Math.ceil((midnight(after) - after) / 1000), Math.ceil((midnight(before) - before) / 1000)];
}

function assertRetryAfterInRange(value: string | null, range: [number, number]): void {
  const n = Number(value);
  assert.ok(Number.isInteger(n) && n >= Math.min(...range) && n <= Math.max(...range), `retry-after ${value} not in ${range.join('–')}`);
}

/** Send a chat completion that holds `maxTokens` of the budget while the gate keeps it; resolves with its status when answered. */
function holdChat(r: DirRouter, maxTokens: number): Promise<number> {
  return fetch(new URL('/v1/chat/completions', r.router.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: maxTokens, messages: [{ role: 'user', content: 'hold' }] }),
  }).then(async (res) => {
    await res.arrayBuffer();
    return res.status;
  });
}

describe('the openai SDK acts on the router 429s', () => {
  // A watchdog, not a bound: an SDK told to retry would sleep until the reset (hours), and the test must fail, not hang.
  it(
    'an exhausted budget is not retried, and says when it resets; an answer under a budget carries its headroom',
    { timeout: 60_000 },
    async (t) => {
      const r = await router(t, budgetPolicy({ perRequestTokens: 1000, dailyTokens: 500 }), stubs());
      const counted = countingFetch();
      const c = new OpenAI({ baseURL: new URL('/v1', r.router.url).toString(), apiKey: 'sk-test', fetch: counted.fetch });
      openaiStub.setBehaviour({ usage: 1000 });
      const first = await c.chat.completions
        .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 })
        .withResponse();
      assert.equal(first.response.headers.get('x-ratelimit-limit-tokens'), '500');
      const remaining = Number(first.response.headers.get('x-ratelimit-remaining-tokens'));
      assert.ok(remaining > 0 && remaining < 500, `remaining ${remaining}: the cap less this request's reservation`);
      assert.match(first.response.headers.get('x-ratelimit-reset-tokens') ?? '', /^(\d+h)?(\d+m)?\d+s$|^\d+ms$/);

      const before = Date.now();
      const err = await c.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }).then(
        () => assert.fail('expected a refusal'),
        (e: unknown) => e,
      );
      const afterMs = Date.now();
      assert.ok(err instanceof OpenAI.RateLimitError);
      assert.equal(err.code, 'budget_exceeded');
      assert.equal(err.headers.get('x-should-retry'), 'false');
      assertRetryAfterInRange(err.headers.get('retry-after'), toMidnight(before, afterMs));
      assert.equal(counted.attempts.length, 2, 'one attempt for the answer, one for the refusal: no retry');

      // A request over the per-request cap is refused the same way every time: not retried either.
      const over = await c.chat.completions
        .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1001 })
        .catch((e: unknown) => e);
      assert.ok(over instanceof OpenAI.RateLimitError);
      assert.equal(over.code, 'per_request_tokens_exceeded');
      assert.equal(counted.attempts.length, 3);
    },
  );

  it('a budget held by a request in flight is retried after the advertised second, and passes once it settles', async (t) => {
    const gate = await startGate(openaiStub.url);
    t.after(() => gate.close());
    const r = await router(t, budgetPolicy({ dailyTokens: 5000 }), { openai: gate.url, anthropic: anthropicStub.url });
    openaiStub.setBehaviour({ usage: 30 });
    // 4990 tokens plus the prompt: the whole budget, held while the gate keeps the request.
    const held = holdChat(r, 4990);
    await until('the holding request reached the upstream', () => gate.arrived === 1);

    let heldDone: Promise<number> | undefined;
    const counted = countingFetch(async (status, attempt) => {
      // Before the SDK sees its first refusal, let the holding request finish (and settle).
      if (attempt === 1 && status === 429) {
        gate.open();
        heldDone = held;
        assert.equal(await held, 200);
      }
    });
    const c = new OpenAI({ baseURL: new URL('/v1', r.router.url).toString(), apiKey: 'sk-test', fetch: counted.fetch });
    const ok = await c.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    assert.equal(ok.choices[0]?.message.content, 'Hello from the kars OpenAI stub.');
    assert.ok(heldDone !== undefined, 'the first attempt was refused while the budget was held');
    assert.deepEqual(
      counted.attempts.map((a) => a.status),
      [429, 200],
    );
    const gap = (counted.attempts[1]?.at ?? 0) - (counted.attempts[0]?.at ?? 0);
    assert.ok(gap >= 1000, `retried after ${gap.toFixed(0)} ms, before the advertised second`);
  });
});

describe('the Anthropic SDK acts on the router 429s', () => {
  const anthropicPolicy = (p: Record<string, unknown>): Record<string, unknown> => ({ ...p, provider: 'anthropic' });
  const msg = [{ role: 'user' as const, content: 'hi' }];

  it('an exhausted budget is not retried, and says when it resets', { timeout: 60_000 }, async (t) => {
    const r = await router(t, anthropicPolicy(budgetPolicy({ dailyTokens: 500 })), stubs());
    const counted = countingFetch();
    const c = new Anthropic({ baseURL: r.router.url.toString(), apiKey: 'sk-ant-test', fetch: counted.fetch });
    anthropicStub.setBehaviour({ inputTokens: 600, outputTokens: 400 });
    const first = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg }).withResponse();
    assert.equal(first.response.headers.get('x-ratelimit-limit-tokens'), '500');
    const before = Date.now();
    const err = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg }).catch((e: unknown) => e);
    const afterMs = Date.now();
    assert.ok(err instanceof Anthropic.RateLimitError);
    assert.equal(err.errorCode, 'budget_exceeded');
    assert.equal(err.headers.get('x-should-retry'), 'false');
    assertRetryAfterInRange(err.headers.get('retry-after'), toMidnight(before, afterMs));
    assert.equal(counted.attempts.length, 2, 'no retry');
  });

  it('a budget held by a request in flight is retried after the advertised second, and passes once it settles', async (t) => {
    const gate = await startGate(openaiStub.url);
    t.after(() => gate.close());
    // The holding request goes to the (gated) OpenAI upstream; the Messages request to the Anthropic stub.
    const r = await router(t, budgetPolicy({ dailyTokens: 5000 }), { openai: gate.url, anthropic: anthropicStub.url });
    openaiStub.setBehaviour({ usage: 30 });
    const held = holdChat(r, 4990);
    await until('the holding request reached the upstream', () => gate.arrived === 1);
    const counted = countingFetch(async (status, attempt) => {
      if (attempt === 1 && status === 429) {
        gate.open();
        assert.equal(await held, 200);
      }
    });
    const c = new Anthropic({ baseURL: r.router.url.toString(), apiKey: 'sk-ant-test', fetch: counted.fetch });
    const ok = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: msg });
    assert.equal(ok.content[0]?.type === 'text' ? ok.content[0].text : undefined, 'Hello from the kars Anthropic stub.');
    assert.deepEqual(
      counted.attempts.map((a) => a.status),
      [429, 200],
    );
    const gap = (counted.attempts[1]?.at ?? 0) - (counted.attempts[0]?.at ?? 0);
    assert.ok(gap >= 1000, `retried after ${gap.toFixed(0)} ms`);
  });
});
