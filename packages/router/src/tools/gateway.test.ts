import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeClock } from '@kars/kube-core';
import type { PolicySnapshot, ToolRules } from '../snapshot.js';
import { startMcpStub, type McpStub } from '../stubs/mcp.js';
import { parseAgtProfile } from './agt.js';
import { createMcpGateway, rewriteSse, type McpGatewayOptions, type ToolDecision } from './gateway.js';
import { postJson, type JsonReply } from '../testing/http.js';
import { toolRules } from '../testing/rules.js';

/** Socket tests fail instead of hanging when bytes never arrive. */
const T = { timeout: 5000 };

const TOOLS = ['read_file', 'write_file', 'delete_file', 'search'].map((name) => ({ name }));

function agt(yaml: string): NonNullable<ToolRules['agt']> {
  const r = parseAgtProfile(yaml);
  if (!r.ok) throw new Error(r.error);
  return r.agt;
}

const policy = toolRules;

function snap(tools: ToolRules[]): PolicySnapshot {
  return { inference: undefined, tools, egress: [], loadedAtMs: 0, refused: {} };
}

interface Fixture {
  stub: McpStub;
  url: string;
  decisions: ToolDecision[];
  snapshotReads: () => number;
  setTools(tools: ToolRules[]): void;
  clock: FakeClock;
  close(): Promise<void>;
}

async function fixture(
  tools: ToolRules[],
  extra: Partial<McpGatewayOptions> = {},
  stubOpts: Parameters<typeof startMcpStub>[0] = {},
): Promise<Fixture> {
  const stub = await startMcpStub({ tools: TOOLS, ...stubOpts });
  let current = snap(tools);
  let reads = 0;
  const decisions: ToolDecision[] = [];
  const clock = new FakeClock();
  const gw = createMcpGateway({
    snapshot: () => {
      reads++;
      return current;
    },
    upstream: stub.url,
    sandbox: 'sb1',
    clock,
    onDecision: (d) => decisions.push(d),
    ...extra,
  });
  const server: Server = createServer((req, res) => {
    void gw(req, res).then((handled) => {
      if (!handled) res.writeHead(404).end('not the gateway');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    stub,
    url: `http://127.0.0.1:${port}/mcp`,
    decisions,
    snapshotReads: () => reads,
    setTools(t) {
      current = snap(t);
    },
    clock,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await stub.close();
    },
  };
}

/** POST a JSON-RPC message as an MCP client does (it accepts JSON or an event stream). */
function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonReply> {
  return postJson(url, body, { accept: 'application/json, text/event-stream', ...headers });
}

function call(id: number, name: string, args: unknown = {}) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

describe('MCP gateway: tools/list', () => {
  let f: Fixture;
  before(async () => {
    f = await fixture([
      policy('fs', { agt: agt('rules:\n  - deny: "delete_*"\n    reason: no deleting\n') }),
      policy('approve', { appliesTo: { tool: 'write_file', mcpServer: null }, approval: { mode: 'always' } }),
    ]);
  });
  after(() => f.close());

  it('hides the tools AGT denies and keeps the rest in upstream order', T, async () => {
    const r = await post(f.url, LIST);
    assert.equal(r.status, 200);
    assert.equal(r.json.id, 1);
    assert.deepEqual(
      r.json.result.tools.map((t: { name: string }) => t.name),
      ['read_file', 'write_file', 'search'],
    );
    assert.ok(r.json.result.tools.every((t: Record<string, unknown>) => typeof t['inputSchema'] === 'object'));
    assert.deepEqual(
      f.decisions.filter((d) => d.kind === 'list').map((d) => [d.tool, d.decision, d.policy]),
      [['delete_file', 'hidden', 'fs']],
    );
  });

  it('keeps approval-required tools listed (only their calls are refused)', T, async () => {
    const r = await post(f.url, LIST);
    assert.ok(r.json.result.tools.some((t: { name: string }) => t.name === 'write_file'));
  });

  it('hides tools from a text/event-stream answer too', T, async () => {
    f.stub.setResponseMode('sse');
    try {
      const r = await post(f.url, LIST);
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
      const data = r.text.split('\n').find((l) => l.startsWith('data: '));
      const msg = JSON.parse(data!.slice(6));
      assert.deepEqual(
        msg.result.tools.map((t: { name: string }) => t.name),
        ['read_file', 'write_file', 'search'],
      );
      assert.match(r.text, /^event: message\n/);
    } finally {
      f.stub.setResponseMode('json');
    }
  });
});

describe('MCP gateway: tools/call', () => {
  it('forwards an allowed call and returns the upstream answer verbatim', T, async () => {
    const f = await fixture([policy('fs', { agt: agt('rules:\n  - deny: "delete_*"\n') })]);
    try {
      const r = await post(f.url, call(7, 'read_file', { path: '/a' }));
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, {
        jsonrpc: '2.0',
        id: 7,
        result: { content: [{ type: 'text', text: 'called read_file with {"path":"/a"}' }], isError: false },
      });
      assert.deepEqual(
        f.stub.calls.map((c) => [c.tool, c.arguments]),
        [['read_file', { path: '/a' }]],
      );
      assert.deepEqual(
        f.decisions.map((d) => [d.kind, d.tool, d.decision, d.policy]),
        [['call', 'read_file', 'allowed', 'fs']],
      );
    } finally {
      await f.close();
    }
  });

  it('refuses an AGT-denied call with -32001 tool_denied and never forwards it', T, async () => {
    const f = await fixture([policy('fs', { agt: agt('rules:\n  - deny: "delete_*"\n    reason: deleting is not allowed\n') })]);
    try {
      const r = await post(f.url, call(8, 'delete_file', { path: '/a' }));
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, {
        jsonrpc: '2.0',
        id: 8,
        error: {
          code: -32001,
          message: 'tool_denied: delete_file is denied by ToolPolicy fs: deleting is not allowed',
          data: {
            code: 'tool_denied',
            policy: 'fs',
            tool: 'delete_file',
            reason: 'deleting is not allowed',
            rule: { effect: 'deny', pattern: 'delete_*', index: 0 },
          },
        },
      });
      assert.deepEqual(f.stub.calls, []);
      assert.deepEqual(
        f.decisions.map((d) => d.decision),
        ['tool_denied'],
      );
    } finally {
      await f.close();
    }
  });

  it('lets the first matching AGT rule win', T, async () => {
    const f = await fixture([policy('fs', { agt: agt('rules:\n  - allow: "read_*"\n  - deny: "*_file"\n') })]);
    try {
      assert.equal((await post(f.url, call(1, 'read_file'))).json.result.content[0].text, 'called read_file with {}');
      const denied = await post(f.url, call(2, 'write_file'));
      assert.equal(denied.json.error.code, -32001);
      assert.equal(denied.json.error.message, 'tool_denied: write_file is denied by ToolPolicy fs: rule 1 (deny "*_file")');
      assert.equal((await post(f.url, call(3, 'search'))).json.result.content[0].text, 'called search with {}');
      assert.deepEqual(
        f.stub.calls.map((c) => c.tool),
        ['read_file', 'search'],
      );
    } finally {
      await f.close();
    }
  });

  it('refuses everything a default-deny profile does not allow', T, async () => {
    const f = await fixture([policy('strict', { agt: agt('default: deny\nrules:\n  - allow: search\n') })]);
    try {
      assert.ok((await post(f.url, call(1, 'search'))).json.result);
      const r = await post(f.url, call(2, 'read_file'));
      assert.equal(r.json.error.message, 'tool_denied: read_file is denied by ToolPolicy strict: no rule allows it (default: deny)');
      assert.equal(r.json.error.data.rule, null);
      const list = await post(f.url, LIST);
      assert.deepEqual(
        list.json.result.tools.map((t: { name: string }) => t.name),
        ['search'],
      );
    } finally {
      await f.close();
    }
  });

  it('matches server/tool globs against the configured server name', T, async () => {
    const f = await fixture([policy('gh', { agt: agt('rules:\n  - deny: "files/write_*"\n') })], { server: 'files' });
    try {
      assert.equal((await post(f.url, call(1, 'write_file'))).json.error.code, -32001);
      assert.ok((await post(f.url, call(2, 'read_file'))).json.result);
    } finally {
      await f.close();
    }
  });

  it('refuses an approval-required call with -32002 and says how approval is obtained', T, async () => {
    const f = await fixture([policy('pay', { appliesTo: { tool: 'write_file', mcpServer: null }, approval: { mode: 'always' } })]);
    try {
      const r = await post(f.url, call(4, 'write_file'));
      assert.equal(r.json.error.code, -32002);
      assert.equal(r.json.error.message, 'approval_required: write_file requires approval under ToolPolicy pay');
      assert.equal(r.json.error.data.code, 'approval_required');
      assert.equal(r.json.error.data.policy, 'pay');
      assert.equal(r.json.error.data.tool, 'write_file');
      assert.match(r.json.error.data.howToGetApproval, /kars toolpolicy apply pay --approval-mode never/);
      assert.deepEqual(f.stub.calls, []);
      assert.ok((await post(f.url, call(5, 'read_file'))).json.result, 'the policy applies to write_file only');
    } finally {
      await f.close();
    }
  });

  it('lets approval mode never through', T, async () => {
    const f = await fixture([policy('p', { approval: { mode: 'never' } })]);
    try {
      assert.ok((await post(f.url, call(1, 'write_file'))).json.result);
    } finally {
      await f.close();
    }
  });

  it('rate-limits per tool: a burst passes, the next call gets -32003 with retryAfterMs, and refill lets one more through', T, async () => {
    const f = await fixture([policy('rl', { rateLimit: { rps: 1, burst: 2 } })]);
    try {
      assert.ok((await post(f.url, call(1, 'search'))).json.result);
      assert.ok((await post(f.url, call(2, 'search'))).json.result);
      const limited = await post(f.url, call(3, 'search'));
      assert.equal(limited.json.error.code, -32003);
      assert.match(limited.json.error.message, /^rate_limited: search exceeded the rate limit of ToolPolicy rl/);
      assert.equal(limited.json.error.data.code, 'rate_limited');
      assert.equal(limited.json.error.data.retryAfterMs, 1000);
      assert.ok((await post(f.url, call(4, 'read_file'))).json.result, 'another tool has its own bucket');
      f.clock.advance(1000);
      assert.ok((await post(f.url, call(5, 'search'))).json.result);
      assert.equal((await post(f.url, call(6, 'search'))).json.error.code, -32003);
      assert.equal(f.stub.calls.filter((c) => c.tool === 'search').length, 3);
    } finally {
      await f.close();
    }
  });

  it('does not spend a rate-limit token on a call AGT denies', T, async () => {
    const f = await fixture([policy('both', { rateLimit: { rps: 1, burst: 1 }, agt: agt('rules:\n  - deny: delete_file\n') })]);
    try {
      assert.equal((await post(f.url, call(1, 'delete_file'))).json.error.code, -32001);
      assert.equal((await post(f.url, call(2, 'delete_file'))).json.error.code, -32001);
    } finally {
      await f.close();
    }
  });

  it('applies only the most specific policy', T, async () => {
    const f = await fixture(
      [
        policy('deny-all', { appliesTo: { tool: '*', mcpServer: null }, agt: agt('default: deny\n') }),
        policy('search-ok', { appliesTo: { tool: 'search', mcpServer: null }, agt: agt('default: allow\n') }),
        policy('files-server', {
          appliesTo: { tool: null, mcpServer: 'files' },
          agt: agt('rules:\n  - allow: read_file\ndefault: deny\n'),
        }),
        policy('files-write', { appliesTo: { tool: 'write_file', mcpServer: 'files' }, approval: { mode: 'always' } }),
      ],
      { server: 'files' },
    );
    try {
      assert.ok((await post(f.url, call(1, 'search'))).json.result, 'tool exact beats server exact and the wildcard');
      assert.ok((await post(f.url, call(2, 'read_file'))).json.result, 'server exact beats the wildcard');
      const del = await post(f.url, call(3, 'delete_file'));
      assert.equal(del.json.error.data.policy, 'files-server');
      const write = await post(f.url, call(4, 'write_file'));
      assert.equal(write.json.error.code, -32002, 'tool and server exact wins');
      assert.equal(write.json.error.data.policy, 'files-write');
    } finally {
      await f.close();
    }
  });

  it('refuses a tools/call without a tool name with -32602', T, async () => {
    const f = await fixture([]);
    try {
      const r = await post(f.url, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: {} });
      assert.equal(r.json.error.code, -32602);
      assert.equal(r.json.id, 9);
      assert.deepEqual(f.stub.calls, []);
    } finally {
      await f.close();
    }
  });
});

describe('MCP gateway: protocol and upstream', () => {
  let f: Fixture;
  before(async () => {
    f = await fixture([policy('fs', { agt: agt('rules:\n  - deny: delete_file\n') })]);
  });
  after(() => f.close());

  it('answers malformed JSON with a -32700 parse error and forwards nothing', T, async () => {
    const before = f.stub.methods.length;
    const r = await post(f.url, '{"jsonrpc": "2.0", "id": 1, "method": ');
    assert.equal(r.status, 400);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.equal(r.json.id, null);
    assert.equal(r.json.error.code, -32700);
    assert.equal(f.stub.methods.length, before);
  });

  it('answers a message that is not JSON-RPC with -32600', T, async () => {
    const r = await post(f.url, { hello: 'world' });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, -32600);
  });

  it('answers methods other than POST, GET and DELETE with 405 and forwards nothing', T, async () => {
    const before = f.stub.requests;
    const r = await fetch(f.url, { method: 'PUT', body: '{}' });
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'GET, POST, DELETE');
    assert.equal(((await r.json()) as { error: { code: number } }).error.code, -32600);
    assert.equal(f.stub.requests, before);
  });

  it('forwards GET and DELETE to the upstream and relays its answer (the stub has no stream: 405)', T, async () => {
    for (const method of ['GET', 'DELETE']) {
      const before = f.stub.requests;
      const r = await fetch(f.url, { method, headers: { accept: 'text/event-stream' } });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.get('allow'), 'POST');
      await r.text();
      assert.equal(f.stub.requests, before + 1, method);
    }
  });

  it('refuses an MCP-Protocol-Version it does not know with 400, on every method, and forwards nothing', T, async () => {
    for (const [method, version] of [
      ['POST', '2099-01-01'],
      ['GET', 'latest'],
      ['DELETE', '2025-06-18, 2025-03-26'],
    ] as const) {
      const before = f.stub.requests;
      const r = await fetch(f.url, {
        method,
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': version },
        ...(method === 'POST' ? { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) } : {}),
      });
      assert.equal(r.status, 400, `${method} ${version}`);
      const body = (await r.json()) as { error: { code: number; data: { code: string; requested: string } } };
      assert.equal(body.error.code, -32600);
      assert.equal(body.error.data.code, 'protocol_version_unsupported');
      assert.equal(body.error.data.requested, version);
      assert.equal(f.stub.requests, before, `${method} ${version} reached the upstream`);
    }
  });

  it('refuses a batch on 2025-06-18 and later before any decision, and decides it on 2025-03-26', T, async () => {
    const batch = [call(31, 'search'), call(32, 'delete_file')];
    for (const version of ['2025-06-18', '2025-11-25']) {
      const before = f.stub.requests;
      const r = await post(f.url, batch, { 'mcp-protocol-version': version });
      assert.equal(r.status, 400, version);
      assert.equal(r.json.error.data.code, 'batch_not_allowed');
      assert.equal(f.stub.requests, before, `${version}: the batch reached the upstream`);
    }
    const calls = f.stub.calls.length;
    const r = await post(f.url, batch, { 'mcp-protocol-version': '2025-03-26' });
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.json.map((m: { id: number; error?: { code: number } }) => [m.id, m.error?.code ?? 'ok']),
      [
        [31, 'ok'],
        [32, -32001],
      ],
    );
    assert.deepEqual(
      f.stub.calls.slice(calls).map((c) => c.tool),
      ['search'],
    );
  });

  it('replaces an initialize answer that negotiates a version it does not know with -32602', T, async () => {
    const r = await post(f.url, {
      jsonrpc: '2.0',
      id: 'init-future',
      method: 'initialize',
      params: { protocolVersion: '2099-01-01', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    assert.equal(r.json.id, 'init-future');
    assert.equal(r.json.result, undefined);
    assert.equal(r.json.error.code, -32602);
    assert.equal(r.json.error.message, 'Unsupported protocol version');
    assert.equal(r.json.error.data.requested, '2099-01-01');
  });

  it('keeps an SSE event with empty data (the 2025-11-25 priming event) with its id', () => {
    assert.equal(
      rewriteSse('id: s_1\nretry: 5\ndata: \n\n', (m) => m),
      'id: s_1\nretry: 5\ndata:\n\n',
    );
  });

  it('leaves other paths to the caller', T, async () => {
    const r = await fetch(f.url.replace('/mcp', '/other'), { method: 'POST', body: '{}' });
    assert.equal(r.status, 404);
    assert.equal(await r.text(), 'not the gateway');
  });

  it('forwards other methods and passes response headers such as mcp-session-id through', T, async () => {
    const r = await post(f.url, {
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    assert.equal(r.json.result.protocolVersion, '2025-03-26');
    assert.match(r.headers.get('mcp-session-id') ?? '', /^stub-session-\d+$/);
    const n = await post(f.url, { jsonrpc: '2.0', method: 'notifications/initialized' });
    assert.equal(n.status, 202);
    assert.ok(f.stub.methods.includes('notifications/initialized'));
  });

  it('passes an upstream JSON-RPC error through verbatim', T, async () => {
    f.stub.setToolError('search', { code: -32050, message: 'backend exploded', data: { detail: 1 } });
    try {
      const r = await post(f.url, call(11, 'search'));
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, { jsonrpc: '2.0', id: 11, error: { code: -32050, message: 'backend exploded', data: { detail: 1 } } });
    } finally {
      f.stub.setToolError('search', undefined);
    }
  });

  it('passes an upstream HTTP error through verbatim, also for tools/list', T, async () => {
    f.stub.setHttpFailure({ status: 503, body: 'overloaded', contentType: 'text/plain' });
    try {
      const c = await post(f.url, call(12, 'search'));
      assert.equal(c.status, 503);
      assert.equal(c.text, 'overloaded');
      const l = await post(f.url, LIST);
      assert.equal(l.status, 503);
      assert.equal(l.text, 'overloaded');
    } finally {
      f.stub.setHttpFailure(undefined);
    }
  });

  it('refuses a tools/list answer it cannot read instead of passing it unfiltered', T, async () => {
    f.stub.setHttpFailure({ status: 200, body: 'not json', contentType: 'application/json' });
    try {
      const r = await post(f.url, LIST);
      assert.equal(r.status, 502);
      assert.equal(r.json.error.code, -32004);
      assert.equal(r.json.id, 1);
    } finally {
      f.stub.setHttpFailure(undefined);
    }
  });

  it('decides batch elements one by one with one snapshot, forwards the allowed ones and merges the answers', T, async () => {
    const reads = f.snapshotReads();
    const r = await post(f.url, [
      call(1, 'read_file'),
      call(2, 'delete_file'),
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      { jsonrpc: '2.0', method: 'notifications/progress' },
    ]);
    assert.equal(r.status, 200);
    assert.equal(f.snapshotReads() - reads, 1);
    const byId = new Map<number, any>(r.json.map((m: { id: number }) => [m.id, m]));
    assert.equal(r.json.length, 3);
    assert.equal(byId.get(1).result.content[0].text, 'called read_file with {}');
    assert.equal(byId.get(2).error.code, -32001);
    assert.deepEqual(
      byId.get(3).result.tools.map((t: { name: string }) => t.name),
      ['read_file', 'write_file', 'search'],
    );
  });

  it('answers a batch of only refused calls without asking the upstream', T, async () => {
    const before = f.stub.methods.length;
    const r = await post(f.url, [call(1, 'delete_file')]);
    assert.deepEqual(
      r.json.map((m: any) => m.error.code),
      [-32001],
    );
    assert.equal(f.stub.methods.length, before);
  });
});

describe('MCP gateway: limits and observers', () => {
  it('answers a body over maxRequestBytes with 413 and forwards nothing', T, async () => {
    const f = await fixture([], { maxRequestBytes: 64 });
    try {
      const r = await post(f.url, call(1, 'search', { q: 'x'.repeat(200) }));
      assert.equal(r.status, 413);
      assert.equal(r.json.error.code, -32600);
      assert.deepEqual(f.stub.methods, []);
    } finally {
      await f.close();
    }
  });

  it('keeps deciding when the onDecision observer throws', T, async () => {
    const f = await fixture([policy('fs', { agt: agt('rules:\n  - deny: delete_file\n') })], {
      onDecision: () => {
        throw new Error('observer bug');
      },
    });
    try {
      assert.equal((await post(f.url, call(1, 'delete_file'))).json.error.code, -32001);
      assert.ok((await post(f.url, call(2, 'search'))).json.result);
    } finally {
      await f.close();
    }
  });
});

describe('MCP gateway: upstream down', () => {
  it('answers -32004 upstream_unavailable with HTTP 502 when the upstream cannot be reached', T, async () => {
    const f = await fixture([]);
    try {
      await f.stub.close();
      const r = await post(f.url, call(1, 'search'));
      assert.equal(r.status, 502);
      assert.equal(r.json.id, 1);
      assert.equal(r.json.error.code, -32004);
      assert.match(
        r.json.error.message,
        /^upstream_unavailable: MCP server http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED\)$/,
      );
    } finally {
      await f.close();
    }
  });
});

describe('rewriteSse', () => {
  it('rewrites the JSON of complete events, keeps comments, drops events that are not JSON and a trailing partial event', () => {
    const out = rewriteSse('event: message\r\nid: 1\r\ndata: {"a":1}\r\n\r\n: comment\n\ndata: not json\n\ndata: {"a":2', (m) => ({
      ...(m as object),
      b: true,
    }));
    assert.equal(out, 'event: message\nid: 1\ndata: {"a":1,"b":true}\n\n: comment\n\n');
  });
});
