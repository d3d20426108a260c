/** Latency summary of one measured phase (milliseconds). */
export interface Summary {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/** Nearest-rank percentile of already sorted values (p in 0..100); null for none. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] ?? null;
}

/** p50, p99 and max of the values that are numbers (missing measurements are skipped, and counted apart by the caller). */
export function summarize(values: ReadonlyArray<number | null>): Summary {
  const xs = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  return { count: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs.length ? (xs[xs.length - 1] ?? null) : null };
}
