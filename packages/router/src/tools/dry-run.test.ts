/**
 * Dry-run ToolPolicies in the MCP gateway (ADR 0050), through the real gateway and the MCP stub:
 * each one's would-be decisions on calls and listed tools are recorded with `mode: DryRun`, and
 * (a property over random enforced and dry-run rules) the answers the agent gets are exactly those
 * of the enforced rules alone.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { FakeClock } from '@kars/kube-core';
import { parseAgtProfile } from '@kars/policy-compiler/runtime';
import type { PolicySnapshot, ToolRules } from '../snapshot.js';
import { startMcpStub, type McpStub } from '../stubs/mcp.js';
import { createMcpGateway } from './gateway.js';
import { postJson } from '../testing/http.js';
import { toolRules } from '../testing/rules.js';
import { DecisionRecorder } from '../decisions/recorder.js';
import type { DecisionRecord, PolicyRef } from '../decisions/record.js';

const TOOLS = ['read_file', 'write_file', 'delete_file', 'search'].map((name) => ({ name }));

function agt(yaml: string): NonNullable<ToolRules['agt']> {
  const r = parseAgtProfile(yaml);
  if (!r.ok) throw new Error(r.error);
  return r.agt;
}

const ref = (name: string): PolicyRef[] => [
  { kind: 'ToolPolicy', name, generation: 3, digest: `sha256:${'a'.repeat(64)}` },
  { kind: 'AgtProfile', name, generation: 3, digest: `sha256:${'b'.repeat(64)}` },
];

interface Gateway {
  url: string;
  records: DecisionRecord[];
  counts: string[];
  set(snapshot: PolicySnapshot): void;
  close(): Promise<void>;
}

async function gateway(stub: McpStub): Promise<Gateway> {
  const records: DecisionRecord[] = [];
  const counts: string[] = [];
  let current: PolicySnapshot = { inference: undefined, tools: [], egress: [], loadedAtMs: 0, refused: {} };
  const clock = new FakeClock();
  const decisions = new DecisionRecorder({
    sandbox: 'sb1',
    instance: 'r1',
    clock,
    sink: { write: (r) => records.push(r), close: () => Promise.resolve() },
    onDryRun: (c) => counts.push(`${c.kind}/${c.policy}/${c.decision}/${c.reason}`),
  });
  const gw = createMcpGateway({ snapshot: () => current, upstream: stub.url, sandbox: 'sb1', clock, decisions });
  const server: Server = createServer((req, res) => void gw(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    records,
    counts,
    set: (s) => (current = s),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const post = (url: string, body: unknown) => postJson(url, body, { accept: 'application/json, text/event-stream' });
const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
const call = (name: string) => ({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: {} } });

describe('MCP gateway: dry-run ToolPolicies', () => {
  let stub: McpStub;
  let g: Gateway;
  before(async () => {
    stub = await startMcpStub({ tools: TOOLS });
    g = await gateway(stub);
  });
  after(async () => {
    await g.close();
    await stub.close();
  });

  it('records what a dry-run policy would hide and refuse, while the agent sees and calls what the enforced one allows', async () => {
    const enforced = toolRules('enforced', { agt: agt('rules:\n  - deny: "delete_*"\n') });
    const trial = toolRules('trial', { agt: agt('rules:\n  - deny: "write_*"\n'), enforcement: 'DryRun' });
    g.set({
      inference: undefined,
      tools: [enforced],
      egress: [],
      loadedAtMs: 0,
      refused: {},
      dryRun: { inference: [], tools: [{ rules: trial, refs: ref('trial') }] },
    });
    g.records.length = 0;
    const list = await post(g.url, LIST);
    const names = (list.json as { result: { tools: Array<{ name: string }> } }).result.tools.map((t) => t.name);
    assert.deepEqual(names, ['read_file', 'write_file', 'search'], 'hidden by the enforced policy only');
    const write = await post(g.url, call('write_file'));
    assert.equal((write.json as { error?: unknown }).error, undefined, 'the call proceeds');
    const del = await post(g.url, call('delete_file'));
    assert.equal((del.json as { error: { data: { code: string } } }).error.data.code, 'tool_denied');
    const dry = g.records.filter((r) => r.mode === 'DryRun');
    assert.deepEqual(
      dry.map((r) => [(r.target as { action: string }).action, (r.target as { tool: string }).tool, r.decision, r.reason]),
      [
        ['list', 'write_file', 'deny', 'tool_denied'],
        ['call', 'write_file', 'deny', 'tool_denied'],
        ['call', 'delete_file', 'allow', 'allowed'],
      ],
    );
    assert.ok(dry.every((r) => r.policies[0]?.name === 'trial' && r.policies[0]?.generation === 3));
    assert.ok(g.counts.includes('tool/trial/deny/tool_denied'));
    // The enforced records name the enforced snapshot, with no mode.
    assert.ok(g.records.filter((r) => r.mode === undefined).every((r) => r.policies[0]?.name !== 'trial'));
  });

  it('the agent gets the same answers with any dry-run policies as with none (property)', async () => {
    const rules = fc.record({
      deny: fc.subarray(['read_*', 'write_*', 'delete_*', 'search', '*'], { maxLength: 3 }),
      rps: fc.option(fc.constantFrom(0, 1), { nil: null }),
      approval: fc.boolean(),
      unpinned: fc.constantFrom('Allow' as const, 'Deny' as const),
    });
    const build = (
      name: string,
      r: { deny: string[]; rps: number | null; approval: boolean; unpinned: 'Allow' | 'Deny' },
      dryRun: boolean,
    ) =>
      toolRules(name, {
        agt: r.deny.length === 0 ? null : agt(`rules:\n${r.deny.map((d) => `  - deny: "${d}"\n`).join('')}`),
        rateLimit: r.rps === null ? null : { rps: r.rps, burst: 1 },
        approval: r.approval ? { mode: 'always' } : null,
        unpinnedTools: r.unpinned,
        enforcement: dryRun ? 'DryRun' : 'Enforce',
      });
    await fc.assert(
      fc.asyncProperty(rules, fc.array(rules, { maxLength: 3 }), fc.constantFrom(...TOOLS.map((t) => t.name)), async (e, dry, tool) => {
        // Each run on fresh rate-limit state: a new gateway per case would be slow, so names differ instead.
        const id = Math.random().toString(36).slice(2, 8);
        const enforced = [build(`e-${id}`, e, false)];
        const answers = async (s: PolicySnapshot) => {
          g.set(s);
          const list = await post(g.url, LIST);
          const called = await post(g.url, call(tool));
          return [list.status, list.json, called.status, (called.json as { error?: { code?: number } }).error?.code ?? null];
        };
        const base = { inference: undefined, tools: enforced, egress: [], loadedAtMs: 0, refused: {} } as PolicySnapshot;
        const without = await answers(base);
        const withDry = await answers({
          ...base,
          tools: [build(`e2-${id}`, e, false)],
          dryRun: { inference: [], tools: dry.map((d, i) => ({ rules: build(`d${i}-${id}`, d, true), refs: ref(`d${i}`) })) },
        });
        assert.deepEqual(withDry, without);
      }),
      { numRuns: 60 },
    );
  });
});
