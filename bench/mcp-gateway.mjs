// The MCP gateway's added latency, with the official MCP SDK on both sides (issue 20 item 7):
// the same SDK client calls the same SDK server (StreamableHTTPServerTransport, SSE answers)
// directly and through a real router, and times, one at a time:
// - tools/call round trips (an allowed call, answered as an SSE stream);
// - tools/list round trips (filtered by the gateway);
// - a server push on the GET stream, from the server's send() to the client's onmessage.
// Usage: npm run build && node bench/mcp-gateway.mjs [N]   (default N = 300 per measurement)
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startSdkUpstream } from '../packages/router/dist/testing/mcp-sdk-upstream.js';
import { startDirRouter } from '../packages/router/dist/testing/policy-dir.js';
import { startOpenAIStub } from '../packages/router/dist/stubs/openai.js';

const N = Number(process.argv[2] ?? 300);
const TOOLS = ['read_file', 'delete_file', 'search', 'write_file', 'delete_repo', 'drop_table', 'list_dir'];

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function measure(url, up) {
  let opened = up.getStreamOpened();
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(transport);
  await opened;
  let waiting;
  const deliver = transport.onmessage;
  transport.onmessage = (m) => {
    if (m.method === 'notifications/message' && waiting) waiting();
    deliver?.(m);
  };
  const server = up.sessions.get(transport.sessionId).transport;
  const out = { call: [], list: [], push: [] };
  for (let i = 0; i < 20; i++) await client.callTool({ name: 'search', arguments: {} }); // warm-up
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await client.callTool({ name: 'search', arguments: {} });
    out.call.push(performance.now() - t0);
  }
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await client.listTools();
    out.list.push(performance.now() - t0);
  }
  for (let i = 0; i < N; i++) {
    const got = new Promise((resolve) => (waiting = resolve));
    const t0 = performance.now();
    await server.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: i } });
    await got;
    out.push.push(performance.now() - t0);
  }
  await client.close();
  return out;
}

const inference = await startOpenAIStub();
const up = await startSdkUpstream({ tools: TOOLS });
const r = await startDirRouter(
  {
    toolProfile: { appliesTo: { tool: null, mcpServer: null } },
    agt: 'default: allow\nrules:\n  - deny: "*delete*"\n  - deny: "drop_table"\n',
  },
  { upstream: inference.url, mcpUpstream: up.url },
);
try {
  const direct = await measure(up.url.href, up);
  const routed = await measure(`${r.router.url}/mcp`, up);
  console.log(`MCP gateway, official SDK client and server, N=${N} each, sequential (ms)`);
  console.log('measurement                 direct p50/p99     via router p50/p99   added p50');
  for (const [k, label] of [
    ['call', 'tools/call (SSE answer)'],
    ['list', 'tools/list (filtered)'],
    ['push', 'GET stream push'],
  ]) {
    const d = [pct(direct[k], 50), pct(direct[k], 99)];
    const v = [pct(routed[k], 50), pct(routed[k], 99)];
    console.log(
      `${label.padEnd(27)} ${d
        .map((x) => x.toFixed(2))
        .join(' / ')
        .padEnd(18)} ${v
        .map((x) => x.toFixed(2))
        .join(' / ')
        .padEnd(20)} ${(v[0] - d[0]).toFixed(2)}`,
    );
  }
} finally {
  await r.stop();
  await up.close();
  await inference.close();
}
