import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LocalStack } from '@kars/freshness/conformance';
import { until } from '@kars/kube-core/testing';
import { INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';

const kars = fileURLToPath(new URL('../../bin/kars.js', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function probe(stack: LocalStack, args: string[], opts: { interruptAfterSecondEdit?: boolean } = {}): Promise<Run> {
  let interrupt = opts.interruptAfterSecondEdit === true;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [kars, 'freshness', 'probe', '--kubeconfig', stack.kubeconfig, ...args], {
      env: { ...process.env, KARS_HTTP2_PING_INTERVAL_SECS: '1', KARS_HTTP2_PING_TIMEOUT_SECS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      if (interrupt && /edit 2:/.test(stderr)) {
        interrupt = false;
        child.kill('SIGINT');
      }
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function leftovers(stack: LocalStack): Promise<{ policies: string[]; sandbox: boolean }> {
  const policies = (await stack.client.list(INFERENCE_POLICY, { namespace: 'default' })).items.map((p) => p.metadata.name ?? '');
  const sandbox = (await stack.client.getOrUndefined(KARS_SANDBOX, 'default', 'kars-probe')) !== undefined;
  return { policies, sandbox };
}

/**
 * The probe deleted what it made before it exited: whatever is still there already carries a
 * deletionTimestamp (the controller removes its finalizer, which on a loaded machine can take a
 * moment after the probe is gone), and then it goes.
 */
async function assertCleanedUp(stack: LocalStack): Promise<void> {
  const policies = (await stack.client.list(INFERENCE_POLICY, { namespace: 'default' })).items;
  for (const p of policies) assert.ok(p.metadata.deletionTimestamp, `policy ${p.metadata.name} is deleted, not left behind`);
  const sandbox = await stack.client.getOrUndefined(KARS_SANDBOX, 'default', 'kars-probe');
  if (sandbox) assert.ok(sandbox.metadata.deletionTimestamp, 'the probe sandbox is deleted, not left behind');
  await until(
    'the probe policy and sandbox are finalized and gone',
    async () => {
      const left = await leftovers(stack);
      return left.policies.length === 0 && !left.sandbox;
    },
    30_000,
  );
}

describe('kars freshness probe (process, against the local stack)', () => {
  const stack = new LocalStack();
  before(async () => {
    await stack.start();
  });
  after(async () => stack.stop());

  it('makes 20 edits, prints p50/p99/max as JSON, passes its SLO and cleans up', async (t) => {
    const run = await probe(stack, ['--iterations', '20', '--slo', '2', '-o', 'json']);
    assert.equal(run.code, 0, run.stderr);
    const report = JSON.parse(run.stdout) as {
      pass: boolean;
      edits: Array<{
        generation: number;
        observedGeneration: number;
        compiledDigest: string;
        configMapResourceVersion: string;
        toConfigMapMs: number;
        toEchoMs: number;
        toReadyMs: number;
      }>;
      summary: { echo: { p50: number; p99: number; max: number; count: number } };
    };
    assert.equal(report.pass, true);
    assert.equal(report.edits.length, 20);
    for (const e of report.edits) {
      assert.equal(e.observedGeneration, e.generation, 'the controller observed the generation written');
      assert.match(e.compiledDigest, /^sha256:[0-9a-f]{64}$/);
      assert.match(e.configMapResourceVersion, /^\d+$/);
      assert.ok(e.toConfigMapMs > 0 && e.toConfigMapMs <= e.toEchoMs && e.toEchoMs <= e.toReadyMs, 'ConfigMap, then echo, then Ready');
    }
    assert.equal(new Set(report.edits.map((e) => e.compiledDigest)).size, 20, 'every edit compiled to a new digest');
    assert.equal(report.summary.echo.count, 20);
    t.diagnostic(
      `edit → echo p50 ${Math.round(report.summary.echo.p50)} ms, p99 ${Math.round(report.summary.echo.p99)} ms, max ${Math.round(report.summary.echo.max)} ms`,
    );
    await assertCleanedUp(stack);
  });

  it('prints its table and exits 1 when an edit breaks the SLO', async () => {
    const run = await probe(stack, ['--iterations', '2', '--slo', '0.000001']);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stdout, /^EDIT\s+GENERATION\s+OBSERVED\s+DIGEST\s+CM-RV\s+TO-CONFIGMAP\s+TO-ECHO\s+TO-READY/m);
    assert.match(run.stdout, /^edit→echo\s+\d+ms\s+\d+ms\s+\d+ms\s+2$/m);
    assert.match(run.stdout, /^FAIL: 0\/2 edits echoed by every router within the SLO of 0 ms/m);
    await assertCleanedUp(stack);
  });

  it('cleans up on Ctrl-C and exits 130', async () => {
    const run = await probe(stack, ['--iterations', '1000'], { interruptAfterSecondEdit: true });
    assert.equal(run.code, 130, run.stderr);
    assert.match(run.stderr, /interrupted: cleaning up/);
    await assertCleanedUp(stack);
  });

  it('exits 2 with the fix when no router serves the sandbox, and leaves nothing behind', async () => {
    const run = await probe(stack, ['--sandbox', 'nobody-routes-this', '--router-timeout', '3']);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /no router serves sandbox default\/nobody-routes-this .*kars router --sandbox nobody-routes-this/);
    // The probe deletes its policy before it exits; the controller then removes its finalizer, which
    // on a loaded machine can take a moment after the probe is gone.
    const left = (await stack.client.list(INFERENCE_POLICY, { namespace: 'default' })).items;
    for (const p of left) assert.ok(p.metadata.deletionTimestamp, `${p.metadata.name} is deleted, not left behind`);
    await until(
      'the probe policy is finalized and gone',
      async () => (await stack.client.list(INFERENCE_POLICY, { namespace: 'default' })).items.length === 0,
      30_000,
    );
    assert.equal(await stack.client.getOrUndefined(KARS_SANDBOX, 'default', 'nobody-routes-this'), undefined);
  });

  it('refuses to re-point a sandbox that enforces a real policy, unless --force', async () => {
    await stack.client.create(KARS_SANDBOX, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'prod', namespace: 'default' },
      spec: { inferenceRef: { name: 'prod-budget' } },
    } as never);
    const run = await probe(stack, ['--sandbox', 'prod', '--router-timeout', '3']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /enforces InferencePolicy "prod-budget"; the probe would replace it/);
    const sb = await stack.client.get<
      { metadata: object; spec: { inferenceRef: { name: string } } } & import('@kars/kube-core').KubeObject
    >(KARS_SANDBOX, 'default', 'prod');
    assert.equal(sb.spec.inferenceRef.name, 'prod-budget', 'untouched');
    const forced = await probe(stack, ['--sandbox', 'prod', '--router-timeout', '2', '--force']);
    assert.equal(forced.code, 2, 'no router serves it here, so the probe stops at setup');
    const after = await stack.client.get<
      { metadata: object; spec: { inferenceRef: { name: string } } } & import('@kars/kube-core').KubeObject
    >(KARS_SANDBOX, 'default', 'prod');
    assert.equal(after.spec.inferenceRef.name, 'prod-budget', 'the previous binding is restored after the probe');
  });

  it('rejects bad flags with a clear message', async () => {
    const run = await probe(stack, ['--iterations', '0']);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /--iterations must be a positive integer, got "0"/);
  });
});
