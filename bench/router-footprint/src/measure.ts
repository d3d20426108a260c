/** One peer process, measured: start-up, idle RSS, and RSS, CPU and latency under the paced load. */
import { readFileSync } from 'node:fs';
import { pinoStderr, procCpu, sleep, spawnListening } from '../../lib/dist/index.js';
import type { LatencySummary, LoadResult, Loadgen } from './loadgen.js';
import type { LeaseWatch } from './lease-watch.js';
import { chatRequest } from './peers.js';

/** Memory of a process in MB. */
export interface Rss {
  rss: number;
  anon: number;
  file: number;
  hwm: number;
}

/** VmRSS, RssAnon and RssFile of a process in MB (NaN once it is gone). */
export function rss(pid: number): Rss {
  try {
    const txt = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mb = (k: string): number => Number(txt.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN) / 1024;
    return { rss: mb('VmRSS'), anon: mb('RssAnon'), file: mb('RssFile'), hwm: mb('VmHWM') };
  } catch {
    return { rss: NaN, anon: NaN, file: NaN, hwm: NaN };
  }
}

/** The figures of a peer under load. */
export interface LoadFigures {
  maxRss: number;
  maxAnon: number;
  lastRss: number;
  samples: number;
  hwm: number;
  achievedRate: number;
  cpuUsPerReq: number;
  completed: number;
  requests: number;
  p50: number;
  p99: number;
  errors: LoadResult['errors'];
}

/** One run of one peer. */
export interface PeerRun {
  label: string;
  pid: number;
  listeningMs?: number;
  listeningCpuMs?: number;
  echoMs?: number;
  echoCpuMs?: number;
  startupRss?: Rss;
  idle?: Rss;
  /** RSS `settledSecs` after the echo, still idle: after V8's memory reducer (it runs ~8 s after the last burst of allocation). */
  settled?: Rss;
  load?: LoadFigures;
  failure?: string;
  errorLines?: number;
}

/** What the benchmark's configuration gives a measurement. */
export interface MeasureConfig {
  idleSecs: number;
  /** Seconds after the echo for the settled sample (0: none); at least `idleSecs`. */
  settledSecs: number;
  loadSecs: number;
  warmupSecs: number;
  rate: number;
  maxConns: number;
}

/** One peer process to measure. `echo` (routers only): the Lease watch, the digest and the Lease that echoes it. */
export interface PeerSpec {
  label: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  echo?: { watch: LeaseWatch; digest: string; lease: string };
}

/**
 * Start one peer process and measure it: start-up, idle RSS, RSS under the paced load.
 * `echo` (routers only) is `{ watch, digest, lease }`.
 */
export async function measurePeer({
  label,
  args,
  env,
  echo,
  cfg,
  loadgen,
}: PeerSpec & { cfg: MeasureConfig; loadgen: Loadgen }): Promise<PeerRun> {
  const t0 = performance.now();
  const h = await spawnListening(label, args, {
    env,
    collectStderr: (child) => pinoStderr(child, { tailMax: 40, lineChars: 400 }),
    diedMessage: (code, signal, hh) =>
      `${label} exited unexpectedly (code ${code}, signal ${signal})\n${hh.stderr.tail.slice(-10).join('\n')}`,
  });
  const out: PeerRun = { label, pid: h.pid };
  try {
    out.listeningMs = performance.now() - t0;
    out.listeningCpuMs = procCpu(h.pid).total * 1000;
    if (echo) {
      out.echoMs = (await echo.watch.waitFor(echo.lease, echo.digest, 30_000)) - t0;
      out.echoCpuMs = procCpu(h.pid).total * 1000;
    }
    out.startupRss = rss(h.pid);
    await sleep(cfg.idleSecs * 1000);
    if (h.died) throw new Error(h.died);
    out.idle = rss(h.pid);
    if (cfg.settledSecs > cfg.idleSecs) {
      await sleep((cfg.settledSecs - cfg.idleSecs) * 1000);
      if (h.died) throw new Error(h.died);
      out.settled = rss(h.pid);
    }
    const samples: Rss[] = [];
    let sampler: NodeJS.Timeout | undefined;
    let cpu0 = NaN;
    let cpu1 = NaN;
    const result = await loadgen.run(
      {
        kind: 'open',
        host: '127.0.0.1',
        port: Number(new URL(h.url).port),
        rate: cfg.rate,
        warmupMs: cfg.warmupSecs * 1000,
        durationMs: cfg.loadSecs * 1000,
        maxConns: cfg.maxConns,
        expectStatus: 200,
        req: chatRequest(h.url).toString('base64'),
      },
      (mark) => {
        if (mark === 'start') {
          cpu0 = procCpu(h.pid).total;
          sampler = setInterval(() => samples.push(rss(h.pid)), 100);
        } else if (mark === 'end') {
          cpu1 = procCpu(h.pid).total;
          clearInterval(sampler);
        }
      },
    );
    clearInterval(sampler);
    if (h.died) throw new Error(h.died);
    const latency: LatencySummary = result.latency;
    out.load = {
      maxRss: Math.max(...samples.map((s) => s.rss)),
      maxAnon: Math.max(...samples.map((s) => s.anon)),
      lastRss: samples.at(-1)?.rss ?? NaN,
      samples: samples.length,
      hwm: rss(h.pid).hwm,
      achievedRate: result.achievedRate,
      cpuUsPerReq: ((cpu1 - cpu0) * 1e6) / result.completed,
      completed: result.completed,
      requests: result.requests,
      p50: latency.p50,
      p99: latency.p99,
      errors: result.errors,
    };
    const errs = result.errors.transport + Object.values(result.errors.status).reduce((a, b) => a + b, 0);
    if (errs > 0) out.failure = `${label}: ${errs} failed requests under load (${result.errors.first.join('; ')})`;
    if (result.completed < result.requests) out.failure ??= `${label}: ${result.requests - result.completed} requests never answered`;
  } finally {
    await h.stop();
    out.errorLines = h.stderr.error + h.stderr.fatal;
    if (out.errorLines > 0) out.failure ??= `${label} logged ${out.errorLines} error line(s): ${h.stderr.firstErrors.join(' | ')}`;
  }
  return out;
}
