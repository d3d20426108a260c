import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoLease, ROUTER_LEASE_SECONDS } from '@kars/policy-api';
import type { RouterEcho } from '@kars/policy-api';
import { INFERENCE_POLICY_KIND, TOOL_POLICY_KIND } from '@kars/policy-compiler';
import { expectedEchoes, routerState } from './policy-status.js';
import { runKars, startTestStack, until } from '../testing/stack.js';
import type { TestStack } from '../testing/stack.js';

const D1 = `sha256:${'1'.repeat(64)}`;
const D2 = `sha256:${'2'.repeat(64)}`;
const echo = (over: Partial<RouterEcho> = {}): RouterEcho => ({
  sandbox: 'sb',
  instance: 'r1',
  digests: { InferencePolicy: D1 },
  errors: {},
  renewedAtMs: 100_000,
  leaseDurationSeconds: 15,
  ...over,
});

describe('routerState: one router against one compiled digest', () => {
  it('SYNCED only when live, loaded == compiled and no error', () => {
    assert.equal(routerState(echo(), [{ kind: 'InferencePolicy', digest: D1 }], 90_000, 101_000).state, 'SYNCED');
  });
  it('STALE with the age since the compile when it enforces another digest or none', () => {
    assert.deepEqual(routerState(echo(), [{ kind: 'InferencePolicy', digest: D2 }], 90_000, 101_000), {
      state: 'STALE',
      ageSeconds: 11,
      detail: 'enforces an older digest',
      loadedDigest: D1,
    });
    assert.equal(
      routerState(echo({ digests: { InferencePolicy: null } }), [{ kind: 'InferencePolicy', digest: D2 }], 90_000, 101_000).detail,
      'has not loaded the policy',
    );
  });
  it('STALE with the age since the last renewal once the lease expired, even if the digest matched', () => {
    const s = routerState(echo(), [{ kind: 'InferencePolicy', digest: D1 }], 90_000, 100_000 + 15_000 + 30_000);
    assert.equal(s.state, 'STALE');
    assert.equal(s.ageSeconds, 45);
    assert.match(s.detail ?? '', /lease not renewed for 45s/);
  });
  it('NACK with the router error, whatever it loaded', () => {
    assert.deepEqual(
      routerState(echo({ errors: { InferencePolicy: 'bad json' } }), [{ kind: 'InferencePolicy', digest: D2 }], 90_000, 101_000),
      {
        state: 'NACK',
        ageSeconds: null,
        detail: 'bad json',
        loadedDigest: D1,
      },
    );
  });
  it('a ToolPolicy router is SYNCED only when every expected kind is loaded; STALE names the kind behind', () => {
    const tools = [
      { kind: 'AgtProfile' as const, digest: D1 },
      { kind: 'ToolPolicy' as const, digest: D2 },
    ];
    assert.equal(routerState(echo({ digests: { AgtProfile: D1, ToolPolicy: D2 } }), tools, 90_000, 101_000).state, 'SYNCED');
    // The AGT profile is current but profile.json (scope, rate limit, pins) is not: not enforced.
    assert.deepEqual(routerState(echo({ digests: { AgtProfile: D1, ToolPolicy: D1 } }), tools, 90_000, 101_000), {
      state: 'STALE',
      ageSeconds: 11,
      detail: 'enforces an older digest (ToolPolicy)',
      loadedDigest: D1,
    });
    assert.equal(
      routerState(echo({ digests: { AgtProfile: D1 }, errors: { ToolPolicy: 'pins: unknown' } }), tools, 90_000, 101_000).state,
      'NACK',
    );
    assert.equal(routerState(echo(), [], 90_000, 101_000).state, 'NOT-APPLICABLE');
  });
  it('looks only at its own kind', () => {
    assert.equal(
      routerState(echo({ errors: { AgtProfile: 'x' } }), [{ kind: 'InferencePolicy', digest: D1 }], 90_000, 101_000).state,
      'SYNCED',
    );
    assert.equal(routerState(echo(), [{ kind: 'AgtProfile', digest: D1 }], 90_000, 101_000).state, 'STALE');
  });
});

describe('expectedEchoes: what the routers must echo, as the controller awaits it', () => {
  const meta = { name: 'p', namespace: 'ns', generation: 1 };
  it('a ToolPolicy without an AGT profile is still echoed (profile.json under ToolPolicy), not "nothing to echo"', () => {
    const tp = { metadata: meta, spec: { appliesTo: { tool: '*', sandboxMatchLabels: {} }, rateLimit: { rps: 1, burst: 1 } } };
    const c = TOOL_POLICY_KIND.compile(tp);
    assert.ok(c.ok);
    assert.deepEqual(expectedEchoes(TOOL_POLICY_KIND, tp, null), [{ kind: 'ToolPolicy', digest: c.profileDigest }]);
  });
  it('with an AGT profile: AgtProfile (the digest the status records) first, then ToolPolicy', () => {
    const tp = { metadata: meta, spec: { appliesTo: { tool: '*', sandboxMatchLabels: {} }, agtProfile: { inline: 'rules: []\n' } } };
    assert.deepEqual(
      expectedEchoes(TOOL_POLICY_KIND, tp, null).map((e) => e.kind),
      ['AgtProfile', 'ToolPolicy'],
    );
  });
  it('a stored spec that does not compile: the last good digest its status records, under the kind the status names', () => {
    const ip = { metadata: meta, spec: { appliesTo: { action: '*' }, tokenBudget: { perRequestTokens: -1 } } } as never;
    assert.deepEqual(expectedEchoes(INFERENCE_POLICY_KIND, ip, D1), [{ kind: 'InferencePolicy', digest: D1 }]);
    assert.deepEqual(expectedEchoes(INFERENCE_POLICY_KIND, ip, null), []);
  });
});

describe('kars policy status and KarsSandbox status.routers, as processes against apiserver + controller + router', () => {
  let stack: TestStack;
  let kc: string[];

  before(async () => {
    stack = await startTestStack();
    kc = ['--kubeconfig', stack.kubeconfig];
    for (const args of [
      ['sandbox', 'create', '-f', 'examples/sandbox.yaml'],
      ['ip', 'apply', '-f', 'examples/inference-policy.yaml'],
      ['tp', 'apply', '-f', 'examples/tool-policy.yaml'],
    ]) {
      const r = await runKars([...args, ...kc]);
      assert.equal(r.code, 0, r.stderr);
    }
    await stack.router('demo-agent');
    const w = await runKars(['ip', 'apply', 'demo-budget', '--per-request-tokens', '900', '--wait', ...kc]);
    assert.equal(w.code, 0, w.stderr);
  });
  after(() => stack.close());

  it('shows SYNCED for every policy and router, with digests, generations and edit → enforced times', async () => {
    const r = await runKars(['policy', 'status', ...kc]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(
      lines[0] ?? '',
      /^POLICY\s+MODE\s+SANDBOX\s+ROUTER\s+STATUS\s+COMPILED\s+LOADED\s+GEN\s+OBSERVED\s+LAST\s+MAX\s+STALENESS\s+DETAIL$/,
    );
    assert.match(
      r.stdout,
      /\nip\/demo-budget\s+Enforce\s+demo-agent\s+test-1\s+SYNCED\s+sha256:[0-9a-f]{12}\s+sha256:[0-9a-f]{12}\s+2\s+2\s+\d+ms\s+\d+ms\s+\d+(\.\d)?s \(\d+s ago\)\n/,
    );
    assert.match(r.stdout, /\ntp\/demo-tools\s+Enforce\s+demo-agent\s+test-1\s+SYNCED\s/);
    const json = JSON.parse((await runKars(['policy', 'status', 'demo-budget', '-o', 'json', ...kc])).stdout);
    assert.equal(json.length, 1);
    const ip = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies/demo-budget')).body;
    assert.equal(json[0].compiledDigest, ip.status.compiledDigest);
    assert.equal(json[0].routers[0].loadedDigest, ip.status.compiledDigest);
    assert.equal(json[0].routers[0].state, 'SYNCED');
    // The router reports its heartbeat staleness in its echo Lease; the controller's heartbeat is fresh here.
    assert.equal(typeof json[0].routers[0].stalenessSeconds, 'number');
    assert.ok(json[0].routers[0].stalenessSeconds < 60, String(json[0].routers[0].stalenessSeconds));
    assert.equal(typeof json[0].routers[0].stalenessReportAgeSeconds, 'number');
    assert.equal(json[0].lastMs, ip.status.propagation.lastMs);
    assert.ok(json[0].maxMs >= json[0].lastMs, 'maxMs is the largest lastMs');
    const none = await runKars(['policy', 'status', 'nope', ...kc]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no InferencePolicy or ToolPolicy named "nope" in namespace "default"/);
  });

  it('KarsSandbox status lists each router with its loaded digests (kubectl get ksb -o yaml)', async () => {
    const ip = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies/demo-budget')).body;
    const tp = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/toolpolicies/demo-tools')).body;
    const sb = await until('sandbox status shows the digests', async () => {
      const o = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/karssandboxes/demo-agent')).body;
      return o.status?.routers?.[0]?.loaded?.InferencePolicy === ip.status.compiledDigest ? o : undefined;
    });
    assert.equal(sb.status.routers[0].instance, 'test-1');
    assert.equal(sb.status.routers[0].loaded.AgtProfile, tp.status.compiledDigest);
    assert.deepEqual(sb.status.routers[0].lastErrors, {});
    let kubectl: string | undefined;
    try {
      kubectl = (await promisify(execFile)('kubectl', ['version', '--client'])).stdout ? 'kubectl' : undefined;
    } catch {
      kubectl = undefined;
    }
    if (!kubectl) return;
    const { stdout } = await promisify(execFile)('kubectl', ['--kubeconfig', stack.kubeconfig, 'get', 'ksb', 'demo-agent', '-o', 'yaml']);
    assert.match(stdout, new RegExp(`InferencePolicy: ${ip.status.compiledDigest as string}`));
  });

  it("NACK with the router's error when it refuses a policy the controller compiled", async () => {
    // The controller accepts any YAML; the router's AGT subset refuses a rule with an unknown key and keeps the last good one.
    const agt = join(mkdtempSync(join(tmpdir(), 'kars-agt-')), 'agt.yaml');
    writeFileSync(agt, 'rules:\n  - allow: "x"\n    when: always\n');
    const r = await runKars(['tp', 'apply', 'demo-tools', '--agt-file', agt, ...kc]);
    assert.equal(r.code, 0, r.stderr);
    const status = await until('NACK', async () => {
      const s = await runKars(['policy', 'status', 'demo-tools', ...kc]);
      return /\bNACK\b/.test(s.stdout) ? s.stdout : undefined;
    });
    assert.match(
      status,
      /tp\/demo-tools\s+Enforce\s+demo-agent\s+test-1\s+NACK\s+sha256:[0-9a-f]{12}\s+sha256:[0-9a-f]{12}\s+2\s+2\s.*when/,
    );
    const sb = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/karssandboxes/demo-agent')).body;
    assert.match(sb.status.routers[0].lastErrors.AgtProfile, /when/);
  });

  it('STALE with an age for a router enforcing an older digest and for one whose lease expired', async () => {
    const now = Date.now();
    await stack.ts.client.post(
      '/apis/coordination.k8s.io/v1/namespaces/default/leases',
      echoLease('default', {
        sandbox: 'demo-agent',
        instance: 'old-router',
        digests: { InferencePolicy: D1 },
        errors: {},
        renewedAtMs: now,
        leaseDurationSeconds: 3600,
      }),
    );
    await stack.ts.client.post(
      '/apis/coordination.k8s.io/v1/namespaces/default/leases',
      echoLease('default', {
        sandbox: 'demo-agent',
        instance: 'gone-router',
        digests: { InferencePolicy: D1 },
        errors: {},
        renewedAtMs: now - 120_000,
        leaseDurationSeconds: ROUTER_LEASE_SECONDS,
      }),
    );
    const r = await runKars(['policy', 'status', 'demo-budget', ...kc]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /ip\/demo-budget\s+Enforce\s+demo-agent\s+old-router\s+STALE \(\d+s\)\s+sha256:[0-9a-f]{12}\s+sha256:111111111111\s.*enforces an older digest/,
    );
    assert.match(r.stdout, /ip\/demo-budget\s+Enforce\s+demo-agent\s+gone-router\s+STALE \((2m|1[2-9]\ds)\)\s.*lease not renewed/);
    assert.match(r.stdout, /ip\/demo-budget\s+Enforce\s+demo-agent\s+test-1\s+SYNCED/);
  });

  it('never SYNCED for a router whose lease two processes write, even when the last write carries the compiled digest', async () => {
    const ip = (await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies/demo-budget')).body;
    const leases = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
    const write = (holder: string): ReturnType<typeof echoLease> =>
      echoLease('default', {
        sandbox: 'demo-agent',
        instance: 'twin',
        holder,
        digests: { InferencePolicy: ip.status.compiledDigest },
        errors: {},
        renewedAtMs: Date.now(),
        leaseDurationSeconds: 3600,
      });
    assert.equal((await stack.ts.client.post(leases, write('twin/aaaa'))).status, 201);
    await until('twin SYNCED while one process writes it', async () =>
      /ip\/demo-budget\s+Enforce\s+demo-agent\s+twin\s+SYNCED/.test((await runKars(['policy', 'status', 'demo-budget', ...kc])).stdout),
    );
    // A second process, the same instance name, no took-over-from: the lease now holds what it loaded.
    // An update names the version it replaces, as kube-apiserver requires of a Lease.
    const current = (await stack.ts.client.get(`${leases}/kars-router-demo-agent-twin`)).body as { metadata: { resourceVersion: string } };
    const next = write('twin/bbbb') as { metadata: Record<string, unknown> };
    next.metadata['resourceVersion'] = current.metadata.resourceVersion;
    const put = await stack.ts.client.put(`${leases}/kars-router-demo-agent-twin`, next);
    assert.equal(put.status, 200, put.text);
    const out = await until('twin CONTESTED', async () => {
      const s = (await runKars(['policy', 'status', 'demo-budget', ...kc])).stdout;
      return /twin\s+CONTESTED/.test(s) ? s : undefined;
    });
    assert.match(
      out,
      /ip\/demo-budget\s+Enforce\s+demo-agent\s+twin\s+CONTESTED\s.*lease written by two processes: twin\/aaaa and twin\/bbbb/,
    );
    assert.match(out, /ip\/demo-budget\s+Enforce\s+demo-agent\s+test-1\s+SYNCED/, 'the other router is unaffected');
  });
});
