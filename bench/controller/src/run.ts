// What a run records as it goes: the table's rows, the raw samples for the results file, the
// failures and notes, and the controllers' /metrics snapshots.

import type { Config } from './config.js';
import type { ControllerExit } from './controller-process.js';
import type { PromSample } from './prom.js';
import type { Heap, QueueSample } from './queue-sampler.js';
import type { Stats } from './util.js';

/** One row of the table (and of `metrics` in the results file). */
export interface Row {
  metric: string;
  value: number | number[];
  unit: string;
  display: string;
  goal: string;
  notes: string;
}

/** What a sequence of edits measured (see `runEdits`). */
export interface EditRun {
  toCm: number[];
  toReady: number[];
  lastCompileMs: number[];
  lastMs: number[];
  patchMs: number[];
  timeouts: number;
  errors: string[];
}

/** A controller's pino stderr counts, as the results file keeps them. */
export interface StderrCounts {
  lines: number;
  warn: number;
  error: number;
  firstErrors: string[];
}

/** The cold start's raw figures. */
export interface ColdRaw {
  policies: number;
  sandboxes: number;
  metricsUpMs: number;
  readyzMs: number;
  firstStatusMs: number | null;
  firstConfigMapMs: number | null;
  allCompiledMs: number | null;
  allReferencedReadyMs: number | null;
  waitEndedMs: number;
  rssAtConvergenceKb: number;
  hwmAtConvergenceKb: number;
  maxSampledRssKb: number;
  rssAfterDrainKb: number;
  hwmAfterDrainKb: number;
  heapAfterDrain: Heap | null;
  maxHeapUsedMb: number;
  controllerCpuSec: number;
  apiserverCpuSec: number;
  benchCpuSec: number;
  apiWrites: number;
  rssTimeline: Array<[number, number]>;
  queueDepthMax: number;
  heapAtConvergence: Heap | null;
  queueDepthAtConvergence: number | null;
  queueDrainedMs: number | null;
  queueTimeline: QueueSample[];
  notConverged: string[];
  notReady: string[];
  hwmAtEndKb?: number;
  rssAtEndKb?: number;
}

/** The raw samples of the results file, in the order the phases add them. */
export interface Raw {
  edits?: EditRun & {
    apiWrites: number;
    toCmStats: Stats;
    toReadyStats: Stats;
    lastCompileMsStats: Stats;
    lastMsStats: Stats;
    patchStats: Stats;
    controllerCpuSec: number;
    apiserverCpuSec: number;
    benchCpuSec: number;
    wallSec: number;
  };
  controller1?: {
    pid: number;
    up: { metricsUpMs: number; readyMs: number };
    rssStartKb: number;
    rssEndKb: number;
    hwmKb: number;
    exit: ControllerExit | undefined;
    stderr: StderrCounts;
  };
  coldSetup?: {
    sandboxes: number;
    policies: number;
    namespaces: number;
    sandboxWallMs: number;
    policyWallMs: number;
    totalMs: number;
    errors: number;
  };
  cold?: ColdRaw;
  loadedEdits?: EditRun & { toCmStats: Stats; toReadyStats: Stats };
  controller2?: { pid: number; exit: ControllerExit | undefined; stderr: StderrCounts };
  router?: { leaseApplies: number; errors: string[] };
}

/** A controller's /metrics at the end of its phase, for the histogram tables. */
export interface HistTable {
  title: string;
  prom: PromSample[];
}

/** The record of one run. */
export interface Run {
  cfg: Config;
  rows: Row[];
  raw: Raw;
  failures: string[];
  notes: string[];
  histTables: HistTable[];
  /** Add a row to the table. */
  add(metric: string, value: number | number[], unit: string, display: string, goal: string, notesText?: string): void;
}

/** An empty record for a run with `cfg`. */
export function newRun(cfg: Config): Run {
  const rows: Row[] = [];
  return {
    cfg,
    rows,
    raw: {},
    failures: [],
    notes: [],
    histTables: [],
    add(metric, value, unit, display, goal, notesText = '') {
      rows.push({ metric, value, unit, display, goal, notes: notesText });
    },
  };
}

/** The goal cell of a row: `≤ limit unit: met`, `**missed**`, or `n/a` when `v` is not a number. */
export const goalCell = (v: number, limit: number, unit: string): string =>
  Number.isFinite(v) ? `≤ ${limit} ${unit}: ${v <= limit ? 'met' : '**missed**'}` : `≤ ${limit} ${unit}: n/a`;
