/**
 * Regression tests for issue 25 item 4, against a real router with a real MCP upstream: a denied
 * tool's name, description and schema must never reach the agent in any `tools/list` answer,
 * whatever the request's id and however the upstream frames or addresses its answer.
 *
 * Before the fix the gateway filtered only answers whose id matched a forwarded tools/list request
 * (as `typeof:String(id)`), so `"id": null`, `1e400` (null when re-serialised), an answer with
 * another id, and an SSE or JSON answer to a method it did not rewrite all came back unfiltered.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startMcpStub, type McpStub } from './stubs/mcp.js';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { startDirRouter, type DirRouter } from './testing/policy-dir.js';

const AGT = 'default: allow\nrules:\n  - deny: "*delete*"\n';
/** The denied tool: its name, description and schema marker must never show. */
const DENIED = {
  name: 'delete_repo',
  description: 'DENIED-DESCRIPTION wipes a repository',
  inputSchema: { type: 'object', title: 'DENIED-SCHEMA' },
};
const TOOLS = [DENIED, { name: 'safe_tool', description: 'a safe tool' }];
const LEAKS = ['delete_repo', 'DENIED-DESCRIPTION', 'DENIED-SCHEMA'];

/** POST raw bytes to the router's /mcp as an MCP client does; the answer's status and raw text. */
async function rpcRaw(r: DirRouter, body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${r.router.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body,
  });
  return { status: res.status, text: await res.text() };
}

function assertNoLeak(text: string, what: string): void {
  for (const l of LEAKS) assert.ok(!text.includes(l), `${what}: ${l} reached the agent in ${text.slice(0, 600)}`);
}

/** A tools/list answer as an upstream would write it, with `id` spelled as raw JSON text. */
const listAnswer = (idText: string): string =>
  `{"jsonrpc":"2.0","id":${idText},"result":{"tools":${JSON.stringify(TOOLS.map((t) => ({ inputSchema: { type: 'object' }, ...t })))}}}`;

describe('hostile agent vs tools/list filtering (issue 25 item 4)', () => {
  let stub: OpenAIStub;
  let mcp: McpStub;
  let r: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    mcp = await startMcpStub({ tools: TOOLS });
    r = await startDirRouter(
      { toolProfile: { appliesTo: { tool: null, mcpServer: null } }, agt: AGT },
      { upstream: stub.url, mcpUpstream: mcp.url },
    );
  });
  after(async () => {
    await r.stop();
    await mcp.close();
    await stub.close();
  });

  it('a normal tools/list is filtered (control)', async () => {
    const res = await rpcRaw(r, '{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    assert.equal(res.status, 200);
    assert.ok(res.text.includes('safe_tool'), res.text);
    assertNoLeak(res.text, 'id 1');
  });

  for (const idText of ['null', '1e400', '-1e400', '9007199254740993', '1.5', '0.1', 'true', '{}', '[1]', '{"a":1}']) {
    it(`a tools/list with id ${idText} is refused with -32600 and never answered unfiltered (hole: null/1e400 came back unfiltered)`, async () => {
      for (const mode of ['json', 'sse'] as const) {
        mcp.setResponseMode(mode);
        try {
          const res = await rpcRaw(r, `{"jsonrpc":"2.0","id":${idText},"method":"tools/list"}`);
          assertNoLeak(res.text, `id ${idText} (${mode})`);
          const body = JSON.parse(res.text);
          assert.equal(body.error?.code, -32600, res.text);
          assert.equal(body.id, null, res.text);
        } finally {
          mcp.setResponseMode('json');
        }
      }
    });
  }

  it('a batch with a null-id tools/list gets the refusal and the other answers, none unfiltered', async () => {
    const res = await rpcRaw(
      r,
      '[{"jsonrpc":"2.0","id":null,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"ping"}]',
    );
    assertNoLeak(res.text, 'batch');
    const body = JSON.parse(res.text) as Array<{ id: unknown; error?: { code: number } }>;
    assert.equal(body.length, 3, res.text);
    assert.ok(
      body.some((m) => m.id === null && m.error?.code === -32600),
      res.text,
    );
    assert.ok(res.text.includes('safe_tool'), res.text);
  });

  it('a batch with the same id twice (tools/list and ping) is filtered', async () => {
    const res = await rpcRaw(r, '[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"tools/list"}]');
    assertNoLeak(res.text, 'duplicate ids');
    assert.ok(res.text.includes('safe_tool'), res.text);
  });

  for (const [label, status, contentType, body] of [
    ['JSON answer to a ping with a tools list under another id', 200, 'application/json', listAnswer('999')],
    ['JSON answer with a null id', 200, 'application/json', listAnswer('null')],
    ['JSON batch answer holding a tools list', 200, 'application/json', `[${listAnswer('"x"')}]`],
    ['SSE answer to a ping holding a tools list', 200, 'text/event-stream', `event: message\ndata: ${listAnswer('42')}\n\n`],
    ['SSE answer with CR line ends', 200, 'text/event-stream', `event: message\rdata: ${listAnswer('42')}\r\r`],
    ['SSE answer whose last event has no blank line', 200, 'text/event-stream', `data: ${listAnswer('7')}`],
    ['SSE event that a lenient parser reads (NaN)', 200, 'text/event-stream', `data: ${listAnswer('NaN')}\n\n`],
    [
      'SSE data split over two data lines',
      200,
      'text/event-stream',
      `data: ${listAnswer('8').slice(0, 40)}\ndata: ${listAnswer('8').slice(40)}\n\n`,
    ],
    [
      'JSON answer with a duplicate result key',
      200,
      'application/json',
      `{"jsonrpc":"2.0","id":3,"result":{"tools":[]},${listAnswer('3').slice(1)}`,
    ],
    ['an HTTP error whose JSON body holds a tools list', 500, 'application/json', listAnswer('3')],
    // Found by an attacker's pass over the fix:
    ['SSE answer starting with a byte-order mark', 200, 'text/event-stream', `\uFEFFdata: ${listAnswer('42')}\n\n`],
    ['JSON answer spelling Result with a capital', 200, 'application/json', listAnswer('3').replace('"result"', '"Result"')],
    [
      'JSON answer with a second, capitalised Tools list',
      200,
      'application/json',
      `{"jsonrpc":"2.0","id":3,"result":{"tools":[],"Tools":${JSON.stringify(TOOLS)}}}`,
    ],
    ['JSON batch nested in a batch', 200, 'application/json', `[[${listAnswer('3')}]]`],
  ] as const) {
    it(`filters an upstream ${label} (hole: only answers to a matching tools/list id were filtered)`, async () => {
      mcp.setHttpFailure({ status, contentType, body });
      try {
        const res = await rpcRaw(r, '{"jsonrpc":"2.0","id":3,"method":"ping"}');
        assertNoLeak(res.text, label);
        const n = await rpcRaw(r, '{"jsonrpc":"2.0","method":"notifications/initialized"}');
        assertNoLeak(n.text, `${label} (notification)`);
      } finally {
        mcp.setHttpFailure(undefined);
      }
    });
  }

  it('property: whatever the id and framing, no denied tool reaches the agent', async () => {
    // ids as raw JSON text: valid ids, ids that do not survive re-serialisation, other JSON values
    const idText = fc.oneof(
      fc.constantFrom(
        'null',
        '1e400',
        '-1e400',
        '1E999',
        '9007199254740993',
        '-9007199254740993',
        '1.0',
        '1.5',
        '-0',
        '1e2',
        'true',
        'false',
        '{}',
        '[]',
      ),
      fc.integer().map(String),
      fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map(String),
      fc.double().filter(Number.isFinite).map(String),
      fc.string({ unit: 'binary' }).map((s) => JSON.stringify(s)),
      fc.jsonValue().map((v) => JSON.stringify(v)),
    );
    const framing = fc.constantFrom('single', 'batch', 'batch-dup', 'notification');
    const upstream = fc.constantFrom('stub-json', 'stub-sse', 'raw-json', 'raw-sse', 'raw-batch');
    await fc.assert(
      fc.asyncProperty(idText, framing, upstream, fc.nat(1000), async (id, frame, up, other) => {
        const list = `{"jsonrpc":"2.0","id":${id},"method":"tools/list"}`;
        const body =
          frame === 'single'
            ? list
            : frame === 'batch'
              ? `[${list},{"jsonrpc":"2.0","id":${other},"method":"ping"}]`
              : frame === 'batch-dup'
                ? `[${list},${list},{"jsonrpc":"2.0","id":${id},"method":"ping"}]`
                : '{"jsonrpc":"2.0","method":"tools/list"}';
        mcp.setResponseMode(up === 'stub-sse' ? 'sse' : 'json');
        if (up === 'raw-json') mcp.setHttpFailure({ status: 200, contentType: 'application/json', body: listAnswer(id) });
        if (up === 'raw-batch')
          mcp.setHttpFailure({ status: 200, contentType: 'application/json', body: `[${listAnswer(id)},${listAnswer(String(other))}]` });
        if (up === 'raw-sse')
          mcp.setHttpFailure({ status: 200, contentType: 'text/event-stream', body: `event: message\ndata: ${listAnswer(id)}\n\n` });
        try {
          const res = await rpcRaw(r, body);
          for (const l of LEAKS) if (res.text.includes(l)) return false;
          return true;
        } finally {
          mcp.setHttpFailure(undefined);
          mcp.setResponseMode('json');
        }
      }),
      { numRuns: 150 },
    );
  });
});
