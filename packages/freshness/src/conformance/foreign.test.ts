import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FAULTS, foreignSkipReason } from './faults.js';
import { LocalStack } from './stack.js';

const SUITE = fileURLToPath(new URL('./faults.test.js', import.meta.url));

/** Run the fault suite file as a user would against another cluster: a process, configured by env only. */
function runSuite(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // A test process of its own: without NODE_TEST_CONTEXT, which would make it a subtest of this one.
    const { NODE_TEST_CONTEXT: _, ...parent } = process.env;
    const child = spawn(process.execPath, ['--test', '--test-reporter=tap', SUITE], {
      env: { ...parent, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/**
 * The suite's foreign-cluster mode, run for real: a kars stack that the suite process does not own
 * (started here, outside it), reached only through KARS_CONFORMANCE_KUBECONFIG. The suite must run
 * the fault-free case against it and skip every fault it cannot cause there, saying why.
 */
describe('freshness conformance suite against a foreign cluster (kubeconfig only)', () => {
  const stack = new LocalStack();

  before(async () => {
    await stack.start();
  });
  after(async () => stack.stop());

  it('runs the edit without a fault and skips each fault it cannot cause, with the reason', async () => {
    const before = stack.processes();
    assert.ok(
      before.every((p) => p.running),
      JSON.stringify(before),
    );
    const { code, out } = await runSuite({
      KARS_CONFORMANCE_KUBECONFIG: stack.kubeconfig,
      KARS_CONFORMANCE_NAMESPACE: stack.namespace,
      KARS_CONFORMANCE_SANDBOX: stack.sandbox,
    });
    assert.equal(code, 0, `the suite passes against the foreign cluster:\n${out}`);
    assert.match(out, /^ {4}ok \d+ - without a fault: an edit is compiled, echoed and Ready well within a second$/m, out);
    assert.match(out, /edit → ConfigMap \d+ ms, → echo \d+ ms, → Ready \d+ ms/, 'the fault-free edit was measured');
    for (const fault of FAULTS) {
      const line = out.split('\n').find((l) => l.includes(` - ${fault}: edit → router echo`));
      assert.ok(line, `${fault}: reported`);
      assert.match(line, /^ {4}ok \d+ - /, `${fault}: not failed: ${line}`);
      assert.ok(line.endsWith(`# SKIP ${foreignSkipReason(fault)}`), `${fault}: skipped with its reason: ${line}`);
    }
    // The suite did not touch the stack's processes: the same ones still run.
    assert.deepEqual(stack.processes(), before);
  });
});
