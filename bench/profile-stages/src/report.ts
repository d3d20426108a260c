/** The stage table (Markdown) or JSON of aggregated profiles. */
import type { Accumulator } from './aggregate.js';

/** Stages that are not part of the busy time. */
const notBusy = (s: string): boolean => s === '(idle)' || s === 'startup (module load)';

/** Microseconds of everything but idle and startup. */
export function busyUs(acc: Accumulator): number {
  return [...acc.stages].filter(([s]) => !notBusy(s)).reduce((t, [, us]) => t + us, 0);
}

/** The stages, most time first. */
export function stageRows(acc: Accumulator): Array<[string, number]> {
  return [...acc.stages].sort((a, b) => b[1] - a[1]);
}

/** The JSON output (`--json`). */
export function jsonReport(files: readonly string[], ops: number | undefined, acc: Accumulator): string {
  return `${JSON.stringify({ files, ops, busyUs: busyUs(acc), stages: Object.fromEntries(stageRows(acc)) }, null, 2)}\n`;
}

/**
 * The Markdown output: the header line and stage table (µs per write with `ops`), then with `top`
 * the functions with the most self time per stage, and with `acc.pathStage` its heaviest call paths.
 */
export function markdownReport(files: readonly string[], ops: number | undefined, top: number, acc: Accumulator): string {
  const busy = busyUs(acc);
  const rows = stageRows(acc);
  const perOps = ops ? files.length * ops : undefined;
  const lines = [
    `${files.length} profile(s); window ${(acc.windowUs / 1000).toFixed(0)} ms${acc.all ? ' (whole profile)' : ' (first to last request)'}; busy (not idle, not startup): ${(busy / 1000).toFixed(0)} ms` +
      (perOps ? ` = ${(busy / perOps).toFixed(0)} µs per write over ${perOps} writes` : ''),
    '',
    `| stage | ms | share of busy |${perOps ? ' µs per write |' : ''}`,
    `|---|---|---|${perOps ? '---|' : ''}`,
  ];
  for (const [s, us] of rows) {
    const share = notBusy(s) ? '–' : `${((100 * us) / busy).toFixed(1)}%`;
    lines.push(`| ${s} | ${(us / 1000).toFixed(0)} | ${share} |${perOps ? ` ${(us / perOps).toFixed(1)} |` : ''}`);
  }
  if (top > 0) {
    for (const [s] of rows) {
      if (notBusy(s)) continue;
      const fns = [...acc.self]
        .filter(([k]) => k.startsWith(`${s}\u0000`))
        .sort((a, b) => b[1] - a[1])
        .slice(0, top);
      lines.push('', `**${s}**, self time:`);
      for (const [k, us] of fns) lines.push(`- ${(us / 1000).toFixed(0)} ms ${k.split('\u0000')[1]}`);
    }
  }
  if (acc.pathStage) {
    lines.push('', `**${acc.pathStage}**, heaviest call paths (innermost first):`);
    for (const [p, us] of [...acc.paths].sort((a, b) => b[1] - a[1]).slice(0, 25)) lines.push(`- ${(us / 1000).toFixed(0)} ms ${p}`);
  }
  return `${lines.join('\n')}\n`;
}
