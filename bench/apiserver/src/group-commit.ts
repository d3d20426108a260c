/**
 * Phase 0, group commit: one fsync per write (--commit-batch 1) against group commit, side by
 * side, each round on a fresh server per mode.
 */
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expectStatus, fmtInt, log, runPool, startKarsApiserver } from '../../lib/dist/index.js';
import type { PoolRun } from '../../lib/dist/index.js';
import type { Config, ModeKey } from './config.js';
import { groupCommitReport } from './group-commit-report.js';
import type { ModeSummary } from './group-commit-report.js';
import { clientCpuSec, procCpuSec, runPartitioned, stats } from './measure.js';
import type { Stats } from './measure.js';
import { makeRawClient } from './raw-client.js';
import type { KubeObj } from './phase.js';

/** One server configuration phase 0 measures. */
export interface Mode {
  key: ModeKey;
  label: string;
  args: string[];
  /** Another checkout's `apps/cli/bin/kars.js` (the `before` mode); this checkout's when unset. */
  bin?: string;
}

/** One op of one round: throughput, latency and CPU per op of server and load generator. */
export interface RoundRow extends Stats {
  opsPerSec: number;
  cpuMsPerOp: number;
  clientCpuMsPerOp: number;
}

/** One round of one mode. */
export interface Round {
  create: RoundRow;
  update: RoundRow;
}

/** What phase 0 reports: its table lines, every round, and the per-mode medians. */
export interface GroupCommitResult {
  lines: string[];
  runs: Record<ModeKey, Round[]>;
  summary: Record<string, ModeSummary>;
}

/**
 * Flush dirty pages and let the disk go quiet before each server starts, so a round does not
 * inherit the previous round's writeback (the rounds alternate modes, so without this each mode
 * pays for the other's writes). BENCH_GC_SETTLE_MS (default 2000; 0 turns it off).
 */
async function settleDisk(ms: number): Promise<void> {
  if (ms <= 0) return;
  spawnSync('sync');
  await new Promise((r) => setTimeout(r, ms));
}

/**
 * The `before` mode: kars apiserver as built from another checkout (BENCH_GC_BEFORE, e.g. a
 * worktree of the last commit before group commit), so "before" is the code as it was, not
 * today's code with `--commit-batch 1`. Undefined when the variable is unset.
 */
function beforeMode(tree: string | undefined): Mode | undefined {
  if (!tree) return undefined;
  const bin = join(tree, 'apps/cli/bin/kars.js');
  if (!existsSync(bin)) throw new Error(`BENCH_GC_BEFORE=${tree}: no ${bin} (a built kars checkout is needed)`);
  const git = spawnSync('git', ['-C', tree, 'log', '-1', '--format=%h %cs'], { encoding: 'utf8' });
  const rev = git.status === 0 ? git.stdout.trim() : tree;
  return { key: 'before', label: `before group commit (build of \`${rev}\`)`, args: [], bin };
}

/**
 * Create and update throughput at concurrency `conc` against a fresh server per mode and round.
 * Modes alternate (A B A B …) so drift in the shared machine's load hits both alike; the table
 * gives per-mode medians over rounds, and the ratios group/one (and group/before with
 * BENCH_GC_BEFORE). Failed requests are added to `failures`.
 */
export async function groupCommitPhase(cfg: Config, dataRoot: string, failures: string[]): Promise<GroupCommitResult> {
  const candidates: Array<Mode | undefined> = [
    beforeMode(cfg.gcBefore),
    { key: 'single', label: 'one fsync per write (`--commit-batch 1`)', args: ['--commit-batch', '1'] },
    { key: 'group', label: 'group commit (default `--commit-batch 256`)', args: [] },
  ];
  const modes = candidates.filter((m): m is Mode => m !== undefined && (m.key === 'before' || cfg.gcModes.includes(m.key)));
  const runs: Record<ModeKey, Round[]> = { before: [], single: [], group: [] };
  const conc = cfg.gcConcurrency;
  for (let round = 0; round < cfg.gcRounds; round++) {
    for (const mode of modes) {
      const dir = join(dataRoot, `gc-${mode.key}-${round}`);
      log(
        `group commit ${round + 1}/${cfg.gcRounds}, ${mode.key}: ${cfg.gcWarmup} + ${cfg.gcWarmup} warm-up, ${cfg.gcOps} creates + ${cfg.gcOps} updates, concurrency ${conc}`,
      );
      await settleDisk(cfg.gcSettleMs);
      const srv = await startKarsApiserver(dir, mode.args, mode.bin === undefined ? {} : { bin: mode.bin });
      const client = await makeRawClient(srv.url, srv.ca, srv.token, conc);
      try {
        const { request } = client;
        expectStatus(
          await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'gc' } }),
          [201],
          'create namespace gc',
        );
        // Warm-up, unmeasured: creates, then updates of those objects, so the JIT has compiled
        // both paths before the measured window (a fresh server's first thousand writes cost
        // about twice the CPU of later ones).
        const warmRvs: Array<string | undefined> = [];
        const warm = await runPool(cfg.gcWarmup, conc, async (i) => {
          warmRvs[i] = expectStatus<KubeObj>(
            await request('POST', '/api/v1/namespaces/gc/configmaps', {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `warm-${i}` },
              data: { i: String(i) },
            }),
            [201],
            `warm-up create ${i}`,
          ).metadata.resourceVersion;
        });
        const warmUp = await runPartitioned(cfg.gcWarmup, conc, cfg.gcWarmup, async (i, j) => {
          warmRvs[j] = expectStatus<KubeObj>(
            await request('PUT', `/api/v1/namespaces/gc/configmaps/warm-${j}`, {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `warm-${j}`, namespace: 'gc', resourceVersion: warmRvs[j] },
              data: { i: String(j), u: String(i) },
            }),
            [200],
            `warm-up update warm-${j}`,
          ).metadata.resourceVersion;
        });
        warm.errors.push(...warmUp.errors);
        const rvs = new Array<string | undefined>(cfg.gcOps);
        let cpu0 = procCpuSec(srv.pid);
        let cli0 = clientCpuSec();
        const cr = await runPool(cfg.gcOps, conc, async (i) => {
          const body = {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: `cm-${i}` },
            data: { index: String(i), payload: 'x'.repeat(64) },
          };
          rvs[i] = expectStatus<KubeObj>(
            await request('POST', '/api/v1/namespaces/gc/configmaps', body),
            [201],
            `create cm-${i}`,
          ).metadata.resourceVersion;
        });
        const createCpu = procCpuSec(srv.pid) - cpu0;
        const createCli = clientCpuSec() - cli0;
        cpu0 = procCpuSec(srv.pid);
        cli0 = clientCpuSec();
        const up = await runPartitioned(cfg.gcOps, conc, cfg.gcOps, async (i, j) => {
          const body = {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: `cm-${j}`, namespace: 'gc', resourceVersion: rvs[j] },
            data: { index: String(j), update: String(i), payload: 'y'.repeat(64) },
          };
          rvs[j] = expectStatus<KubeObj>(
            await request('PUT', `/api/v1/namespaces/gc/configmaps/cm-${j}`, body),
            [200],
            `update cm-${j}`,
          ).metadata.resourceVersion;
        });
        const updateCpu = procCpuSec(srv.pid) - cpu0;
        const updateCli = clientCpuSec() - cli0;
        for (const [what, r] of [
          ['create', cr],
          ['update', up],
        ] as const)
          if (r.errors.length) failures.push(`group commit ${what} (${mode.key}): ${r.errors.length} failed (first: ${r.errors[0]})`);
        const row = (r: PoolRun, cpuSec: number, cliSec: number): RoundRow => ({
          opsPerSec: cfg.gcOps / (r.wallMs / 1000),
          ...stats(r.lat),
          cpuMsPerOp: (cpuSec * 1000) / cfg.gcOps,
          clientCpuMsPerOp: (cliSec * 1000) / cfg.gcOps,
        });
        const done: Round = { create: row(cr, createCpu, createCli), update: row(up, updateCpu, updateCli) };
        runs[mode.key].push(done);
        log(`  ${mode.key}: create ${fmtInt(done.create.opsPerSec)} ops/s, update ${fmtInt(done.update.opsPerSec)} ops/s`);
      } finally {
        client.close();
        await srv.stop();
      }
    }
  }
  const { lines, summary } = groupCommitReport(cfg, modes, runs);
  return { lines, runs, summary };
}
