/**
 * The wire contract has one home (`@kars/policy-compiler` router-view): the real router and the
 * controller's test router must echo exactly the same thing for the same compiled ConfigMaps,
 * including what the router refuses. This runs both against kars apiserver for every golden input
 * of the compiler, plus inputs built to be refused, and compares the two echo Leases annotation by
 * annotation.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';

import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds, LAST_ERRORS_ANNOTATION, LOADED_DIGESTS_ANNOTATION, REJECTED_DIGESTS_ANNOTATION, routerLeaseName } from '@kars/policy-api';
import type { KarsSandbox } from '@kars/policy-api';
import { compileDocuments, NO_CAPABILITIES, rfc3339Seconds } from '@kars/policy-compiler';
import type { RouterCapabilities } from '@kars/policy-compiler';
import { TestRouter } from '@kars/policy-controller/testing';
import { pino } from 'pino';
import { startRouter } from './server.js';
import type { RunningRouter } from './server.js';
import { clientFor, fastWatchConfig } from '@kars/kube-runtime/testing';

const testdata = fileURLToPath(new URL('../../policy-compiler/testdata/', import.meta.url));
const cfg = fastWatchConfig({ pingMs: 1000, idleMs: 5000 });
const silent = pino({ level: 'silent' });
const ALL_GUARDRAILS: RouterCapabilities = { mcpServers: [], guardrailProviders: ['openai-moderation'] };

interface Case {
  name: string;
  sandbox: string;
  spec: KarsSandbox['spec'];
  configMaps: Array<{ name: string; data: Record<string, string> }>;
  caps: RouterCapabilities;
  /** Kinds the router must refuse in this case (so the test proves it covers refusals). */
  refuses: string[];
}

/** Compile a golden file with `now` = the real clock (the routers judge expiry by it) and return its ConfigMaps. */
function golden(file: string): { configMaps: Case['configMaps']; docs: unknown[] } {
  const docs = parseAllDocuments(readFileSync(testdata + file, 'utf8')).map((d) => d.toJS() as unknown);
  const r = compileDocuments(docs, { now: rfc3339Seconds(Date.now()), env: {} });
  assert.deepEqual(r.errors, []);
  return { configMaps: r.configMaps.map((c) => ({ name: c.metadata.name, data: c.data })), docs };
}

function cases(): Case[] {
  const ip = golden('inference-policy.yaml');
  const tp = golden('tool-policy.yaml');
  const eg = golden('egress-approvals.yaml');
  const demo = (eg.docs as Array<{ kind: string; spec: KarsSandbox['spec'] }>).find((d) => d.kind === 'KarsSandbox');
  assert.ok(demo);
  const out: Case[] = [
    {
      name: 'golden InferencePolicy with guardrails, router without a guardrail backend',
      sandbox: 'sb',
      spec: { inferenceRef: { name: 'prod-chat' } },
      configMaps: ip.configMaps,
      caps: NO_CAPABILITIES,
      refuses: ['InferencePolicy'],
    },
    {
      name: 'golden InferencePolicy with guardrails, router with the backend',
      sandbox: 'sb',
      spec: { inferenceRef: { name: 'prod-chat' } },
      configMaps: ip.configMaps,
      caps: ALL_GUARDRAILS,
      refuses: [],
    },
    {
      name: 'golden selector-only InferencePolicy',
      sandbox: 'sb',
      spec: { inferenceRef: { name: 'selector-only' } },
      configMaps: ip.configMaps,
      caps: NO_CAPABILITIES,
      refuses: [],
    },
    {
      name: 'golden ToolPolicy with commerce, an MCP scope and a full-AGT profile',
      sandbox: 'sb',
      spec: { governance: { enabled: true, toolPolicyRef: { name: 'payments' } } },
      configMaps: tp.configMaps,
      caps: NO_CAPABILITIES,
      refuses: ['ToolPolicy', 'AgtProfile'],
    },
    {
      name: 'golden ToolPolicy without AGT profile',
      sandbox: 'sb',
      spec: { governance: { enabled: true, toolPolicyRef: { name: 'kars-default' } } },
      configMaps: tp.configMaps,
      caps: NO_CAPABILITIES,
      refuses: [],
    },
    {
      name: 'golden sandbox with two approvals',
      sandbox: 'demo',
      spec: demo.spec,
      configMaps: eg.configMaps,
      caps: NO_CAPABILITIES,
      refuses: [],
    },
  ];
  // Inputs built to be refused, one field at a time.
  const ipBody = JSON.parse(
    ip.configMaps.find((c) => c.name === 'inferencepolicy-selector-only-profile')!.data['inference-policy.json']!,
  ) as Record<string, unknown>;
  const bad: Array<[string, Record<string, string>]> = [
    ['inference body that is not JSON', { 'inference-policy.json': '{"tokenBudget":' }],
    ['inference body with an unknown top-level field', { 'inference-policy.json': JSON.stringify({ ...ipBody, maxCost: 5 }) }],
    [
      'inference body with an unknown nested field',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, tokenBudget: { dailyTokens: 5, hourlyTokens: 1 } }) },
    ],
    [
      'inference body with a string where a number belongs',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, tokenBudget: { perRequestTokens: '100' } }) },
    ],
    [
      'inference body with an unknown severity',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, contentSafety: { hate: 'Extreme' } }) },
    ],
  ];
  for (const [name, data] of bad)
    out.push({
      name,
      sandbox: 'sb',
      spec: { inferenceRef: { name: 'x' } },
      configMaps: [{ name: 'inferencepolicy-x-profile', data }],
      caps: ALL_GUARDRAILS,
      refuses: ['InferencePolicy'],
    });
  const profile = (o: Record<string, unknown>): string =>
    JSON.stringify(
      {
        appliesTo: { tool: '*', mcpServer: null, sandboxMatchLabels: {} },
        commerce: null,
        rateLimit: null,
        approval: null,
        displayName: null,
        ...o,
      },
      null,
      2,
    );
  const badTools: Array<[string, Record<string, string>]> = [
    ['tool profile with an unknown field', { 'profile.json': profile({ budget: 3 }) }],
    [
      'tool profile scoped to an MCP server the router does not front',
      { 'profile.json': profile({ appliesTo: { tool: '*', mcpServer: 'github', sandboxMatchLabels: {} } }) },
    ],
    [
      'AGT profile with a rule key outside the subset',
      { 'profile.json': profile({}), 'agt-profile.yaml': 'rules:\n  - deny: "*delete*"\n    when: always\n' },
    ],
    ['AGT profile that is not YAML', { 'profile.json': profile({}), 'agt-profile.yaml': 'rules: [unclosed\n' }],
  ];
  for (const [name, data] of badTools)
    out.push({
      name,
      sandbox: 'sb',
      spec: { governance: { enabled: true, toolPolicyRef: { name: 't' } } },
      configMaps: [{ name: 'toolpolicy-t-profile', data }],
      caps: NO_CAPABILITIES,
      refuses: ['ToolPolicy'],
    });
  out.push({
    name: 'tool profile scoped to an MCP server the router fronts',
    sandbox: 'sb',
    spec: { governance: { enabled: true, toolPolicyRef: { name: 't' } } },
    configMaps: [
      {
        name: 'toolpolicy-t-profile',
        data: {
          'profile.json': profile({ appliesTo: { tool: '*', mcpServer: 'github', sandboxMatchLabels: {} } }),
          'agt-profile.yaml': 'rules:\n  - deny: "*delete*"\n',
        },
      },
    ],
    caps: { mcpServers: ['github'], guardrailProviders: [] },
    refuses: [],
  });
  out.push({
    name: 'approvals with an unparseable file',
    sandbox: 'sb',
    spec: { networkPolicy: { allowedEndpoints: [{ host: 'a.example' }] } },
    configMaps: [
      {
        name: 'kars-sb-egress-approvals',
        data: {
          'approval-x.json': 'nope',
          'approval-y.json': JSON.stringify({
            hosts: [{ host: 'B.example', port: 8443 }],
            expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
          }),
        },
      },
    ],
    caps: NO_CAPABILITIES,
    refuses: [],
  });
  return out;
}

describe('one wire contract: the test router echoes exactly what the real router echoes', () => {
  let ts: TestServer;
  let client: KubeClient;
  const ac = new AbortController();
  const routers: RunningRouter[] = [];

  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    client = clientFor(ts.server.kubeconfigPath, cfg);
  });

  after(async () => {
    ac.abort();
    await Promise.all(routers.map((r) => r.done));
    client.close();
    await ts.close();
  });

  const all = cases();
  for (const [i, c] of all.entries()) {
    it(`${c.name}`, async () => {
      const ns = `case-${i}`;
      await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
      for (const cm of c.configMaps) {
        await ts.client.post(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: cm.name, labels: { 'app.kubernetes.io/managed-by': 'kars-controller' } },
          data: cm.data,
        });
      }
      await ts.client.post(`/apis/kars.azure.com/v1alpha1/namespaces/${ns}/karssandboxes`, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'KarsSandbox',
        metadata: { name: c.sandbox },
        spec: c.spec,
      });
      const real = await startRouter(
        {
          sandbox: c.sandbox,
          namespace: ns,
          listen: '127.0.0.1:0',
          upstream: new URL('http://127.0.0.1:9'),
          source: { kind: 'api', client, config: cfg },
          instance: 'real',
          guardrailProviders: c.caps.guardrailProviders as Array<'openai-moderation'>,
          mcpUpstreams: c.caps.mcpServers.map((name) => ({ name, url: new URL('http://127.0.0.1:9/mcp') })),
          metrics: new RuntimeMetrics(),
          log: silent,
        },
        ac.signal,
      );
      routers.push(real);
      const test = new TestRouter(client, ns, c.sandbox, 'test', c.caps);
      await test.step();
      const leaseOf = async (instance: string): Promise<Record<string, string> | undefined> => {
        const r = await ts.client.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${routerLeaseName(c.sandbox, instance)}`);
        return r.status === 200 ? (r.body.metadata.annotations as Record<string, string>) : undefined;
      };
      const want = (await leaseOf('test'))!;
      // The real router loads through its watches and publishes within its debounce; give it time to settle.
      const t0 = Date.now();
      let got: Record<string, string> | undefined;
      while (Date.now() - t0 < 10_000) {
        got = real.isReady() ? await leaseOf('real') : undefined;
        if (
          got &&
          got[LOADED_DIGESTS_ANNOTATION] === want[LOADED_DIGESTS_ANNOTATION] &&
          got[LAST_ERRORS_ANNOTATION] === want[LAST_ERRORS_ANNOTATION]
        )
          break;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.ok(got, 'the real router published its echo lease');
      for (const a of [LOADED_DIGESTS_ANNOTATION, LAST_ERRORS_ANNOTATION, REJECTED_DIGESTS_ANNOTATION])
        assert.equal(got[a], want[a], `${a} differs`);
      // What the router refused, it says so, with the refused digest; what it accepted, it echoes.
      const rejected = JSON.parse(want[REJECTED_DIGESTS_ANNOTATION] ?? '{}') as Record<string, string>;
      const errors = JSON.parse(want[LAST_ERRORS_ANNOTATION] ?? '{}') as Record<string, string>;
      for (const k of c.refuses) {
        assert.match(rejected[k] ?? '', /^sha256:[0-9a-f]{64}$/, `${k} is reported as refused`);
        assert.ok(errors[k], `${k} carries an error`);
      }
      if (c.refuses.length === 0) assert.deepEqual(rejected, {}, `nothing refused, got ${JSON.stringify(errors)}`);
    });
  }
});
