/**
 * What phases 1–4 share: the running server and its client, the table they add rows to, the
 * failures and raw results they record, and CPU readings around a phase.
 */
import { fmt1, fmt2, startKarsApiserver } from '../../lib/dist/index.js';
import type { HttpsJsonClient, KarsApiserver } from '../../lib/dist/index.js';
import type { Config } from './config.js';
import { clientCpuSec, procCpuSec } from './measure.js';

/** The namespace of phases 1–3. */
export const NS = 'bench';

/** The part of a Kubernetes object the benchmark reads. */
export interface KubeObj {
  metadata: { resourceVersion?: string; [field: string]: unknown };
  [field: string]: unknown;
}

/** The part of a Kubernetes list the benchmark reads. */
export interface KubeListBody {
  metadata: { resourceVersion?: string; continue?: string };
  items: unknown[];
}

/** One row of the main table (and of `metrics` in the results file). */
export interface Metric {
  metric: string;
  value: number | number[];
  unit: string;
  display: string;
  notes: string;
}

/** The server of phases 1–4, with its stderr tail at hand for the FAILURES block. */
export type Server = KarsApiserver & { stderrTail: string[] };

/** CPU times and the wall clock at the start of a measurement. */
export interface CpuMark {
  srv: number;
  cli: number;
  t: number;
}

/** CPU of server and load generator since a {@link CpuMark}, and the note the table shows for it. */
export interface CpuNote {
  srvCpuSec: number;
  cliCpuSec: number;
  wallSec: number;
  note: string;
}

/** What every phase after the group-commit one gets. */
export interface PhaseContext {
  cfg: Config;
  srv: Server;
  request: HttpsJsonClient['request'];
  /** Add a row to the main table. */
  add(metric: string, value: number | number[], unit: string, display: string, notes?: string): void;
  failures: string[];
  /** The `raw` block of the results file, one key per phase. */
  raw: Record<string, unknown>;
  cpuMark(): CpuMark;
  /** CPU since `m0`, per op of `ops` operations. */
  cpuNote(m0: CpuMark, ops: number): CpuNote;
}

/** Start `kars apiserver` as a child process; resolves once it prints its listening URL. */
export async function startServer(dataDir: string, historyWindow: number): Promise<Server> {
  const srv = await startKarsApiserver(dataDir, ['--history-window', String(historyWindow)]);
  return Object.assign(srv, { stderrTail: srv.stderr.tail });
}

/** A {@link PhaseContext} over `srv` and `client` (CPU readings of `srv.pid` and of this process). */
export function phaseContext(
  cfg: Config,
  srv: Server,
  client: HttpsJsonClient,
  metrics: Metric[],
  failures: string[],
  raw: Record<string, unknown>,
): PhaseContext {
  return {
    cfg,
    srv,
    request: client.request,
    add: (metric, value, unit, display, notes = '') => {
      metrics.push({ metric, value, unit, display, notes });
    },
    failures,
    raw,
    cpuMark: () => ({ srv: procCpuSec(srv.pid), cli: clientCpuSec(), t: performance.now() }),
    cpuNote: (m0, ops) => {
      const s = procCpuSec(srv.pid) - m0.srv;
      const c = clientCpuSec() - m0.cli;
      const wall = (performance.now() - m0.t) / 1000;
      return {
        srvCpuSec: s,
        cliCpuSec: c,
        wallSec: wall,
        note: `server CPU ${fmt1(s)} s (${fmt2((s * 1000) / ops)} ms/op, ${Math.round((100 * s) / wall)}% of a core); client CPU ${fmt1(c)} s`,
      };
    },
  };
}
