/** Settings and helpers shared by the write-path benchmark's parts. */
import type { KubeObject } from '@kars/kube-core';

/** Creates (and as many updates) per round: BENCH_WP_OPS, default 4000. */
export const OPS = Number(process.env['BENCH_WP_OPS'] ?? 4000);
/** Rounds, each on a fresh service: BENCH_WP_ROUNDS, default 3. */
export const ROUNDS = Number(process.env['BENCH_WP_ROUNDS'] ?? 3);
/** Writes in flight. */
export const CONC = 64;
/** The write options of every create and update. */
export const opts = { dryRun: false, manager: 'bench', fieldValidation: 'Warn' } as const;

/** Median (the mean of the middle two for an even count). */
export const med = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? (s[(s.length - 1) / 2] ?? NaN) : ((s[s.length / 2 - 1] ?? NaN) + (s[s.length / 2] ?? NaN)) / 2;
};

/** CPU time (user + system) of this process, all threads, in µs. */
export const cpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** The small ConfigMap `cm-<i>` every create writes. */
export const cmBody = (i: number | string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `cm-${i}` },
  data: { index: String(i), payload: 'x'.repeat(64) },
});
