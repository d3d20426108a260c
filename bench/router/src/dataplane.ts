/**
 * What the data-plane phases (latency, ttfb, throughput) share: where each peer is and what it
 * needs, the rounds over the peers, CPU accounting between the load generator's marks, and cells.
 */
import { fmt1 } from '../../lib/dist/index.js';
import { APIS, chatBody, type ApiSpec } from './apis.js';
import { PEER_LABEL, TRAFFIC_MAX_TOKENS, type PeerName } from './config.js';
import type { CpuDelta, ErrorTally, Mark } from './jobs.js';
import { portkeyHeaders } from './peers.js';
import { cpuDelta, cpuSnap, type CpuSnap } from './procs.js';
import { need, type Run } from './run.js';
import type { ApiSkipped } from './setup.js';
import { median } from './stats.js';

/** CPU snapshots at the load generator's `start` and `end` marks. */
export interface CpuMarks {
  onMark: (m: Mark) => void;
  /** `cpuDelta` between the two marks, or undefined when one is missing. */
  delta: (requests: number, override?: Record<string, number>) => CpuDelta | undefined;
}

/** Over a peer's rounds, the median of CPU figures per process (see {@link DataPlane.cpuOf}). */
export interface CpuOf {
  us: (k: string) => number;
  sysUs: (k: string) => number;
  pct: (k: string) => number;
  other: number;
}

/** The data-plane helpers of a run (see {@link dataPlane}). */
export interface DataPlane {
  apiSkipped: ApiSkipped;
  /** The chat body of the traffic. */
  body: string;
  /** The URL of a peer for chat (the router of the chat policy). */
  url0: (peer: PeerName) => string;
  /** The URL of a peer for `a`: the Anthropic stub is "direct" for Messages, and each API has its own router. */
  urlOf: (peer: PeerName, a: ApiSpec) => string;
  /** The request headers a peer needs (Portkey: which provider, and the stub as its custom host). */
  headersOf: (peer: PeerName, a?: ApiSpec) => Record<string, string>;
  /** The process that does the hop for a peer (none for direct). */
  hopOf: (peer: PeerName) => PeerName | undefined;
  /** Failed requests of a run. */
  errCount: (r: { errors: ErrorTally }) => number;
  /** Run `fn(round, peer, warmSecs)` for every round and every peer in that round's order, children checked first. */
  eachRun: (fn: (round: number, peer: PeerName, warm: number) => Promise<void>) => Promise<void>;
  /** CPU snapshots at the load generator's `start` and `end` marks; `delta(...)` is `cpuDelta` between them. */
  cpuMarks: (api?: ApiSpec) => CpuMarks;
  /** Over a peer's rounds, the median of: µs (and kernel µs) per request and % of a core per process, and other load on the VM. */
  cpuOf: (runs: ReadonlyArray<{ cpu?: CpuDelta | undefined }>) => CpuOf;
  /** A CPU cell: the hop's µs per request (and its kernel part), plus the stub's. */
  cpuCell: (peer: PeerName, S: Partial<Record<PeerName, CpuOf>>) => string;
}

/** The data-plane helpers over the run's processes (read when called, so they follow restarts). */
export function dataPlane(run: Run, apiSkipped: ApiSkipped): DataPlane {
  const { cfg, procs } = run;
  const peers = cfg.peers;
  /** The kars router that serves `a`: chat's, or the one started for that API. */
  const routerOf = (a: ApiSpec): string => need(a === APIS.chat ? procs.router : procs.apiRouters[a.name], `the router for ${a.label}`).url;
  const stubOf = (a: ApiSpec): string =>
    a.upstream === 'anthropic' ? need(procs.anthropicStub, 'the Anthropic stub').url : need(procs.stub, 'the stub').url;
  const url0 = (peer: PeerName): string => {
    switch (peer) {
      case 'direct':
        return need(procs.stub, 'the stub').url;
      case 'proxy':
        return need(procs.proxy, 'the proxy').url;
      case 'nginx':
        return need(procs.nginx, 'nginx').url;
      case 'bare':
        return need(procs.bare, 'the router without a policy').url;
      case 'router':
        return need(procs.router, 'the router').url;
      case 'portkey':
        return need(procs.portkey, 'the Portkey gateway').url;
    }
  };
  const urlOf = (peer: PeerName, a: ApiSpec): string =>
    peer === 'direct' && a.upstream === 'anthropic' ? stubOf(a) : peer === 'router' ? routerOf(a) : url0(peer);
  /** The processes whose CPU is counted; `stub` is the stub that serves `a` (the Anthropic one for Messages). */
  const pids = (a: ApiSpec = APIS.chat): Record<string, number | undefined> => ({
    stub: a.upstream === 'anthropic' ? procs.anthropicStub?.pid : procs.stub?.pid,
    proxy: procs.proxy?.pid,
    nginx: procs.nginx?.pid,
    bare: procs.bare?.pid,
    router: (a === APIS.chat ? procs.router : procs.apiRouters[a.name])?.pid,
    portkey: procs.portkey?.pid,
    loadgen: procs.loadgen?.pid,
  });
  const body = chatBody(TRAFFIC_MAX_TOKENS);
  // Optional simulated upstream latency (the stub's x-stub-delay-ms; the router and the proxy pass it on).
  const delayHeaders: Record<string, string> = cfg.upstreamDelayMs > 0 ? { 'x-stub-delay-ms': String(cfg.upstreamDelayMs) } : {};
  const headersOf = (peer: PeerName, a: ApiSpec = APIS.chat): Record<string, string> =>
    peer === 'portkey' ? { ...delayHeaders, ...portkeyHeaders(stubOf(a), a.upstream) } : delayHeaders;
  const hopOf = (peer: PeerName): PeerName | undefined => (peer === 'direct' ? undefined : peer);
  /** Round r runs the peers in order, reversed on odd rounds, so no peer always goes first. */
  const orderOf = (round: number): PeerName[] => (round % 2 === 0 ? [...peers] : [...peers].reverse());
  const errCount = (r: { errors: ErrorTally }): number => r.errors.transport + Object.values(r.errors.status).reduce((x, y) => x + y, 0);
  const eachRun = async (fn: (round: number, peer: PeerName, warm: number) => Promise<void>): Promise<void> => {
    for (let round = 0; round < cfg.rounds; round++) {
      const warm = round === 0 ? cfg.warmupSecs : cfg.rewarmSecs;
      for (const peer of orderOf(round)) {
        run.checkChildren();
        await fn(round, peer, warm);
      }
    }
  };
  const cpuMarks = (api: ApiSpec = APIS.chat): CpuMarks => {
    let a: CpuSnap | undefined;
    let b: CpuSnap | undefined;
    return {
      onMark: (m) => {
        if (m === 'start') a = cpuSnap(pids(api));
        else b = cpuSnap(pids(api));
      },
      delta: (requests, override) => (a && b ? cpuDelta(a, b, requests, override) : undefined),
    };
  };
  const cpuOf = (runs: ReadonlyArray<{ cpu?: CpuDelta | undefined }>): CpuOf => {
    const agg = (f: (r: { cpu?: CpuDelta | undefined }) => number): number => median(runs.map(f));
    return {
      us: (k) => agg((r) => r.cpu?.usPerReq[k] ?? NaN),
      sysUs: (k) => agg((r) => r.cpu?.sysUsPerReq[k] ?? NaN),
      pct: (k) => agg((r) => r.cpu?.pctCore[k] ?? NaN),
      other: agg((r) => r.cpu?.otherPct ?? NaN),
    };
  };
  const cpuCell = (peer: PeerName, S: Partial<Record<PeerName, CpuOf>>): string => {
    const s = need(S[peer], `the figures of ${peer}`);
    const hop = hopOf(peer);
    const parts: string[] = [];
    if (hop) parts.push(`${PEER_LABEL[hop]} ${fmt1(s.us(hop))} µs (sys ${fmt1(s.sysUs(hop))})`);
    parts.push(`stub ${fmt1(s.us('stub'))} µs`);
    return parts.join(' + ');
  };
  return { apiSkipped, body, url0, urlOf, headersOf, hopOf, errCount, eachRun, cpuMarks, cpuOf, cpuCell };
}
