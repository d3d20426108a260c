/**
 * The router's admin listener (`--admin-listen`): every path needs exactly one
 * `Authorization: Bearer <token>` (compared in constant time, ADR 0028), and only GET is served.
 *
 * - `GET /internal/policy-status`: what the router loaded, per kind, with the heartbeat staleness;
 * - `GET /internal/mcp-tools`: the MCP tool definitions each gateway last saw listed (ADR 0043);
 * - `GET /decisions`, `GET /decisions/head`: the decision log (ADR 0040), when it is on.
 *
 * Anything else is 404 before the token is looked at; a wrong or missing token is 401.
 */
import http from 'node:http';
import type { ServerResponse } from 'node:http';
import { authorizationValues, bearerToken, secretEquals } from '@kars/kube-core';
import type { DecisionLog } from './decisions/log.js';
import { parseDecisionQuery, serveDecisions } from './decisions/stream.js';
import type { PolicySnapshot } from './snapshot.js';
import type { HeartbeatStaleness } from './staleness.js';
import type { PolicyState } from './state.js';
import { isToolListed } from './tools/decide.js';
import { listedTool, type SeenDefinitions } from './tools/pins.js';

/** What one MCP gateway saw listed (`server` null for the unnamed `/mcp`). */
export interface GatewayListing {
  server: string | null;
  path: string;
  seen: SeenDefinitions;
}

/** What the admin listener reads. */
export interface AdminDeps {
  /** The bearer token; without one every request is 401. */
  token: string | undefined;
  state: PolicyState;
  listings: readonly GatewayListing[];
  decisionLog: DecisionLog | undefined;
  /** The heartbeat staleness of an API-fed router; undefined for a directory-fed one. */
  staleness: HeartbeatStaleness | undefined;
  /** Ends streamed `/decisions` answers when the router stops. */
  signal: AbortSignal;
}

/** Write `body` as JSON with its length. */
export function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The admin listener's HTTP server (not yet listening). */
export function createAdminServer(d: AdminDeps): http.Server {
  return http.createServer((req, res) => {
    const [adminPath, query] = (req.url ?? '').split('?', 2);
    const known =
      adminPath === '/internal/policy-status' ||
      adminPath === MCP_TOOLS_PATH ||
      adminPath === '/decisions' ||
      adminPath === '/decisions/head';
    if (!known || req.method !== 'GET') return sendJson(res, 404, { error: 'not found' });
    const got = bearerToken(authorizationValues(req.rawHeaders));
    if (!d.token || got === undefined || !secretEquals(got, d.token)) return sendJson(res, 401, { error: 'unauthorized' });
    if (adminPath === MCP_TOOLS_PATH) return sendJson(res, 200, mcpToolsView(d.listings, d.state.current().tools));
    if (adminPath !== '/internal/policy-status') {
      const log = d.decisionLog;
      if (log === undefined) return sendJson(res, 404, { error: 'the decision log is off (kars router --decision-log DIR)' });
      if (adminPath === '/decisions/head') {
        void log.flushed().then(() => sendJson(res, 200, { schema_version: 1, ...log.head() }));
        return;
      }
      const q = parseDecisionQuery(new URLSearchParams(query ?? ''));
      if (typeof q === 'string') return sendJson(res, 400, { error: q });
      void serveDecisions(log, q, res, d.signal).catch(() => res.destroy());
      return;
    }
    const entries = d.state.statusEntries();
    sendJson(res, 200, {
      schema_version: 1,
      count: entries.length,
      entries,
      ...(d.staleness ? { staleness_seconds: d.staleness.stalenessSeconds(), heartbeat: d.staleness.status() } : {}),
    });
  });
}

/** The admin listener's view of the MCP tool definitions each gateway last saw listed (ADR 0043). */
export const MCP_TOOLS_PATH = '/internal/mcp-tools';

/**
 * The body of `GET /internal/mcp-tools`: per MCP server (`server` null for the unnamed `/mcp`), the
 * last definition of each tool it saw listed, with its digest, and whether the policy in force
 * lets the agent see it (`visible`; `hiddenBecause` the code when not).
 */
export function mcpToolsView(
  listings: readonly GatewayListing[],
  tools: PolicySnapshot['tools'],
): { schema_version: 1; servers: unknown[] } {
  return {
    schema_version: 1,
    servers: listings.map((l) => ({
      server: l.server,
      path: l.path,
      tools: l.seen.catalog().map((e) => {
        const def: Record<string, unknown> = { name: e.name };
        if ('description' in e) def['description'] = e.description;
        if ('inputSchema' in e) def['inputSchema'] = e.inputSchema;
        const v = isToolListed(tools, l.server ?? undefined, e.name, { entry: listedTool(def, e.name), conflicted: e.conflict });
        return {
          ...def,
          digest: e.digest,
          conflict: e.conflict,
          seenAt: new Date(e.seenAtMs).toISOString(),
          visible: v.listed,
          ...(v.listed ? {} : { hiddenBecause: v.code, reason: v.reason }),
        };
      }),
    })),
  };
}
