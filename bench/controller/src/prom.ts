// Prometheus text parsing: samples, histogram families with quantile estimates, counters.

/** One sample line of the Prometheus text format. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments and blank lines skipped). */
export function parseProm(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m?.[1]) continue;
    const labels: Record<string, string> = {};
    for (const lm of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      if (lm[1] !== undefined) labels[lm[1]] = lm[2] ?? '';
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/**
 * Prometheus' histogram_quantile: linear interpolation inside the bucket holding the q-th
 * observation. When that is the +Inf bucket, the answer is only "above the top bound": returned
 * as -(top bound), which the table prints as "> …".
 */
export function histQuantile(buckets: ReadonlyArray<readonly [number, number]>, count: number, q: number): number {
  if (!(count > 0)) return NaN;
  const rank = q * count;
  let prevLe = 0;
  let prevCum = 0;
  for (const [le, cum] of buckets) {
    if (cum >= rank) {
      if (le === Infinity) return -prevLe;
      return prevLe + ((le - prevLe) * (rank - prevCum)) / Math.max(1e-12, cum - prevCum);
    }
    prevLe = le;
    prevCum = cum;
  }
  return prevLe;
}

/** One label set of a histogram family, with its mean and quantile estimates. */
export interface Histogram {
  /** The labels other than `le`, as `k=v,…`. */
  kind: string;
  count: number;
  sum: number;
  /** [upper bound, cumulative count], ascending; +Inf as Infinity. */
  buckets: Array<[number, number]>;
  mean: number;
  p50: number;
  p99: number;
}

type LabelFilter = (labels: Record<string, string>) => boolean;

/** One histogram family, per label set (without `le`): count, sum, buckets, p50/p99 estimates. */
export function histogram(samples: readonly PromSample[], name: string, filter: LabelFilter = () => true): Histogram[] {
  const byKind = new Map<string, { kind: string; count: number; sum: number; buckets: Array<[number, number]> }>();
  for (const s of samples) {
    if (!s.name.startsWith(name) || !filter(s.labels)) continue;
    const kind = Object.entries(s.labels)
      .filter(([k]) => k !== 'le')
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const h = byKind.get(kind) ?? { kind, count: 0, sum: 0, buckets: [] };
    byKind.set(kind, h);
    if (s.name === `${name}_bucket`) h.buckets.push([s.labels['le'] === '+Inf' ? Infinity : Number(s.labels['le']), s.value]);
    else if (s.name === `${name}_count`) h.count = s.value;
    else if (s.name === `${name}_sum`) h.sum = s.value;
  }
  return [...byKind.values()].map((h) => {
    h.buckets.sort((a, b) => a[0] - b[0]);
    return {
      ...h,
      mean: h.count ? h.sum / h.count : NaN,
      p50: histQuantile(h.buckets, h.count, 0.5),
      p99: histQuantile(h.buckets, h.count, 0.99),
    };
  });
}

/** The samples named exactly `name` whose labels pass `filter`. */
export function counterValues(samples: readonly PromSample[], name: string, filter: LabelFilter = () => true): PromSample[] {
  return samples.filter((s) => s.name === name && filter(s.labels));
}
