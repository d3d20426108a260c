/**
 * `kars tp pin POLICY --server NAME` (issue 21 item 5, ADR 0043): approve the MCP tool definitions
 * a router's gateway currently sees for one server, by writing their digests into the ToolPolicy's
 * `spec.toolPins` through the API server, as every `kars tp` write goes.
 *
 * Steps: read `GET /internal/mcp-tools` from the router's admin listener (bearer token); recompute
 * each definition's digest here and refuse when it differs from the router's (the two must agree on
 * the canonical form); show every definition with its digest and whether it is new, changed or
 * already pinned; then write, after a confirmation. Pins of other servers and other tools are kept;
 * the pin of each shown tool on this server is replaced.
 *
 * Decisions (ADR 0043): `--yes` writes without asking; on a terminal the command asks `[y/N]`;
 * without a terminal and without `--yes` it prints what it would write and exits 1 without writing,
 * so a script that forgot `--yes` notices. A tool the gateway saw listed twice with different
 * definitions is never pinned (there is no one definition to approve).
 *
 * Caveats: the gateway shows only what an agent listed through it (it does not ask the upstream
 * itself); the router's admin listener is reached directly (`--router-admin URL`), not through the
 * API server's proxy.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { Option } from 'commander';
import { TOOL_POLICY, toolDefinitionDigest } from '@kars/policy-api';
import type { ToolPin, ToolPolicy, ToolPolicySpec } from '@kars/policy-api';
import type { KubeObject } from '@kars/kube-core';
import { collect } from '../lib/flags.js';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import { getRequired, refOf, upsert } from '../lib/objects.js';
import { CliError } from '../lib/output.js';

interface PinFlags extends KubeFlags {
  server: string;
  routerAdmin?: string;
  adminTokenFile?: string;
  tool?: string[];
  unpinned?: 'Allow' | 'Deny';
  yes?: boolean;
}

/** One tool definition as the router's admin listener returns it. */
interface SeenTool {
  name: string;
  description?: unknown;
  inputSchema?: unknown;
  digest: string;
  conflict: boolean;
  visible?: boolean;
  hiddenBecause?: string;
}

/** What the user is asked to approve for one tool. */
export interface PinChange {
  tool: SeenTool;
  /** `new`: no pin on this server; `changed`: a pin with another digest; `same`: already pinned. */
  status: 'new' | 'changed' | 'same';
  previous?: string;
}

/** Read the definitions the router's gateway last saw for `server`. */
async function seenTools(adminUrl: string, token: string, server: string): Promise<SeenTool[]> {
  const url = `${adminUrl.replace(/\/+$/, '')}/internal/mcp-tools`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  } catch (err) {
    throw new CliError(`cannot reach the router's admin listener at ${url}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (res.status === 401) throw new CliError(`the router's admin listener refused the token (401): check --admin-token-file`);
  if (res.status !== 200) throw new CliError(`GET ${url} answered ${res.status}`);
  const body = (await res.json()) as { servers?: Array<{ server: string | null; tools: SeenTool[] }> };
  const servers = body.servers ?? [];
  const entry = servers.find((s) => s.server === server);
  if (entry === undefined) {
    const named = servers.map((s) => s.server).filter((s): s is string => s !== null);
    throw new CliError(
      `the router fronts no MCP server named ${server} (${named.length > 0 ? `it fronts ${named.join(', ')}` : 'it fronts no named MCP server'})`,
    );
  }
  return entry.tools;
}

/** The pins `spec` holds for `server` (by lower-cased name). */
function pinsOn(spec: ToolPolicySpec, server: string): Map<string, ToolPin> {
  const m = new Map<string, ToolPin>();
  for (const p of spec.toolPins ?? []) if (p.server === server) m.set(p.name.toLowerCase(), p);
  return m;
}

/** What approving `tools` would change in `spec`. */
export function pinChanges(spec: ToolPolicySpec, server: string, tools: readonly SeenTool[]): PinChange[] {
  const have = pinsOn(spec, server);
  return tools.map((tool) => {
    const p = have.get(tool.name.toLowerCase());
    if (p === undefined) return { tool, status: 'new' };
    return p.digest === tool.digest && p.name === tool.name ? { tool, status: 'same' } : { tool, status: 'changed', previous: p.digest };
  });
}

/** `spec` with the pins of `tools` on `server` written (replacing that server's pins of the same names), and `unpinned` if given. */
export function withPins(spec: ToolPolicySpec, server: string, tools: readonly SeenTool[], unpinned?: 'Allow' | 'Deny'): ToolPolicySpec {
  const names = new Set(tools.map((t) => t.name.toLowerCase()));
  const kept = (spec.toolPins ?? []).filter((p) => p.server !== server || !names.has(p.name.toLowerCase()));
  return {
    ...spec,
    toolPins: [...kept, ...tools.map((t) => ({ name: t.name, server, digest: t.digest }))],
    ...(unpinned !== undefined ? { unpinnedTools: unpinned } : {}),
  };
}

function show(c: PinChange): string {
  const t = c.tool;
  const lines = [
    `${c.status === 'same' ? '=' : c.status === 'new' ? '+' : '~'} ${t.name}  ${t.digest}  (${c.status}${c.previous ? `, was ${c.previous}` : ''}${t.visible === false ? `; hidden now: ${t.hiddenBecause ?? 'unknown'}` : ''})`,
    `    description: ${t.description === undefined ? '(none)' : typeof t.description === 'string' ? JSON.stringify(t.description) : JSON.stringify(t.description)}`,
    `    inputSchema: ${t.inputSchema === undefined ? '(none)' : JSON.stringify(t.inputSchema)}`,
  ];
  return lines.join('\n');
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

/** Add `pin` to the `kars toolpolicy|tp` command. */
export function addPinCommand(tp: Command): void {
  addKubeOptions(
    tp
      .command('pin')
      .argument('<policy>', 'the ToolPolicy to write the pins into (it must exist)')
      .description(
        "pin the MCP tool definitions a router's gateway currently sees for one server: show them with their digests, then write spec.toolPins",
      )
      .requiredOption('--server <name>', 'the MCP server (kars router --mcp-upstream NAME=URL) whose tools to pin')
      .option('--router-admin <url>', "the router's admin listener, e.g. http://127.0.0.1:8090 (default: env KARS_ROUTER_ADMIN_URL)")
      .option('--admin-token-file <file>', "file with the router's admin bearer token (default: env KARS_ROUTER_ADMIN_TOKEN)")
      .option('--tool <name>', 'pin only this tool (repeatable; default: every tool the gateway saw for the server)', collect)
      .addOption(new Option('--unpinned <mode>', 'also set spec.unpinnedTools').choices(['Allow', 'Deny']))
      .option('--yes', 'write without asking for confirmation'),
  ).action(async (name: string, f: PinFlags) => {
    const admin = f.routerAdmin ?? process.env['KARS_ROUTER_ADMIN_URL'];
    if (admin === undefined || admin === '') throw new CliError('--router-admin URL is required (or env KARS_ROUTER_ADMIN_URL)');
    let token: string | undefined;
    if (f.adminTokenFile !== undefined) {
      try {
        token = readFileSync(f.adminTokenFile, 'utf8').trim();
      } catch (err) {
        throw new CliError(`cannot read --admin-token-file ${f.adminTokenFile}: ${err instanceof Error ? err.message : String(err)}`);
      }
    } else token = process.env['KARS_ROUTER_ADMIN_TOKEN'];
    if (token === undefined || token === '')
      throw new CliError('an admin token is required: --admin-token-file FILE (or env KARS_ROUTER_ADMIN_TOKEN)');

    let tools = await seenTools(admin, token, f.server);
    if (f.tool !== undefined) {
      const want = new Set(f.tool);
      const missing = [...want].filter((n) => !tools.some((t) => t.name === n));
      if (missing.length > 0)
        throw new CliError(
          `the gateway has not seen ${missing.join(', ')} listed for MCP server ${f.server}; have the agent list its tools first`,
        );
      tools = tools.filter((t) => want.has(t.name));
    }
    if (tools.length === 0)
      throw new CliError(
        `the gateway has seen no tools listed for MCP server ${f.server}; have the agent list its tools (tools/list) first`,
      );
    for (const t of tools) {
      const def: Record<string, unknown> = { name: t.name };
      if ('description' in t) def['description'] = t.description;
      if ('inputSchema' in t) def['inputSchema'] = t.inputSchema;
      const mine = toolDefinitionDigest(def);
      if (mine !== t.digest)
        throw new CliError(
          `the router's digest of ${t.name} (${t.digest}) is not the one computed here (${mine}); the router and this CLI disagree on the canonical form`,
        );
    }
    const conflicted = tools.filter((t) => t.conflict);
    if (conflicted.length > 0) {
      if (f.tool !== undefined)
        throw new CliError(
          `${conflicted.map((t) => t.name).join(', ')}: listed more than once with different definitions; nothing to approve`,
        );
      for (const t of conflicted) process.stderr.write(`skipped ${t.name}: listed more than once with different definitions\n`);
      tools = tools.filter((t) => !t.conflict);
    }

    await withKube(f, async (ctx) => {
      const current = await getRequired<ToolPolicy & KubeObject>(ctx, TOOL_POLICY, name);
      const changes = pinChanges(current.spec, f.server, tools);
      process.stdout.write(`MCP server ${f.server}, as the gateway last saw it listed, against ${refOf(TOOL_POLICY, name)}:\n`);
      for (const c of changes) process.stdout.write(`${show(c)}\n`);
      const unpinnedChange = f.unpinned !== undefined && f.unpinned !== (current.spec.unpinnedTools ?? 'Allow');
      if (changes.every((c) => c.status === 'same') && !unpinnedChange) {
        process.stdout.write('nothing to change: every definition shown is pinned already\n');
        return;
      }
      const n = changes.filter((c) => c.status !== 'same').length;
      const what = `${n} pin${n === 1 ? '' : 's'}${unpinnedChange ? ` and unpinnedTools: ${f.unpinned}` : ''}`;
      if (f.yes !== true) {
        if (!(process.stdin.isTTY && process.stderr.isTTY))
          throw new CliError(
            `not written: ${what} to approve, and no terminal to confirm on; review the definitions above and pass --yes to write them`,
          );
        if (!(await confirm(`write ${what} to ${refOf(TOOL_POLICY, name)} in namespace ${ctx.namespace}? [y/N] `)))
          throw new CliError('not written');
      }
      const r = await upsert<ToolPolicy>(ctx, TOOL_POLICY, name, (existing) => {
        if (existing === undefined) throw new CliError(`${refOf(TOOL_POLICY, name)} was deleted meanwhile; nothing written`);
        return { spec: withPins(existing.spec, f.server, tools, f.unpinned) };
      });
      process.stdout.write(`${refOf(TOOL_POLICY, name)} ${r.action}: ${what}\n`);
    });
  });
}
