/**
 * The MCP gateway on the current protocol (issue 20 item 7), proven with the official TypeScript
 * SDK on both sides: its `Client` over `StreamableHTTPClientTransport` pointed at a real router, and
 * its `Server` over `StreamableHTTPServerTransport` (sessions, an event store, SSE answers) behind
 * it. Policy: every tool matching `*delete*`, and `drop_table`, is denied.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema, McpError, type JSONRPCMessage, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.js';
import { startDirRouter, type DirRouter } from '../testing/policy-dir.js';
import { startSdkUpstream, type SdkUpstream } from '../testing/mcp-sdk-upstream.js';

const T = { timeout: 10_000 };
const AGT = 'default: allow\nrules:\n  - deny: "*delete*"\n  - deny: "drop_table"\n';
/** Upstream tools in list order; with 2 a page, page 3 holds only denied tools. */
const TOOLS = ['read_file', 'delete_file', 'search', 'write_file', 'delete_repo', 'drop_table', 'list_dir'];
const ALLOWED = ['read_file', 'search', 'write_file', 'list_dir'];
const DENIED = /delete|drop_table/i;

/** Every message the client received after connecting, with waiters for one to come. */
class Seen {
  readonly all: JSONRPCMessage[] = [];
  #waiters: Array<{ test: (m: JSONRPCMessage) => boolean; resolve: (m: JSONRPCMessage) => void }> = [];
  push(m: JSONRPCMessage): void {
    this.all.push(m);
    this.#waiters = this.#waiters.filter((w) => {
      if (!w.test(m)) return true;
      w.resolve(m);
      return false;
    });
  }
  /** The first message from index `from` on that passes `test` (already seen or still to come). */
  next(test: (m: JSONRPCMessage) => boolean, from = 0): Promise<JSONRPCMessage> {
    const had = this.all.slice(from).find(test);
    if (had !== undefined) return Promise.resolve(had);
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }
}

const isLog = (text: string) => (m: JSONRPCMessage) =>
  'method' in m && m.method === 'notifications/message' && (m.params as { data?: unknown } | undefined)?.data === text;

interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  seen: Seen;
  /** Content type of each HTTP answer the client got, by method. */
  answers: Array<{ method: string; status: number; contentType: string }>;
  sessionId: string;
}

async function connect(r: DirRouter, opts: ConstructorParameters<typeof Client>[1] = {}): Promise<Connected> {
  const answers: Connected['answers'] = [];
  const transport = new StreamableHTTPClientTransport(new URL(`${r.router.url}/mcp`), {
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      answers.push({ method: init?.method ?? 'GET', status: res.status, contentType: res.headers.get('content-type') ?? '' });
      return res;
    },
    reconnectionOptions: { initialReconnectionDelay: 5, maxReconnectionDelay: 20, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
  });
  const client = new Client({ name: 'kars-test-agent', version: '1.0.0' }, opts);
  await client.connect(transport);
  const seen = new Seen();
  const deliver = transport.onmessage;
  transport.onmessage = (m: JSONRPCMessage) => {
    seen.push(m);
    deliver?.(m);
  };
  const sessionId = transport.sessionId;
  assert.ok(sessionId !== undefined, 'the upstream session id reached the client');
  return { client, transport, seen, answers, sessionId };
}

function toolNames(tools: Tool[] | unknown): string[] {
  return (tools as Array<{ name: string }>).map((t) => t.name);
}

/** The names in a message's `params.tools`. */
function paramTools(m: JSONRPCMessage | undefined): string[] {
  return toolNames((m as unknown as { params: { tools: Tool[] } }).params.tools);
}

/** An McpError with this code (and kars code in data), as the SDK raises it. */
function mcpError(code: number, karsCode?: string) {
  return (e: unknown): boolean => {
    assert.ok(e instanceof McpError, `expected McpError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    if (karsCode !== undefined) assert.equal((e.data as { code?: string } | undefined)?.code, karsCode);
    return true;
  };
}

describe('MCP gateway with the official MCP SDK as client and server (issue 20 item 7)', () => {
  let inference: OpenAIStub;
  let up: SdkUpstream;
  let r: DirRouter;
  const open: Connected[] = [];
  before(async () => {
    inference = await startOpenAIStub();
    up = await startSdkUpstream({ tools: TOOLS, pageSize: 2 });
    r = await startDirRouter(
      { toolProfile: { appliesTo: { tool: null, mcpServer: null } }, agt: AGT },
      { upstream: inference.url, mcpUpstream: up.url },
    );
  });
  after(async () => {
    for (const c of open) await c.client.close().catch(() => undefined);
    await r.stop();
    await up.close();
    await inference.close();
  });
  async function agent(opts: ConstructorParameters<typeof Client>[1] = {}): Promise<Connected> {
    const c = await connect(r, opts);
    open.push(c);
    return c;
  }

  it(
    'initializes on 2025-11-25 and carries Mcp-Session-Id and MCP-Protocol-Version on every later request to the upstream',
    T,
    async () => {
      const from = up.requests.length;
      const a = await agent();
      assert.equal(a.client.getServerVersion()?.name, 'kars-sdk-upstream');
      await a.client.ping();
      const later = up.requests.slice(from).filter((q) => q.headers['mcp-session-id'] !== undefined);
      assert.ok(later.length >= 2, 'initialized and ping went upstream with the session');
      for (const q of later) {
        assert.equal(q.headers['mcp-session-id'], a.sessionId);
        assert.equal(q.headers['mcp-protocol-version'], '2025-11-25');
      }
    },
  );

  it('tools/list pagination: the cursor passes, every page is filtered, a denied tool is on no page', T, async () => {
    const a = await agent();
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await a.client.listTools(cursor === undefined ? {} : { cursor });
      pages.push(toolNames(page.tools));
      cursor = page.nextCursor;
    } while (cursor !== undefined && pages.length < 10);
    assert.deepEqual(pages, [['read_file'], ['search', 'write_file'], [], ['list_dir']]);
    assert.deepEqual(pages.flat(), ALLOWED);
  });

  it('a denied tool is refused with McpError -32001 (tool_denied), whatever the case, and never runs', T, async () => {
    const a = await agent();
    const ran = up.calls.length;
    for (const name of ['delete_file', 'DELETE_FILE', 'Delete_Repo', 'drop_table', 'Drop_Table'])
      await assert.rejects(a.client.callTool({ name, arguments: { stream: true } }), mcpError(-32001, 'tool_denied'));
    for (const name of ['ｄelete_file', 'delete_file ', 'delete\u200b_file', 'dr\u043Ep_table'])
      await assert.rejects(a.client.callTool({ name, arguments: {} }), mcpError(-32602, 'tool_name_invalid'));
    assert.deepEqual(up.calls.slice(ran), []);
    // the session still works
    const ok = await a.client.callTool({ name: 'read_file', arguments: {} });
    assert.deepEqual(ok.content, [{ type: 'text', text: 'ran read_file' }]);
  });

  it('an allowed tools/call answered as an SSE stream: progress and the result pass, pushed tool lists are filtered', T, async () => {
    const a = await agent();
    const from = a.seen.all.length;
    const progress: number[] = [];
    const res = await a.client.callTool({ name: 'search', arguments: { stream: true, smuggle: true, steps: 3 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    assert.deepEqual(res.content, [{ type: 'text', text: 'ran search' }]);
    assert.deepEqual(progress, [1, 2, 3]);
    const answer = a.answers.filter((x) => x.method === 'POST').at(-1);
    assert.match(answer?.contentType ?? '', /^text\/event-stream/);
    const got = a.seen.all.slice(from);
    const changed = got.find((m) => 'method' in m && m.method === 'notifications/tools/list_changed');
    const sampling = got.find((m) => 'method' in m && m.method === 'sampling/createMessage');
    assert.ok(changed !== undefined && sampling !== undefined, JSON.stringify(got));
    assert.deepEqual(paramTools(changed), ALLOWED);
    assert.deepEqual(paramTools(sampling), ALLOWED);
    assert.doesNotMatch(JSON.stringify(got), DENIED);
  });

  it('notifications/tools/list_changed on the GET stream reaches the client, and the re-list it triggers is filtered', T, async () => {
    let changed!: (tools: Tool[]) => void;
    const relisted = new Promise<Tool[]>((resolve) => (changed = resolve));
    const opened = up.getStreamOpened();
    const a = await agent({
      listChanged: { tools: { debounceMs: 0, onChanged: (err, tools) => (err === null && tools !== null ? changed(tools) : undefined) } },
    });
    await opened;
    const get = up.requests.filter((q) => q.method === 'GET' && q.headers['mcp-session-id'] === a.sessionId);
    assert.equal(get.length, 1, 'the GET stream went through the router');
    assert.equal(get[0]!.headers['mcp-protocol-version'], '2025-11-25');
    const before = [...up.tools];
    up.pageSize = 100;
    try {
      up.tools.push('delete_everything', 'fresh_tool');
      await up.sessions.get(a.sessionId)!.server.sendToolListChanged();
      assert.deepEqual(toolNames(await relisted), [...ALLOWED, 'fresh_tool']);
    } finally {
      up.tools.splice(0, up.tools.length, ...before);
      up.pageSize = 2;
    }
  });

  it(
    'server-initiated messages on the GET stream are filtered: a padded list_changed and a sampling request listing tools',
    T,
    async () => {
      const opened = up.getStreamOpened();
      const a = await agent();
      await opened;
      const from = a.seen.all.length;
      const transport = up.sessions.get(a.sessionId)!.transport;
      const all = TOOLS.map((name) => ({ name, inputSchema: { type: 'object' } }));
      await transport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { tools: all } });
      await transport.send({
        jsonrpc: '2.0',
        id: 'push-1',
        method: 'sampling/createMessage',
        params: { messages: [], maxTokens: 1, tools: all },
      });
      await transport.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'end of pushes' } });
      await a.seen.next(isLog('end of pushes'), from);
      const got = a.seen.all.slice(from);
      assert.equal(got.length, 3, JSON.stringify(got));
      for (const m of got.slice(0, 2)) assert.deepEqual(paramTools(m), ALLOWED);
      assert.doesNotMatch(JSON.stringify(got), DENIED);
    },
  );

  it(
    'the GET stream resumes with Last-Event-ID: what was sent while it was down is replayed through the gateway, filtered',
    T,
    async () => {
      const opened = up.getStreamOpened();
      const a = await agent();
      a.client.setNotificationHandler(LoggingMessageNotificationSchema, () => undefined);
      await opened;
      const from = a.seen.all.length;
      const transport = up.sessions.get(a.sessionId)!.transport;
      await transport.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'before the cut' } });
      await a.seen.next(isLog('before the cut'), from);
      const reopened = up.getStreamOpened();
      transport.closeStandaloneSSEStream();
      // Stored while no stream is open: only a resumption can deliver them.
      const all = TOOLS.map((name) => ({ name, inputSchema: { type: 'object' } }));
      await transport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { tools: all } });
      await transport.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'after the cut' } });
      await reopened;
      await a.seen.next(isLog('after the cut'), from);
      const resumes = up.requests.filter(
        (q) => q.method === 'GET' && q.headers['mcp-session-id'] === a.sessionId && q.headers['last-event-id'],
      );
      assert.equal(resumes.length, 1, 'one resumption reached the upstream');
      assert.match(String(resumes[0]!.headers['last-event-id']), /_\d{8}$/);
      const got = a.seen.all.slice(from);
      const changed = got.find((m) => 'method' in m && m.method === 'notifications/tools/list_changed');
      assert.deepEqual(paramTools(changed), ALLOWED);
      assert.doesNotMatch(JSON.stringify(got), DENIED);
    },
  );

  it('a tools/list whose SSE answer is cut before its result gets it on a GET with Last-Event-ID, filtered', T, async () => {
    const a = await agent();
    const from = up.requests.length;
    up.cutListStream = true;
    up.pageSize = 100;
    try {
      const page = await a.client.listTools();
      assert.deepEqual(toolNames(page.tools), ALLOWED);
    } finally {
      up.cutListStream = false;
      up.pageSize = 2;
    }
    const resumes = up.requests.slice(from).filter((q) => q.method === 'GET' && q.headers['last-event-id'] !== undefined);
    assert.equal(resumes.length, 1, 'the answer came on a resumed GET stream');
  });

  it('an agent that leaves its GET stream ends the upstream GET too (no connection left behind)', T, async () => {
    const opened = up.getStreamOpened();
    const a = await connect(r);
    await opened;
    const closed = up.getStreamClosed();
    await a.client.close();
    await closed;
    // and the session can open a new stream (the upstream allows one GET stream per session: 409 otherwise)
    const reopened = up.getStreamOpened();
    const asked = fetch(`${r.router.url}/mcp`, {
      headers: { accept: 'text/event-stream', 'mcp-session-id': a.sessionId, 'mcp-protocol-version': '2025-11-25' },
    });
    await reopened;
    // the SDK server's response head leaves with its first event
    await up.sessions
      .get(a.sessionId)!
      .transport.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'hello again' } });
    const res = await asked;
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const again = up.getStreamClosed();
    await res.body?.cancel();
    await again;
  });

  it(
    'an unsupported or renegotiated MCP-Protocol-Version is refused with 400 by the gateway and never reaches the upstream',
    T,
    async () => {
      const a = await agent();
      for (const [version, code] of [
        ['2099-01-01', 'protocol_version_unsupported'],
        ['2025-06-18', 'protocol_version_mismatch'],
        ['2025-11-25, 2025-06-18', 'protocol_version_unsupported'],
      ] as const)
        for (const method of ['POST', 'GET', 'DELETE']) {
          const from = up.requests.length;
          const res = await fetch(`${r.router.url}/mcp`, {
            method,
            headers: {
              accept: 'application/json, text/event-stream',
              'content-type': 'application/json',
              'mcp-session-id': a.sessionId,
              'mcp-protocol-version': version,
            },
            ...(method === 'POST' ? { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) } : {}),
          });
          assert.equal(res.status, 400, `${method} ${version}`);
          const body = (await res.json()) as { error: { code: number; data: { code: string } } };
          assert.equal(body.error.code, -32600);
          assert.equal(body.error.data.code, code, `${method} ${JSON.stringify(version)}`);
          // (the agent's own GET stream may reach the upstream meanwhile: only this request must not)
          assert.deepEqual(
            up.requests.slice(from).filter((q) => q.headers['mcp-protocol-version'] === version),
            [],
            `${method} ${version} reached the upstream`,
          );
        }
      // the session is untouched
      assert.deepEqual(toolNames((await a.client.listTools()).tools), ['read_file']);
    },
  );
});

/** POST one raw JSON-RPC body to the router on a session; the answer's JSON-RPC messages (JSON or SSE). */
async function raw(
  r: DirRouter,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; messages: Array<Record<string, any>>; session: string | null }> {
  const res = await fetch(`${r.router.url}/mcp`, {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  let messages: Array<Record<string, any>> = [];
  if (type.startsWith('text/event-stream'))
    messages = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, any>);
  else if (text !== '') {
    const v = JSON.parse(text) as unknown;
    messages = (Array.isArray(v) ? v : [v]) as Array<Record<string, any>>;
  }
  return { status: res.status, messages, session: res.headers.get('mcp-session-id') };
}

describe('hostile agent vs the MCP gateway on a real SDK server (issue 20 item 7)', () => {
  let inference: OpenAIStub;
  let up: SdkUpstream;
  let r: DirRouter;
  /** A session initialized on 2025-03-26 (batches allowed) and one on 2025-11-25. */
  const old = { 'mcp-session-id': '', 'mcp-protocol-version': '2025-03-26' };
  const cur = { 'mcp-session-id': '', 'mcp-protocol-version': '2025-11-25' };
  const call = (id: number | string, params: Record<string, unknown>): Record<string, unknown> => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params,
  });

  before(async () => {
    inference = await startOpenAIStub();
    up = await startSdkUpstream({ tools: TOOLS });
    r = await startDirRouter(
      { toolProfile: { appliesTo: { tool: null, mcpServer: null } }, agt: AGT },
      { upstream: inference.url, mcpUpstream: up.url },
    );
    for (const s of [old, cur]) {
      const init = await raw(
        r,
        JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: s['mcp-protocol-version'], capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
        {},
      );
      assert.equal(init.messages[0]?.['result']?.protocolVersion, s['mcp-protocol-version']);
      s['mcp-session-id'] = init.session ?? '';
      const done = await raw(r, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), s);
      assert.equal(done.status, 202);
    }
  });
  after(async () => {
    await r.stop();
    await up.close();
    await inference.close();
  });

  it('a batch on 2025-11-25 is refused with -32600 and never reaches the upstream', T, async () => {
    const from = up.requests.length;
    const res = await raw(r, JSON.stringify([call(1, { name: 'read_file' }), call(2, { name: 'search' })]), cur);
    assert.equal(res.status, 400);
    assert.equal(res.messages[0]?.['error']?.code, -32600);
    assert.equal(res.messages[0]?.['error']?.data?.code, 'batch_not_allowed');
    assert.equal(up.requests.length, from);
  });

  it('the header cannot re-open batches on a 2025-11-25 session (it must name the negotiated version)', T, async () => {
    const from = up.requests.length;
    const res = await raw(r, JSON.stringify([call(1, { name: 'read_file' })]), { ...cur, 'mcp-protocol-version': '2025-03-26' });
    assert.equal(res.status, 400);
    assert.equal(res.messages[0]?.['error']?.data?.code, 'protocol_version_mismatch');
    assert.equal(up.requests.length, from);
  });

  it('a 2025-03-26 batch is decided element by element: with duplicate ids and case variants only the allowed call runs', T, async () => {
    const ran = up.calls.length;
    const res = await raw(
      r,
      JSON.stringify([
        call(7, { name: 'read_file', arguments: {} }),
        call(7, { name: 'delete_file', arguments: {} }),
        call(8, { name: 'DELETE_REPO', arguments: {} }),
      ]),
      old,
    );
    assert.equal(res.status, 200);
    const byKind = res.messages.map((m) => [m['id'], m['error']?.code ?? m['result']?.content?.[0]?.text]);
    assert.deepEqual(
      byKind.sort((x, y) => String(x[1]).localeCompare(String(y[1]))),
      [
        [7, -32001],
        [8, -32001],
        [7, 'ran read_file'],
      ].sort((x, y) => String(x[1]).localeCompare(String(y[1]))),
    );
    assert.deepEqual(up.calls.slice(ran), ['read_file']);
  });

  for (const [label, body] of [
    [
      'a second name key in another case (Go decoders read the last)',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"delete_file"}}',
    ],
    [
      'a params key in another case',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"},"Params":{"name":"delete_file"}}',
    ],
    [
      'a params key with a long s (Unicode folding)',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"},"param\u017f":{"name":"delete_file"}}',
    ],
    ['a method key in another case', '{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"delete_file"},"result":{}}'],
    ['a fullwidth name key', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","\uff4eame":"delete_file"}}'],
    ['the method in another case', '{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"delete_file"}}'],
    ['the method with a space', '{"jsonrpc":"2.0","id":1,"method":"tools/call ","params":{"name":"delete_file"}}'],
    ['the method with a NUL', '{"jsonrpc":"2.0","id":1,"method":"tools/call\\u0000","params":{"name":"delete_file"}}'],
  ] as const)
    it(`${label} is refused with -32600 before any decision, and nothing reaches the upstream`, T, async () => {
      const from = up.requests.length;
      const ran = up.calls.length;
      const res = await raw(r, body, cur);
      assert.equal(res.status, 400, JSON.stringify(res.messages));
      assert.equal(res.messages[0]?.['error']?.code, -32600);
      assert.equal(res.messages[0]?.['error']?.data?.code, 'ambiguous_spelling');
      assert.equal(up.requests.length, from);
      assert.deepEqual(up.calls.slice(ran), []);
    });

  it('_meta cannot rename the call: the decided tool is the one that runs', T, async () => {
    const ran = up.calls.length;
    const res = await raw(
      r,
      JSON.stringify(
        call(9, { name: 'read_file', arguments: { name: 'delete_file' }, _meta: { name: 'delete_file', progressToken: 't' } }),
      ),
      cur,
    );
    assert.equal(res.messages.at(-1)?.['result']?.content?.[0]?.text, 'ran read_file');
    assert.deepEqual(up.calls.slice(ran), ['read_file']);
    const denied = await raw(r, JSON.stringify(call(10, { name: 'delete_file', _meta: { name: 'read_file' } })), cur);
    assert.equal(denied.messages[0]?.['error']?.code, -32001);
    assert.deepEqual(up.calls.slice(ran), ['read_file']);
  });

  it('DELETE ends the session upstream; a request on it afterwards gets the upstream 404', T, async () => {
    const a = await connect(r);
    try {
      assert.ok(up.sessions.has(a.sessionId));
      await a.transport.terminateSession();
      assert.equal(up.requests.at(-1)?.method, 'DELETE');
      assert.equal(up.sessions.has(a.sessionId), false);
      const res = await raw(r, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), {
        'mcp-session-id': a.sessionId,
        'mcp-protocol-version': '2025-11-25',
      });
      assert.equal(res.status, 404);
      assert.equal(res.messages[0]?.['error']?.code, -32001);
    } finally {
      await a.client.close();
    }
  });
});

/** Resolves once the router's snapshot satisfies `pred` (now or after a reload). */
function snapshotWhere(
  r: DirRouter,
  pred: (tools: ReturnType<DirRouter['router']['state']['current']>['tools']) => boolean,
): Promise<void> {
  return new Promise((resolve) => {
    if (pred(r.router.state.current().tools)) {
      resolve();
      return;
    }
    const off = r.router.state.onChange(() => {
      if (!pred(r.router.state.current().tools)) return;
      off();
      resolve();
    });
  });
}

describe('ToolPolicy outcomes and a live edit, as the MCP SDK raises them (issue 20 item 8, MCP part)', () => {
  let inference: OpenAIStub;
  let up: SdkUpstream;
  let r: DirRouter;
  before(async () => {
    inference = await startOpenAIStub();
    up = await startSdkUpstream({ tools: TOOLS });
    r = await startDirRouter(
      { toolProfile: { appliesTo: { tool: null, mcpServer: null }, rateLimit: { rps: 0, burst: 2 } }, agt: AGT },
      { upstream: inference.url, mcpUpstream: up.url },
    );
  });
  after(async () => {
    await r.stop();
    await up.close();
    await inference.close();
  });

  it(
    'over the rate limit: the burst passes (also streamed), the next call raises McpError -32003 rate_limited and does not run',
    T,
    async () => {
      const a = await connect(r);
      try {
        const ran = up.calls.length;
        const streamed = await a.client.callTool({ name: 'search', arguments: { stream: true } });
        assert.deepEqual(streamed.content, [{ type: 'text', text: 'ran search' }]);
        await a.client.callTool({ name: 'SEARCH', arguments: {} }); // the same bucket, whatever the case
        await assert.rejects(a.client.callTool({ name: 'search', arguments: {} }), (e: unknown) => {
          mcpError(-32003, 'rate_limited')(e);
          assert.equal(((e as McpError).data as { retryAfterMs: unknown }).retryAfterMs, null);
          return true;
        });
        assert.deepEqual(up.calls.slice(ran), ['search', 'SEARCH']);
      } finally {
        await a.client.close();
      }
    },
  );

  it(
    'an edit is enforced on an open session: new calls refused by the new policy, and the GET stream opened before it filters by it',
    T,
    async () => {
      const opened = up.getStreamOpened();
      const a = await connect(r);
      try {
        await opened;
        writeFileSync(
          join(r.dir, 'policies', 'profile.json'),
          JSON.stringify({ appliesTo: { tool: null, mcpServer: null }, approval: { mode: 'always' } }),
        );
        writeFileSync(join(r.dir, 'policies', 'agt-profile.yaml'), 'default: allow\nrules:\n  - deny: "search"\n');
        await snapshotWhere(r, (tools) => tools.length === 1 && tools[0]!.approval?.mode === 'always' && tools[0]!.agt?.rules.length === 1);
        const ran = up.calls.length;
        await assert.rejects(a.client.callTool({ name: 'read_file', arguments: {} }), mcpError(-32002, 'approval_required'));
        await assert.rejects(a.client.callTool({ name: 'search', arguments: {} }), mcpError(-32001, 'tool_denied'));
        assert.deepEqual(up.calls.slice(ran), []);
        // the listing follows the new rules: search hidden, the delete tools visible again
        assert.deepEqual(
          toolNames((await a.client.listTools()).tools),
          TOOLS.filter((t) => t !== 'search'),
        );
        const from = a.seen.all.length;
        const all = TOOLS.map((name) => ({ name, inputSchema: { type: 'object' } }));
        const transport = up.sessions.get(a.sessionId)!.transport;
        await transport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { tools: all } });
        const pushed = await a.seen.next((m) => 'method' in m && m.method === 'notifications/tools/list_changed', from);
        assert.deepEqual(
          paramTools(pushed),
          TOOLS.filter((t) => t !== 'search'),
        );
      } finally {
        await a.client.close();
      }
    },
  );
});

describe('a named MCP server (/mcp/<name>) on the current protocol', () => {
  let inference: OpenAIStub;
  let up: SdkUpstream;
  let r: DirRouter;
  before(async () => {
    inference = await startOpenAIStub();
    up = await startSdkUpstream({ tools: TOOLS });
    r = await startDirRouter(
      {
        toolProfile: { appliesTo: { tool: null, mcpServer: 'github' } },
        agt: 'default: allow\nrules:\n  - deny: "github/delete_*"\n',
      },
      { upstream: inference.url, mcpUpstreams: [{ name: 'github', url: up.url }] },
    );
  });
  after(async () => {
    await r.stop();
    await up.close();
    await inference.close();
  });

  it('serves the session, the GET stream and DELETE at /mcp/github, with server/tool rules on lists, pushes and calls', T, async () => {
    const opened = up.getStreamOpened();
    const transport = new StreamableHTTPClientTransport(new URL(`${r.router.url}/mcp/github`), {
      reconnectionOptions: { initialReconnectionDelay: 5, maxReconnectionDelay: 20, reconnectionDelayGrowFactor: 1.5, maxRetries: 2 },
    });
    const client = new Client({ name: 'kars-test-agent', version: '1.0.0' });
    await client.connect(transport);
    try {
      await opened;
      const visible = TOOLS.filter((t) => !t.startsWith('delete_'));
      assert.deepEqual(toolNames((await client.listTools()).tools), visible);
      await assert.rejects(client.callTool({ name: 'delete_repo', arguments: {} }), mcpError(-32001, 'tool_denied'));
      const seen = new Seen();
      const deliver = transport.onmessage;
      transport.onmessage = (m: JSONRPCMessage) => {
        seen.push(m);
        deliver?.(m);
      };
      const all = TOOLS.map((name) => ({ name, inputSchema: { type: 'object' } }));
      await up.sessions
        .get(transport.sessionId!)!
        .transport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { tools: all } });
      assert.deepEqual(paramTools(await seen.next((m) => 'method' in m && m.method === 'notifications/tools/list_changed')), visible);
      const sid = transport.sessionId!;
      await transport.terminateSession();
      assert.equal(up.sessions.has(sid), false, 'DELETE ended the upstream session');
      assert.deepEqual(up.calls, []);
    } finally {
      await client.close();
    }
  });
});
