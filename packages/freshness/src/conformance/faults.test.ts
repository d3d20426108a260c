import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClient } from '@kars/kube-client';
import { ProbeSession } from '../probe.js';
import { detectionBound, FAULTS, foreignSkipReason, inject } from './faults.js';
import { LocalStack, suiteWatchConfig } from './stack.js';

// Point the suite at another cluster: KARS_CONFORMANCE_KUBECONFIG (and KARS_CONFORMANCE_NAMESPACE,
// KARS_CONFORMANCE_SANDBOX for a sandbox a router serves there). It then runs the fault-free case
// and skips every fault it cannot cause, with the reason.
const foreign = process.env['KARS_CONFORMANCE_KUBECONFIG'];

describe('freshness conformance: edit → router echo under each fault', () => {
  let stack: LocalStack | undefined;
  let client: KubeClient;
  let session: ProbeSession;

  before(async () => {
    if (foreign) {
      const cfg = suiteWatchConfig();
      client = KubeClient.fromKubeconfig({ kubeconfig: foreign, pingIntervalMs: cfg.pingIntervalMs, pingTimeoutMs: cfg.pingTimeoutMs });
    } else {
      stack = new LocalStack();
      await stack.start();
      client = stack.client;
    }
    try {
      session = await ProbeSession.open({
        client,
        namespace: process.env['KARS_CONFORMANCE_NAMESPACE'] ?? 'default',
        sandbox: process.env['KARS_CONFORMANCE_SANDBOX'] ?? 'kars-probe',
        config: suiteWatchConfig(),
        routerTimeoutMs: 60_000,
        editTimeoutMs: 20_000,
      });
    } catch (err) {
      const logs = stack?.logs() ?? '';
      await stack?.stop();
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
    }
  });

  after(async () => {
    await session?.close().catch(() => undefined);
    if (stack) await stack.stop();
    else client?.close();
  });

  it('without a fault: an edit is compiled, echoed and Ready well within a second', async (t) => {
    const r = await session.edit();
    t.diagnostic(
      `edit → ConfigMap ${Math.round(r.toConfigMapMs ?? -1)} ms, → echo ${Math.round(r.toEchoMs ?? -1)} ms, → Ready ${Math.round(r.toReadyMs ?? -1)} ms`,
    );
    assert.equal(r.error, undefined);
    assert.ok(r.toEchoMs !== null && r.toEchoMs <= 2000, `echo within 2 s: ${r.toEchoMs}`);
  });

  for (const fault of FAULTS) {
    it(`${fault}: edit → router echo within the detection bound + 2 s`, { skip: foreign ? foreignSkipReason(fault) : false }, async (t) => {
      assert.ok(stack);
      await inject(stack, fault);
      const r = await session.edit();
      const bound = detectionBound(fault) + 2000;
      t.diagnostic(
        `${fault}: edit → ConfigMap ${Math.round(r.toConfigMapMs ?? -1)} ms, → echo ${r.toEchoMs === null ? 'never' : `${Math.round(r.toEchoMs)} ms`} (bound ${bound} ms), → Ready ${r.toReadyMs === null ? 'never' : `${Math.round(r.toReadyMs)} ms`}, generation ${r.generation}, observed ${r.observedGeneration}`,
      );
      assert.ok(r.toEchoMs !== null, `${fault}: the edit was echoed (${r.error ?? ''})\n${stack.logs()}`);
      assert.ok(r.toEchoMs <= bound, `${fault}: edit → echo ${Math.round(r.toEchoMs)} ms exceeds the bound ${bound} ms`);
      assert.equal(r.observedGeneration, r.generation, 'the controller observed the generation written');
    });
  }
});
