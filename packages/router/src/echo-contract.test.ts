/**
 * The real router's echo Lease, held against an **independent** expectation: the wire contract
 * itself (`kars-wire-contract.md` §2.1, §2.4, §3, §5), written out below from its text and not from
 * the compiler's or the router's code. For every golden input of the compiler, and inputs built to
 * be refused, a real router runs against kars apiserver; its loaded digests, errors and refused
 * digests must be exactly what the contract says a router reading those ConfigMap bytes echoes:
 * - `InferencePolicy`: `canonical("inference-policy.json", bytes)` of `inferencepolicy-<name>-profile`;
 * - `ToolPolicy`: over `profile.json`, `AgtProfile`: over `agt-profile.yaml` of `toolpolicy-<name>-profile`;
 * - `EgressApproval`: `canonical("merged-allowlist.json", body)` of the baseline ∪ unexpired
 *   approval files' hosts (lowercased, port 443 by default, sorted by host bytes then port, deduplicated);
 * - a refused kind echoes null, names the error, and reports the refused bytes' digest.
 * The digest function is checked against the contract's golden vector first.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
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
import { pino } from 'pino';
import { startRouter } from './server.js';
import type { RunningRouter } from './server.js';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';

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
  /** What the refusal's error must say (every case that refuses names one). */
  why?: RegExp;
}

/** §2.1, from the contract's text: `sha256:` over u64_BE(len(name)) ‖ name ‖ u64_BE(len(body)) ‖ body. */
function contractDigest(name: string, body: string): string {
  const len = (b: Buffer): Buffer => {
    const l = Buffer.alloc(8);
    l.writeBigUInt64BE(BigInt(b.length));
    return l;
  };
  const n = Buffer.from(name, 'utf8');
  const b = Buffer.from(body, 'utf8');
  return `sha256:${createHash('sha256')
    .update(Buffer.concat([len(n), n, len(b), b]))
    .digest('hex')}`;
}

/** §2.4: the merged allowlist body of a set of endpoints (lowercase, port 443 by default, sorted by (host bytes, port), deduplicated). */
function mergedAllowlistBody(endpoints: ReadonlyArray<{ host: string; port?: number | undefined }>): string {
  const canon = endpoints
    .map((e) => ({ host: e.host.trim().replace(/[A-Z]/g, (c) => c.toLowerCase()), port: e.port ?? 443 }))
    .filter((e) => e.host !== '')
    .sort((a, b) => Buffer.compare(Buffer.from(a.host), Buffer.from(b.host)) || a.port - b.port)
    .filter((e, i, all) => i === 0 || e.host !== all[i - 1]!.host || e.port !== all[i - 1]!.port);
  return JSON.stringify({ schemaVersion: 1, endpoints: canon });
}

interface Echo {
  digests: Record<string, string | null>;
  errorKinds: string[];
  rejected: Record<string, string>;
}

/** What the contract says a router echoes for this case's ConfigMaps at `nowMs`. */
function expectedEcho(c: Case, nowMs: number): Echo {
  const data = (cm: string): Record<string, string> => c.configMaps.find((m) => m.name === cm)?.data ?? {};
  const out: Echo = { digests: { InferencePolicy: null, ToolPolicy: null, AgtProfile: null }, errorKinds: [], rejected: {} };
  const refused = (kind: string, digest: string | undefined): void => {
    out.errorKinds.push(kind);
    if (digest !== undefined) out.rejected[kind] = digest;
  };
  const ip = c.spec.inferenceRef?.name;
  const ipBody = ip === undefined ? undefined : data(`inferencepolicy-${ip}-profile`)['inference-policy.json'];
  if (ipBody !== undefined) {
    const d = contractDigest('inference-policy.json', ipBody);
    if (c.refuses.includes('InferencePolicy')) refused('InferencePolicy', d);
    else out.digests['InferencePolicy'] = d;
  }
  const tp = c.spec.governance?.toolPolicyRef?.name;
  const tpData = tp === undefined ? {} : data(`toolpolicy-${tp}-profile`);
  if (tpData['profile.json'] !== undefined) {
    const dp = contractDigest('profile.json', tpData['profile.json']);
    const agt = tpData['agt-profile.yaml'];
    const da = agt === undefined ? undefined : contractDigest('agt-profile.yaml', agt);
    // ToolPolicy and AgtProfile are one load: a refusal refuses both.
    if (c.refuses.includes('ToolPolicy')) {
      refused('ToolPolicy', dp);
      refused('AgtProfile', da);
    } else {
      out.digests['ToolPolicy'] = dp;
      out.digests['AgtProfile'] = da ?? null;
    }
  }
  let unparseable = false;
  const approvals = Object.entries(data(`kars-${c.sandbox}-egress-approvals`))
    .filter(([k]) => k.startsWith('approval-') && k.endsWith('.json'))
    .flatMap(([, body]) => {
      try {
        const a = JSON.parse(body) as { hosts: Array<{ host: string; port?: number }>; expiresAt: string };
        return Date.parse(a.expiresAt) > nowMs ? a.hosts : [];
      } catch {
        unparseable = true; // skipped and reported, never fatal: the rest still loads
        return [];
      }
    });
  if (unparseable) out.errorKinds.push('EgressApproval');
  out.digests['EgressApproval'] = contractDigest(
    'merged-allowlist.json',
    mergedAllowlistBody([...(c.spec.networkPolicy?.allowedEndpoints ?? []), ...approvals]),
  );
  out.errorKinds.sort();
  return out;
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
      why: /guardrails\[0\]\.provider: guardrail openai-moderation has no backend/,
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
      why: /appliesTo\.mcpServer: this router does not front MCP server/,
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
  const bad: Array<[string, Record<string, string>, RegExp]> = [
    ['inference body that is not JSON', { 'inference-policy.json': '{"tokenBudget":' }, /JSON/],
    ['inference body with an unknown top-level field', { 'inference-policy.json': JSON.stringify({ ...ipBody, maxCost: 5 }) }, /maxCost/],
    [
      'inference body with an unknown nested field',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, tokenBudget: { dailyTokens: 5, hourlyTokens: 1 } }) },
      /tokenBudget\.hourlyTokens/,
    ],
    [
      'inference body with a string where a number belongs',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, tokenBudget: { perRequestTokens: '100' } }) },
      /tokenBudget\.perRequestTokens/,
    ],
    [
      'inference body with an unknown severity',
      { 'inference-policy.json': JSON.stringify({ ...ipBody, contentSafety: { hate: 'Extreme' } }) },
      /contentSafety\.hate/,
    ],
  ];
  for (const [name, data, why] of bad)
    out.push({
      name,
      sandbox: 'sb',
      spec: { inferenceRef: { name: 'x' } },
      configMaps: [{ name: 'inferencepolicy-x-profile', data }],
      caps: ALL_GUARDRAILS,
      refuses: ['InferencePolicy'],
      why,
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
  const badTools: Array<[string, Record<string, string>, RegExp]> = [
    ['tool profile with an unknown field', { 'profile.json': profile({ budget: 3 }) }, /budget/],
    [
      'tool profile scoped to an MCP server the router does not front',
      { 'profile.json': profile({ appliesTo: { tool: '*', mcpServer: 'github', sandboxMatchLabels: {} } }) },
      /appliesTo\.mcpServer: this router does not front MCP server "github"/,
    ],
    [
      'AGT profile with a rule key outside the subset',
      { 'profile.json': profile({}), 'agt-profile.yaml': 'rules:\n  - deny: "*delete*"\n    when: always\n' },
      /agt-profile\.yaml: .*when/,
    ],
    ['AGT profile that is not YAML', { 'profile.json': profile({}), 'agt-profile.yaml': 'rules: [unclosed\n' }, /agt-profile\.yaml: /],
  ];
  for (const [name, data, why] of badTools)
    out.push({
      name,
      sandbox: 'sb',
      spec: { governance: { enabled: true, toolPolicyRef: { name: 't' } } },
      configMaps: [{ name: 'toolpolicy-t-profile', data }],
      caps: NO_CAPABILITIES,
      refuses: ['ToolPolicy'],
      why,
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

describe('the wire contract: the real router echoes what the contract says for the bytes it reads', () => {
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

  it("the digest written from the contract's text gives the contract's golden vector (§2.4)", () => {
    assert.equal(
      contractDigest('merged-allowlist.json', '{"schemaVersion":1,"endpoints":[{"host":"example.com","port":443}]}'),
      'sha256:fe6cf9580a22eaacff45a3c8d3bb06f5f635b34c5981558b4587524c45e9c8a5',
    );
    assert.equal(mergedAllowlistBody([{ host: 'Example.COM' }]), '{"schemaVersion":1,"endpoints":[{"host":"example.com","port":443}]}');
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
      // No approval in these inputs expires within the test, so the expectation holds from now on.
      const want = expectedEcho(c, Date.now());
      for (const k of c.refuses) assert.ok(want.errorKinds.includes(k), `the expectation refuses ${k}, as the case names`);
      /** The real router's echo, as the contract reads it. */
      const echoOf = async (): Promise<Echo & { errors: Record<string, string> }> => {
        const r = await ts.client.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${routerLeaseName(c.sandbox, 'real')}`);
        assert.equal(r.status, 200, 'the real router published its echo lease');
        const a = r.body.metadata.annotations as Record<string, string>;
        const errors = JSON.parse(a[LAST_ERRORS_ANNOTATION] ?? '{}') as Record<string, string>;
        return {
          digests: JSON.parse(a[LOADED_DIGESTS_ANNOTATION] ?? '{}') as Record<string, string | null>,
          errorKinds: Object.keys(errors).sort(),
          rejected: JSON.parse(a[REJECTED_DIGESTS_ANNOTATION] ?? '{}') as Record<string, string>,
          errors,
        };
      };
      // The router loads through its watches and publishes within its debounce: poll until it matches.
      const got = await until(
        `${c.name}: the echo the contract expects`,
        async () => {
          const e = await echoOf();
          assert.deepEqual({ digests: e.digests, errorKinds: e.errorKinds, rejected: e.rejected }, want);
          return e;
        },
        { timeoutMs: 10_000 },
      );
      for (const k of c.refuses) {
        assert.match(got.rejected[k] ?? '', /^sha256:[0-9a-f]{64}$/, `${k} is reported as refused`);
        assert.match(got.errors[k] ?? '', c.why ?? /(?!)/, `${k}'s error says why: ${got.errors[k]}`);
      }
    });
  }
});
