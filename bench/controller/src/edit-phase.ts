// Phases 1 and 2: controller #1 against a small world. Its idle RSS, then edit → new ConfigMap and
// edit → Ready by router echo over sequential edits, then its /metrics.

import { fmt1, fmtInt, log, mb, selfCpuSec, sleep } from '../../lib/dist/index.js';
import { startController } from './controller-process.js';
import type { Editor } from './editor.js';
import { isReadyFor, dailyOf } from './objects.js';
import { parseProm } from './prom.js';
import { goalCell } from './run.js';
import type { Run } from './run.js';
import { procCpuSec, procStatus, stats } from './util.js';
import type { Handles, World } from './world.js';

/** Run phases 1 and 2; returns controller #1's idle VmRSS / VmHWM (kB), which the cold start compares with. */
export async function editPhase(run: Run, w: World, h: Handles, editor: Editor): Promise<{ rssKb: number; hwmKb: number }> {
  const { cfg, raw, failures, notes } = run;
  const { srv, ips, cms, currentRv, waitFor } = w;
  const { editKey, editCmKey, runEdits } = editor;
  log(`controller #1 (edit phase): ${cfg.editSandboxes} sandbox router(s) reference ${editKey}`);
  const ctl1 = await startController(srv.kubeconfig, 'edit');
  h.ctls.push(ctl1);
  const up1 = await ctl1.waitUp();
  await waitFor(
    () => isReadyFor(ips.store.get(editKey)) && dailyOf(cms.store.get(editCmKey)) === editor.value,
    30_000,
    'initial Ready of edit/edited',
  );
  log(
    `  controller pid ${ctl1.pid}: /metrics after ${up1.metricsUpMs.toFixed(0)} ms, /readyz 200 after ${up1.readyMs.toFixed(0)} ms; ${editKey} Ready`,
  );
  await sleep(1000);
  const rss1 = procStatus(ctl1.pid);
  run.add(
    'Controller RSS at start (idle)',
    mb(rss1.rssKb),
    'MB',
    `${fmt1(mb(rss1.rssKb))} MB`,
    '',
    `child VmRSS 1 s after ${editKey} became Ready; /readyz 200 ${fmtInt(up1.readyMs)} ms after spawn`,
  );

  log(`  warm-up: ${cfg.warmupEdits} edits (not measured)`);
  const wu = await runEdits(cfg.warmupEdits, 'warm-up', ctl1);
  if (wu.timeouts) failures.push(`warm-up: ${wu.timeouts} edits not Ready in time (first: ${wu.errors[0]})`);
  log(`1-2/3 edits: ${cfg.edits} sequential edits of ${editKey}`);
  const rvEdits0 = await currentRv();
  const cpu1 = { ctl: procCpuSec(ctl1.pid), srv: procCpuSec(srv.pid), self: selfCpuSec(), t: performance.now() };
  const ed = await runEdits(cfg.edits, 'edit', ctl1);
  const editWrites = (await currentRv()) - rvEdits0;
  const wall1 = (performance.now() - cpu1.t) / 1000;
  const ctlCpu1 = procCpuSec(ctl1.pid) - cpu1.ctl;
  const srvCpu1 = procCpuSec(srv.pid) - cpu1.srv;
  const selfCpu1 = selfCpuSec() - cpu1.self;
  const cmSt = stats(ed.toCm);
  const rdSt = stats(ed.toReady);
  const lcSt = stats(ed.lastCompileMs);
  const lmSt = stats(ed.lastMs);
  const paSt = stats(ed.patchMs);
  const cpuNote1 = `${fmt1(editWrites / Math.max(1, cfg.edits))} API writes per edit (incl. lease renewals); CPU per edit: controller ${fmt1((ctlCpu1 * 1000) / cfg.edits)} ms, apiserver ${fmt1((srvCpu1 * 1000) / cfg.edits)} ms, bench ${fmt1((selfCpu1 * 1000) / cfg.edits)} ms`;
  raw.edits = {
    ...ed,
    apiWrites: editWrites,
    toCmStats: cmSt,
    toReadyStats: rdSt,
    lastCompileMsStats: lcSt,
    lastMsStats: lmSt,
    patchStats: paSt,
    controllerCpuSec: ctlCpu1,
    apiserverCpuSec: srvCpu1,
    benchCpuSec: selfCpu1,
    wallSec: wall1,
  };
  run.add(
    'edit → new ConfigMap p50 / p99',
    [cmSt.p50, cmSt.p99],
    'ms',
    `${fmt1(cmSt.p50)} / ${fmt1(cmSt.p99)} ms`,
    goalCell(cmSt.p99, cfg.goals.editToConfigMapP99Ms, 'ms (p99)'),
    `${cmSt.n} sequential edits (merge PATCH of spec.tokenBudget.dailyTokens, ${cfg.editGapMs} ms apart), until the bench's ConfigMap watch holds the value; max ${fmt1(cmSt.max)} ms; PATCH itself p50 ${fmt1(paSt.p50)} ms; controller's status.propagation.lastCompileMs median ${fmt1(lcSt.p50)} ms (p99 ${fmt1(lcSt.p99)})`,
  );
  run.add(
    'edit → Ready by router echo p50 / p99',
    [rdSt.p50, rdSt.p99],
    'ms',
    `${fmt1(rdSt.p50)} / ${fmt1(rdSt.p99)} ms`,
    goalCell(rdSt.p99, cfg.goals.editToReadyP99Ms, 'ms (p99)'),
    `until phase Ready, observedGeneration = generation, loadedDigest = compiledDigest, with ${cfg.editSandboxes} sandbox router(s) echoing; max ${fmt1(rdSt.max)} ms; controller's status.propagation.lastMs median ${fmt1(lmSt.p50)} ms; ${cpuNote1}`,
  );
  if (ed.timeouts) failures.push(`edits: ${ed.timeouts} of ${cfg.edits} not Ready within ${cfg.editTimeoutMs} ms (first: ${ed.errors[0]})`);

  const prom1 = parseProm(await ctl1.metrics());
  run.histTables.push({
    title: `controller #1 (edit phase: ${cfg.warmupEdits} warm-up + ${cfg.edits} measured edits, initial compile)`,
    prom: prom1,
  });
  const end1 = procStatus(ctl1.pid);
  const exit1 = await ctl1.stop();
  raw.controller1 = {
    pid: ctl1.pid,
    up: up1,
    rssStartKb: rss1.rssKb,
    rssEndKb: end1.rssKb,
    hwmKb: end1.hwmKb,
    exit: exit1,
    stderr: { lines: ctl1.stderr.lines, warn: ctl1.stderr.warn, error: ctl1.stderr.error, firstErrors: ctl1.stderr.firstErrors },
  };
  if (!exit1?.graceful) notes.push(`controller #1 did not exit cleanly on SIGTERM: ${JSON.stringify(exit1)}`);
  return rss1;
}
