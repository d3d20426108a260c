import type { ProbeReport } from './probe.js';

function ms(v: number | null): string {
  return v === null ? '-' : `${Math.round(v)}ms`;
}

function short(d: string | null): string {
  return d === null ? '-' : d.replace(/^sha256:/, '').slice(0, 12);
}

function pad(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return (
    rows
      .map((r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd((widths[i] ?? 0) + 3)))
          .join('')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

/** The probe's table: one row per edit, then p50/p99/max per phase and the verdict. */
export function formatReport(r: ProbeReport): string {
  const edits = pad([
    ['EDIT', 'GENERATION', 'OBSERVED', 'DIGEST', 'CM-RV', 'TO-CONFIGMAP', 'TO-ECHO', 'TO-READY', 'ROUTERS', 'ERROR'],
    ...r.edits.map((e) => [
      String(e.edit),
      String(e.generation),
      e.observedGeneration === null ? '-' : String(e.observedGeneration),
      short(e.compiledDigest),
      e.configMapResourceVersion ?? '-',
      ms(e.toConfigMapMs),
      ms(e.toEchoMs),
      ms(e.toReadyMs),
      String(e.routers),
      e.error ?? '',
    ]),
  ]);
  const s = r.summary;
  const summary = pad([
    ['PHASE', 'P50', 'P99', 'MAX', 'N'],
    ['edit→configmap', ms(s.configMap.p50), ms(s.configMap.p99), ms(s.configMap.max), String(s.configMap.count)],
    ['edit→echo', ms(s.echo.p50), ms(s.echo.p99), ms(s.echo.max), String(s.echo.count)],
    ['edit→ready', ms(s.ready.p50), ms(s.ready.p99), ms(s.ready.max), String(s.ready.count)],
  ]);
  const verdict = `${r.pass ? 'PASS' : 'FAIL'}: ${r.edits.length - r.breaches}/${r.edits.length} edits echoed by every router within the SLO of ${Math.round(r.sloMs)} ms (sandbox ${r.namespace}/${r.sandbox}, policy ${r.policy})\n`;
  return `${edits}\n${summary}\n${verdict}`;
}
