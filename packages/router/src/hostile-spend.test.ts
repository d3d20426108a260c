/**
 * Regression tests for issue 25 items 2 and 3: spend an agent could get for free. A real router
 * (policy directory) in front of upstreams that hold, stream, reset or drop requests; the agent
 * abandons its requests; the ledger is read from the router's `/metrics`
 * (`kars_router_budget_tokens`). Nothing waits on a timer: tests wait on the upstream recording
 * a request, finishing an answer, or the ledger releasing its reservations.
 */
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { startDropsReused, startHeldUpstream, type HeldUpstreamOptions } from './testing/upstreams.js';
import { chatBody, postChat } from './testing/http.js';
import { startOpenAIStub } from './stubs/openai.js';

interface Ledger {
  daily: number;
  reserved: number;
}

async function ledger(r: DirRouter): Promise<Ledger> {
  const text = await (await fetch(`${r.router.url}/metrics`)).text();
  const read = (state: string): number => {
    const m = new RegExp(`^kars_router_budget_tokens\\{state="${state}"\\} (\\d+)$`, 'm').exec(text);
    assert.ok(m, `kars_router_budget_tokens{state="${state}"} missing from /metrics`);
    return Number(m[1]);
  };
  return { daily: read('daily'), reserved: read('reserved') };
}

/** The ledger once no request holds a reservation (every one has settled). */
async function settled(r: DirRouter): Promise<Ledger> {
  for (let i = 0; i < 2000; i++) {
    const l = await ledger(r);
    if (l.reserved === 0) return l;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`reservations still held: ${JSON.stringify(await ledger(r))}`);
}

/** The ledger while `n` tokens or more are reserved (a request is in flight). */
async function reservedAtLeast(r: DirRouter, n: number): Promise<Ledger> {
  for (let i = 0; i < 2000; i++) {
    const l = await ledger(r);
    if (l.reserved >= n) return l;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`no reservation of ${n}: ${JSON.stringify(await ledger(r))}`);
}

/**
 * After the agent's socket was destroyed: two requests on new connections, answered in turn. The
 * router's socket had its end of stream ready before either connection was opened, so it has
 * handled the agent's going away by the time both are answered (an ordering of events, not a timer).
 */
async function noticed(r: DirRouter): Promise<void> {
  for (let i = 0; i < 2; i++) await (await fetch(`${r.router.url}/healthz`, { headers: { connection: 'close' } })).text();
}

const BODY = JSON.stringify(chatBody('hello', { max_tokens: 50 }));
const STREAM_BODY = JSON.stringify(chatBody('hello', { max_tokens: 50, stream: true }));

/** Send a chat request the agent will abandon; `abandon()` destroys its socket. */
function send(
  r: DirRouter,
  body: string,
): { req: http.ClientRequest; response: Promise<http.IncomingMessage | undefined>; abandon(): void } {
  const req = http.request(`${r.router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    agent: false,
  });
  const response = new Promise<http.IncomingMessage | undefined>((resolve) => {
    req.on('response', resolve);
    req.on('error', () => resolve(undefined));
    req.on('close', () => resolve(undefined));
  });
  req.end(body);
  return { req, response, abandon: () => req.destroy() };
}

async function rig(t: TestContext, o: HeldUpstreamOptions, dailyTokens = 1_000_000, fetchTimeoutMs?: number) {
  const up = await startHeldUpstream(o);
  const r = await startDirRouter(
    { inference: budgetPolicy({ dailyTokens }) },
    { upstream: up.url, ...(fetchTimeoutMs !== undefined ? { fetchTimeoutMs } : {}) },
  );
  t.after(async () => {
    await r.stop();
    await up.close();
  });
  return { up, r };
}

describe('hostile agent vs spend: abandoned requests are charged (issue 25 item 2)', { timeout: 60_000 }, () => {
  it('abandoned before the answer headers: charged the usage the upstream reports (hole: settled at 0)', async (t) => {
    const { up, r } = await rig(t, { answer: 'json', usage: 777 });
    const a = send(r, BODY);
    await up.arrived(1);
    a.abandon();
    await a.response;
    await noticed(r);
    up.release();
    await up.finished(1);
    const l = await settled(r);
    assert.equal(l.daily, 777, 'the upstream answered 777 tokens after the agent left');
  });

  it('abandoned mid-stream: charged the usage of the final usage chunk (hole: charged a bytes/4 estimate of what was relayed)', async (t) => {
    const { up, r } = await rig(t, { answer: 'stream', usage: 777, headFirst: true });
    const a = send(r, STREAM_BODY);
    const res = await a.response;
    assert.ok(res, 'the stream head arrived');
    await new Promise((resolve) => res.once('data', resolve));
    a.abandon();
    await noticed(r);
    up.release();
    await up.finished(1);
    assert.equal((await settled(r)).daily, 777);
  });

  it('abandoned mid-stream, a stream without usage: charged at least the estimate of the whole stream (hole: only of what was relayed)', async (t) => {
    const { up, r } = await rig(t, { answer: 'stream-no-usage', headFirst: true, events: 40, filler: 400 });
    const a = send(r, STREAM_BODY);
    const res = await a.response;
    assert.ok(res);
    await new Promise((resolve) => res.once('data', resolve));
    a.abandon();
    await noticed(r);
    up.release();
    await up.finished(1);
    const l = await settled(r);
    // 40 events of 400 bytes of text each: the whole answer is over 16,000 bytes, over 4,000 tokens at 4 bytes a token.
    assert.ok(up.bodyBytes() > 16_000, `the upstream wrote the whole stream: ${up.bodyBytes()} bytes`);
    assert.ok(l.daily >= Math.ceil(up.bodyBytes() / 4), `charged ${l.daily} for a ${up.bodyBytes()}-byte answer`);
  });

  for (const answer of ['stream'] as const) {
    it(`abandoned while an output guardrail buffers the ${answer} answer: charged the usage it reports (hole: a bytes estimate)`, async (t) => {
      // Found by an attacker's pass: under an output stage the agent sees nothing until the answer
      // has ended, so leaving after the upstream's head used to skip reading the buffered usage.
      const up = await startHeldUpstream({ answer, usage: 50_000, headFirst: answer === 'stream' });
      const moderation = await startOpenAIStub();
      const r = await startDirRouter(
        { inference: budgetPolicy({ dailyTokens: 1_000_000 }, { guardrails: [{ provider: 'openai-moderation', applyTo: 'output' }] }) },
        { upstream: up.url, guardrail: { url: moderation.url } },
      );
      t.after(async () => {
        await r.stop();
        await up.close();
        await moderation.close();
      });
      const a = send(r, answer === 'stream' ? STREAM_BODY : BODY);
      await up.arrived(1);
      a.abandon();
      await a.response;
      await noticed(r);
      up.release();
      await up.finished(1);
      assert.equal((await settled(r)).daily, 50_000, 'the upstream reported 50,000 tokens');
    });
  }

  for (const answer of ['reset', 'never'] as const) {
    it(`abandoned, then the upstream ${answer === 'reset' ? 'resets the connection' : 'never answers'}: charged the reservation (hole: 0)`, async (t) => {
      const { up, r } = await rig(t, { answer }, 1_000_000, answer === 'never' ? 300 : undefined);
      const a = send(r, BODY);
      await up.arrived(1);
      const held = await reservedAtLeast(r, 1);
      a.abandon();
      await a.response;
      await noticed(r);
      up.release();
      const l = await settled(r);
      assert.ok(held.reserved >= 50, `the reservation holds the completion cap: ${held.reserved}`);
      assert.equal(l.daily, held.reserved, 'charged exactly what was reserved');
    });
  }

  it('an agent abandoning request after request cannot get more upstream work than the daily budget (hole: 20 abandoned requests cost 840 tokens, the ledger rose by 0)', async (t) => {
    const usage = 42;
    const cap = 500;
    const { up, r } = await rig(t, { answer: 'json', usage }, cap);
    up.release();
    let admitted = 0;
    for (let round = 0; round < 30; round++) {
      // Four at once, each abandoned as soon as the upstream has it.
      const wave = Array.from({ length: 4 }, () => send(r, BODY));
      const before = up.received();
      const answers = await Promise.all(
        wave.map(async (a) => {
          const res = await Promise.race([a.response, up.arrived(before + 1).then(() => undefined)]);
          if (res !== undefined) return res.statusCode;
          a.abandon();
          return undefined;
        }),
      );
      await settled(r);
      admitted = up.received();
      if (answers.every((s) => s === 429)) break;
    }
    const l = await settled(r);
    assert.equal(l.daily, admitted * usage, 'every request the upstream answered is charged');
    // The cap is crossed by at most the requests in flight when it was reached (each reserves ≥ 50).
    assert.ok(admitted * usage <= cap + 4 * usage, `the upstream did ${admitted * usage} tokens of work against a ${cap}-token budget`);
    const after = await postChat(r.router.url, chatBody('hello', { max_tokens: 50 }));
    assert.equal(after.status, 429, after.text);
  });
});

describe('hostile upstream vs replay: a written request is never sent twice (issue 25 item 3)', { timeout: 60_000 }, () => {
  it('an upstream that reads a POST on a reused keep-alive connection and drops it: seen once, 502, reservation charged (hole: sent again on a new connection)', async (t) => {
    const up = await startDropsReused(7);
    const r = await startDirRouter({ inference: budgetPolicy({ dailyTokens: 1_000_000 }) }, { upstream: new URL(up.origin) });
    t.after(async () => {
      await r.stop();
      up.close();
    });
    const first = await postChat(r.router.url, chatBody('hello', { max_tokens: 50 }));
    assert.equal(first.status, 200, first.text);
    assert.equal((await settled(r)).daily, 7);
    const second = await postChat(r.router.url, chatBody('hello', { max_tokens: 50 }));
    assert.equal(second.status, 502, second.text);
    assert.equal(second.json?.error?.type, 'proxy_error');
    assert.equal(up.received(), 2, 'the upstream saw the second request exactly once');
    assert.equal(up.connections(), 1, 'no new connection carried it again');
    const l = await settled(r);
    assert.ok(l.daily - 7 >= 50, `the dropped request was charged its reservation: ${l.daily - 7}`);
  });

  it('a keep-alive connection the upstream closed while idle (before anything was written to it) is not reused: the next request succeeds on a new one', async (t) => {
    let received = 0;
    let connections = 0;
    let closedOne!: () => void;
    const idleClosed = new Promise<void>((resolve) => (closedOne = resolve));
    const server = net.createServer((sock) => {
      connections++;
      sock.on('error', () => undefined);
      sock.on('close', () => closedOne());
      let buf = '';
      sock.on('data', (d) => {
        buf += d.toString('latin1');
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(buf.slice(0, end))?.[1] ?? '0');
        if (buf.length < end + 4 + len) return;
        buf = '';
        received++;
        const body = JSON.stringify({ choices: [], usage: { total_tokens: 5 } });
        // Answer with keep-alive, then close the connection at once: it is idle in the router's pool.
        sock.end(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`,
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const r = await startDirRouter(
      { inference: budgetPolicy({ dailyTokens: 1_000_000 }) },
      { upstream: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`) },
    );
    t.after(async () => {
      await r.stop();
      server.close();
    });
    assert.equal((await postChat(r.router.url, chatBody('hello', { max_tokens: 50 }))).status, 200);
    // Closed on both sides: the router's client has seen the upstream's FIN and closed its end.
    await idleClosed;
    const again = await postChat(r.router.url, chatBody('hello', { max_tokens: 50 }));
    assert.equal(again.status, 200, again.text);
    assert.equal(received, 2, 'each request reached the upstream once');
    assert.equal(connections, 2, 'the second went on a new connection');
    assert.equal((await settled(r)).daily, 10);
  });
});
