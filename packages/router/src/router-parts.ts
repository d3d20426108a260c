/**
 * Parts `startRouter` assembles, built here so that it only wires them: the policy source the
 * router reads (the API server, or a directory), and one MCP gateway per MCP server it fronts.
 */
import type { Clock } from '@kars/kube-core';
import type { RouterCapabilities } from '@kars/policy-compiler/runtime';
import type { GatewayListing } from './admin.js';
import type { DecisionRecorder } from './decisions/recorder.js';
import type { UpstreamClient } from './http/upstream.js';
import type { RouterOptions } from './server.js';
import { ApiPolicySource } from './sources/api.js';
import { DirPolicySource } from './sources/dir.js';
import type { PolicyState } from './state.js';
import { createMcpGateway } from './tools/gateway.js';
import type { McpGatewayHandler, ToolDecision } from './tools/gateway.js';
import { SeenDefinitions } from './tools/pins.js';

/** MCP server names: a DNS-label-like token, so `/mcp/<name>` needs no escaping and `<name>/<tool>` globs stay unambiguous. */
export const MCP_SERVER_NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;

/** The router's policy source, and what readiness and the metrics read of it. */
export interface PolicySources {
  api: ApiPolicySource | undefined;
  dir: DirPolicySource | undefined;
  /** Age of the policy view in ms (Infinity before the first load). */
  viewAgeMs: () => number;
  /** Whether a policy view has been loaded. */
  isLoaded: () => boolean;
}

/** The source `opts.source` names, reading into `state`. */
export function createPolicySources(
  opts: RouterOptions,
  state: PolicyState,
  capabilities: RouterCapabilities,
  clock: Clock,
): PolicySources {
  const api =
    opts.source.kind === 'api'
      ? new ApiPolicySource({
          client: opts.source.client,
          namespace: opts.namespace,
          sandbox: opts.sandbox,
          config: opts.source.config,
          state,
          capabilities,
          metrics: opts.metrics,
          log: opts.log,
          clock,
        })
      : undefined;
  const dir = opts.source.kind === 'dir' ? new DirPolicySource(opts.source.dir, state, capabilities, undefined, clock) : undefined;
  return {
    api,
    dir,
    viewAgeMs: () => (api ? api.viewAgeMs() : dir ? dir.viewAgeMs() : Infinity),
    isLoaded: () => (api ? api.isReady() : dir ? dir.viewAgeMs() !== Infinity : false),
  };
}

/** What every gateway of one router shares. */
export interface GatewayDeps {
  snapshot: () => ReturnType<PolicyState['current']>;
  client: UpstreamClient;
  clock: Clock;
  onDecision: (d: ToolDecision) => void;
  decisions: DecisionRecorder;
}

/**
 * One gateway per MCP server: `/mcp` for the unnamed one (`opts.mcpUpstream`), `/mcp/<name>` for
 * each named one, and what each saw listed (for pins and GET /internal/mcp-tools, ADR 0043).
 * Throws on a server name that is not a DNS label, or one given twice.
 */
export function createMcpGateways(
  opts: Pick<RouterOptions, 'mcpUpstream' | 'mcpUpstreams' | 'sandbox'>,
  deps: GatewayDeps,
): { gateways: Map<string, McpGatewayHandler>; listings: GatewayListing[] } {
  const gateways = new Map<string, McpGatewayHandler>();
  const listings: GatewayListing[] = [];
  const servers: { name: string | null; url: URL }[] = [
    ...(opts.mcpUpstream ? [{ name: null, url: opts.mcpUpstream }] : []),
    ...(opts.mcpUpstreams ?? []),
  ];
  for (const { name, url } of servers) {
    if (name !== null && !MCP_SERVER_NAME.test(name))
      throw new Error(`MCP server name must be a lower-case DNS label (letters, digits, '.', '_', '-'), got ${JSON.stringify(name)}`);
    const path = name === null ? '/mcp' : `/mcp/${name}`;
    if (gateways.has(path)) throw new Error(`MCP server ${name} is given twice`);
    const seen = new SeenDefinitions(undefined, deps.clock);
    listings.push({ server: name, path, seen });
    gateways.set(
      path,
      createMcpGateway({
        snapshot: deps.snapshot,
        upstream: url,
        sandbox: opts.sandbox,
        client: deps.client,
        clock: deps.clock,
        ...(name === null ? {} : { server: name, path }),
        seen,
        onDecision: deps.onDecision,
        decisions: deps.decisions,
      }),
    );
  }
  return { gateways, listings };
}
