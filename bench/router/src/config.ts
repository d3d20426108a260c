/**
 * The run's configuration from the environment (see bench/README.md, "Router"), the peers and the
 * load generators found on this machine, and the constants of the policy and the traffic.
 */
import { envInt, log, splitArgs } from '../../lib/dist/index.js';
import { APIS, isApiName, type ApiName } from './apis.js';
import { PORTKEY_DIR, findNginx, findPortkey } from './peers.js';
import { findWrk } from './wrk.js';

/** The peers a request can go through (`BENCH_PEERS`); `direct` is straight to the stub. */
export type PeerName = 'direct' | 'proxy' | 'nginx' | 'bare' | 'router' | 'portkey';

/** A peer's short name, in notes and the "vs direct" column. */
export const PEER_LABEL: Record<PeerName, string> = {
  direct: 'direct',
  proxy: 'proxy',
  nginx: 'nginx',
  bare: 'bare router',
  router: 'router',
  portkey: 'portkey',
};
/** A peer's column heading. */
export const PEER_HEAD: Record<PeerName, string> = {
  direct: 'direct → stub',
  proxy: 'node:http proxy → stub',
  nginx: 'nginx → stub',
  bare: 'kars router, no policy → stub',
  router: 'kars router → stub',
  portkey: 'Portkey gateway → stub',
};
const isPeer = (p: string): p is PeerName => Object.hasOwn(PEER_LABEL, p);

/** The phases (`BENCH_PHASES`), in the default order. */
const PHASES = ['decision', 'latency', 'ttfb', 'throughput', 'dir', 'api'] as const;
/** A phase of the benchmark. */
export type Phase = (typeof PHASES)[number];
const isPhase = (p: string): p is Phase => (PHASES as readonly string[]).includes(p);

export const SANDBOX = 'sb';
export const NS = 'bench';
export const POLICY = 'bench-policy';
/** The realistic policy's per-request cap; the traffic asks for fewer tokens. */
export const REALISTIC_CAP = 1024;
export const TRAFFIC_MAX_TOKENS = 256;
/** Reload phases: probes ask for PROBE_TOKENS; the cap alternates HIGH (→ 200) and LOW (→ 429). */
export const PROBE_TOKENS = 512;
export const CAP_HIGH = 1024;
export const CAP_LOW = 256;

/** A positive number from env var `name`, `def` when unset or empty. */
export function envNum(name: string, def: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${v}"`);
  return n;
}

/** The goals the tables report as met or missed. */
export interface Goals {
  addedP50Ms: number;
  addedP99Ms: number;
  throughputRatio: number;
  nginxRatio: number;
  portkeyRatio: number;
  ttfbAddedP99Ms: number;
  decisionUs: number;
}

/** The run's configuration (written to the results file as `config`). */
export interface Config {
  quick: boolean;
  phases: Phase[];
  rate: number;
  openSecs: number;
  closedSecs: number;
  warmupSecs: number;
  rewarmSecs: number;
  rounds: number;
  concurrency: number;
  maxConns: number;
  decisionIters: number;
  decisionRuns: number;
  changes: number;
  probeMs: number;
  changeTimeoutMs: number;
  upstreamDelayMs: number;
  loadgen: string;
  /** The peers measured: `BENCH_PEERS` less the ones not installed here. */
  peers: PeerName[];
  ttfbRequests: number;
  /** The APIs of the latency and ttfb phases, chat first. */
  apis: ApiName[];
  goals: Goals;
  /** Why a peer of `BENCH_PEERS` is not measured. */
  skipped: string[];
}

/** The configuration and what was found on this machine. */
export interface Setup {
  cfg: Config;
  phases: Set<Phase>;
  nginxBin: { version: string } | undefined;
  portkeyPkg: { script: string; version: string } | undefined;
  wrk: { version: string } | undefined;
  /** The closed-loop load generator, as the report names it. */
  closedGen: string;
  /** The open-loop load generator, as the report names it. */
  openGen: string;
}

/** Read the configuration from the environment (throws on a bad value) and look for nginx, Portkey and wrk. */
export function configure(): Setup {
  const quick = process.env.BENCH_QUICK === '1';
  const phaseNames = new Set(splitArgs((process.env.BENCH_PHASES ?? 'decision,latency,ttfb,throughput,dir,api').replace(/,/g, ' ')));
  const phases = new Set<Phase>();
  for (const p of phaseNames) {
    if (!isPhase(p)) throw new Error(`BENCH_PHASES: unknown phase "${p}"`);
    phases.add(p);
  }
  const apiNames = splitArgs((process.env.BENCH_APIS ?? 'chat,responses,messages').replace(/,/g, ' '));
  const cfg0 = {
    quick,
    phases: [...phases],
    rate: envInt('BENCH_RATE', 1000),
    openSecs: envNum('BENCH_OPEN_SECS', quick ? 4 : 5),
    closedSecs: envNum('BENCH_CLOSED_SECS', quick ? 3 : 5),
    // A fresh router needs ~2–3 s of traffic before its code is optimized enough to keep up
    // with 1,000 req/s on the 2-core VM (see README), so the first warm-up is 3 s.
    warmupSecs: envNum('BENCH_WARMUP_SECS', 3),
    rewarmSecs: envNum('BENCH_REWARM_SECS', 1),
    rounds: envInt('BENCH_ROUNDS', quick ? 1 : 4),
    concurrency: envInt('BENCH_CONCURRENCY', 32),
    maxConns: envInt('BENCH_MAX_CONNS', 64),
    decisionIters: envInt('BENCH_DECISION_ITERS', quick ? 50_000 : 200_000),
    decisionRuns: envInt('BENCH_DECISION_RUNS', quick ? 3 : 7),
    changes: envInt('BENCH_CHANGES', quick ? 15 : 50),
    probeMs: envNum('BENCH_PROBE_MS', 2),
    changeTimeoutMs: envInt('BENCH_CHANGE_TIMEOUT_MS', 5000),
    upstreamDelayMs:
      process.env.BENCH_UPSTREAM_DELAY_MS && process.env.BENCH_UPSTREAM_DELAY_MS !== '0' ? envInt('BENCH_UPSTREAM_DELAY_MS', 0) : 0,
    loadgen: process.env.BENCH_LOADGEN ?? 'auto',
    peers: splitArgs((process.env.BENCH_PEERS ?? 'direct,proxy,nginx,router,portkey').replace(/,/g, ' ')),
    ttfbRequests: envInt('BENCH_TTFB_REQUESTS', quick ? 300 : 1000),
    // The APIs the latency and ttfb phases measure; throughput and the reload phases use chat.
    apis: [] as ApiName[],
    goals: { addedP50Ms: 0.5, addedP99Ms: 1, throughputRatio: 0.8, nginxRatio: 0.6, portkeyRatio: 5, ttfbAddedP99Ms: 1, decisionUs: 20 },
  };
  for (const a of apiNames) {
    if (!isApiName(a)) throw new Error(`BENCH_APIS: unknown API "${a}" (${Object.keys(APIS).join(', ')})`);
    cfg0.apis.push(a);
  }
  if (!cfg0.apis.includes('chat')) cfg0.apis.unshift('chat');
  const named: PeerName[] = [];
  for (const p of cfg0.peers) {
    if (!isPeer(p)) throw new Error(`BENCH_PEERS: unknown peer "${p}" (${Object.keys(PEER_LABEL).join(', ')})`);
    named.push(p);
  }
  // Peers from outside the repo are skipped, with a message, when they are not installed.
  const nginxBin = named.includes('nginx') ? findNginx() : undefined;
  const portkeyPkg = named.includes('portkey') ? findPortkey() : undefined;
  const skipped: string[] = [];
  if (named.includes('nginx') && !nginxBin) skipped.push('nginx: not on PATH (apt-get install -y nginx)');
  if (named.includes('portkey') && !portkeyPkg)
    skipped.push(
      `portkey: ${PORTKEY_DIR} not found (npm install --prefix bench/peers @portkey-ai/gateway@1.15.2, or set BENCH_PORTKEY_DIR)`,
    );
  for (const m of skipped) log(`skipping peer ${m}`);
  const cfg: Config = {
    ...cfg0,
    peers: named.filter((p) => (p !== 'nginx' || nginxBin) && (p !== 'portkey' || portkeyPkg)),
    skipped,
  };
  if (!['auto', 'wrk', 'node'].includes(cfg.loadgen)) throw new Error(`BENCH_LOADGEN must be auto, wrk or node, got "${cfg.loadgen}"`);
  const wrk = cfg.loadgen === 'node' ? undefined : findWrk();
  if (cfg.loadgen === 'wrk' && !wrk) throw new Error('BENCH_LOADGEN=wrk but wrk is not on PATH (apt-get install -y wrk)');
  const closedGen = wrk
    ? `wrk ${wrk.version} (-t1, separate process)`
    : `Node raw-HTTP/1.1 generator (separate process; ${cfg.loadgen === 'node' ? 'BENCH_LOADGEN=node' : 'wrk not on PATH'})`;
  const openGen = 'Node raw-HTTP/1.1 generator (separate process; wrk has no constant-rate mode)';
  return { cfg, phases, nginxBin, portkeyPkg, wrk, closedGen, openGen };
}
