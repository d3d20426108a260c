// The MCP gateway's added latency, with the official MCP SDK on both sides (issue 20 item 7):
// the same SDK client calls the same SDK server (StreamableHTTPServerTransport, SSE answers)
// directly and through a real router, and times, one at a time:
// - tools/call round trips (an allowed call, answered as an SSE stream);
// - tools/list round trips (filtered by the gateway);
// - a server push on the GET stream, from the server's send() to the client's onmessage.
// Usage: npm run build && node bench/mcp-gateway/dist/main.js [N]   (default N = 300 per measurement)
import { startSdkUpstream } from '@kars/router/testing/mcp-sdk-upstream';
import { startDirRouter } from '@kars/router/testing/policy-dir';
import { startOpenAIStub } from '@kars/router/stubs';
import { measure, pct } from './measure.js';
import type { Timings } from './measure.js';

const N = Number(process.argv[2] ?? 300);
const TOOLS = ['read_file', 'delete_file', 'search', 'write_file', 'delete_repo', 'drop_table', 'list_dir'];

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
  const direct = await measure(up.url.href, up, N);
  const routed = await measure(`${r.router.url}/mcp`, up, N);
  console.log(`MCP gateway, official SDK client and server, N=${N} each, sequential (ms)`);
  console.log('measurement                 direct p50/p99     via router p50/p99   added p50');
  const rows: Array<[keyof Timings, string]> = [
    ['call', 'tools/call (SSE answer)'],
    ['list', 'tools/list (filtered)'],
    ['push', 'GET stream push'],
  ];
  for (const [k, label] of rows) {
    const d = [pct(direct[k], 50), pct(direct[k], 99)] as const;
    const v = [pct(routed[k], 50), pct(routed[k], 99)] as const;
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
