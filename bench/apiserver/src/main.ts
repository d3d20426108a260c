/**
 * Benchmark for `kars apiserver`: create/update throughput, watch fan-out, and RSS with many
 * stored objects. The server runs as a separate child process so its RSS and CPU are measured
 * apart from the load generator. See bench/README.md for what each number means.
 *
 *   npm run bench                                        # full scale (build first, then run)
 *   BENCH_SCALE=0.05 node bench/apiserver/dist/main.js   # smoke test, < 1 min
 *
 * Env: BENCH_SCALE (default 1) scales every object/update count; BENCH_WATCHERS (default 50,
 * not scaled), BENCH_CREATES, BENCH_UPDATES, BENCH_FANOUT_UPDATES, BENCH_RSS_OBJECTS override a
 * single count; BENCH_SERVER_NODE_ARGS passes extra flags to the server's node (e.g.
 * "--cpu-prof --cpu-prof-dir=/tmp/prof"); BENCH_KEEP=1 keeps the data dir.
 * Phase 0 compares one fsync per write (--commit-batch 1) with group commit at concurrency 64:
 * BENCH_GC_OPS (default 4000 × scale) creates and as many updates per round, BENCH_GC_ROUNDS
 * (default 3) alternating rounds, each after BENCH_GC_WARMUP (default 1000) unmeasured creates and
 * as many updates; BENCH_ONLY=groupcommit stops after it; BENCH_GC_MODES=group (or single) runs one
 * mode only, e.g. to compare server builds or flags (no ratio row then); BENCH_GC_SETTLE_MS
 * (default 2000) syncs and waits before each server starts. BENCH_GC_BEFORE=<dir of a built kars
 * checkout> adds a third mode, "before": that checkout's apiserver (e.g. the last commit before
 * group commit; bench/README.md says how to make one), with the ratio group / before.
 *
 * This module is also the watch worker's script: in a worker thread it runs `watchWorker()`.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import {
  cpuLine,
  expectStatus,
  finishRun,
  fmt1,
  fsTypeOf,
  httpsJsonClient,
  log,
  mb,
  mdRow,
  procStatus,
  removeTempDir,
  runMain,
  sleep,
} from '../../lib/dist/index.js';
import type { HttpsJsonClient } from '../../lib/dist/index.js';
import { RSS_CONC, readConfig } from './config.js';
import { fanoutPhase } from './fanout.js';
import type { WorkerHolder } from './fanout.js';
import { groupCommitPhase } from './group-commit.js';
import type { GroupCommitResult } from './group-commit.js';
import { phaseContext, startServer } from './phase.js';
import type { Metric, Server } from './phase.js';
import { rssPhase } from './rss.js';
import { watchWorker } from './watch-worker.js';
import { createPhase, updatePhase, warmUp } from './writes.js';

/** Thrown to stop after the group-commit phase (BENCH_ONLY=groupcommit). */
class SkipRest extends Error {}

/** This module's file: the watch worker thread runs it too. */
const SELF = fileURLToPath(import.meta.url);

async function main(): Promise<number> {
  const tStart = performance.now();
  const cfg = readConfig();
  const { scale } = cfg;

  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-bench-'));
  const dataDir = join(dataRoot, 'apiserver');
  const fsType = fsTypeOf(dataRoot);
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir} (${fsType})`);

  const metrics: Metric[] = [];
  const raw: Record<string, unknown> = {};
  const failures: string[] = [];
  let srv: Server | undefined;
  let client: HttpsJsonClient | undefined;
  const held: WorkerHolder = { worker: undefined };
  let gc: GroupCommitResult | undefined;

  try {
    // ---- 0. group commit, side by side --------------------------------------------------------
    gc = await groupCommitPhase(cfg, dataRoot, failures);
    raw['groupCommit'] = { runs: gc.runs, summary: gc.summary };
    if (cfg.only === 'groupcommit') throw new SkipRest();
    // ---- start ------------------------------------------------------------------------------
    const tBoot = performance.now();
    srv = await startServer(dataDir, cfg.historyWindow);
    const bootMs = performance.now() - tBoot;
    log(`server pid ${srv.pid} at ${srv.url} (started in ${bootMs.toFixed(0)} ms)`);
    client = httpsJsonClient(srv.url, srv.ca, srv.token, { maxSockets: RSS_CONC });
    const ctx = phaseContext(cfg, srv, client, metrics, failures, raw);
    expectStatus(await ctx.request('GET', '/version'), [200], 'GET /version');
    await sleep(1000);
    const base = procStatus(srv.pid);
    ctx.add(
      'Server RSS at start (idle)',
      mb(base.rssKb),
      'MB',
      `${fmt1(mb(base.rssKb))} MB`,
      `child process VmRSS after 1 s idle; startup ${bootMs.toFixed(0)} ms (incl. PKI generation)`,
    );

    const warm = await warmUp(ctx);
    const rvs = await createPhase(ctx);
    await updatePhase(ctx, rvs);
    await fanoutPhase(ctx, rvs, SELF, held);
    await rssPhase(ctx, base.rssKb, warm);
  } catch (err) {
    if (!(err instanceof SkipRest)) failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.stderrTail.length) failures.push(`server stderr tail:\n${srv.stderrTail.slice(-15).join('\n')}`);
  } finally {
    if (held.worker) await held.worker.terminate().catch(() => undefined);
    client?.close();
    if (srv) await srv.stop();
    removeTempDir(dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  const runtimeSec = (performance.now() - tStart) / 1000;
  const lines = [
    `## kars apiserver benchmark`,
    ``,
    `${new Date().toISOString()} · scale ${scale} · node ${process.version} · ${cpuLine()} · data dir on ${fsType} · runtime ${fmt1(runtimeSec)} s`,
    ``,
    `| metric | value | notes |`,
    `|---|---|---|`,
    ...metrics.map((m) => mdRow([m.metric, m.display, m.notes])),
  ];
  if (gc) lines.push('', ...gc.lines);
  return finishRun('apiserver', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: quote medians and ratios, not single runs. Server = separate child process; client CPU includes the watch worker thread.',
    config: cfg,
    runtimeSec,
    machine: { dataDirFs: fsType },
    json: { metrics: metrics.map(({ metric, value, unit, display, notes }) => ({ metric, value, unit, display, notes })), raw },
  });
}

if (isMainThread) {
  runMain(main);
} else {
  watchWorker();
}
