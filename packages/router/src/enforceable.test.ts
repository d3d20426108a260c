/**
 * "Ready means enforced" (issue 9 item 1), end to end: kars apiserver, the kars controller and real
 * routers. For each compiled field a router cannot enforce (a guardrail stage without its backend,
 * a ToolPolicy scoped to an MCP server the router does not front, an unknown field), the router
 * refuses the policy (NACK, with the field named in its echo Lease and /internal/policy-status), the
 * policy goes Degraded/RouterRejected naming the router and the field, and it never reaches Ready;
 * once the router can enforce it (restarted with the backend or the server), or the field is
 * removed, it becomes Ready.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';

import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds, LAST_ERRORS_ANNOTATION, routerLeaseName } from '@kars/policy-api';
import { PolicyController } from '@kars/policy-controller';
import { pino } from 'pino';
import { startRouter } from './server.js';
import type { RouterOptions, RunningRouter } from './server.js';
import { startMcpStub } from './stubs/mcp.js';
import type { McpStub } from './stubs/mcp.js';
import { startOpenAIStub } from './stubs/openai.js';
import type { OpenAIStub } from './stubs/openai.js';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';

const NS = 'enforce';
const API = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const cfg = fastWatchConfig({ pingMs: 1000, idleMs: 5000 });
const silent = pino({ level: 'silent' });
const TOKEN = 'admin-token-enforce';

interface Cond {
  type: string;
  status: string;
  reason: string;
  message: string;
}

describe('a router echoes only what it enforces: unenforceable policy never becomes Ready', () => {
  let ts: TestServer;
  let openai: OpenAIStub;
  let github: McpStub;
  let other: McpStub;
  let client: KubeClient;
  const ac = new AbortController();
  let controllerRun: Promise<void>;
  const running: Array<{ router: RunningRouter; stop: AbortController }> = [];

  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    openai = await startOpenAIStub();
    github = await startMcpStub({ tools: [{ name: 'delete_repo' }, { name: 'get_repo' }] });
    other = await startMcpStub({ tools: [{ name: 'delete_repo' }] });
    client = clientFor(ts.server.kubeconfigPath, cfg);
    const controller = new PolicyController({
      client,
      config: cfg,
      metrics: new RuntimeMetrics(),
      log: silent,
      leaderElection: { enabled: false, namespace: NS, name: 'c', identity: 'c' },
      env: {},
    });
    controllerRun = controller.run(ac.signal);
  });

  after(async () => {
    ac.abort();
    for (const r of running) r.stop.abort();
    await Promise.all([controllerRun, ...running.map((r) => r.router.done)]);
    client.close();
    await Promise.all([openai.close(), github.close(), other.close()]);
    await ts.close();
  });

  /** Start a router for `sandbox` as instance `instance`; the returned stop() ends it gracefully. */
  async function router(
    sandbox: string,
    instance: string,
    extra: Partial<RouterOptions>,
  ): Promise<{ router: RunningRouter; stop: () => Promise<void> }> {
    const stop = new AbortController();
    const r = await startRouter(
      {
        sandbox,
        namespace: NS,
        listen: '127.0.0.1:0',
        adminListen: '127.0.0.1:0',
        adminToken: TOKEN,
        upstream: openai.url,
        source: { kind: 'api', client, config: cfg },
        instance,
        metrics: new RuntimeMetrics(),
        log: silent,
        ...extra,
      },
      stop.signal,
    );
    const entry = { router: r, stop };
    running.push(entry);
    return {
      router: r,
      stop: async () => {
        stop.abort();
        await r.done;
        running.splice(running.indexOf(entry), 1);
      },
    };
  }

  async function conditions(
    plural: string,
    name: string,
  ): Promise<
    { status: Record<string, unknown> & { conditions?: Cond[]; compiledDigest?: string | null; phase?: string } } & Record<string, unknown>
  > {
    return (await ts.client.get(`${API}/${plural}/${name}`)).body;
  }
  const cond = (obj: { status?: { conditions?: Cond[] } }, type: string): Cond | undefined =>
    obj.status?.conditions?.find((c) => c.type === type);

  /** Wait for Degraded/RouterRejected, then check that Ready stays False for a while: the router refused it for good. */
  async function expectRejected(plural: string, name: string, field: RegExp, instance: string): Promise<Cond> {
    const degraded = await until(`${plural}/${name} Degraded/RouterRejected`, async () => {
      const o = await conditions(plural, name);
      const d = cond(o, 'Degraded');
      return d?.status === 'True' && d.reason === 'RouterRejected' ? d : undefined;
    });
    assert.match(degraded.message, field, 'the condition names the field');
    assert.match(degraded.message, new RegExp(`router ${instance}\\b`), 'the condition names the router');
    const t0 = Date.now();
    while (Date.now() - t0 < 1500) {
      const o = await conditions(plural, name);
      assert.notEqual(cond(o, 'Ready')?.status, 'True', `${plural}/${name} must not be Ready while a router refuses it`);
      assert.equal(o.status.phase, 'Degraded');
      await new Promise((r) => setTimeout(r, 100));
    }
    return degraded;
  }

  async function expectReady(plural: string, name: string): Promise<void> {
    await until(`${plural}/${name} Ready/RouterEnforcing`, async () => {
      const o = await conditions(plural, name);
      const r = cond(o, 'Ready');
      return r?.status === 'True' && r.reason === 'RouterEnforcing' && cond(o, 'Degraded')?.status === 'False';
    });
  }

  async function policyStatus(
    r: RunningRouter,
  ): Promise<Array<{ kind: string; last_error: string | null; rejected_digest: string | null; digest: string | null }>> {
    const res = await fetch(`${r.adminUrl ?? ''}/internal/policy-status`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return (
      (await res.json()) as {
        entries: Array<{ kind: string; last_error: string | null; rejected_digest: string | null; digest: string | null }>;
      }
    ).entries;
  }

  async function call(
    r: RunningRouter,
    path: string,
    tool: string,
  ): Promise<{ error?: { code: number; message: string }; result?: unknown }> {
    const res = await fetch(`${r.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {} } }),
    });
    return (await res.json()) as { error?: { code: number; message: string }; result?: unknown };
  }

  it('an InferencePolicy with a guardrail stage is refused by a router without a guardrail backend, and Ready once the router has one', async () => {
    await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb-g' },
      spec: { inferenceRef: { name: 'ip-g' } },
    });
    await ts.client.post(`${API}/inferencepolicies`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'InferencePolicy',
      metadata: { name: 'ip-g' },
      spec: {
        appliesTo: { sandboxName: 'sb-g' },
        tokenBudget: { perRequestTokens: 100 },
        guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }],
      },
    });
    const first = await router('sb-g', 'rg', {});
    await expectRejected('inferencepolicies', 'ip-g', /guardrails\[0\]\.provider/, 'rg');
    const compiled = (await conditions('inferencepolicies', 'ip-g')).status.compiledDigest;
    const entry = (await policyStatus(first.router)).find((e) => e.kind === 'InferencePolicy');
    assert.match(entry?.last_error ?? '', /guardrails\[0\]\.provider: guardrail openai-moderation has no backend/);
    assert.equal(entry?.rejected_digest, compiled, '/internal/policy-status names the refused digest');
    const lease = (await ts.client.get(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${routerLeaseName('sb-g', 'rg')}`)).body;
    assert.match(JSON.parse(lease.metadata.annotations[LAST_ERRORS_ANNOTATION]).InferencePolicy, /no backend configured/);
    // With no earlier InferencePolicy to keep enforcing, the agent must not run unpoliced: fail closed.
    const before = openai.requests.length;
    const chat = await fetch(`${first.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(chat.status, 503);
    assert.equal(((await chat.json()) as { error: { code: string } }).error.code, 'guardrail_misconfigured');
    assert.equal(openai.requests.length, before, 'the refused request never reached the upstream');
    await first.stop();
    await router('sb-g', 'rg', { guardrailProviders: ['openai-moderation'] });
    await expectReady('inferencepolicies', 'ip-g');
  });

  it('a ToolPolicy scoped to an MCP server is refused by a router that does not front it, and once Ready is enforced on exactly that server', async () => {
    await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb-t' },
      spec: { governance: { enabled: true, toolPolicyRef: { name: 'tp-gh' } } },
    });
    await ts.client.post(`${API}/toolpolicies`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'ToolPolicy',
      metadata: { name: 'tp-gh' },
      spec: {
        appliesTo: { tool: '*', mcpServer: 'github' },
        agtProfile: { inline: 'rules:\n  - deny: delete_repo\n    reason: no deleting\n' },
      },
    });
    // The old single, unnamed upstream: nothing tells the gateway it fronts "github".
    const first = await router('sb-t', 'rt', { mcpUpstream: github.url });
    await expectRejected('toolpolicies', 'tp-gh', /appliesTo\.mcpServer: this router does not front MCP server "github"/, 'rt');
    const entries = await policyStatus(first.router);
    assert.match(entries.find((e) => e.kind === 'ToolPolicy')?.last_error ?? '', /appliesTo\.mcpServer/);
    // The refused ToolPolicy was the only one: tool calls fail closed instead of passing unpoliced.
    const callsBefore = github.calls.length;
    const refused = await fetch(`${first.router.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_repo', arguments: {} } }),
    });
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'policy_rejected');
    assert.equal(github.calls.length, callsBefore, 'the refused call never reached the MCP server');
    await first.stop();

    const second = await router('sb-t', 'rt', {
      mcpUpstreams: [
        { name: 'github', url: github.url },
        { name: 'other', url: other.url },
      ],
    });
    await expectReady('toolpolicies', 'tp-gh');
    const denied = await call(second.router, '/mcp/github', 'delete_repo');
    assert.ok(denied.error, `delete_repo on github is refused, got ${JSON.stringify(denied)}`);
    assert.equal(github.calls.filter((c) => c.tool === 'delete_repo').length, 0, 'the refused call never reached github');
    const allowed = await call(second.router, '/mcp/github', 'get_repo');
    assert.equal(allowed.error, undefined, 'other github tools pass');
    const elsewhere = await call(second.router, '/mcp/other', 'delete_repo');
    assert.equal(elsewhere.error, undefined, 'the policy scoped to github does not govern server "other"');
    assert.equal(other.calls.filter((c) => c.tool === 'delete_repo').length, 1);
  });

  it('an unknown field in the compiled profile is refused; removing it makes the policy Ready', async () => {
    await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb-u' },
      spec: { governance: { enabled: true, toolPolicyRef: { name: 'tp-u' } } },
    });
    await ts.client.post(`${API}/toolpolicies`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'ToolPolicy',
      metadata: { name: 'tp-u' },
      spec: { appliesTo: { tool: '*' }, agtProfile: { inline: 'limits:\n  maxCallsPerMinute: 5\nrules:\n  - deny: rm\n' } },
    });
    await router('sb-u', 'ru', { mcpUpstream: other.url });
    await expectRejected('toolpolicies', 'tp-u', /unknown top-level key "limits"/, 'ru');
    await ts.client.patch(`${API}/toolpolicies/tp-u`, { spec: { agtProfile: { inline: 'rules:\n  - deny: rm\n' } } }, 'merge');
    await expectReady('toolpolicies', 'tp-u');
  });
});
