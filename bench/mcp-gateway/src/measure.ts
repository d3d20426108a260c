/**
 * One series of measurements: the official MCP SDK client, connected to `url` (the SDK server
 * itself, or the router in front of it), times tools/call, tools/list and a push on the GET stream.
 */
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { SdkUpstream } from '@kars/router/testing/mcp-sdk-upstream';

/** Round trips in ms, by measurement. */
export interface Timings {
  call: number[];
  list: number[];
  push: number[];
}

/** Nearest-rank percentile `p` (0..100) of `xs`. */
export function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

/** Time `n` of each measurement, one at a time, through `url` to the SDK server `up`. */
export async function measure(url: string, up: SdkUpstream, n: number): Promise<Timings> {
  const opened = up.getStreamOpened();
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(transport);
  await opened;
  let waiting: (() => void) | undefined;
  const deliver = transport.onmessage;
  transport.onmessage = (m) => {
    if ('method' in m && m.method === 'notifications/message' && waiting) waiting();
    deliver?.(m);
  };
  const session = transport.sessionId === undefined ? undefined : up.sessions.get(transport.sessionId);
  if (!session) throw new Error(`no server session ${transport.sessionId}`);
  const server = session.transport;
  const out: Timings = { call: [], list: [], push: [] };
  for (let i = 0; i < 20; i++) await client.callTool({ name: 'search', arguments: {} }); // warm-up
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await client.callTool({ name: 'search', arguments: {} });
    out.call.push(performance.now() - t0);
  }
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await client.listTools();
    out.list.push(performance.now() - t0);
  }
  for (let i = 0; i < n; i++) {
    const got = new Promise<void>((resolve) => (waiting = resolve));
    const t0 = performance.now();
    await server.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: i } });
    await got;
    out.push.push(performance.now() - t0);
  }
  await client.close();
  return out;
}
