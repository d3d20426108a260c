/**
 * Dry-run policies (issue 21 item 4, ADR 0050), as a user runs them: kars apiserver, the
 * controller and a real router. A DryRun InferencePolicy and a DryRun ToolPolicy reach the demo
 * sandbox through appliesTo; the router records what they would refuse (decision records with
 * `mode: DryRun`, the metric) while requests proceed under the policies the sandbox references;
 * `kars policy status` shows the mode; the controller marks them Ready only once the router
 * echoes their digests in its dry-run slots. And they never weaken an enforced policy: a call the
 * enforced ToolPolicy denies stays denied, and a sandbox that references a DryRun policy keeps
 * enforcing its last enforced one.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningRouter } from '@kars/router';
import { logFiles, type ChainLine, type DecisionRecord } from '@kars/router/decisions';
import { callTool, chat, runKars, startTestStack, until } from '../testing/stack.js';
import type { TestStack } from '../testing/stack.js';

const IP = '/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies';
const TP = '/apis/kars.azure.com/v1alpha1/namespaces/default/toolpolicies';
const SB = '/apis/kars.azure.com/v1alpha1/namespaces/default/karssandboxes';

type Rec = ChainLine & DecisionRecord;

describe('dry-run policies', () => {
  let stack: TestStack;
  let router: RunningRouter;
  let root: string;
  let kc: string[];

  /** Every decision record the router has written so far. */
  const records = (): Rec[] =>
    logFiles(root).flatMap((f) =>
      readFileSync(join(root, f), 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as ChainLine)
        .filter((l): l is Rec => l.type === 'decision'),
    );
  const policy = async (path: string): Promise<any> => (await stack.ts.client.get(path)).body;
  const ready = (path: string, reason: string) =>
    until(`${path} is Ready (${reason})`, async () => {
      const o = await policy(path);
      const c = (o.status?.conditions ?? []).find((x: { type: string }) => x.type === 'Ready');
      return c?.status === 'True' && c.reason === reason && o.status?.observedGeneration === o.metadata.generation ? o : undefined;
    });

  before(async () => {
    stack = await startTestStack();
    root = mkdtempSync(join(tmpdir(), 'kars-dry-run-'));
    kc = ['--kubeconfig', stack.kubeconfig];
    for (const [cmd, file] of [
      ['sandbox create', 'examples/sandbox.yaml'],
      ['ip apply', 'examples/inference-policy.yaml'],
      ['tp apply', 'examples/tool-policy.yaml'],
      ['ip apply', 'examples/inference-policy-dry-run.yaml'],
      ['tp apply', 'examples/tool-policy-dry-run.yaml'],
    ] as const) {
      const r = await runKars([...cmd.split(' '), '-f', file, ...kc]);
      assert.equal(r.code, 0, `${cmd} -f ${file}: ${r.stderr}`);
    }
    router = await stack.router('demo-agent', 'default', { decisionLog: { dir: root } });
    await until('the router is ready', () => router.isReady());
  });
  after(async () => {
    await stack.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('is Ready only as recorded (RouterRecording), beside the enforced policies, and kars policy status says DryRun', async () => {
    const trial = await ready(`${IP}/demo-budget-trial`, 'RouterRecording');
    const noWrites = await ready(`${TP}/no-writes-trial`, 'RouterRecording');
    await ready(`${IP}/demo-budget`, 'RouterEnforcing');
    assert.match(trial.status.conditions.find((c: { type: string }) => c.type === 'Ready').message, /DryRun: recorded, not enforced/);
    // The router echoes them in their own slots, never as the kind it enforces.
    const echo = router.state.echo();
    assert.equal(echo.dryRun?.digests['InferencePolicy/demo-budget-trial'], trial.status.compiledDigest);
    assert.equal(echo.dryRun?.digests['AgtProfile/no-writes-trial'], noWrites.status.compiledDigest);
    assert.notEqual(echo.digests.InferencePolicy, trial.status.compiledDigest);
    const st = await runKars(['policy', 'status', '-o', 'json', ...kc]);
    assert.equal(st.code, 0, st.stderr);
    const rows = JSON.parse(st.stdout) as Array<{ name: string; mode: string; routers: Array<{ state: string }> }>;
    const row = (n: string) => rows.find((r) => r.name === n);
    assert.equal(row('demo-budget-trial')?.mode, 'DryRun');
    assert.deepEqual(
      row('demo-budget-trial')?.routers.map((r) => r.state),
      ['SYNCED'],
    );
    assert.equal(row('no-writes-trial')?.mode, 'DryRun');
    assert.equal(row('demo-budget')?.mode, 'Enforce');
    // The README's commands: --wait returns once the router records it, and says it is not enforced.
    const wait = await runKars(['ip', 'apply', '-f', 'examples/inference-policy-dry-run.yaml', '--wait', ...kc]);
    assert.equal(wait.code, 0, wait.stderr);
    assert.match(wait.stdout, /demo-budget-trial recorded \(DryRun, not enforced\): generation 1, digest sha256:/);
    const table = await runKars(['policy', 'status', 'demo-budget-trial', ...kc]);
    assert.match(table.stdout, /ip\/demo-budget-trial\s+DryRun\s+demo-agent\s+\S+\s+SYNCED/);
  });

  it('records the would-be refusal while the request proceeds under the enforced policy', async () => {
    const trial = await ready(`${IP}/demo-budget-trial`, 'RouterRecording');
    const enforced = await ready(`${IP}/demo-budget`, 'RouterEnforcing');
    // 500 tokens: demo-budget allows up to 1000 per request; the trial would refuse over 100.
    const r = await chat(router.url, 500);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const [allowed, wouldBe] = await until('both records are written', () => {
      const inf = records().filter((x) => x.kind === 'inference');
      const a = inf.find((x) => x.mode === undefined && x.decision === 'allow');
      const d = inf.find((x) => x.mode === 'DryRun');
      return a && d ? [a, d] : undefined;
    });
    assert.equal(wouldBe.decision, 'deny');
    assert.equal(wouldBe.reason, 'per_request_tokens_exceeded');
    assert.equal(wouldBe.requestId, allowed.requestId, 'one request, two records');
    assert.deepEqual(wouldBe.policies, [
      { kind: 'InferencePolicy', name: 'demo-budget-trial', generation: trial.metadata.generation, digest: trial.status.compiledDigest },
    ]);
    // The enforced record names the enforced policy, now with its generation.
    assert.deepEqual(allowed.policies, [
      { kind: 'InferencePolicy', name: 'demo-budget', generation: enforced.metadata.generation, digest: enforced.status.compiledDigest },
    ]);
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    assert.match(
      metrics,
      /kars_router_dry_run_decisions_total\{kind="inference",policy="demo-budget-trial",decision="deny",reason="per_request_tokens_exceeded"\} [1-9]/,
    );
  });

  it('a dry-run ToolPolicy records what it would deny, and never lets through what the enforced one denies', async () => {
    await ready(`${TP}/no-writes-trial`, 'RouterRecording');
    const write = await callTool(router.url, 'write_file');
    // Forwarded: the MCP stub itself answers (it serves only "echo"); a gateway refusal would carry data.code.
    assert.equal(write.error?.data?.code, undefined, JSON.stringify(write));
    assert.equal(write.error?.message, 'unknown tool: write_file', JSON.stringify(write));
    // demo-tools denies *delete*; the trial allows it: it stays denied.
    const del = await callTool(router.url, 'delete_file');
    assert.equal(del.error?.data?.code, 'tool_denied', JSON.stringify(del));
    const tools = await until('the tool records are written', () => {
      const t = records().filter((x) => x.kind === 'tool');
      return t.length >= 4 ? t : undefined;
    });
    const line = (tool: string, mode: 'DryRun' | undefined) =>
      tools.find((x) => (x.target as { tool: string }).tool === tool && x.mode === mode);
    assert.equal(line('write_file', undefined)?.decision, 'allow');
    assert.equal(line('write_file', 'DryRun')?.decision, 'deny');
    assert.equal(line('write_file', 'DryRun')?.reason, 'tool_denied');
    assert.equal(line('write_file', 'DryRun')?.policies[0]?.name, 'no-writes-trial');
    assert.equal(line('delete_file', undefined)?.decision, 'deny');
    assert.equal(line('delete_file', 'DryRun')?.decision, 'allow');
  });

  it('refuses an answer-side field on a DryRun policy (kars ip apply before sending; the controller if written directly) and keeps recording the last good one', async () => {
    const recorded = router.state.echo().dryRun?.digests['InferencePolicy/demo-budget-trial'];
    assert.ok(recorded?.startsWith('sha256:'));
    const floor = [
      'apiVersion: kars.azure.com/v1alpha1',
      'kind: InferencePolicy',
      'metadata: {name: demo-budget-trial}',
      'spec:',
      '  enforcement: DryRun',
      '  appliesTo: {sandboxName: demo-agent}',
      '  tokenBudget: {perRequestTokens: 100}',
      '  contentSafety: {hate: Low}',
      '',
    ].join('\n');
    const r = await runKars(['ip', 'apply', '-f', '-', ...kc], { input: floor });
    assert.notEqual(r.code, 0, r.stdout);
    assert.match(r.stderr, /spec\.contentSafety: a DryRun policy cannot hold a content-safety floor/);
    // Written past the CLI: the controller refuses it, says why, and keeps the compiled ConfigMap.
    const patched = await stack.ts.client.patch(
      `${IP}/demo-budget-trial`,
      { spec: { guardrails: [{ provider: 'openai-moderation' }] } },
      'merge',
    );
    assert.equal(patched.status, 200, patched.text);
    const refused = await until('the controller refuses the edit', async () => {
      const o = await policy(`${IP}/demo-budget-trial`);
      const c = (o.status?.conditions ?? []).find((x: { type: string }) => x.type === 'Ready');
      return o.status?.observedGeneration === o.metadata.generation && c?.status === 'False' ? c : undefined;
    });
    assert.match(refused.message, /spec\.guardrails\[0\]\.applyTo: a DryRun policy's guardrail stages must say applyTo: input/);
    assert.equal(router.state.echo().dryRun?.digests['InferencePolicy/demo-budget-trial'], recorded, 'the last good one is still recorded');
    // Back to a request-side-only policy: Ready as recorded again.
    await stack.ts.client.patch(`${IP}/demo-budget-trial`, { spec: { guardrails: null } }, 'merge');
    const again = await ready(`${IP}/demo-budget-trial`, 'RouterRecording');
    assert.equal(again.status.compiledDigest, recorded);
  });

  it('a sandbox that references a DryRun policy keeps enforcing its last enforced one', async () => {
    const before = router.state.echo().digests.InferencePolicy;
    await stack.ts.client.patch(`${SB}/demo-agent`, { spec: { inferenceRef: { name: 'demo-budget-trial' } } }, 'merge');
    await until('the router refuses the reference', () => {
      const e = router.state.echo();
      return /which is DryRun/.test(e.errors.InferencePolicy ?? '') ? e : undefined;
    });
    assert.equal(router.state.echo().digests.InferencePolicy, before, 'the last enforced digest stays');
    // 2000 tokens: over demo-budget's 1000, still refused; the trial's own record is a dry-run one.
    const r = await chat(router.url, 2000);
    assert.equal(r.status, 429, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'per_request_tokens_exceeded');
    const trial = await until('the trial is refused for the reference', async () => {
      const o = await policy(`${IP}/demo-budget-trial`);
      return o.status?.phase === 'Ready' || o.status?.phase === 'Degraded' ? o : undefined;
    });
    // Still recorded where appliesTo selects it: the reference does not make it enforced.
    assert.equal(router.state.echo().dryRun?.digests['InferencePolicy/demo-budget-trial'], trial.status.compiledDigest);
  });
});
