/**
 * The main process's view of the other processes: starting the node children (stubs, proxy,
 * routers, apiserver, the load generator), their CPU and memory from /proc, and which router
 * build is measured.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  ROOT,
  pinoStderr,
  procCpu as procCpuBase,
  procStatus,
  selfCpuSec,
  spawnListening,
  splitArgs,
  type Listening,
  type PinoStderr,
} from '../../lib/dist/index.js';
import type { CpuDelta, Job, LoadgenMessage, Mark, ResultOf } from './jobs.js';

/** This benchmark's entry point (`bench/router/dist/main.js`), which the children run with `--stub`, `--proxy` or `--loadgen`. */
export const SELF = join(dirname(fileURLToPath(import.meta.url)), 'main.js');

/** CPU time of a process in seconds, from /proc/<pid>/stat (10 ms resolution): `{ total, sys }`; NaNs once it is gone. */
export const procCpu = (pid: number): { total: number; sys: number } => procCpuBase(pid, { safe: true });
/** CPU time (user + system) of a process in seconds; NaN once it is gone. */
export const procCpuSec = (pid: number): number => procCpu(pid).total;

/** VmRSS of a process in MB; NaN once it is gone. */
export const procRssMb = (pid: number): number => procStatus(pid, { safe: true }).rssKb / 1024;

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat. */
export function machineBusySec(): number {
  try {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - (f[3] ?? NaN) - (f[4] ?? NaN)) / 100;
  } catch {
    return NaN;
  }
}

/** A CPU snapshot (see {@link cpuSnap}). */
export interface CpuSnap {
  t: number;
  machine: number;
  self: number;
  procs: Record<string, number>;
  sys: Record<string, number>;
}

/** CPU snapshot of the named processes, this process and the whole machine. */
export function cpuSnap(pids: Record<string, number | undefined>): CpuSnap {
  const procs: Record<string, number> = {};
  const sys: Record<string, number> = {};
  for (const [k, pid] of Object.entries(pids)) {
    if (!pid) continue;
    const c = procCpu(pid);
    procs[k] = c.total;
    sys[k] = c.sys;
  }
  return { t: performance.now(), machine: machineBusySec(), self: selfCpuSec(), procs, sys };
}

/**
 * Per process: CPU seconds, % of one core and µs per request between two snapshots; `otherPct` is
 * the rest of the machine's busy time (other jobs on the shared VM), in % of one core.
 */
export function cpuDelta(a: CpuSnap, b: CpuSnap, requests: number, override: Record<string, number> = {}): CpuDelta {
  const wallS = (b.t - a.t) / 1000;
  const out = {
    wallS,
    sec: {} as Record<string, number>,
    pctCore: {} as Record<string, number>,
    usPerReq: {} as Record<string, number>,
    sysUsPerReq: {} as Record<string, number>,
  };
  let ours = b.self - a.self;
  for (const k of new Set([...Object.keys(b.procs), ...Object.keys(override)])) {
    const s = override[k] ?? (b.procs[k] ?? NaN) - (a.procs[k] ?? NaN);
    out.sec[k] = s;
    out.pctCore[k] = (s / wallS) * 100;
    out.usPerReq[k] = requests > 0 ? (s * 1e6) / requests : NaN;
    out.sysUsPerReq[k] = requests > 0 && override[k] === undefined ? (((b.sys[k] ?? NaN) - (a.sys[k] ?? NaN)) * 1e6) / requests : NaN;
    if (Number.isFinite(s)) ours += s;
  }
  return { ...out, otherPct: Math.max(0, ((b.machine - a.machine - ours) / wallS) * 100) };
}

/** A node child that printed `listening: <url>` (the url without a trailing `/`), with its pino stderr counted. */
export type Child = Listening<PinoStderr> & { label: string };

/**
 * Spawn a node child that prints `listening: <url>` (and maybe `kubeconfig: <path>`) on stdout.
 * `died` is set when it exits before `stop()`.
 */
export async function startChild(
  label: string,
  args: string[],
  { nodeArgs = [], env = process.env, timeoutMs = 30_000 }: { nodeArgs?: string[]; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Child> {
  const h = await spawnListening<PinoStderr>(label, [...nodeArgs, ...args], {
    env,
    timeoutMs,
    collectStderr: (child) => pinoStderr(child, { tailMax: 40, lineChars: 400 }),
    diedMessage: (code, signal, h) =>
      `${label} exited unexpectedly (code ${code}, signal ${signal})\n${h.stderr.tail.slice(-10).join('\n')}`,
  });
  h.url = h.url.replace(/\/$/, '');
  return Object.assign(h, { label });
}

/** The Node load generator child (see {@link startLoadgen}). */
export interface Loadgen {
  pid: number | undefined;
  /** Run `job`; `onMark` is called at the start and the end of the measured window. */
  run<J extends Job>(job: J, onMark?: (m: Mark) => void): Promise<ResultOf<J>>;
  stop(): void;
}

/** The Node load generator child; `run(job, onMark)` resolves with its result. */
export function startLoadgen(): Loadgen {
  const child = spawn(process.execPath, [...splitArgs(process.env.BENCH_LOADGEN_NODE_ARGS), SELF, '--loadgen'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let handler: ((m: LoadgenMessage) => void) | undefined;
  let exitErr: Error | undefined;
  child.on('message', (m) => handler?.(m as LoadgenMessage));
  child.once('exit', (code, signal) => {
    exitErr = new Error(`load generator exited (code ${code}, signal ${signal})`);
    handler?.({ type: 'result', ok: false, error: exitErr.message });
  });
  return {
    pid: child.pid,
    run<J extends Job>(job: J, onMark?: (m: Mark) => void): Promise<ResultOf<J>> {
      if (exitErr) return Promise.reject(exitErr);
      return new Promise((res, rej) => {
        handler = (m) => {
          if (m.type === 'mark') onMark?.(m.name);
          else if (m.type === 'result') {
            handler = undefined;
            if (m.ok) res(m.result as ResultOf<J>);
            else rej(new Error(m.error));
          }
        };
        child.send(job);
      });
    },
    stop() {
      if (child.connected) child.disconnect();
      if (child.exitCode === null) setTimeout(() => child.kill('SIGKILL'), 2000).unref();
    },
  };
}

/** Which build of the router was measured: a digest of every .js file under packages/router/dist and the newest mtime. */
export function routerBuildId(): { distSha256: string; newestMtime: string } {
  const dir = join(ROOT, 'packages/router/dist');
  const h = createHash('sha256');
  let newest = 0;
  for (const f of readdirSync(dir, { recursive: true })
    .filter((f) => String(f).endsWith('.js'))
    .sort()) {
    h.update(String(f)).update(readFileSync(join(dir, String(f))));
    newest = Math.max(newest, statSync(join(dir, String(f))).mtimeMs);
  }
  return { distSha256: h.digest('hex').slice(0, 16), newestMtime: new Date(newest).toISOString() };
}
