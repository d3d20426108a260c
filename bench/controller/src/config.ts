// The run's configuration, from the environment (see bench/README.md, "Policy controller").

import { envInt } from './util.js';

/** What a run does; written as is to the results file and the first log line. */
export interface Config {
  quick: boolean;
  edits: number;
  warmupEdits: number;
  editSandboxes: number;
  editGapMs: number;
  editTimeoutMs: number;
  coldPolicies: number;
  coldSandboxes: number;
  coldNamespaces: number;
  coldTimeoutMs: number;
  loadedEdits: number;
  createConcurrency: number;
  goals: { editToConfigMapP99Ms: number; editToReadyP99Ms: number; coldStartS: number; coldRssMb: number };
  historyWindow: number;
}

/** The configuration from BENCH_* (BENCH_QUICK=1: the smoke-test defaults); throws on a bad value. */
export function readConfig(): Config {
  const quick = process.env['BENCH_QUICK'] === '1';
  // BENCH_ONLY=coldstart: no measured, warm-up or loaded edits (controller #1 still starts once).
  const coldOnly = process.env['BENCH_ONLY'] === 'coldstart';
  if (process.env['BENCH_ONLY'] !== undefined && !coldOnly)
    throw new Error(`BENCH_ONLY must be "coldstart", got "${process.env['BENCH_ONLY']}"`);
  const edits = envInt('BENCH_EDITS', coldOnly ? 0 : quick ? 30 : 200);
  const warmupEdits = envInt('BENCH_WARMUP_EDITS', coldOnly ? 0 : quick ? 5 : 20);
  const editSandboxes = envInt('BENCH_EDIT_SANDBOXES', 3);
  const editGapMs = envInt('BENCH_EDIT_GAP_MS', 100);
  const editTimeoutMs = envInt('BENCH_EDIT_TIMEOUT_SECS', 30) * 1000;
  const coldPolicies = envInt('BENCH_COLD_POLICIES', quick ? 1000 : 10_000);
  const coldSandboxes = envInt('BENCH_COLD_SANDBOXES', 100);
  const coldNamespaces = envInt('BENCH_COLD_NAMESPACES', 10);
  const coldTimeoutMs = envInt('BENCH_COLD_TIMEOUT_SECS', quick ? 180 : 600) * 1000;
  const loadedEdits = envInt('BENCH_LOADED_EDITS', coldOnly ? 0 : quick ? 10 : 30);
  if (editSandboxes < 1) throw new Error('BENCH_EDIT_SANDBOXES must be >= 1');
  return {
    quick,
    edits,
    warmupEdits,
    editSandboxes,
    editGapMs,
    editTimeoutMs,
    coldPolicies,
    coldSandboxes: Math.min(coldSandboxes, coldPolicies),
    coldNamespaces: Math.max(1, Math.min(coldNamespaces, Math.max(1, coldPolicies))),
    coldTimeoutMs,
    loadedEdits,
    createConcurrency: 16,
    goals: { editToConfigMapP99Ms: 100, editToReadyP99Ms: 250, coldStartS: 30, coldRssMb: 400 },
    historyWindow: Math.max(20_000, 5 * coldPolicies + 10 * (edits + loadedEdits + warmupEdits) + 10_000),
  };
}
