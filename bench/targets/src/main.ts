#!/usr/bin/env node
// kars apiserver and kube-apiserver side by side, in one run (issue 18 item 3): for each target
// server, the real `kars controller` and `kars router` (and `kars stub openai`) as child processes
// time edit → ConfigMap, edit → router echo and edit → Ready; then the three watch clients (the
// kars Reflector, @kubernetes/client-node's informer, kubernetes-fluent-client's Watcher) watch
// through a FaultRelay of ours in front of the server, which silently freezes every connection
// (no FIN, no RST), and the bench times how long each takes to see an edit made after the drop.
// Same fault, same clients, same settings against both servers. See bench/README.md ("kars
// apiserver and kube-apiserver side by side").
//
//   npm run bench:targets                                  # build, then kars apiserver + the newest pinned kube-apiserver
//   BENCH_TARGETS=kars,kube-1.34,kube-1.37 node bench/targets/dist/main.js
//   node bench/targets/dist/main.js --targets kars,kube-all         # every pinned kube-apiserver
//
// Env: BENCH_TARGETS (or --targets), BENCH_EDITS, BENCH_WARMUP_EDITS, BENCH_EDIT_GAP_MS,
// BENCH_TRIALS, BENCH_FRESHNESS_CAP_SECS, BENCH_OBJECTS, BENCH_PEERS, BENCH_RERUN_STUCK,
// BENCH_FAULT_DELAY_MAX_SECS, BENCH_KEEP (see the README table). Timings never decide the exit code.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { processesMentioning } from '@kars/kube-envtest';
import { errMsg, finishRun, fmt1, log, removeTempDir, runMain } from '../../lib/dist/index.js';
import { parseTargets, readConfig } from './config.js';
import { dropPhase } from './drop-phase.js';
import { editPhase } from './edit-phase.js';
import { report } from './report.js';
import type { TargetResult } from './report.js';
import { startTarget } from './servers.js';
import { isSignalled, killMentioning, lateStops, resetShutdown, setSignalled, shutdown } from './shutdown.js';
import { nowMs } from './util.js';

async function main(): Promise<number> {
  const tStart = nowMs();
  const loadStart = os.loadavg();
  const cfg = readConfig();
  const targets = parseTargets(cfg.targetSpec);
  const failures: string[] = [];
  const skipped: Array<{ id: string; reason: string }> = [];
  const results: TargetResult[] = [];
  const root = mkdtempSync(join(os.tmpdir(), 'kars-bench-targets-'));
  log(`config ${JSON.stringify(cfg)}; targets ${targets.map((t) => t.id).join(', ')}; temp dir ${root}`);
  const onSignal = (sig: NodeJS.Signals): void => {
    if (isSignalled()) {
      killMentioning(root, { children: true });
      process.exit(130);
    }
    setSignalled();
    log(`${sig}: stopping everything this run started (again to kill at once)`);
    void shutdown()
      .then(() => lateStops())
      .finally(() => {
        killMentioning(root, { children: true });
        removeTempDir(root);
        process.exit(130);
      });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const strays: string[] = [];
  process.on('unhandledRejection', (r) => strays.push(`unhandledRejection: ${errMsg(r)}`));
  process.on('uncaughtException', (e) => strays.push(`uncaughtException: ${e instanceof Error ? e.stack : String(e)}`));

  try {
    for (const target of targets) {
      if (isSignalled()) break;
      const tdir = join(root, target.id);
      log(`target ${target.id}: starting`);
      const t0 = nowMs();
      const r: TargetResult = { target };
      try {
        const srv = await startTarget(target, tdir, cfg);
        if ('skipped' in srv) {
          log(`target ${target.id}: skipped: ${srv.skipped}`);
          skipped.push({ id: target.id, reason: srv.skipped });
          continue;
        }
        r.srv = srv;
        r.startSec = (nowMs() - t0) / 1000;
        r.loadStart = os.loadavg()[0] ?? NaN;
        log(`target ${target.id}: ${srv.label} up in ${fmt1(r.startSec)} s`);
        // A phase that fails is reported; the other still runs.
        if (cfg.edits > 0) {
          log(`target ${target.id}: 1/2 edits`);
          r.edits = await editPhase(srv, cfg, failures).catch((err: unknown) => {
            failures.push(`${target.id}, edits: ${err instanceof Error ? err.stack : String(err)}`);
            return undefined;
          });
        }
        log(`target ${target.id}: 2/2 silent drop (${cfg.peers.join(', ')})`);
        r.drops = await dropPhase(srv, cfg, tdir, failures).catch((err: unknown) => {
          failures.push(`${target.id}, silent drop: ${err instanceof Error ? err.stack : String(err)}`);
          return undefined;
        });
        const died = srv.died();
        if (died) failures.push(died);
      } catch (err) {
        failures.push(`${target.id}: ${err instanceof Error ? err.stack : String(err)}`);
      } finally {
        r.loadEnd = os.loadavg()[0] ?? NaN;
        results.push(r);
        await shutdown(); // this target's processes go before the next target starts
        resetShutdown();
        const left = processesMentioning(tdir);
        if (left.length) failures.push(`${target.id}: processes still running after stop: ${left.join(', ')}`);
      }
    }
  } finally {
    await shutdown();
    removeTempDir(root);
  }
  const runtimeSec = (nowMs() - tStart) / 1000;
  const lines = report(cfg, results, skipped, { loadStart, runtimeSec });
  if (strays.length)
    lines.push(
      '',
      '**Errors thrown inside clients (not benchmark failures)**',
      '',
      ...strays.slice(0, 10).map((s) => `- ${s.split('\n')[0]}`),
    );
  return finishRun('targets', {
    lines,
    failures,
    footer:
      "Shared 2-core machine: quote medians and ratios, not absolute figures; the targets run one after the other (each alone on the machine, as far as this run goes), and the drop times are dominated by the clients' timers.",
    config: cfg,
    runtimeSec,
    machine: { loadAvgStart: loadStart, loadAvgEnd: os.loadavg() },
    json: {
      skipped,
      strays,
      targets: results.map((r) => ({
        id: r.target.id,
        label: r.srv?.label,
        storage: r.srv?.storage,
        startSec: r.startSec,
        edits: r.edits,
        drops: r.drops,
      })),
    },
    markdown: true,
  });
}

// Third-party clients leave keep-alive sockets and timers behind (KFC keeps idle undici
// connections for 10 min), so exit explicitly.
runMain(main, { exit: true, onError: () => void shutdown() });
