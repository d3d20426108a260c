/** The benchmark's configuration, from the environment (see bench/README.md, "Watch freshness"). */
import { ALL_PEERS, PEERS } from '../../watch-peers/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';

/** A phase of the benchmark. */
export type Phase = 'freshness' | 'throughput' | 'memory';

/** How the silent drop is made. */
export type Fault = 'freeze' | 'blackhole';

/** The API server the peers watch: kars apiserver (with its fault relay), or a real kube-apiserver (kube-envtest). */
export type Server = 'kars' | 'kube';

/** The configuration of one run. */
export interface Config {
  quick: boolean;
  trials: number;
  capSecs: number;
  objects: number;
  updates: number;
  memObjects: number;
  warmObjects: number;
  tputObjects: number;
  /** Rounds of the events/s phase; the peers' order alternates from one round to the next (BENCH_TPUT_ROUNDS). */
  tputRounds: number;
  concurrency: number;
  createConcurrency: number;
  bookmarkSecs: number;
  faultDelayMaxSecs: number;
  rerunStuck: boolean;
  peers: PeerKind[];
  phases: Phase[];
  fault: Fault;
  server: Server;
}

const list = (v: string): string[] =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** Read and check BENCH_QUICK, BENCH_TRIALS, BENCH_PEERS, BENCH_PHASES, BENCH_FAULT, BENCH_SERVER and the rest. */
export function readConfig(): Config {
  const env = process.env;
  const quick = env['BENCH_QUICK'] === '1';
  const num = (name: string, def: number, min: number): number => {
    const v = env[name];
    if (v === undefined || v === '') return def;
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${v}"`);
    return n;
  };
  const int = (name: string, def: number, min: number): number => {
    const n = num(name, def, min);
    if (!Number.isInteger(n)) throw new Error(`${name} must be an integer, got "${env[name]}"`);
    return n;
  };
  const peers = list(env['BENCH_PEERS'] ?? ALL_PEERS.join(','));
  for (const p of peers)
    if (!(PEERS as Record<string, unknown>)[p]) throw new Error(`BENCH_PEERS: unknown peer "${p}" (use ${ALL_PEERS.join(', ')})`);
  const phases = list(env['BENCH_PHASES'] ?? 'freshness,throughput,memory');
  for (const p of phases) if (!['freshness', 'throughput', 'memory'].includes(p)) throw new Error(`BENCH_PHASES: unknown phase "${p}"`);
  const fault = env['BENCH_FAULT'] ?? 'freeze';
  if (fault !== 'freeze' && fault !== 'blackhole') throw new Error(`BENCH_FAULT must be freeze or blackhole, got "${fault}"`);
  const server = env['BENCH_SERVER'] ?? 'kars';
  if (server !== 'kars' && server !== 'kube') throw new Error(`BENCH_SERVER must be kars or kube, got "${server}"`);
  if (server === 'kube' && phases.includes('freshness'))
    throw new Error(
      "BENCH_SERVER=kube runs the throughput and memory phases only (the silent drop needs kars apiserver's fault relay): set BENCH_PHASES=throughput,memory",
    );
  return {
    quick,
    trials: int('BENCH_TRIALS', quick ? 1 : 3, 1),
    capSecs: num('BENCH_FRESHNESS_CAP_SECS', quick ? 20 : 180, 1),
    objects: int('BENCH_OBJECTS', quick ? 50 : 300, 1),
    updates: int('BENCH_UPDATES', quick ? 2000 : 20_000, 16),
    memObjects: int('BENCH_MEM_OBJECTS', quick ? 1000 : 10_000, 10),
    warmObjects: quick ? 20 : 100,
    tputObjects: 64,
    tputRounds: int('BENCH_TPUT_ROUNDS', 2, 1),
    concurrency: 16,
    createConcurrency: 32,
    bookmarkSecs: int('BENCH_BOOKMARK_SECS', 60, 1),
    faultDelayMaxSecs: num('BENCH_FAULT_DELAY_MAX_SECS', 10, 0),
    rerunStuck: env['BENCH_RERUN_STUCK'] === '1',
    peers: peers as PeerKind[],
    phases: phases as Phase[],
    fault,
    server,
  };
}
