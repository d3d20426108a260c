/** The end of a run: the two tables (data plane, control plane) and the results files. */
import os from 'node:os';

import { cpuLine, finishRun, fmt1, mdRow } from '../../lib/dist/index.js';
import { PEER_HEAD } from './config.js';
import { PORTKEY_DIR } from './peers.js';
import type { Run } from './run.js';

/** A goal cell: `≤ 0.5 ms added (router): met` (or `**missed**`, or `n/a` when there is no value). */
export function goalCell(v: number, limit: number, unit: string, cmp: 'le' | 'ge' = 'le'): string {
  if (!Number.isFinite(v)) return `${cmp === 'le' ? '≤' : '≥'} ${limit} ${unit}: n/a`;
  const met = cmp === 'le' ? v <= limit : v >= limit;
  return `${cmp === 'le' ? '≤' : '≥'} ${limit} ${unit}: ${met ? 'met' : '**missed**'}`;
}

/**
 * Print the report (header, data-plane table, control-plane table, failures) and write the
 * results files; returns the exit code.
 */
export function report(run: Run, tStart: number, build: { distSha256: string; newestMtime: string }): number {
  const { cfg, raw, dataRows, ctlRows, phaseTimes, nginxBin, portkeyPkg, openGen, closedGen } = run;
  const loadavgEnd = os.loadavg();
  raw.loadavgEnd = loadavgEnd;
  const runtimeSec = (performance.now() - tStart) / 1000;
  const la = (a: number[]): string => a.map((x) => x.toFixed(2)).join(' ');
  const lines = [
    `## kars router benchmark${cfg.quick ? ' (quick)' : ''}`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load average ${la(raw.loadavgStart)} at start, ${la(loadavgEnd)} at end · runtime ${fmt1(runtimeSec)} s (${Object.entries(
      phaseTimes,
    )
      .map(([k, v]) => `${k} ${fmt1(v)} s`)
      .join(', ')})`,
    ``,
    `Router build: packages/router/dist sha256 ${build.distSha256}… (newest file ${build.newestMtime}). Load generators: open loop — ${openGen}; closed loop — ${closedGen}. Stub, pass-through proxy, router, load generator (and apiserver) are separate processes sharing the same ${os.cpus().length} cores; "direct" sends the same requests to the stub itself.${nginxBin ? ` nginx ${nginxBin.version} (Debian package).` : ''}${portkeyPkg ? ` Portkey AI gateway ${portkeyPkg.version} from ${PORTKEY_DIR}.` : ''}${cfg.skipped.length ? ` Skipped peers: ${cfg.skipped.join('; ')}.` : ''}`,
  ];
  if (dataRows.length) {
    lines.push(
      '',
      `| metric | ${cfg.peers.map((p) => PEER_HEAD[p]).join(' | ')} | vs direct | goal | notes |`,
      `|---|${cfg.peers.map(() => '---|').join('')}---|---|---|`,
      ...dataRows.map((m) => mdRow([m.metric, ...cfg.peers.map((p) => m[p] ?? ''), m.diff, m.goal, m.notes])),
    );
  }
  if (ctlRows.length) {
    lines.push(
      '',
      `| metric | value | goal | notes |`,
      `|---|---|---|---|`,
      ...ctlRows.map((m) => mdRow([m.metric, m.display, m.goal, m.notes])),
    );
  }
  return finishRun('router', {
    lines,
    failures: run.failures,
    footer: `Shared ${os.cpus().length}-core machine: quote medians over several runs, and the added latency / ratio rather than absolute numbers.`,
    config: cfg,
    runtimeSec,
    json: {
      loadGenerators: { open: openGen, closed: closedGen },
      routerBuild: build,
      phaseTimes,
      rows: { dataPlane: dataRows, controlPlane: ctlRows },
      raw,
    },
    markdown: true,
  });
}
