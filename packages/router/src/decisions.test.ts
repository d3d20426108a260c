/**
 * Issue 21 items 1–2 against the real router (policy directory, OpenAI stub, MCP stub, egress proxy,
 * decision log): one record per decision — inference allowed, refused and capped; tool call
 * allowed and refused, a tool hidden from tools/list; egress CONNECT allowed and refused, HTTP
 * refused — each naming the digest of the policy in force, before and after a policy edit made
 * mid-run. The records are read back through the admin listener's `/decisions` with its token, the
 * chain is checked, and every inference and MCP answer carries the digest header.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTcpEchoServer, until, type TcpEchoServer } from '@kars/kube-core/testing';
import { canonicalDigest } from '@kars/policy-compiler';
import { startMcpStub, type McpStub } from './stubs/mcp.js';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { chatBody, connectStatus, postChat, postJson, type JsonReply } from './testing/http.js';
import { logFiles, verifyChain, type ChainLine, type DecisionRecord } from './decisions/index.js';

const TOKEN = 'audit-admin-token';
const AGT = 'default: allow\nrules:\n  - deny: "*delete*"\n';

function httpViaProxy(proxy: string, url: string): Promise<number> {
  const u = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: Number(u.port), path: url, method: 'GET', headers: { host: new URL(url).host } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function adminLines(r: DirRouter, query = ''): Promise<{ status: number; lines: ChainLine[]; text: string }> {
  const res = await fetch(`${r.router.adminUrl}/decisions${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const text = await res.text();
  return {
    status: res.status,
    text,
    lines: text
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as ChainLine),
  };
}

const mcp = (r: DirRouter, body: unknown): Promise<JsonReply> =>
  postJson(`${r.router.url}/mcp`, body, { accept: 'application/json, text/event-stream' });

describe('decision records (issue 21 items 1–2)', () => {
  let openai: OpenAIStub;
  let tools: McpStub;
  let echo: TcpEchoServer;
  let r: DirRouter;
  let logDir: string;

  before(async () => {
    openai = await startOpenAIStub();
    tools = await startMcpStub({ tools: [{ name: 'safe_tool' }, { name: 'delete_repo' }] });
    echo = await startTcpEchoServer();
    logDir = mkdtempSync(join(tmpdir(), 'kars-decisions-'));
    r = await startDirRouter(
      {
        inference: budgetPolicy({ perRequestTokens: 500, dailyTokens: 1_000_000 }),
        toolProfile: { appliesTo: { tool: null, mcpServer: null } },
        agt: AGT,
        baseline: [{ host: '127.0.0.1', port: echo.port }],
      },
      {
        upstream: openai.url,
        mcpUpstream: tools.url,
        egressListen: '127.0.0.1:0',
        adminListen: '127.0.0.1:0',
        adminToken: TOKEN,
        decisionLog: { dir: logDir },
      },
    );
    await until('policy loaded', () => r.router.isReady());
  });

  after(async () => {
    await r.stop();
    await tools.close();
    await openai.close();
    await echo.close();
    rmSync(logDir, { recursive: true, force: true });
  });

  it('records one decision per request, each with the digest in force, across a policy edit', async () => {
    const egressUrl = r.router.egressUrl as string;
    /** One round of every kind of decision; returns the request ids and what each must be. */
    const round = async (): Promise<Array<{ id: string | undefined; kind: string; decision: string; reason: string; header?: string }>> => {
      const out: Array<{ id: string | undefined; kind: string; decision: string; reason: string; header?: string }> = [];
      const chat = async (extra: Record<string, unknown>, decision: string, reason: string, status: number): Promise<JsonReply> => {
        const res = await postChat(r.router.url, chatBody('hi', extra));
        assert.equal(res.status, status, res.text);
        out.push({
          id: res.headers.get('x-kars-request-id') ?? undefined,
          kind: 'inference',
          decision,
          reason,
          header: res.headers.get('x-kars-policy-digest') ?? '',
        });
        return res;
      };
      await chat({ max_tokens: 10 }, 'allow', 'allowed', 200);
      await chat({ max_tokens: 100_000 }, 'deny', 'per_request_tokens_exceeded', 429);
      await chat({}, 'cap', 'completion_limit_set', 200);
      const tool = async (body: unknown, decision: string, reason: string): Promise<JsonReply> => {
        const res = await mcp(r, body);
        assert.equal(res.status, 200, res.text);
        out.push({
          id: res.headers.get('x-kars-request-id') ?? undefined,
          kind: 'tool',
          decision,
          reason,
          header: res.headers.get('x-kars-policy-digest') ?? '',
        });
        return res;
      };
      const ok = await tool(
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'safe_tool', arguments: {} } },
        'allow',
        'allowed',
      );
      assert.equal(ok.json?.error, undefined, ok.text);
      const denied = await tool(
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'delete_repo', arguments: {} } },
        'deny',
        'tool_denied',
      );
      assert.equal(denied.json?.error?.data?.code, 'tool_denied', denied.text);
      // A tool hidden from a list is recorded with why it was hidden (here the AGT profile's deny).
      const list = await tool({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, 'deny', 'tool_denied');
      assert.deepEqual(
        (list.json?.result?.tools as Array<{ name: string }>).map((t) => t.name),
        ['safe_tool'],
      );
      assert.equal(await connectStatus(egressUrl, `127.0.0.1:${echo.port}`), 200);
      out.push({ id: undefined, kind: 'egress', decision: 'allow', reason: 'baseline' });
      assert.equal(await connectStatus(egressUrl, 'denied.example:443'), 403);
      out.push({ id: undefined, kind: 'egress', decision: 'deny', reason: 'denied' });
      assert.equal(await httpViaProxy(egressUrl, 'http://denied.example/x'), 403);
      out.push({ id: undefined, kind: 'egress', decision: 'deny', reason: 'denied' });
      return out;
    };

    const before = r.router.state.digests();
    const inferenceBody = readFileSync(join(r.dir, 'inference', 'inference-policy.json'), 'utf8');
    assert.equal(before.InferencePolicy, canonicalDigest('inference-policy.json', inferenceBody));
    const first = await round();

    // The edit, mid-run: every kind changes, and the router reloads within about a second.
    writeFileSync(
      join(r.dir, 'inference', 'inference-policy.json'),
      JSON.stringify(budgetPolicy({ perRequestTokens: 400, dailyTokens: 900_000 })),
    );
    writeFileSync(join(r.dir, 'policies', 'agt-profile.yaml'), `${AGT}  - deny: "drop_*"\n`);
    writeFileSync(
      join(r.dir, 'egress', 'allowlist.json'),
      JSON.stringify({
        schemaVersion: 1,
        endpoints: [
          { host: '127.0.0.1', port: echo.port },
          { host: 'other.example', port: 443 },
        ],
      }),
    );
    await until('the edit is enforced', () => {
      const d = r.router.state.digests();
      return (
        d.InferencePolicy !== before.InferencePolicy && d.AgtProfile !== before.AgtProfile && d.EgressApproval !== before.EgressApproval
      );
    });
    const afterEdit = r.router.state.digests();
    const second = await round();

    const expected = [...first.map((e) => ({ ...e, digests: before })), ...second.map((e) => ({ ...e, digests: afterEdit }))];
    const { lines } = await until('every decision is in the log', async () => {
      const got = await adminLines(r);
      return got.lines.filter((l) => l.type === 'decision').length >= expected.length ? got : undefined;
    });
    const records = lines.filter((l): l is ChainLine & DecisionRecord => l.type === 'decision');
    assert.equal(records.length, expected.length, 'exactly one record per decision');
    assert.equal(lines[0]?.type, 'start');

    const digestOf = (d: typeof before, kind: string): string | null => (d as Record<string, string | null | undefined>)[kind] ?? null;
    for (let i = 0; i < expected.length; i++) {
      const want = expected[i] as (typeof expected)[number];
      const got = records[i] as DecisionRecord;
      const label = `record ${i}: ${JSON.stringify(got)}`;
      assert.equal(got.kind, want.kind, label);
      assert.equal(got.decision, want.decision, label);
      assert.equal(got.reason, want.reason, label);
      assert.equal(got.sandbox, 'sb', label);
      assert.equal(got.instance, 'test', label);
      if (want.id !== undefined)
        assert.equal(got.requestId, want.id, `${label}: the record's request id is the answer's x-kars-request-id`);
      assert.ok(got.requestId.length > 0, label);
      for (const p of got.policies) assert.equal(p.digest, digestOf(want.digests, p.kind), `${label}: ${p.kind} digest`);
      const kinds = got.policies.map((p) => p.kind);
      assert.deepEqual(
        kinds,
        want.kind === 'inference' ? ['InferencePolicy'] : want.kind === 'tool' ? ['ToolPolicy', 'AgtProfile'] : ['EgressApproval'],
        label,
      );
      if (want.header !== undefined)
        assert.equal(
          want.header,
          got.policies.map((p) => `${p.kind}=${p.digest ?? 'none'}`).join(', '),
          `${label}: the answer's x-kars-policy-digest names the same digests`,
        );
    }
    // Tokens: the allowed and capped requests reserved and were charged what the stub reported; the refusal reserved nothing.
    const [allowed, refused, capped] = records;
    assert.ok(allowed?.tokens && allowed.tokens.reserved > 0 && allowed.tokens.charged > 0, JSON.stringify(allowed));
    assert.equal(refused?.tokens, null);
    assert.equal((refused?.target as { model: string | null }).model, 'gpt-4o', 'a refusal names the model asked for');
    assert.ok(capped?.tokens && capped.tokens.reserved > 0, JSON.stringify(capped));
    assert.deepEqual(allowed?.target, { api: 'OpenAI chat completions', model: 'gpt-4o', provider: 'azure-openai', deployment: null });
    assert.deepEqual(records[3]?.target, { server: null, tool: 'safe_tool', action: 'call' });
    assert.deepEqual(records[6]?.target, { host: '127.0.0.1', port: echo.port, via: 'CONNECT' });

    // Filters, and the chain of what is on disk is whole.
    const denies = await adminLines(r, '?decision=deny&kind=egress');
    assert.deepEqual(
      denies.lines.filter((l) => l.type === 'decision').map((l) => (l as DecisionRecord).reason),
      ['denied', 'denied', 'denied', 'denied'],
    );
    const files = logFiles(logDir).map((n) => ({ name: n, text: readFileSync(join(logDir, n), 'utf8') }));
    const v = verifyChain(files);
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.equal(v.records, lines.length);
  });

  it('records a refusal of the front door (a body over the bound, refused before it is read), with the digest header', async () => {
    const u = new URL(r.router.url);
    const head = await new Promise<string>((resolve, reject) => {
      const s = net.connect(Number(u.port), u.hostname, () =>
        s.write(
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${64 * 1024 * 1024}\r\n\r\n`,
        ),
      );
      let buf = '';
      s.on('error', reject);
      s.on('data', (d: Buffer) => {
        buf += d.toString('latin1');
        if (buf.includes('\r\n\r\n')) {
          s.destroy();
          resolve(buf);
        }
      });
    });
    assert.match(head, /^HTTP\/1\.1 413 /);
    const id = /\r\nx-kars-request-id: ([^\r]+)/i.exec(head)?.[1];
    assert.ok(id !== undefined, head);
    assert.match(
      head,
      new RegExp(`\\r\\nx-kars-policy-digest: InferencePolicy=${r.router.state.digests().InferencePolicy ?? ''}\\r\\n`, 'i'),
    );
    const rec = await until('the refusal is recorded', async () =>
      (await adminLines(r)).lines.find((l) => l.type === 'decision' && (l as DecisionRecord).requestId === id),
    );
    assert.equal((rec as DecisionRecord).decision, 'deny');
    assert.equal((rec as DecisionRecord).reason, 'request_too_large');
    assert.equal((rec as DecisionRecord).policies[0]?.digest, r.router.state.digests().InferencePolicy);
  });

  it('answers /decisions only with the admin token, and follows new lines', async () => {
    const anon = await fetch(`${r.router.adminUrl}/decisions`);
    assert.equal(anon.status, 401);
    await anon.text();
    const ac = new AbortController();
    const res = await fetch(`${r.router.adminUrl}/decisions?follow=1&kind=inference`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const sent = await postChat(r.router.url, chatBody('hi', { max_tokens: 5 }));
    const id = sent.headers.get('x-kars-request-id');
    let text = '';
    const decoder = new TextDecoder();
    while (!text.includes(`"requestId":"${id}"`)) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
    ac.abort();
    assert.ok(text.includes(`"requestId":"${id}"`), 'the follower received the new record');
  });
});
