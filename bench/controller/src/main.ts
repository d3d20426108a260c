#!/usr/bin/env node
// Benchmark for the kars policy controller (`kars controller`): edit → compiled ConfigMap,
// edit → Ready by router echo, and a cold start over many InferencePolicies (time and RSS).
//
// `kars apiserver` and `kars controller` each run as a separate child process, so the controller's
// RSS and CPU are read from /proc apart from everything else. The benchmark process hosts the
// observers (Reflectors that time what the controller writes) and an auto-echo router simulator:
// a Reflector on the controller's ConfigMaps that, on every change, recomputes the digest of each
// sandbox's InferencePolicy ConfigMap and at once applies that sandbox's echo Lease, as a router
// does when it loads a ConfigMap (and renews every lease every 5 s, as a router does).
//
//   npm run bench:controller                              # defaults (build first, then run)
//   BENCH_QUICK=1 node bench/controller/dist/main.js      # smoke test, ~1 min (needs a prior `npx tsc -b`)
//
// Env: see bench/README.md ("Policy controller"). Timings never decide the exit code.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { finishRun, fsTypeOf, log, runMain } from '../../lib/dist/index.js';
import { coldPhase } from './cold-phase.js';
import { readConfig } from './config.js';
import { editPhase } from './edit-phase.js';
import { createEditor } from './editor.js';
import { report } from './report.js';
import { newRun } from './run.js';
import { startWorld, teardown } from './world.js';
import type { Handles } from './world.js';

async function main(): Promise<number> {
  const tStart = performance.now();
  const cfg = readConfig();

  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-bench-ctl-'));
  const dataDir = join(dataRoot, 'apiserver');
  const fsType = fsTypeOf(dataRoot);
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir} (${fsType})`);

  const run = newRun(cfg);
  const { failures, notes } = run;
  const h: Handles = { ac: new AbortController(), reflectorRuns: [], ctls: [] };

  try {
    // ---- apiserver, CRDs, observers, router simulator ----------------------------------------
    const w = await startWorld(cfg, dataDir, h);
    // ---- phase 1+2: edits against a small world ---------------------------------------------
    const editor = await createEditor(w, cfg);
    const rss1 = await editPhase(run, w, h, editor);
    // ---- phase 3: cold start ----------------------------------------------------------------
    await coldPhase(run, w, h, editor, rss1);

    for (const c of h.ctls) {
      if (c.stderr.error || c.stderr.fatal)
        notes.push(
          `controller ${c.label} logged ${c.stderr.error} error and ${c.stderr.fatal} fatal lines (first: ${c.stderr.firstErrors[0]?.slice(0, 300)})`,
        );
    }
    if (w.router.errors.length)
      failures.push(`router simulator: ${w.router.errors.length} lease applies failed (first: ${w.router.errors[0]})`);
    run.raw.router = { leaseApplies: w.router.applies, errors: w.router.errors.slice(0, 10) };
    if (w.reflectorWarnings.length)
      notes.push(`bench observers: ${w.reflectorWarnings.length} watch warnings (first: ${w.reflectorWarnings[0]})`);
    if (w.srv.died) failures.push(w.srv.died);
  } catch (err) {
    const srv = h.srv;
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.died)
      failures.push(`${srv.died} (a signal other than the benchmark's own stop means something else on the machine killed it)`);
    for (const c of h.ctls) if (c.died) failures.push(c.died);
    if (srv?.stderr.tail.length) failures.push(`apiserver stderr tail:\n${srv.stderr.tail.slice(-10).join('\n')}`);
    for (const c of h.ctls)
      if (c.stderr.tail.length) failures.push(`controller ${c.label} stderr tail:\n${c.stderr.tail.slice(-10).join('\n')}`);
  } finally {
    await teardown(h, dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  const runtimeSec = (performance.now() - tStart) / 1000;
  const { lines, histJson } = report(run, { runtimeSec, fsType });
  return finishRun('controller', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: apiserver, controller and the benchmark (observers + router simulator) compete for the cores. Goals are reported, never asserted.',
    config: cfg,
    runtimeSec,
    machine: { dataDirFs: fsType },
    json: { notes, metrics: run.rows, histograms: histJson, raw: run.raw },
  });
}

runMain(main);
