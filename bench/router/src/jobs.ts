/**
 * What the main process and the load generator child (`--loadgen`) exchange over IPC: the jobs,
 * their results and the messages around them. Types only.
 */
import type { Summary } from './stats.js';

/** The load generator's marks: the start and the end of the measured window. */
export type Mark = 'start' | 'end';

/** What a job's fields have in common. */
interface JobBase {
  host: string;
  port: number;
  /** The request bytes, base64. */
  req: string;
  warmupMs: number;
  durationMs: number;
  expectStatus: number;
}

/** Open loop: `rate` requests per second whatever the answers, on up to `maxConns` connections. */
export interface OpenJob extends JobBase {
  kind: 'open';
  rate: number;
  maxConns: number;
}

/** Closed loop: `concurrency` connections, each sending its next request when the last one answered. */
export interface ClosedJob extends JobBase {
  kind: 'closed';
  concurrency: number;
}

/** A job of the load generator. */
export type Job = OpenJob | ClosedJob;

/** Failed requests of a run: transport errors, unexpected statuses (by status) and the first few messages. */
export interface ErrorTally {
  transport: number;
  status: Record<string, number>;
  first: string[];
}

/** The CPU accounting of a run (see `cpuDelta`). */
export interface CpuDelta {
  wallS: number;
  sec: Record<string, number>;
  pctCore: Record<string, number>;
  usPerReq: Record<string, number>;
  sysUsPerReq: Record<string, number>;
  otherPct: number;
}

/** A stall episode of an open-loop run. */
export interface Stall {
  atS: number;
  spanMs: number;
  requests: number;
  maxMs: number;
}

/** What an open-loop run measured. */
export interface OpenResult {
  why: string;
  requests: number;
  completed: number;
  durationMs: number;
  achievedRate: number;
  latency: Summary;
  latencyFromIntended: Summary;
  scheduleLag: Summary;
  maxConnections: number;
  stalls: { episodes: number; worst: Stall[] };
  errors: ErrorTally;
  loadgenCpuSec: number;
  /** Added by the main process. */
  cpu?: CpuDelta | undefined;
}

/** What a closed-loop run measured (by the Node generator or wrk). */
export interface ClosedResult {
  requests: number;
  durationMs: number;
  throughput: number;
  latency: Summary;
  errors: ErrorTally;
  loadgenCpuSec: number;
  /** wrk's output. */
  raw?: string;
  /** Added by the main process. */
  cpu?: CpuDelta | undefined;
}

/** The result of a job. */
export type ResultOf<J extends Job> = J extends OpenJob ? OpenResult : ClosedResult;

/** A message of the load generator to the main process. */
export type LoadgenMessage =
  | { type: 'mark'; name: Mark }
  | { type: 'result'; ok: true; result: OpenResult | ClosedResult }
  | { type: 'result'; ok: false; error: string | undefined };
