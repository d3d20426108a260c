/**
 * Regression tests for issue 9 item 4 (tool and body integrity), against a real router with a real
 * MCP upstream: a hostile agent tries to call a denied tool under other spellings.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startMcpStub, type McpStub } from './stubs/mcp.js';
import { startOpenAIStub, type OpenAIStub } from './stubs/openai.js';
import { startDirRouter, type DirRouter } from './testing/policy-dir.js';
import { postJson } from './testing/http.js';

const AGT = 'default: allow\nrules:\n  - deny: "*delete*"\n  - deny: "drop_table"\n';

/** POST a JSON-RPC message to the router's /mcp; `body` is the answer parsed, or its text when it is not JSON. */
async function rpc(r: DirRouter, body: string): Promise<{ status: number; body: any }> {
  const res = await postJson(`${r.router.url}/mcp`, body, { accept: 'application/json, text/event-stream' });
  return { status: res.status, body: res.json ?? res.text };
}
const call = (name: string, id = 1): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });

describe('hostile agent vs tool rules (issue 9 item 4)', () => {
  let stub: OpenAIStub;
  let mcp: McpStub;
  let r: DirRouter;
  before(async () => {
    stub = await startOpenAIStub();
    mcp = await startMcpStub({
      tools: [{ name: 'delete_repo' }, { name: 'drop_table' }, { name: 'safe_tool' }, { name: 'github/delete_repo' }],
    });
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

  it('*delete* denies the namespaced tool github/delete_repo (hole: * did not cross /)', async () => {
    mcp.calls.length = 0;
    const res = await rpc(r, call('github/delete_repo'));
    assert.equal(res.body?.error?.data?.code, 'tool_denied', JSON.stringify(res.body));
    assert.equal(mcp.calls.length, 0);
  });

  for (const [label, name] of [
    ['upper case', 'DELETE_REPO'],
    ['mixed case', 'Delete_Repo'],
    ['mixed case of an exact deny', 'Drop_Table'],
    ['fullwidth look-alike (changes under NFKC)', 'ｄｅｌｅｔｅ_repo'],
    ['ligature look-alike', 'drop_tab\uFB02e'],
    ['Cyrillic look-alike', 'dr\u043Ep_table'],
    ['trailing space', 'drop_table '],
    ['leading space', ' drop_table'],
    ['inner space', 'drop table'],
    ['zero-width space', 'drop_\u200Btable'],
    ['tab', 'drop_table\t'],
    ['NUL', 'drop_table\u0000'],
    ['newline', 'drop_table\n'],
  ] as const) {
    it(`a tool name with ${label} never reaches the upstream (hole: case, look-alike and space variants were forwarded)`, async () => {
      mcp.calls.length = 0;
      const res = await rpc(r, call(name));
      assert.ok(res.body?.error !== undefined, `${JSON.stringify(name)} was answered ${JSON.stringify(res.body)}`);
      assert.ok(['tool_denied', 'tool_name_invalid'].includes(res.body.error.data?.code), JSON.stringify(res.body));
      assert.equal(mcp.calls.length, 0, `${JSON.stringify(name)} reached the upstream`);
    });
  }

  it('duplicate JSON keys are refused before any decision (hole: {"name":"delete_repo","name":"safe_tool"} passed the check and could run delete_repo upstream)', async () => {
    mcp.calls.length = 0;
    for (const body of [
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","name":"safe_tool","arguments":{}}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"safe_tool","arguments":{}},"params":{"name":"delete_repo"}}',
      '[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\\u0061me":"delete_repo","name":"safe_tool"}}]',
    ]) {
      const res = await rpc(r, body);
      assert.equal(res.status, 400, `${body}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body?.error?.data?.code, 'duplicate_key', JSON.stringify(res.body));
    }
    assert.equal(mcp.calls.length, 0);
  });

  it('forwards the parsed message, never the original bytes (hole: the original bytes went upstream)', async () => {
    // A recording upstream: the MCP stub parses what it gets, so it cannot tell bytes from parse.
    const seen: string[] = [];
    const rec = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":7,"result":{"content":[]}}');
      });
    });
    await new Promise<void>((resolve) => rec.listen(0, '127.0.0.1', resolve));
    const rr = await startDirRouter(
      { toolProfile: { appliesTo: { tool: null, mcpServer: null } }, agt: AGT },
      { upstream: stub.url, mcpUpstream: new URL(`http://127.0.0.1:${(rec.address() as AddressInfo).port}/mcp`) },
    );
    try {
      const raw = '{"jsonrpc":"2.0", "id":7,\n "method":"tools/call","params":{"name":"safe_tool","arguments":{"x":"\\u0041"}}}';
      const res = await rpc(rr, raw);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(seen.length, 1);
      assert.equal(seen[0], JSON.stringify(JSON.parse(raw)), 'the upstream got the re-serialised parse');
    } finally {
      await rr.stop();
      await new Promise((resolve) => rec.close(resolve));
    }
  });

  it('an allowed, well-formed call still goes through', async () => {
    mcp.calls.length = 0;
    const res = await rpc(r, call('safe_tool'));
    assert.equal(res.body?.result !== undefined, true, JSON.stringify(res.body));
    assert.equal(mcp.calls.length, 1);
  });
});
