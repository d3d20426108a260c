import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeClient } from '@kars/kube-client';
import { until } from '@kars/kube-core/testing';
import { ProbeSession } from '../probe.js';
import { detectionBound, FAULTS, inject } from './faults.js';
import type { FaultName } from './faults.js';
import { suiteWatchConfig } from './stack.js';
import type { FaultStack } from './stack.js';

/** Where {@link faultSuite} runs: a stack it starts and stops, or a foreign cluster's client (faults skipped). */
export type FaultSuiteTarget =
  { stack: () => FaultStack } | { client: () => KubeClient; namespace: string; sandbox: string; skip: (fault: FaultName) => string };

/** One case of the fault suite, for the test file to declare with its own `it` (so node's runner attributes it to that file). */
export interface FaultSuiteCase {
  name: string;
  skip: string | false;
  run: (t: TestContext) => Promise<void>;
}

/** The fault suite as hooks and cases, for a test file's `describe`. */
export interface FaultSuite {
  before: () => Promise<void>;
  after: () => Promise<void>;
  cases: FaultSuiteCase[];
}

/**
 * The fault suite, one body for every apiserver: open a {@link ProbeSession}, check a fault-free
 * edit is echoed within 2 s, then inject each of {@link FAULTS} in turn and require the next edit to
 * be echoed within `detectionBound(fault) + 2 s`, at the generation written. After the compaction
 * fault it also requires a controller to have logged a watch restart for 410 Expired (the
 * compaction really was met, not stepped around). A test file declares it:
 *
 * ```ts
 * const suite = faultSuite(target);
 * describe(title, () => {
 *   before(suite.before);
 *   after(suite.after);
 *   for (const c of suite.cases) it(c.name, { skip: c.skip }, c.run);
 * });
 * ```
 */
export function faultSuite(target: FaultSuiteTarget): FaultSuite {
  let stack: FaultStack | undefined;
  let client: KubeClient;
  let session: ProbeSession;
  const cases: FaultSuiteCase[] = [
    {
      name: 'without a fault: an edit is compiled, echoed and Ready well within a second',
      skip: false,
      run: async (t) => {
        const r = await session.edit();
        t.diagnostic(
          `edit → ConfigMap ${Math.round(r.toConfigMapMs ?? -1)} ms, → echo ${Math.round(r.toEchoMs ?? -1)} ms, → Ready ${Math.round(r.toReadyMs ?? -1)} ms`,
        );
        assert.equal(r.error, undefined);
        assert.ok(r.toEchoMs !== null && r.toEchoMs <= 2000, `echo within 2 s: ${r.toEchoMs}`);
      },
    },
  ];
  for (const fault of FAULTS) {
    cases.push({
      name: `${fault}: edit → router echo within the detection bound + 2 s`,
      skip: 'stack' in target ? false : target.skip(fault),
      run: async (t) => {
        assert.ok(stack);
        const compactedTo = await inject(stack, fault);
        const r = await session.edit();
        const bound = detectionBound(fault) + 2000;
        t.diagnostic(
          `${fault}: edit → ConfigMap ${Math.round(r.toConfigMapMs ?? -1)} ms, → echo ${r.toEchoMs === null ? 'never' : `${Math.round(r.toEchoMs)} ms`} (bound ${bound} ms), → Ready ${r.toReadyMs === null ? 'never' : `${Math.round(r.toReadyMs)} ms`}, generation ${r.generation}, observed ${r.observedGeneration}`,
        );
        assert.ok(r.toEchoMs !== null, `${fault}: the edit was echoed (${r.error ?? ''})\n${stack.logs()}`);
        assert.ok(r.toEchoMs <= bound, `${fault}: edit → echo ${Math.round(r.toEchoMs)} ms exceeds the bound ${bound} ms\n${stack.logs()}`);
        assert.equal(r.observedGeneration, r.generation, 'the controller observed the generation written');
        if (fault === 'compaction') {
          // The controllers resumed their watches after the reset from compacted resourceVersions:
          // they must have met a 410 whose window starts at or above the compaction (not one left
          // over from the restart before). Its log line may reach us a moment after the echo.
          const s = stack;
          const from = compactedTo;
          assert.ok(from !== undefined && Number.isSafeInteger(from) && from > 0, `the compaction revision: ${from}`);
          const n = await until(
            'a controller logs a watch restart for 410 Expired past the compaction',
            () => s.expiredWatchRestarts(from),
            {
              timeoutMs: 10_000,
              everyMs: 50,
            },
          ).catch((err: unknown) => assert.fail(`${String(err)}\n${s.logs()}`));
          t.diagnostic(`compaction to revision ${from}: ${n} watch restart(s) for 410 Expired with the server's window at or above it`);
        }
      },
    });
  }
  return {
    cases,
    before: async () => {
      if ('stack' in target) {
        stack = target.stack();
        await stack.start();
        client = stack.client;
      } else {
        client = target.client();
      }
      try {
        session = await ProbeSession.open({
          client,
          namespace: 'stack' in target ? 'default' : target.namespace,
          sandbox: 'stack' in target ? 'kars-probe' : target.sandbox,
          config: suiteWatchConfig(),
          routerTimeoutMs: 60_000,
          editTimeoutMs: 20_000,
        });
      } catch (err) {
        const logs = stack?.logs() ?? '';
        await stack?.stop();
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
      }
    },
    after: async () => {
      await session?.close().catch(() => undefined);
      if (stack) await stack.stop();
      else client?.close();
    },
  };
}
