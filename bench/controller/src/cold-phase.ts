// Phase 3: a cold start. BENCH_COLD_POLICIES InferencePolicies and BENCH_COLD_SANDBOXES sandboxes
// are created while no controller runs; then a fresh controller #2 starts and the bench times its
// convergence, its RSS and the work it did. Then, optionally, edits against the loaded controller.

import { Resources } from '@kars/kube-client';
import type { Change } from '@kars/kube-runtime';
import { INFERENCE_POLICY_KIND, INFERENCE_POLICY_LABEL } from '@kars/policy-compiler';
import { INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';
import { errMsg, fmt1, fmt2, fmtInt, log, mb, runPool, selfCpuSec, sleep } from '../../lib/dist/index.js';
import { startController } from './controller-process.js';
import type { ControllerProcess } from './controller-process.js';
import type { Editor } from './editor.js';
import { inferencePolicy, isReadyFor, sandbox } from './objects.js';
import type { ConfigMapObject, PolicyObject } from './objects.js';
import { parseProm } from './prom.js';
import { queueSampler } from './queue-sampler.js';
import type { QueueSampler } from './queue-sampler.js';
import { goalCell } from './run.js';
import type { ColdRaw, Run } from './run.js';
import { fmt1Opt, fmtS, procCpuSec, procStatus, remove, stats } from './util.js';
import type { Handles, World } from './world.js';

/** Create the cold start's namespaces, sandboxes (with their routers) and policies; returns the policies' keys. */
async function coldSetup(run: Run, w: World, nsOf: (i: number) => string): Promise<string[]> {
  const { cfg, raw, failures } = run;
  const { api, router, ips, waitFor } = w;
  const P = cfg.coldPolicies;
  const NSN = cfg.coldNamespaces;
  log(
    `3/3 cold start: creating ${fmtInt(cfg.coldSandboxes)} sandboxes and ${fmtInt(P)} InferencePolicies in ${NSN} namespaces (setup, controller stopped)`,
  );
  for (let n = 0; n < NSN; n++)
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `cold-${n}` } });
  const tSetup = performance.now();
  const sbc = await runPool(cfg.coldSandboxes, cfg.createConcurrency, async (j) => {
    await api.create(KARS_SANDBOX, sandbox(nsOf(j), `sb-${j}`, `p-${j}`));
    await router.add(nsOf(j), `sb-${j}`, `p-${j}`);
  });
  if (sbc.errors.length) failures.push(`cold sandboxes: ${sbc.errors.length} creates failed (first: ${sbc.errors[0]})`);
  let nextPct = 10;
  const tCreate = performance.now();
  const pc = await runPool(
    P,
    cfg.createConcurrency,
    async (i) => {
      await api.create(INFERENCE_POLICY, inferencePolicy(nsOf(i), `p-${i}`, i < cfg.coldSandboxes ? `sb-${i}` : '', 1000 + i));
    },
    (d) => {
      if ((d * 100) / P >= nextPct) {
        const s = (performance.now() - tCreate) / 1000;
        log(`  ${nextPct}% (${fmtInt(d)}) in ${s.toFixed(1)} s, ${fmtInt(d / s)}/s`);
        nextPct += 10;
      }
    },
  );
  if (pc.errors.length) failures.push(`cold policies: ${pc.errors.length} creates failed (first: ${pc.errors[0]})`);
  const coldKeys = Array.from({ length: P }, (_, i) => `${nsOf(i)}/p-${i}`);
  await waitFor(() => coldKeys.every((k) => ips.store.get(k)), 60_000, 'bench watch sees every created policy');
  const setupMs = performance.now() - tSetup;
  raw.coldSetup = {
    sandboxes: cfg.coldSandboxes,
    policies: P,
    namespaces: NSN,
    sandboxWallMs: sbc.wallMs,
    policyWallMs: pc.wallMs,
    totalMs: setupMs,
    errors: pc.errors.length + sbc.errors.length,
  };
  run.add(
    `cold setup: create ${fmtInt(P)} policies (not timed against the goal)`,
    P / (pc.wallMs / 1000),
    'ops/s',
    `${fmtInt(P / (pc.wallMs / 1000))} creates/s`,
    '',
    `${fmt1(pc.wallMs / 1000)} s for the policies (concurrency ${cfg.createConcurrency}, HTTP/2), plus ${fmtInt(cfg.coldSandboxes)} sandboxes with router leases; ${fmt1(setupMs / 1000)} s setup in total`,
  );
  return coldKeys;
}

/**
 * Convergence trackers, driven by the observers' change events: which policies are not compiled
 * yet, which referenced ones are not Ready, which went Degraded, and when each milestone came.
 */
class Convergence {
  readonly pending: Set<string>;
  readonly pendingReady: Set<string>;
  readonly degraded = new Set<string>();
  firstCmAt: number | undefined;
  firstStatusAt: number | undefined;
  allCompiledAt: number | undefined;
  allReadyAt: number | undefined;

  constructor(
    private readonly w: World,
    coldKeys: readonly string[],
    sandboxes: number,
  ) {
    this.pending = new Set(coldKeys);
    this.pendingReady = new Set(coldKeys.slice(0, sandboxes));
  }

  /** Record the moments every policy was compiled and every referenced one Ready. */
  onDone(): void {
    if (this.allCompiledAt === undefined && this.pending.size === 0) this.allCompiledAt = performance.now();
    if (this.allReadyAt === undefined && this.pendingReady.size === 0) this.allReadyAt = performance.now();
  }

  /** ConfigMap subscriber. */
  readonly coldCm = (c: Change<ConfigMapObject>): void => {
    if (c.type !== 'apply' || !c.object.metadata.namespace?.startsWith('cold-')) return;
    const p = c.object.metadata.labels?.[INFERENCE_POLICY_LABEL];
    if (!p) return;
    this.firstCmAt ??= performance.now();
    this.recheck(`${c.object.metadata.namespace}/${p}`);
    this.onDone();
  };

  /** InferencePolicy subscriber. */
  readonly coldIp = (c: Change<PolicyObject>): void => {
    if (c.type !== 'apply' || !c.object.metadata.namespace?.startsWith('cold-')) return;
    if (c.object.status?.observedGeneration !== undefined) this.firstStatusAt ??= performance.now();
    this.recheck(`${c.object.metadata.namespace}/${c.object.metadata.name}`);
    this.onDone();
  };

  private compiledOk(k: string): boolean {
    const o = this.w.ips.store.get(k);
    const st = o?.status;
    if (!st || st.observedGeneration !== o.metadata.generation) return false;
    if (st.phase === 'Degraded') this.degraded.add(k);
    if (st.phase !== 'Compiled' && st.phase !== 'Ready') return false;
    const { namespace, name } = o.metadata;
    return this.w.cms.store.get(`${namespace}/${INFERENCE_POLICY_KIND.configMap.name(name ?? '')}`) !== undefined;
  }

  private recheck(k: string): void {
    if (this.pending.has(k) && this.compiledOk(k)) this.pending.delete(k);
    if (this.pendingReady.has(k) && isReadyFor(this.w.ips.store.get(k))) this.pendingReady.delete(k);
  }
}

/** After convergence: wait until the inferencepolicy queue was empty for two samples in a row (cap 120 s); when it was first seen so. */
async function waitDrained(qs: QueueSampler, ctl2: ControllerProcess, t0: number, convergedAt: number): Promise<number | undefined> {
  for (const tWait = performance.now(); performance.now() - tWait < 120_000 && !ctl2.died; await sleep(100)) {
    const n = qs.samples.length;
    const a = qs.samples[n - 2];
    const b = qs.samples[n - 1];
    if (n >= 2 && a && b && a[0] > convergedAt - t0 && b[1]['inferencepolicy'] === 0 && a[1]['inferencepolicy'] === 0) {
      return t0 + a[0];
    }
  }
  return undefined;
}

/** Run phase 3 (and the loaded edits); `rss1` is controller #1's idle VmRSS, for the ratio. */
export async function coldPhase(run: Run, w: World, h: Handles, editor: Editor, rss1: { rssKb: number }): Promise<void> {
  const { cfg, raw, failures, notes } = run;
  const { srv, ips, cmSubs, ipSubs, currentRv, waitFor } = w;
  const { editKey, runEdits } = editor;
  const P = cfg.coldPolicies;
  const NSN = cfg.coldNamespaces;
  const nsOf = (i: number): string => `cold-${i % NSN}`;
  const coldKeys = await coldSetup(run, w, nsOf);

  const conv = new Convergence(w, coldKeys, cfg.coldSandboxes);
  const { pending, pendingReady, degraded, coldCm, coldIp } = conv;
  cmSubs.unshift(coldCm);
  ipSubs.unshift(coldIp);

  const rvBefore = await currentRv();
  await sleep(500);
  const srvCpu0 = procCpuSec(srv.pid);
  const self0 = selfCpuSec();
  const ctl2 = await startController(srv.kubeconfig, 'cold');
  h.ctls.push(ctl2);
  const t0 = ctl2.tSpawn;
  const qs = queueSampler(ctl2, 1000);
  const up2 = await ctl2.waitUp(cfg.coldTimeoutMs);
  log(
    `  controller #2 pid ${ctl2.pid}: /metrics after ${up2.metricsUpMs.toFixed(0)} ms, /readyz 200 (every watch listed) after ${up2.readyMs.toFixed(0)} ms`,
  );
  let lastLog = performance.now();
  const progress = setInterval(() => {
    if (performance.now() - lastLog < 5000) return;
    lastLog = performance.now();
    log(
      `  ${fmt1((performance.now() - t0) / 1000)} s: ${fmtInt(P - pending.size)} / ${fmtInt(P)} compiled, ${fmtInt(cfg.coldSandboxes - pendingReady.size)} / ${fmtInt(cfg.coldSandboxes)} referenced Ready; controller RSS ${fmt1(mb(procStatus(ctl2.pid).rssKb))} MB, queue depth ${qs.last() ?? '?'}`,
    );
  }, 500);
  let coldErr: unknown;
  try {
    await waitFor(
      () => {
        conv.onDone();
        return (pending.size === 0 && pendingReady.size === 0) || !!ctl2.died;
      },
      cfg.coldTimeoutMs,
      'cold start convergence',
    );
    if (ctl2.died) throw new Error(ctl2.died);
  } catch (err) {
    coldErr = err;
  } finally {
    clearInterval(progress);
  }
  const convergedAt = performance.now();
  const atConv = procStatus(ctl2.pid);
  const ctlCpu2 = procCpuSec(ctl2.pid);
  const srvCpu2 = procCpuSec(srv.pid) - srvCpu0;
  const selfCpu2 = selfCpuSec() - self0;
  const rvAfter = await currentRv();
  remove(cmSubs, coldCm);
  remove(ipSubs, coldIp);
  if (coldErr) {
    failures.push(
      `cold start: ${errMsg(coldErr)}; ${fmtInt(pending.size)} policies never compiled, ${fmtInt(pendingReady.size)} referenced policies never Ready (e.g. ${[...pending, ...pendingReady].slice(0, 3).join(', ')})`,
    );
  }
  if (degraded.size) failures.push(`cold start: ${degraded.size} policies went Degraded (e.g. ${[...degraded].slice(0, 3).join(', ')})`);
  // After convergence the controller still works off re-reconciles its own writes caused; wait
  // until its inferencepolicy queue has been empty for two samples in a row (cap 120 s).
  const depthAtConv = qs.last();
  const heapAtConv = qs.lastHeap();
  const drainedAt = await waitDrained(qs, ctl2, t0, convergedAt);
  await sleep(2000);
  const idle2 = procStatus(ctl2.pid);
  const { allCompiledAt, allReadyAt, firstStatusAt, firstCmAt } = conv;
  const convS = allCompiledAt !== undefined ? (allCompiledAt - t0) / 1000 : NaN;
  const readyS = allReadyAt !== undefined ? (allReadyAt - t0) / 1000 : NaN;
  const writes = rvAfter - rvBefore;
  const cold: ColdRaw = {
    policies: P,
    sandboxes: cfg.coldSandboxes,
    metricsUpMs: up2.metricsUpMs,
    readyzMs: up2.readyMs,
    firstStatusMs: firstStatusAt !== undefined ? firstStatusAt - t0 : null,
    firstConfigMapMs: firstCmAt !== undefined ? firstCmAt - t0 : null,
    allCompiledMs: allCompiledAt !== undefined ? allCompiledAt - t0 : null,
    allReferencedReadyMs: allReadyAt !== undefined ? allReadyAt - t0 : null,
    waitEndedMs: convergedAt - t0,
    rssAtConvergenceKb: atConv.rssKb,
    hwmAtConvergenceKb: atConv.hwmKb,
    maxSampledRssKb: ctl2.rss.maxRssKb,
    rssAfterDrainKb: idle2.rssKb,
    hwmAfterDrainKb: idle2.hwmKb,
    heapAfterDrain: qs.lastHeap() ?? null,
    maxHeapUsedMb: qs.maxHeapUsedMb(),
    controllerCpuSec: ctlCpu2,
    apiserverCpuSec: srvCpu2,
    benchCpuSec: selfCpu2,
    apiWrites: writes,
    rssTimeline: ctl2.rss.samples.filter((_, i) => i % 5 === 0),
    queueDepthMax: qs.max,
    heapAtConvergence: heapAtConv ?? null,
    queueDepthAtConvergence: depthAtConv ?? null,
    queueDrainedMs: drainedAt !== undefined ? drainedAt - t0 : null,
    queueTimeline: qs.samples,
    notConverged: [...pending].slice(0, 20),
    notReady: [...pendingReady].slice(0, 20),
  };
  raw.cold = cold;
  const tl = `spawn → /metrics ${fmtS(up2.metricsUpMs)} s → /readyz (all watches listed) ${fmtS(up2.readyMs)} s → first ConfigMap ${fmtS(cold.firstConfigMapMs)} s → first status ${fmtS(cold.firstStatusMs)} s → all compiled ${fmt1(convS)} s`;
  run.add(
    `cold start: ${fmtInt(P)} policies compiled`,
    convS,
    's',
    `${fmt2(convS)} s`,
    goalCell(convS, cfg.goals.coldStartS, 's'),
    `from spawning a fresh controller until every policy has status.observedGeneration = generation, phase Compiled/Ready and its ConfigMap exists; ${tl}; ${fmtInt(P / convS)} policies/s`,
  );
  run.add(
    `cold start: ${fmtInt(cfg.coldSandboxes)} referenced policies Ready`,
    readyS,
    's',
    `${fmt2(readyS)} s`,
    '',
    `the policies the ${fmtInt(cfg.coldSandboxes)} sandboxes reference, confirmed by their routers' echo`,
  );
  run.add(
    'cold start: controller queue drained',
    cold.queueDrainedMs === null ? NaN : cold.queueDrainedMs / 1000,
    's',
    `${fmtS(cold.queueDrainedMs)} s`,
    '',
    `inferencepolicy work queue (kars_controller_queue_depth, sampled every 1 s) empty twice in a row; max depth ${fmtInt(qs.max)}, ${fmtInt(depthAtConv ?? NaN)} keys still waiting at convergence (re-reconciles caused by the controller's own writes)`,
  );
  run.add(
    'cold start: controller RSS at convergence',
    mb(atConv.rssKb),
    'MB',
    `${fmt1(mb(atConv.rssKb))} MB`,
    '',
    `VmHWM (peak) until then ${fmt1(mb(atConv.hwmKb))} MB; V8 heap used ${fmt1Opt(heapAtConv?.usedMb)} of ${fmt1Opt(heapAtConv?.totalMb)} MB, external ${fmt1Opt(heapAtConv?.externalMb)} MB (its /metrics, ≤ 0.5 s old); ${fmt2(atConv.rssKb / rss1.rssKb)}× the idle controller #1`,
  );
  run.add(
    'cold start: controller peak RSS (VmHWM)',
    mb(idle2.hwmKb),
    'MB',
    `${fmt1(mb(idle2.hwmKb))} MB`,
    goalCell(mb(idle2.hwmKb), cfg.goals.coldRssMb, 'MB'),
    `peak over the whole cold start: spawn until 2 s after its queue drained; RSS then ${fmt1(mb(idle2.rssKb))} MB; the largest V8 heap used seen was ${fmt1(qs.maxHeapUsedMb())} MB`,
  );
  run.add(
    'cold start: work done',
    writes,
    'writes',
    `${fmtInt(writes)} API writes`,
    '',
    `${fmt2(writes / P)} writes per policy (apiserver resourceVersion delta, incl. router leases); CPU until convergence: controller ${fmt1(ctlCpu2)} s (${Math.round((100 * ctlCpu2) / ((convergedAt - t0) / 1000))}% of a core), apiserver ${fmt1(srvCpu2)} s, bench (observers + routers) ${fmt1(selfCpu2)} s`,
  );

  // ---- extra: edits against the loaded controller ------------------------------------------
  if (cfg.loadedEdits > 0 && !ctl2.died) {
    log(`  ${cfg.loadedEdits} edits of ${editKey} against the controller holding ${fmtInt(P)} policies`);
    await waitFor(() => isReadyFor(ips.store.get(editKey)), 30_000, `${editKey} Ready under controller #2`).catch((err: unknown) =>
      failures.push(errMsg(err)),
    );
    const le = await runEdits(cfg.loadedEdits, 'loaded edit', ctl2);
    const lc = stats(le.toCm);
    const lr = stats(le.toReady);
    raw.loadedEdits = { ...le, toCmStats: lc, toReadyStats: lr };
    run.add(
      `edit → ConfigMap / → Ready with ${fmtInt(P)} policies loaded (p50 / p99)`,
      [lc.p50, lc.p99, lr.p50, lr.p99],
      'ms',
      `${fmt1(lc.p50)} / ${fmt1(lc.p99)} ms; ${fmt1(lr.p50)} / ${fmt1(lr.p99)} ms`,
      '',
      `${lr.n} edits of ${editKey} after the cold start converged (same method as above; few samples, p99 ≈ max)`,
    );
    if (le.timeouts) failures.push(`loaded edits: ${le.timeouts} of ${cfg.loadedEdits} not Ready in time (first: ${le.errors[0]})`);
  }

  await qs.stop();
  const end2 = procStatus(ctl2.pid);
  cold.hwmAtEndKb = end2.hwmKb;
  cold.rssAtEndKb = end2.rssKb;
  const prom2 = parseProm(await ctl2.metrics());
  run.histTables.push({
    title: `controller #2 (cold start of ${fmtInt(P)} policies${cfg.loadedEdits ? ` + ${cfg.loadedEdits} edits` : ''})`,
    prom: prom2,
  });
  const exit2 = await ctl2.stop();
  if (!exit2?.graceful) notes.push(`controller #2 did not exit cleanly on SIGTERM: ${JSON.stringify(exit2)}`);
  raw.controller2 = {
    pid: ctl2.pid,
    exit: exit2,
    stderr: { lines: ctl2.stderr.lines, warn: ctl2.stderr.warn, error: ctl2.stderr.error, firstErrors: ctl2.stderr.firstErrors },
  };
}
