#!/usr/bin/env node
// bench/fleet: N real routers (one per sandbox), the controller and the stubs against kars apiserver
// and, when `npm run kube:build` has built it, kube-apiserver, for N = 10, 50, 100 (issue 23).
// Prints Markdown tables on stdout (progress on stderr). See bench/README.md ("A fleet").
//
//   npm run bench:fleet                                   # build, then kars + the newest pinned kube-apiserver, N = 10,50,100
//   BENCH_FLEET_SIZES=10 BENCH_TARGETS=kars npm run bench:fleet   # one small fleet (~1 min)
//
// Env: BENCH_TARGETS (kars,kube), BENCH_FLEET_SIZES (10,50,100), BENCH_EDITS (20), BENCH_WARMUP_EDITS (2),
// BENCH_STEADY_SECS (60), BENCH_ROUTER_START_CONCURRENCY (4), BENCH_PING_CONNECTIONS (100),
// BENCH_PING_INTERVALS_MS (50,100), BENCH_PING_SECS (10), BENCH_PHASES (fleet,ping). Timings never decide the exit code.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { detectionBoundMs, watchConfigFromEnv } from '@kars/kube-runtime';
import { Fleet } from './fleet.js';
import type { EditFigures, RestartFigures, SteadyFigures } from './fleet.js';
import { pingCost } from './ping.js';
import type { PingCost } from './ping.js';
import { parseTargets, startTarget } from './targets.js';

const log = (l: string): void => void process.stderr.write(`[fleet ${new Date().toISOString().slice(11, 19)}] ${l}\n`);
const env = (k: string, d: string): string => process.env[k] ?? d;
const ints = (s: string): number[] =>
  s
    .split(',')
    .map((x) => Number(x.trim()))
    .filter((x) => Number.isFinite(x) && x > 0);

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? NaN;
}
const ms = (x: number): string => (Number.isFinite(x) ? `${Math.round(x)} ms` : '–');
const n1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '–');
const n2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '–');

interface Row {
  target: string;
  n: number;
  edits?: EditFigures;
  burst?: { allReady: number; patchesMs: number };
  steady?: SteadyFigures;
  restart?: RestartFigures;
  error?: string;
}

async function main(): Promise<void> {
  const targets = parseTargets(env('BENCH_TARGETS', 'kars,kube'));
  const sizes = ints(env('BENCH_FLEET_SIZES', '10,50,100'));
  const edits = Number(env('BENCH_EDITS', '20'));
  const warmup = Number(env('BENCH_WARMUP_EDITS', '2'));
  const steadySecs = Number(env('BENCH_STEADY_SECS', '60'));
  const startConc = Number(env('BENCH_ROUTER_START_CONCURRENCY', '4'));
  const phases = env('BENCH_PHASES', 'fleet,ping').split(',');
  const pingConns = Number(env('BENCH_PING_CONNECTIONS', '100'));
  const pingIntervals = ints(env('BENCH_PING_INTERVALS_MS', '50,100'));
  const pingSecs = Number(env('BENCH_PING_SECS', '10'));
  const root = mkdtempSync(join(os.tmpdir(), 'kars-fleet-'));
  const wcfg = watchConfigFromEnv(process.env);
  log(`targets ${targets.map((t) => t.id).join(', ')}; N = ${sizes.join(', ')}; ${edits} edits; steady ${steadySecs} s; dir ${root}`);
  const rows: Row[] = [];
  const pings: Array<{ target: string; intervalMs: number; cost: PingCost }> = [];
  const skipped: string[] = [];
  const load0 = os.loadavg()[0] ?? NaN;
  let stopping: (() => Promise<void>) | undefined;
  const onSignal = (): void => {
    void (stopping?.() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  for (const spec of targets) {
    if (phases.includes('fleet'))
      for (const n of sizes) {
        const dir = join(root, `${spec.id}-${n}`);
        log(`${spec.id}: N = ${n}`);
        const t = await startTarget(spec, dir, (l) => log(`  ${l}`));
        if ('skipped' in t) {
          skipped.push(`${spec.id}: ${t.skipped}`);
          log(`${spec.id}: skipped: ${t.skipped}`);
          break;
        }
        const fleet = new Fleet(t, n, log);
        stopping = async () => {
          await fleet.stop();
          await t.stop();
        };
        const row: Row = { target: t.label, n };
        rows.push(row);
        try {
          await fleet.start(startConc);
          log(`  ${edits} edits of the shared policy`);
          row.edits = await fleet.sharedEdits(edits, warmup, 60_000);
          log(`  edit → every router echoing p50 ${ms(pct(row.edits.toAllEcho, 0.5))}, p99 ${ms(pct(row.edits.toAllEcho, 0.99))}`);
          row.burst = await fleet.burst(300_000);
          log(`  ${n} ToolPolicies edited at once: all Ready in ${ms(row.burst.allReady)}`);
          log(`  steady state, ${steadySecs} s`);
          row.steady = await fleet.steady(steadySecs);
          log(`  restart of the API server`);
          row.restart = await fleet.restart(120_000);
          const x = row.restart;
          log(
            `  restart → every router fresh ${ms(x.allFresh)} (old process gone after ${ms(x.stopped)}${x.killed ? ', killed' : ''}, serving after ${ms(x.serving)}; gone → every router fresh ${ms(x.exitToAllFresh)})`,
          );
        } catch (err) {
          row.error = err instanceof Error ? err.message.slice(0, 2000) : String(err);
          log(`  FAILED: ${row.error}`);
        } finally {
          await fleet.stop();
          await t.stop();
          stopping = undefined;
        }
      }
    if (phases.includes('ping')) {
      const t = await startTarget(spec, join(root, `${spec.id}-ping`), (l) => log(`  ${l}`));
      if ('skipped' in t) {
        if (!skipped.some((s) => s.startsWith(`${spec.id}:`))) skipped.push(`${spec.id}: ${t.skipped}`);
        continue;
      }
      stopping = () => t.stop();
      try {
        for (const iv of pingIntervals) {
          log(`${spec.id}: PING cost, ${pingConns} connections every ${iv} ms`);
          pings.push({ target: t.label, intervalMs: iv, cost: await pingCost(t, pingConns, iv, pingSecs) });
        }
      } catch (err) {
        // A phase that fails is reported, and the other targets still run.
        const why = err instanceof Error ? err.message.slice(0, 500) : String(err);
        skipped.push(`${spec.id}: the PING phase failed: ${why}`);
        log(`  PING phase FAILED: ${why}`);
      } finally {
        await t.stop();
        stopping = undefined;
      }
    }
  }
  report(rows, pings, skipped, { edits, steadySecs, load0, boundMs: detectionBoundMs(wcfg), pingConns });
  rmSync(root, { recursive: true, force: true });
}

function report(
  rows: Row[],
  pings: Array<{ target: string; intervalMs: number; cost: PingCost }>,
  skipped: string[],
  meta: { edits: number; steadySecs: number; load0: number; boundMs: number; pingConns: number },
): void {
  const out: string[] = [];
  const p = (l = ''): number => out.push(l);
  p(`# bench/fleet (${os.cpus().length}× ${os.cpus()[0]?.model ?? '?'}, load ${n1(meta.load0)} → ${n1(os.loadavg()[0] ?? NaN)})`);
  p();
  p(`## One policy shared by all N sandboxes: ${meta.edits} edits, one after another`);
  p();
  p('| target | N | edit → every router echoing p50 / p99 | edit → Ready p50 / p99 | timeouts | N policies edited at once → all Ready |');
  p('|---|---|---|---|---|---|');
  for (const r of rows) {
    if (r.error && !r.edits) {
      p(`| ${r.target} | ${r.n} | failed: ${r.error.replace(/\|/g, '/').replace(/\n/g, ' ').slice(0, 200)} | | | |`);
      continue;
    }
    const e = r.edits;
    p(
      `| ${r.target} | ${r.n} | ${e ? `${ms(pct(e.toAllEcho, 0.5))} / ${ms(pct(e.toAllEcho, 0.99))}` : '–'} | ${e ? `${ms(pct(e.toReady, 0.5))} / ${ms(pct(e.toReady, 0.99))}` : '–'} | ${e?.timeouts ?? '–'} | ${r.burst ? ms(r.burst.allReady) : '–'} |`,
    );
  }
  p();
  p(`## Steady state (${meta.steadySecs} s, nothing edited)`);
  p();
  p(
    '| target | N | writes/s by kind | status writes | API requests/s (audit log) | TCP connections | apiserver CPU / RSS | controller CPU / RSS | router CPU each / RSS median |',
  );
  p('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const s = r.steady;
    if (!s) continue;
    const w = Object.entries(s.writesPerSec)
      .sort()
      .map(([k, v]) => `${k} ${n2(v)}`)
      .join('; ');
    const total = Object.values(s.requestsPerSec ?? {}).reduce((a, b) => a + b, 0);
    const req = s.requestsPerSec
      ? `${n2(total)}: ${Object.entries(s.requestsPerSec)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 5)
          .map(([k, v]) => `${k} ${n2(v)}`)
          .join('; ')}`
      : 'n/a (no request log)';
    p(
      `| ${r.target} | ${r.n} | ${w || '0'} | ${s.statusWrites} | ${req} | ${s.connections} | ${n1(s.apiserverCpuPct)}% / ${n1(s.apiserverRssMiB)} MiB | ${n1(s.controllerCpuPct)}% / ${n1(s.controllerRssMiB)} MiB | ${n2(s.routerCpuPctEach)}% / ${n1(s.routerRssMiBMedian)} MiB |`,
    );
  }
  const diffs = rows.flatMap((r) =>
    Object.entries(r.steady?.statusDiffs ?? {}).map(([k, d]) => `- ${r.target}, N = ${r.n}, ${k}: ${d.slice(0, 400)}`),
  );
  if (diffs.length) {
    p();
    p('What the first status write of each kind changed (old → new):');
    p();
    for (const d of diffs) p(d);
  }
  p();
  p(`## Restart of the API server (detection bound with these settings: ${meta.boundMs / 1000} s)`);
  p();
  const boundPlus5 = meta.boundMs + 5000;
  p(
    `| target | N | restart → old process gone | restart → serving | restart → every router fresh (echoes an edit made at once) | old process gone → every router fresh (goal ≤ bound + 5 s = ${boundPlus5 / 1000} s) | that edit → every router | router relists / watch restarts | LIST / WATCH requests (audit) |`,
  );
  p('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const x = r.restart;
    if (!x) continue;
    p(
      `| ${r.target} | ${r.n} | ${ms(x.stopped)}${x.killed ? ' (killed after the grace)' : ''} | ${ms(x.serving)} | ${ms(x.allFresh)} | ${ms(x.exitToAllFresh)}: ${x.exitToAllFresh <= boundPlus5 ? 'met' : '**missed**'} | ${ms(x.editToAllEcho)} | ${x.relists} / ${x.watchRestarts}${x.relistsUnread + x.watchRestartsUnread > 0 ? ` (${Math.max(x.relistsUnread, x.watchRestartsUnread)} routers unread)` : ''} | ${x.lists ?? 'n/a'} / ${x.watches ?? 'n/a'} |`,
    );
  }
  p();
  p(
    'Restart: SIGTERM, then SIGKILL after the harness grace (10 s, like a kubelet); "old process gone" is when its connections broke. kube-apiserver keeps serving open watches through its shutdown (up to its 60 s shutdown timeout), so with routers watching it is killed after the grace; until then the routers hold working watches. The goal is measured from the moment the old process is gone, the new server\'s start-up included.',
  );
  p();
  p('## Growth (ratio to the smallest N of the same target)');
  p();
  p('| target | N | echo p50 | N-policies burst | writes/s | apiserver CPU | controller CPU |');
  p('|---|---|---|---|---|---|---|');
  const byTarget = new Map<string, Row[]>();
  for (const r of rows) byTarget.set(r.target, [...(byTarget.get(r.target) ?? []), r]);
  const sumW = (s: SteadyFigures | undefined): number => Object.values(s?.writesPerSec ?? {}).reduce((a, b) => a + b, 0);
  for (const [target, rs] of byTarget) {
    const b = rs[0];
    if (!b) continue;
    for (const r of rs) {
      const ratio = (x: number, y: number): string => (Number.isFinite(x / y) ? `${n2(x / y)}×` : '–');
      p(
        `| ${target} | ${r.n} (${n2(r.n / b.n)}×) | ${ratio(pct(r.edits?.toAllEcho ?? [], 0.5), pct(b.edits?.toAllEcho ?? [], 0.5))} | ${ratio(r.burst?.allReady ?? NaN, b.burst?.allReady ?? NaN)} | ${ratio(sumW(r.steady), sumW(b.steady))} | ${ratio(r.steady?.apiserverCpuPct ?? NaN, b.steady?.apiserverCpuPct ?? NaN)} | ${ratio(r.steady?.controllerCpuPct ?? NaN, b.steady?.controllerCpuPct ?? NaN)} |`,
      );
    }
  }
  if (pings.length) {
    p();
    p(`## HTTP/2 PING cost (${meta.pingConns} idle connections; the server's CPU and socket bytes, PINGs on − off)`);
    p();
    p(
      '| target | PINGs/s (= 10,000 routers every …) | server CPU off → on | CPU µs per PING | bytes per PING (in + out) | at 10,000 routers, 5 s interval: CPU / bytes/s | 10 s interval |',
    );
    p('|---|---|---|---|---|---|---|');
    for (const { target, intervalMs, cost } of pings) {
      const every = (10_000 / cost.on.pingsPerSec).toFixed(1);
      const at = (perSec: number): string =>
        `${n1((cost.cpuUsPerPing * perSec) / 1e4)}% / ${Math.round((cost.bytesPerPing * perSec) / 1024)} KiB/s`;
      p(
        `| ${target} | ${Math.round(cost.on.pingsPerSec)} (${every} s; ${intervalMs} ms × ${cost.connections}) | ${n1(cost.off.cpuPct)}% → ${n1(cost.on.cpuPct)}% | ${n1(cost.cpuUsPerPing)} | ${n1(cost.bytesPerPing)} | ${at(2000)} | ${at(1000)} |`,
      );
    }
  }
  if (skipped.length) {
    p();
    for (const s of skipped) p(`skipped ${s}`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
