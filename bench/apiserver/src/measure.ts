/**
 * Measuring: latency statistics, CPU time of the server and of this process, and the partitioned
 * worker pool the update phases run in.
 */
import { percentile, procCpu, selfCpuSec } from '../../lib/dist/index.js';
import type { PoolRun } from '../../lib/dist/index.js';

/** Count, p50, p99 and maximum of a set of latencies. */
export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

/** {@link Stats} of latencies (any order; NaNs when empty). */
export function stats(latMs: ArrayLike<number>): Stats {
  const s = Float64Array.from(latMs).sort();
  return { n: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99), max: s.length ? (s[s.length - 1] ?? NaN) : NaN };
}

/** Median (the mean of the middle two for an even count; NaN when empty). */
export function median(xs: readonly number[]): number {
  const s = Float64Array.from(xs).sort();
  return s.length % 2 ? (s[(s.length - 1) / 2] ?? NaN) : ((s[s.length / 2 - 1] ?? NaN) + (s[s.length / 2] ?? NaN)) / 2;
}

/** Server CPU time (user+system) in seconds, from /proc/<pid>/stat (throws if the server is gone). */
export const procCpuSec = (pid: number): number => procCpu(pid).total;
/** CPU time (user + system) of the load generator (this process, all threads) in seconds. */
export const clientCpuSec = selfCpuSec;

/**
 * Like runPool, but worker w only ever touches objects j with j % concurrency === w, so
 * updates carrying a resourceVersion never race each other (no 409s from the benchmark itself).
 * `op(i, obj)` performs operation i on object index `obj`.
 */
export async function runPartitioned(
  count: number,
  concurrency: number,
  objects: number,
  op: (i: number, obj: number) => Promise<unknown>,
): Promise<PoolRun> {
  const lat = new Float64Array(count);
  const errors: string[] = [];
  const t0 = performance.now();
  const worker = async (w: number): Promise<void> => {
    const owned: number[] = [];
    for (let j = w; j < objects; j += concurrency) owned.push(j);
    if (owned.length === 0) return;
    let k = 0;
    for (let i = w; i < count; i += concurrency) {
      const obj = owned[k++ % owned.length] as number;
      const s = performance.now();
      try {
        await op(i, obj);
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err));
      }
      lat[i] = performance.now() - s;
    }
  };
  const workers = Math.min(concurrency, objects);
  if (workers < concurrency)
    throw new Error(`need at least ${concurrency} objects for ${concurrency}-way partitioned updates, have ${objects}`);
  await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  return { lat, wallMs: performance.now() - t0, errors };
}
