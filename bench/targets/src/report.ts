// The report: edit latency per target, the silent-drop table per client, and every trial.

import os from 'node:os';
import { cpuLine, fmt1, fmt2, mdRow, percentile } from '../../lib/dist/index.js';
import { PEERS } from '../../watch-peers/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';
import type { Config, Target } from './config.js';
import type { Trial } from './drop-phase.js';
import type { EditResult } from './edit-phase.js';
import type { Server } from './servers.js';

/** What one target's run produced (fields set as the run goes). */
export interface TargetResult {
  target: Target;
  srv?: Server;
  startSec?: number;
  loadStart?: number;
  edits?: EditResult | undefined;
  drops?: Trial[] | undefined;
  loadEnd?: number;
}

/** A figure, and whether it is only a lower bound (an edit not seen within the cap). */
interface Cell {
  value: number;
  bound?: boolean;
}

function stats(values: readonly number[]): { n: number; p50: number; p99: number } {
  const s = Float64Array.from(values.filter((v) => Number.isFinite(v))).sort();
  return { n: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99) };
}

/** `a ÷ b` as `1.23×`, with `>`/`<` when one side is a lower bound (not seen within the cap). */
function ratio(a: Cell | undefined, b: Cell | undefined): string {
  if (!a || !b || !Number.isFinite(a.value) || !Number.isFinite(b.value) || b.value <= 0) return '–';
  if (a.bound && b.bound) return '–';
  const r = a.value / b.value;
  const txt = `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`;
  return a.bound ? `> ${txt}` : b.bound ? `< ${txt}` : txt;
}

/** Median and p99 (nearest rank) of drop trials; an unseen edit counts as the time waited, a lower bound. */
function dropStats(trials: readonly Trial[], peer: PeerKind): { n: number; seen: number; p50: Cell; p99: Cell } | undefined {
  const rs = trials.flatMap((t) => {
    const r = t.results[peer];
    return r ? [{ ...r, waitedMs: t.waitedMs ?? NaN }] : [];
  });
  if (!rs.length) return undefined;
  const vals = rs.map((r) => ({ v: r.seenMs === null ? Infinity : r.seenMs / 1000, waited: r.waitedMs / 1000 })).sort((a, b) => a.v - b.v);
  const pick = (q: number): { v: number; waited: number } =>
    vals[Math.min(vals.length - 1, Math.max(0, Math.ceil(q * vals.length) - 1))] ?? { v: NaN, waited: NaN };
  const cell = (x: { v: number; waited: number }): Cell =>
    Number.isFinite(x.v) ? { value: x.v, bound: false } : { value: x.waited, bound: true };
  return { n: rs.length, seen: rs.filter((r) => r.seenMs !== null).length, p50: cell(pick(0.5)), p99: cell(pick(0.99)) };
}

const fmtCell = (c: Cell | undefined): string =>
  c === undefined ? '–' : c.bound ? `not seen (> ${fmt1(c.value)} s)` : `${fmt1(c.value)} s`;

/** The report's Markdown lines. */
export function report(
  cfg: Config,
  results: readonly TargetResult[],
  skipped: ReadonlyArray<{ id: string; reason: string }>,
  meta: { loadStart: number[]; runtimeSec: number },
): string[] {
  const ran = results.filter((r): r is TargetResult & { srv: Server } => r.srv !== undefined);
  const base = ran.find((r) => r.target.kind === 'kars');
  const others = ran.filter((r) => r !== base);
  const lines = [
    '## kars apiserver and kube-apiserver side by side',
    '',
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load avg ${fmt2(meta.loadStart[0] ?? NaN)} at start, ${fmt2(os.loadavg()[0] ?? NaN)} at end · runtime ${fmt1(meta.runtimeSec)} s`,
    '',
    `Targets, one after the other: ${ran.length ? ran.map((r) => `**${r.srv.label}** (${r.srv.storage}; load avg ${fmt1(r.loadStart ?? NaN)} → ${fmt1(r.loadEnd ?? NaN)})`).join(', ') : 'none ran'}.`,
    ...skipped.map((s) => `\n**${s.id} skipped**: ${s.reason}. Only the other targets' columns are shown.`),
    '',
    '### Edit latency (real `kars controller`, `kars router` and `kars stub openai` as processes)',
    '',
  ];
  const head = [
    'metric',
    ...ran.map((r) => `${r.srv.label} p50 / p99`),
    ...(base ? others.map((r) => `${r.target.id} ÷ kars p50 / p99`) : []),
  ];
  lines.push(mdRow(head), `|${head.map(() => '---').join('|')}|`);
  const metrics: Array<[string, 'toCm' | 'toEcho' | 'toReady' | 'patchMs']> = [
    ['edit → ConfigMap', 'toCm'],
    ['edit → router echo', 'toEcho'],
    ['edit → Ready', 'toReady'],
    ['(the PATCH itself)', 'patchMs'],
  ];
  for (const [label, key] of metrics) {
    const st = ran.map((r) => (r.edits ? stats(r.edits[key]) : undefined));
    const cells = st.map((s) => (s && s.n ? `${fmt1(s.p50)} / ${fmt1(s.p99)} ms (n=${s.n})` : '–'));
    const bs = base ? st[ran.indexOf(base)] : undefined;
    const ratios = base
      ? others.map((r) => {
          const s = st[ran.indexOf(r)];
          if (!s?.n || !bs?.n) return '–';
          return `${ratio({ value: s.p50 }, { value: bs.p50 })} / ${ratio({ value: s.p99 }, { value: bs.p99 })}`;
        })
      : [];
    lines.push(mdRow([label, ...cells, ...ratios]));
  }
  lines.push(
    '',
    `Each edit is a merge PATCH of spec.tokenBudget.dailyTokens (${cfg.warmupEdits} unmeasured first, then ${cfg.edits} measured, sequential, ${cfg.editGapMs} ms apart); the times run from just before the PATCH until the bench's own watches see: the compiled ConfigMap holding the new value; the router's echo Lease carrying that ConfigMap's digest; the policy Ready at its generation with loadedDigest = compiledDigest. One sandbox, one router. p99 is the nearest rank: with n ≤ 100 it is the largest sample.`,
    '',
    `### A silent drop: ${cfg.peers.length} watch clients, each with its default / recommended settings`,
    '',
  );
  const dhead = [
    'watch client',
    ...ran.map((r) => `${r.srv.label} median / p99`),
    ...(base ? others.map((r) => `${r.target.id} ÷ kars (median)`) : []),
    ...ran.map((r) => `÷ kars Reflector on ${r.target.id} (median)`),
  ];
  lines.push(mdRow(dhead), `|${dhead.map(() => '---').join('|')}|`);
  for (const p of cfg.peers) {
    const ds = ran.map((r) => dropStats(r.drops ?? [], p));
    const cells = ds.map((d) => (d ? `${fmtCell(d.p50)} / ${fmtCell(d.p99)} (n=${d.n}${d.seen < d.n ? `, seen in ${d.seen}` : ''})` : '–'));
    const bd = base ? ds[ran.indexOf(base)] : undefined;
    const tRatios = base ? others.map((r) => ratio(ds[ran.indexOf(r)]?.p50, bd?.p50)) : [];
    const pRatios = ran.map((r, i) => (p === 'kars' ? '1×' : ratio(ds[i]?.p50, dropStats(r.drops ?? [], 'kars')?.p50)));
    lines.push(mdRow([PEERS[p].label, ...cells, ...tRatios, ...pRatios]));
  }
  lines.push(
    '',
    `The drop: every client watches ${cfg.objects + 2} ConfigMaps through a FaultRelay (@kars/kube-core) in front of the server, its kubeconfig pointed at the relay (TLS passes through; the server's CA still verifies 127.0.0.1). Once all have listed and seen a sync edit, a random 0–${cfg.faultDelayMaxSecs} s later the relay freezes every connection in both directions (no FIN, no RST; its kernel still ACKs, so TCP keepalive never fires), and a merge PATCH of \`target\` goes straight to the server. The time runs from that PATCH to the client's cache holding the new value; cap ${fmt1(cfg.capSecs)} s ("not seen" counts as more than the time waited). ${cfg.trials} trial(s)${cfg.rerunStuck ? '' : '; a client that missed the edit in trial 1 is not re-run (each such trial costs the cap)'}.`,
    '',
    '### Per trial',
    '',
    '| target | trial | client | result | what it did after the freeze (seconds from the edit) |',
    '|---|---|---|---|---|',
  );
  for (const r of ran)
    for (const t of r.drops ?? [])
      for (const [k, x] of Object.entries(t.results))
        lines.push(
          mdRow([
            r.target.id,
            String(t.trial),
            k,
            x.seenMs === null ? `not seen within ${fmt1((t.waitedMs ?? NaN) / 1000)} s` : `${fmt2(x.seenMs / 1000)} s`,
            x.events.length
              ? x.events.slice(0, 4).join('; ') + (x.events.length > 4 ? `; … (${x.events.length})` : '')
              : 'nothing: no error, no reconnect',
          ]),
        );
  return lines;
}
