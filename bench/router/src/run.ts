/**
 * The state one benchmark run shares between its phases: the configuration, the processes it
 * started, the table rows and raw measurements collected so far, and the failures.
 */
import type { CompiledInferencePolicy } from '@kars/policy-compiler';

import type { HttpsJsonClient } from '../../lib/dist/index.js';
import type { ApiName } from './apis.js';
import type { Config, Phase, PeerName, Setup } from './config.js';
import type { External } from './peers.js';
import type { Child, Loadgen } from './procs.js';

/** A row of the data-plane table: one cell per peer, then "vs direct", goal and notes. */
export interface DataRow extends Partial<Record<PeerName, string>> {
  metric: string;
  diff: string;
  goal: string;
  notes: string;
}

/** A row of the control-plane table (decision cost, reload latency). */
export interface CtlRow {
  metric: string;
  display: string;
  goal: string;
  notes: string;
}

/** What the end of a run needs of every process it started (node children and external peers alike). */
export interface Handle {
  label: string;
  died: string | undefined;
  stderr: { error: number; fatal?: number; firstErrors: string[] };
  stop(): Promise<void>;
}

/** The processes of a run (undefined until started, and after a stop). */
export interface Procs {
  stub: Child | undefined;
  anthropicStub: Child | undefined;
  proxy: Child | undefined;
  nginx: External | undefined;
  portkey: External | undefined;
  bare: Child | undefined;
  router: Child | undefined;
  /** The routers of the other APIs (BENCH_APIS), each on its own policy (see `Run.compiled`). */
  apiRouters: Partial<Record<ApiName, Child>>;
  loadgen: Loadgen | undefined;
  srv: Child | undefined;
  api: HttpsJsonClient | undefined;
}

/** What the run's sanity checks saw (in the results file as `raw.sanity`). */
export interface Sanity {
  direct: number;
  router: number;
  overCap: number;
  directBytes: number;
  routerBytes: number;
  overCapBody: string;
  [api: string]: unknown;
}

/** The raw measurements of a run, by phase (in the results file as `raw`). */
export interface Raw {
  loadavgStart: number[];
  [k: string]: unknown;
}

/** One benchmark run. */
export interface Run extends Omit<Setup, 'cfg' | 'phases'> {
  cfg: Config;
  phases: Set<Phase>;
  tmp: string;
  failures: string[];
  /** The raw measurements, written to the results file. */
  raw: Raw;
  sanity: Sanity | undefined;
  dataRows: DataRow[];
  ctlRows: CtlRow[];
  /** Seconds per phase. */
  phaseTimes: Record<string, number>;
  procs: Procs;
  /** The benchmark's InferencePolicy with a per-request cap of `cap`, for the router of `apiName`. */
  compiled: (cap: number, apiName?: ApiName) => CompiledInferencePolicy;
  /** Throw the message of the first child that died. */
  checkChildren: () => void;
}

/** A handle or, when it was not started, an error naming it. */
export function need<T>(h: T | undefined, what: string): T {
  if (h === undefined) throw new Error(`${what} is not running`);
  return h;
}
