/** The report: one table of medians (bare node, kars router, the "before" router), with goals and per-run figures. */
import os from 'node:os';
import { cpuLine, finishRun, fmt1, fmtInt, mdRow, percentile } from '../../lib/dist/index.js';
import type { PeerRun } from './measure.js';

/** The peers of a run. */
export type PeerName = 'bare' | 'router' | 'before';

/** The configuration the report shows. */
export interface ReportConfig {
  runs: number;
  idleSecs: number;
  settledSecs: number;
  rate: number;
  routerNodeOptions: string;
  beforeNodeOptions: string;
  before: string | undefined;
  goals: { idleMb: number; loadMb: number; startupMs: number };
}

/** Median of the finite values; NaN when there are none. */
const median = (values: ReadonlyArray<number | undefined>): number =>
  percentile(
    values.filter((v): v is number => Number.isFinite(v)).sort((a, b) => a - b),
    0.5,
  );

/** Print the table, write the results files and return the exit code (1 when anything failed). */
export function report(
  cfg: ReportConfig,
  peers: PeerName[],
  results: Record<PeerName, PeerRun[]>,
  failures: string[],
  { loadavgStart, runtimeSec }: { loadavgStart: number[]; runtimeSec: number },
): number {
  type Metric = (r: PeerRun) => number | undefined;
  const col = (peer: PeerName, f: Metric): Array<number | undefined> => results[peer].map(f);
  const cell = (peer: PeerName, f: Metric, digits = fmt1): string => {
    const v = col(peer, f);
    return v.length ? `${digits(median(v))}` : '';
  };
  const runsOf = (peer: PeerName, f: Metric): string =>
    col(peer, f)
      .map((v) => fmt1(v ?? NaN))
      .join(', ');
  const settled = cfg.settledSecs > cfg.idleSecs;
  const goal = (v: number, limit: number, unit: string): string =>
    Number.isFinite(v) ? `≤ ${limit} ${unit}: ${v <= limit ? 'met' : '**missed**'}` : `≤ ${limit} ${unit}: n/a`;
  const head = [
    'metric (median of runs)',
    'bare node',
    'kars router',
    ...(peers.includes('before') ? ['router (before)'] : []),
    'goal (router)',
    'runs (router; bare)',
  ];
  const row = (metric: string, f: Metric, g?: (v: number) => string, { bare = true }: { bare?: boolean } = {}): string =>
    mdRow([
      metric,
      bare ? cell('bare', f) : '–',
      cell('router', f),
      ...(peers.includes('before') ? [cell('before', f)] : []),
      g ? g(median(col('router', f))) : '–',
      `${runsOf('router', f)}${bare ? `; ${runsOf('bare', f)}` : ''}`,
    ]);
  const lines = [
    `## kars router footprint and start-up`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load average ${loadavgStart.map((x) => x.toFixed(2)).join(' ')} at start, ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )} at end · ${cfg.runs} runs · router NODE_OPTIONS "${cfg.routerNodeOptions}"${cfg.before ? ` · before: ${cfg.before}, NODE_OPTIONS "${cfg.beforeNodeOptions}"` : ''}`,
    ``,
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---|').join('')}`,
    row(
      'start-up: spawn → policy loaded and echoed (ms)',
      (r) => r.echoMs,
      (v) => goal(v, cfg.goals.startupMs, 'ms'),
      { bare: false },
    ),
    row('start-up CPU: user + system until the echo (ms)', (r) => r.echoCpuMs, undefined, { bare: false }),
    row('start-up: spawn → `listening:` (ms)', (r) => r.listeningMs),
    row('start-up CPU: user + system until `listening:` (ms)', (r) => r.listeningCpuMs),
    // The idle goal is judged on the settled sample when there is one: the first seconds after
    // start-up still hold the young generation start-up grew, which V8's memory reducer returns
    // ~8 s after start-up (not configurable in Node 20's V8); a sidecar spends its life after that.
    row(
      `idle RSS, ${cfg.idleSecs} s after the echo (MB${settled ? '; start-up transient, before the memory reducer' : ''})`,
      (r) => r.idle?.rss,
      settled ? undefined : (v) => goal(v, cfg.goals.idleMb, 'MB'),
    ),
    row('idle RssAnon (MB)', (r) => r.idle?.anon),
    row('idle RssFile (MB)', (r) => r.idle?.file),
    ...(settled
      ? [
          row(
            `idle RSS settled, ${cfg.settledSecs} s after the echo (MB; after V8's memory reducer)`,
            (r) => r.settled?.rss,
            (v) => goal(v, cfg.goals.idleMb, 'MB'),
          ),
          row('settled RssAnon (MB)', (r) => r.settled?.anon),
        ]
      : []),
    row(
      `RSS at ${fmtInt(cfg.rate)} req/s, highest 100 ms sample (MB)`,
      (r) => r.load?.maxRss,
      (v) => goal(v, cfg.goals.loadMb, 'MB'),
    ),
    row(`peak RSS of the whole run, VmHWM (MB)`, (r) => r.load?.hwm),
    row('achieved rate (req/s)', (r) => r.load?.achievedRate),
    row('CPU per request under load (µs)', (r) => r.load?.cpuUsPerReq),
    row('latency p50 (ms)', (r) => r.load?.p50),
    row('latency p99 (ms)', (r) => r.load?.p99),
  ];
  return finishRun('router-footprint', {
    lines,
    failures,
    footer: `Shared ${os.cpus().length}-core machine; every run starts fresh peer processes. Command: ${cfg.before ? `BENCH_BEFORE=${cfg.before} ` : ''}node bench/router-footprint/dist/main.js`,
    config: cfg,
    runtimeSec,
    json: { results },
    markdown: true,
  });
}
