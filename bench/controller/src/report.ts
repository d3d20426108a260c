// The report: the metrics table, then per controller its own Prometheus histograms.

import { cpuLine, fmt1, fmtInt, mdRow } from '../../lib/dist/index.js';
import { counterValues, histogram } from './prom.js';
import type { Histogram } from './prom.js';
import type { Run } from './run.js';

/** A histogram as the results file keeps it (+Inf as the string '+Inf'). */
export type HistogramJson = Omit<Histogram, 'buckets'> & { controller: string; name: string; buckets: Array<[number | '+Inf', number]> };

/** The report's Markdown lines and the histograms for the results file. */
export function report(run: Run, meta: { runtimeSec: number; fsType: string }): { lines: string[]; histJson: HistogramJson[] } {
  const { cfg, rows, notes } = run;
  const lines = [
    `## kars policy controller benchmark`,
    ``,
    `${new Date().toISOString()} · ${cfg.quick ? 'QUICK · ' : ''}${cfg.edits} edits · ${fmtInt(cfg.coldPolicies)} cold policies · node ${process.version} · ${cpuLine()} · data dir on ${meta.fsType} · runtime ${fmt1(meta.runtimeSec)} s`,
    ``,
    `| metric | value | goal | notes |`,
    `|---|---|---|---|`,
    ...rows.map((m) => mdRow([m.metric, m.display, m.goal || '–', m.notes])),
  ];
  const histJson: HistogramJson[] = [];
  for (const t of run.histTables) {
    lines.push(
      '',
      `### Controller /metrics: ${t.title}`,
      '',
      '| histogram | labels | count | mean | p50 ≈ | p99 ≈ | non-empty buckets (le: count) |',
      '|---|---|---|---|---|---|---|',
    );
    const families: Array<[string, (l: Record<string, string>) => boolean]> = [
      ['kars_policy_compile_seconds', () => true],
      ['kars_policy_propagation_seconds', () => true],
      ['kars_controller_reconcile_duration_seconds', (l) => l['controller'] === 'inferencepolicy'],
    ];
    for (const [name, filter] of families) {
      for (const h of histogram(t.prom, name, filter)) {
        histJson.push({ controller: t.title, name, ...h, buckets: h.buckets.map(([le, c]) => [le === Infinity ? '+Inf' : le, c]) });
        if (h.count === 0) continue;
        let prev = 0;
        const nonEmpty: string[] = [];
        for (const [le, cum] of h.buckets) {
          if (cum > prev) nonEmpty.push(`${le === Infinity ? '+Inf' : `${+(le * 1000).toFixed(3)} ms`}: ${fmtInt(cum - prev)}`);
          prev = cum;
        }
        const q = (v: number): string => (v < 0 ? `> ${fmtInt(-v * 1000)} ms` : `${fmt1(v * 1000)} ms`);
        lines.push(
          `| ${name} | ${h.kind} | ${fmtInt(h.count)} | ${fmt1(h.mean * 1000)} ms | ${q(h.p50)} | ${q(h.p99)} | ${nonEmpty.join(', ')} |`,
        );
      }
    }
    const rec = counterValues(t.prom, 'kars_controller_reconcile_total', (l) => l['controller'] === 'inferencepolicy');
    const restartSamples = counterValues(t.prom, 'kars_watch_restarts_total');
    const byReason: Record<string, number> = {};
    for (const r of restartSamples) {
      const reason = String(r.labels['reason']);
      if (r.value > 0) byReason[reason] = (byReason[reason] ?? 0) + r.value;
    }
    const restarts = `${restartSamples.reduce((a, s) => a + s.value, 0)}${
      Object.keys(byReason).length
        ? ` (${Object.entries(byReason)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }`;
    const relists = counterValues(t.prom, 'kars_watch_relists_total').reduce((a, s) => a + s.value, 0);
    lines.push(
      '',
      `inferencepolicy reconciles: ${rec.map((s) => `${s.labels['result']} ${fmtInt(s.value)}`).join(', ') || 'none'}; watch restarts ${restarts}, relists ${fmtInt(relists)} (the initial list counts as one per watch). p50/p99 are Prometheus histogram_quantile estimates (linear within a bucket).`,
    );
  }
  if (notes.length) lines.push('', '**Notes**', '', ...notes.map((n) => `- ${n}`));
  return { lines, histJson };
}
