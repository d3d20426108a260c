import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ProbeSession } from '../probe.js';
import type { EditResult } from '../probe.js';
import { summarize } from '../stats.js';
import { FAULTS, inject } from './faults.js';
import type { FaultName } from './faults.js';
import { LocalStack, suiteWatchConfig } from './stack.js';

/** Storm length (at least two minutes by default; KARS_STORM_SECONDS to change it). */
const STORM_MS = Math.max(10, Number(process.env['KARS_STORM_SECONDS'] ?? 120) || 120) * 1000;
/** Every edit must be enforced and Ready within this long of being written. */
const READY_WITHIN_MS = 10_000;

describe(
  'freshness conformance: a storm of random faults',
  {
    skip: process.env['KARS_CONFORMANCE_KUBECONFIG']
      ? 'faults need the local stack (kars apiserver fault injection, owned processes)'
      : false,
  },
  () => {
    const stack = new LocalStack();
    let session: ProbeSession;

    before(async () => {
      try {
        await stack.start();
        session = await ProbeSession.open({
          client: stack.client,
          namespace: 'default',
          sandbox: 'kars-probe',
          config: suiteWatchConfig(),
          routerTimeoutMs: 60_000,
          editTimeoutMs: 20_000,
        });
      } catch (err) {
        const logs = stack.logs();
        await stack.stop();
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
      }
    });

    after(async () => {
      await session?.close().catch(() => undefined);
      await stack.stop();
    });

    it(`every edit after a random fault is enforced and Ready within ${READY_WITHIN_MS / 1000} s, for ${STORM_MS / 1000} s`, async (t) => {
      const seed = Number(process.env['KARS_STORM_SEED'] ?? Date.now() % 1_000_000);
      let state = seed;
      const rand = (): number => (state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
      t.diagnostic(`seed ${seed} (KARS_STORM_SEED to replay)`);
      const results: Array<{ fault: FaultName; r: EditResult }> = [];
      const started = Date.now();
      while (Date.now() - started < STORM_MS) {
        const fault = FAULTS[Math.floor(rand() * FAULTS.length)] as FaultName;
        await inject(stack, fault);
        const r = await session.edit();
        results.push({ fault, r });
        t.diagnostic(
          `${fault}: → echo ${r.toEchoMs === null ? 'never' : Math.round(r.toEchoMs)} ms, → Ready ${r.toReadyMs === null ? 'never' : Math.round(r.toReadyMs)} ms${r.error ? ` (${r.error})` : ''}`,
        );
        await new Promise((res) => setTimeout(res, 500 + rand() * 1500));
      }
      const ready = summarize(results.map((x) => x.r.toReadyMs));
      t.diagnostic(
        `${results.length} faults and edits in ${Math.round((Date.now() - started) / 1000)} s; edit → Ready p50 ${Math.round(ready.p50 ?? -1)} ms, p99 ${Math.round(ready.p99 ?? -1)} ms, max ${Math.round(ready.max ?? -1)} ms`,
      );
      const late = results.filter((x) => x.r.toReadyMs === null || x.r.toReadyMs > READY_WITHIN_MS);
      assert.ok(results.length >= 10, `the storm made enough edits (${results.length})`);
      assert.deepEqual(
        late.map((x) => `${x.fault}: ${x.r.toReadyMs === null ? `never (${x.r.error ?? ''})` : `${Math.round(x.r.toReadyMs)} ms`}`),
        [],
        `every edit Ready within ${READY_WITHIN_MS} ms\n${late.length ? stack.logs() : ''}`,
      );
    });
  },
);
