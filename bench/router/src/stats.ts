/** Percentile summaries of samples, and the number formats the tables use beyond bench/lib's. */
import { percentile } from '../../lib/dist/index.js';

/** Three decimals; non-finite values as `String(n)`. */
export const fmt3 = (n: number): string => (Number.isFinite(n) ? n.toFixed(3) : String(n));
/** Three decimals with a sign (`+0.123`, `−0.123`); non-finite values as `String(n)`. */
export const signed3 = (n: number): string => (Number.isFinite(n) ? `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(3)}` : String(n));

/** Count, percentiles, extremes and mean of the finite samples. */
export interface Stats {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  min: number;
  mean: number;
}

/** {@link Stats} of the finite values (NaNs when there are none). */
export function stats(values: readonly number[]): Stats {
  const s = Float64Array.from(values)
    .filter((v) => Number.isFinite(v))
    .sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p90: percentile(s, 0.9),
    p99: percentile(s, 0.99),
    p999: percentile(s, 0.999),
    max: s.length ? (s[s.length - 1] ?? NaN) : NaN,
    min: s.length ? (s[0] ?? NaN) : NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}

/** The median of the finite values. */
export const median = (a: readonly number[]): number => stats(a).p50;

/** A latency summary (ms), as the load generators report it: {@link Stats} without the minimum. */
export type Summary = Omit<Stats, 'min'>;

/** {@link Summary} of latencies. */
export function summarize(lat: readonly number[]): Summary {
  const s = stats(lat);
  return { n: s.n, p50: s.p50, p90: s.p90, p99: s.p99, p999: s.p999, max: s.max, mean: s.mean };
}
