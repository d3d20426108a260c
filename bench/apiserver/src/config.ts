/**
 * The benchmark's configuration, read from the environment (see main.ts and bench/README.md for
 * every variable and its default).
 */
import { envInt } from '../../lib/dist/index.js';

/** Requests in flight in phases 1–3 (create, update, fan-out). */
export const CONC = 16;
/** Requests in flight in phase 4 (bulk create). */
export const RSS_CONC = 32;
/** Namespaces the objects of phase 4 are spread over. */
export const NS_COUNT = 10;

/** The modes phase 0 (group commit) knows; `before` only with BENCH_GC_BEFORE. */
export type ModeKey = 'before' | 'single' | 'group';

/** What one run measures and how (written to the results file as `config`, in this key order). */
export interface Config {
  scale: number;
  creates: number;
  updates: number;
  watchers: number;
  fanoutUpdates: number;
  rssObjects: number;
  concurrency: number;
  rssConcurrency: number;
  listLimit: number;
  gcOps: number;
  gcRounds: number;
  gcWarmup: number;
  gcBefore: string | undefined;
  gcSettleMs: number;
  gcModes: string[];
  gcConcurrency: number;
  only: string;
  historyWindow: number;
}

/** The configuration from BENCH_* variables; throws on an invalid value. */
export function readConfig(): Config {
  const scale = Number(process.env['BENCH_SCALE'] ?? '1');
  if (!(scale > 0)) throw new Error(`BENCH_SCALE must be > 0, got "${process.env['BENCH_SCALE']}"`);
  const sc = (n: number, min: number): number => Math.max(min, Math.round(n * scale));
  const base = {
    scale,
    creates: envInt('BENCH_CREATES', sc(2000, CONC)),
    updates: envInt('BENCH_UPDATES', sc(2000, CONC)),
    watchers: envInt('BENCH_WATCHERS', 50),
    fanoutUpdates: envInt('BENCH_FANOUT_UPDATES', sc(10_000, CONC)),
    rssObjects: envInt('BENCH_RSS_OBJECTS', sc(100_000, NS_COUNT)),
    concurrency: CONC,
    rssConcurrency: RSS_CONC,
    listLimit: 500,
    gcOps: envInt('BENCH_GC_OPS', sc(4000, 64)),
    gcRounds: envInt('BENCH_GC_ROUNDS', 3),
    gcWarmup: envInt('BENCH_GC_WARMUP', 1000),
    gcBefore: process.env['BENCH_GC_BEFORE'] || undefined,
    gcSettleMs: envInt('BENCH_GC_SETTLE_MS', 2000, { min: 0 }),
    gcModes: (process.env['BENCH_GC_MODES'] ?? 'single,group').split(','),
    gcConcurrency: 64,
    only: process.env['BENCH_ONLY'] ?? '',
  };
  const cfg: Config = { ...base, historyWindow: Math.max(20_000, base.fanoutUpdates + 1000) };
  if (cfg.creates < CONC) throw new Error(`BENCH_CREATES must be >= ${CONC}`);
  return cfg;
}
