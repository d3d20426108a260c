/** The open-loop load generator of the router benchmark (`--loadgen`), driven over IPC. */
import { spawn } from 'node:child_process';
import { ROOT } from '../../lib/dist/index.js';
import { ROUTER_BENCH } from './peers.js';

/** One open-loop job: request k due at t0 + k/rate on raw HTTP/1.1 keep-alive connections. */
export interface OpenLoopJob {
  kind: 'open';
  host: string;
  port: number;
  rate: number;
  warmupMs: number;
  durationMs: number;
  maxConns: number;
  expectStatus: number;
  /** The raw request, base64. */
  req: string;
}

/** Latency figures (ms) of a job. */
export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

/** What the load generator measured (the fields read here; the rest goes to the results file as is). */
export interface LoadResult {
  requests: number;
  completed: number;
  achievedRate: number;
  latency: LatencySummary;
  errors: { transport: number; status: Record<string, number>; first: string[] };
  [k: string]: unknown;
}

/** A message from the load generator. */
type LoadgenMessage =
  { type: 'mark'; name: string } | { type: 'result'; ok: true; result: LoadResult } | { type: 'result'; ok: false; error: string };

/** The running load generator. */
export interface Loadgen {
  /** Run `job`; `onMark('start' | 'end')` at the measured window's edges. */
  run(job: OpenLoopJob, onMark?: (name: string) => void): Promise<LoadResult>;
  stop(): void;
}

/** The load generator of bench/router (`--loadgen`), driven over IPC; `run(job, onMark)` resolves with its result. */
export function startLoadgen(): Loadgen {
  const child = spawn(process.execPath, [ROUTER_BENCH, '--loadgen'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let handler: ((m: LoadgenMessage) => void) | undefined;
  let exitErr: Error | undefined;
  child.on('message', (m) => handler?.(m as LoadgenMessage));
  child.once('exit', (code, signal) => {
    exitErr = new Error(`load generator exited (code ${code}, signal ${signal})`);
    handler?.({ type: 'result', ok: false, error: exitErr.message });
  });
  return {
    run(job, onMark) {
      if (exitErr) return Promise.reject(exitErr);
      return new Promise((res, rej) => {
        handler = (m) => {
          if (m.type === 'mark') onMark?.(m.name);
          else if (m.type === 'result') {
            handler = undefined;
            if (m.ok) res(m.result);
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
