/** The tables of phase 0 (group commit): per-mode medians over rounds, the ratio rows and the CPU ceiling. */
import os from 'node:os';
import { fmt2, fmtInt, mdRow } from '../../lib/dist/index.js';
import type { Config, ModeKey } from './config.js';
import type { Mode, Round } from './group-commit.js';
import { median } from './measure.js';

/** The medians over rounds of one op in one mode. */
export interface ModeSummary {
  opsPerSec: number;
  p50: number;
  p99: number;
  cpuMsPerOp: number;
  clientCpuMsPerOp: number;
}

/**
 * The report of phase 0: a table row per op and mode (medians over rounds, with every round's
 * throughput), the ratios group / before and group / one where both modes ran, and the CPU ceiling
 * line. `summary` holds the medians by `<op>/<mode>`.
 */
export function groupCommitReport(
  cfg: Config,
  modes: readonly Mode[],
  runs: Record<ModeKey, Round[]>,
): { lines: string[]; summary: Record<string, ModeSummary> } {
  const conc = cfg.gcConcurrency;
  const lines = [
    `### Group commit: create and update at concurrency ${conc} (${fmtInt(cfg.gcOps)} ops each after ${fmtInt(cfg.gcWarmup)} + ${fmtInt(cfg.gcWarmup)} unmeasured, median of ${cfg.gcRounds} alternating rounds, fresh server per round)`,
    '',
    '| op | mode | throughput | p50 | p99 | server CPU / op | load generator CPU / op | every round (ops/s) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const summary: Record<string, ModeSummary> = {};
  for (const op of ['create', 'update'] as const) {
    for (const mode of modes) {
      const rs = runs[mode.key].map((r) => r[op]);
      const m: ModeSummary = {
        opsPerSec: median(rs.map((r) => r.opsPerSec)),
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        cpuMsPerOp: median(rs.map((r) => r.cpuMsPerOp)),
        clientCpuMsPerOp: median(rs.map((r) => r.clientCpuMsPerOp)),
      };
      summary[`${op}/${mode.key}`] = m;
      lines.push(
        mdRow([
          op,
          mode.label,
          `${fmtInt(m.opsPerSec)} ops/s`,
          `${fmt2(m.p50)} ms`,
          `${fmt2(m.p99)} ms`,
          `${fmt2(m.cpuMsPerOp)} ms`,
          `${fmt2(m.clientCpuMsPerOp)} ms`,
          rs.map((r) => fmtInt(r.opsPerSec)).join(', '),
        ]),
      );
    }
    const b = summary[`${op}/group`];
    for (const [base, label] of [
      ['before', '**group / before**'],
      ['single', '**group / one**'],
    ] as const) {
      const a = summary[`${op}/${base}`];
      if (a && b)
        lines.push(
          mdRow([
            op,
            label,
            `**${fmt2(b.opsPerSec / a.opsPerSec)}×** (goal ≥ 5×)`,
            `${fmt2(b.p50 / a.p50)}×`,
            `${fmt2(b.p99 / a.p99)}× (goal ≤ 1×)`,
            `${fmt2(b.cpuMsPerOp / a.cpuMsPerOp)}×`,
            '',
            '',
          ]),
        );
    }
  }
  // What the two cores could serve at all at the measured CPU per operation (server + load
  // generator, both cores fully busy): when 5× the one-fsync throughput is above it, no batching
  // reaches 5× on this machine; only less CPU per write does.
  const cores = os.availableParallelism();
  const ceiling = (op: string): number => {
    const g = summary[`${op}/group`];
    return g ? (cores * 1000) / (g.cpuMsPerOp + g.clientCpuMsPerOp) : NaN;
  };
  lines.push(
    '',
    `CPU ceiling of this machine (${cores} cores fully busy at group commit's server + load generator CPU per op): ` +
      ['create', 'update']
        .map((op) => {
          const five = (['before', 'single'] as const).flatMap((k) => {
            const s = summary[`${op}/${k}`];
            return s ? [`5× ${k === 'before' ? 'before' : 'one fsync per write'} would be ${fmtInt(5 * s.opsPerSec)} ops/s`] : [];
          });
          return `${op} ≤ ${fmtInt(ceiling(op))} ops/s` + (five.length ? ` (${five.join(', ')})` : '');
        })
        .join('; ') +
      '.',
  );
  return { lines, summary };
}
