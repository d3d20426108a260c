import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ListenAddressError } from '@kars/kube-core';
import { startMcpStub, type McpStub } from './mcp.js';

/** Socket tests fail instead of hanging when bytes never arrive. */
const T = { timeout: 5000 };

async function rpc(url: URL | string, body: unknown): Promise<{ status: number; json: any; headers: Headers }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text === '' ? undefined : JSON.parse(text), headers: r.headers };
}

describe('MCP stub', () => {
  let stub: McpStub;
  before(async () => {
    stub = await startMcpStub({
      tools: [{ name: 'search', description: 'Find things' }, { name: 'fail' }],
      toolErrors: { fail: { code: -32010, message: 'nope' } },
    });
  });
  after(() => stub.close());

  it('lists its tools with a description and an input schema', T, async () => {
    const r = await rpc(stub.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    assert.deepEqual(r.json.result.tools[0], {
      name: 'search',
      description: 'Find things',
      inputSchema: { type: 'object', additionalProperties: true },
    });
    assert.equal(r.json.result.tools.length, 2);
  });

  it('answers tools/call with "called <name> with <json args>" and records the call', T, async () => {
    const r = await rpc(stub.url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search', arguments: { q: 'x' } } });
    assert.deepEqual(r.json.result.content, [{ type: 'text', text: 'called search with {"q":"x"}' }]);
    assert.deepEqual(stub.calls.at(-1)?.arguments, { q: 'x' });
  });

  it('answers configured errors and unknown tools with JSON-RPC errors', T, async () => {
    assert.deepEqual((await rpc(stub.url, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'fail' } })).json.error, {
      code: -32010,
      message: 'nope',
    });
    assert.equal((await rpc(stub.url, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'zzz' } })).json.error.code, -32602);
  });

  it('also serves POST / and answers unknown methods with -32601 and bad JSON with -32700', T, async () => {
    const root = new URL('/', stub.url);
    assert.equal((await rpc(root, { jsonrpc: '2.0', id: 5, method: 'nope' })).json.error.code, -32601);
    const bad = await rpc(root, '{');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, -32700);
  });

  it('answers a batch with an array and notifications with 202', T, async () => {
    const r = await rpc(stub.url, [
      { jsonrpc: '2.0', id: 6, method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
    ]);
    assert.deepEqual(r.json, [{ jsonrpc: '2.0', id: 6, result: {} }]);
    assert.equal((await rpc(stub.url, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
  });

  it('rejects a listen address that is not host:port', T, async () => {
    await assert.rejects(startMcpStub({ listen: 'nonsense' }), ListenAddressError);
  });
});
