/** The report of a run: the Markdown tables on stdout and the results files under bench/results/. */
import os from 'node:os';
import { cpuLine, finishRun, fmt1, fmt2, fmtInt, mdEscape, mdRow } from '../../lib/dist/index.js';
import { CN_VERSION, KFC_VERSION, PEERS } from '../../watch-peers/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';
import type { Config } from './config.js';
import type { Raw } from './results.js';

/** The freshness summary of one peer in the results file. */
interface FreshnessSummary {
  trials: number;
  seenSecs: Array<number | null>;
  medianSecs: number | null;
  capSecs: number;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

/** What {@link report} prints and writes. */
export interface RunOutcome {
  cfg: Config;
  raw: Raw;
  failures: string[];
  /** Errors thrown inside peers (reported, not failures). */
  strays: string[];
  runtimeSec: number;
  loadStart: number[];
}

/** The freshness cell and results-file summary of peer `p`, from its trials. */
function freshnessOf(cfg: Config, raw: Raw, p: PeerKind): { fresh: string; summary?: FreshnessSummary } {
  const capS = `${fmt1(cfg.capSecs)} s`;
  const rs = raw.trials.flatMap((t) => {
    const r = t.results?.[p];
    return r ? [r] : [];
  });
  if (!rs.length) return { fresh: '–' };
  let fresh: string;
  const seen = rs.flatMap((r) => (r.seenMs !== null ? [r.seenMs / 1000] : []));
  const med = median(rs.map((r) => (r.seenMs === null ? Infinity : r.seenMs / 1000)));
  const tr = `${rs.length} trial${rs.length > 1 ? 's' : ''}`;
  if (Number.isFinite(med)) {
    const range = seen.length > 1 ? `, range ${fmt1(Math.min(...seen))}–${fmt1(Math.max(...seen))} s` : '';
    const miss = seen.length < rs.length ? `; not seen in ${rs.length - seen.length} of them` : '';
    fresh = `**${fmt1(med)} s** (median of ${tr}${range}${miss})`;
  } else {
    const waited = Math.min(...rs.map((r) => r.waitedMs / 1000));
    const notRerun = !cfg.rerunStuck && cfg.trials > rs.length ? '; not re-run after trial 1' : '';
    fresh = `**not seen within ${capS}** (waited ${fmt1(waited)} s; ${tr}${notRerun}${seen.length ? `; seen in ${seen.length}: ${seen.map(fmt1).join(', ')} s` : ''})`;
  }
  return {
    fresh,
    summary: {
      trials: rs.length,
      seenSecs: rs.map((r) => (r.seenMs === null ? null : r.seenMs / 1000)),
      medianSecs: Number.isFinite(med) ? med : null,
      capSecs: cfg.capSecs,
    },
  };
}

/** The per-trial table: what each peer did after the drop. */
function trialLines(raw: Raw): string[] {
  const lines = [
    '',
    '### Per trial: what each peer did after the drop',
    '',
    '| trial | peer | result | lifecycle after the fault (seconds from the edit) |',
    '|---|---|---|---|',
  ];
  for (const t of raw.trials) {
    for (const k of t.peers) {
      const r = t.results?.[k];
      if (!r) continue;
      const res = r.seenMs === null ? `not seen within ${fmt1(r.waitedMs / 1000)} s` : `${fmt2(r.seenMs / 1000)} s`;
      const ev = r.events.length
        ? r.events
            .slice(0, 6)
            .map((e) => `${e.atSec >= 0 ? '+' : ''}${fmt1(e.atSec)} s ${e.msg.slice(0, 110)}`)
            .join('; ') + (r.events.length > 6 ? `; … (${r.events.length} in all)` : '')
        : 'none: no error, no reconnect';
      lines.push(`| ${t.trial} | ${k} | ${res} | ${mdEscape(ev)} |`);
    }
    lines.push(
      `| ${t.trial} | (server) | fault ${fmt1((t.faultDelayMs ?? NaN) / 1000)} s after the sync edit (the last byte on every watch); froze ${t.frozenStreams ?? '?'} watch streams${t.blackholedConnections !== undefined ? `, black-holed ${t.blackholedConnections} connections` : ''} | client connections to the server: ${t.connectionsBefore ?? '?'} before the fault, ${t.connectionsAtEnd ?? '?'} at the end of the wait |`,
    );
  }
  return lines;
}

/** Print the report, write the results files and return the exit code (1 when anything failed). */
export function report({ cfg, raw, failures, strays, runtimeSec, loadStart }: RunOutcome): number {
  const capS = `${fmt1(cfg.capSecs)} s`;
  const summary: Partial<Record<PeerKind, FreshnessSummary>> = {};
  const rows: string[] = [];
  for (const p of cfg.peers) {
    const { fresh, summary: s } = freshnessOf(cfg, raw, p);
    if (s) summary[p] = s;
    const t = raw.throughput[p];
    const tp =
      p === 'kars-idle'
        ? 'same as kars'
        : t
          ? `${fmtInt(t.eventsPerSec)} (${fmtInt(t.received)}/${fmtInt(t.updatesSent)}; writer ${fmtInt(t.writerOpsPerSec)}/s; ${fmt1(t.cpuUsPerEvent)} µs CPU/event${t.cpuUsPerEventRounds && t.cpuUsPerEventRounds.length > 1 ? `, median of rounds ${t.cpuUsPerEventRounds.map(fmt1).join(' / ')}` : ''})`
          : '–';
    const m = raw.memory[p];
    const mem = p === 'kars-idle' ? 'same as kars' : m ? `${fmt1(m.heapMbPer10k)}` : '–';
    rows.push(mdRow([PEERS[p].label, fresh, PEERS[p].mechanism, tp, mem]));
  }
  const faultDesc =
    cfg.fault === 'blackhole'
      ? 'freezeWatches() plus iptables DROP of every connection open to the server at that moment (keepalive probes are lost too, as behind a load balancer that forgot the flow)'
      : "freezeWatches(): the server's fault relay stops forwarding every open watch connection in both directions, no FIN, no RST; the relay's kernel still ACKs, so TCP keepalive probes are answered";
  const lines = [
    `## Watch freshness after a silent drop`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · ${cfg.quick ? 'QUICK · ' : ''}server: ${cfg.server === 'kube' ? 'kube-apiserver (kube-envtest)' : 'kars apiserver'} · fault: ${cfg.fault} · cap ${capS} · ${cfg.trials} trial(s) · ${cfg.objects + 2} ConfigMaps watched · runtime ${fmt1(runtimeSec)} s · load avg ${fmt2(loadStart[0] ?? NaN)} at start, ${fmt2(os.loadavg()[0] ?? NaN)} at end`,
    ``,
    `| peer | edit seen after the silent drop | detection mechanism (anchors doc; verified in the installed code) | events/s one watcher received | heap MB per 10k cached objects |`,
    `|---|---|---|---|---|`,
    ...rows,
    ``,
    `Fault: ${faultDesc}. The edit is a merge PATCH over a new connection, sent right after the fault; the time is from sending it to the cache holding the new value. Server bookmarks every ${cfg.bookmarkSecs} s (only kars asks for them).`,
  ];
  if (Object.keys(raw.throughput).length) {
    lines.push(
      `events/s: ${fmtInt(cfg.updates)} PUTs at concurrency ${cfg.concurrency} from the benchmark process, the peer alone in a child process; received events ÷ (last receive − first send). It cannot exceed the writer's rate (server-bound, shown), so compare the µs of peer CPU per event too. It runs ${cfg.tputRounds} round(s), after one unmeasured pass of the updates (to warm the writer and the server), the peers' order rotated by one each round (the first peer of a round meets a colder writer, and each peer is first equally often over a multiple of the peer count); the µs per event is the median over the rounds.`,
    );
  }
  if (raw.memoryDataset) {
    lines.push(
      `heap: heapUsed after − before starting the peer, after global.gc(), fresh child per peer (warm-up on ${cfg.warmObjects} objects first); ${fmtInt(cfg.memObjects)} ConfigMaps of ~${fmtInt(raw.memoryDataset.listJsonBytesPerObject)} bytes of JSON each, scaled to 10k. RSS deltas are in the JSON.`,
    );
  }
  if (raw.trials.length) lines.push(...trialLines(raw));
  if (strays.length)
    lines.push(
      '',
      '**Errors thrown inside peers (not counted as benchmark failures)**',
      '',
      ...strays.slice(0, 10).map((s) => `- ${s.split('\n')[0]}`),
    );
  return finishRun('freshness', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: times are dominated by the detection mechanisms (seconds to minutes), not by CPU noise; events/s and heap vary by ~10–20% between runs.',
    config: cfg,
    runtimeSec,
    machine: { loadAvgStart: loadStart, loadAvgEnd: os.loadavg() },
    json: {
      versions: { node: process.version, clientNode: CN_VERSION, kfc: KFC_VERSION },
      strays,
      peers: Object.fromEntries(
        cfg.peers.map((p) => [
          p,
          { ...PEERS[p], freshness: summary[p] ?? null, throughput: raw.throughput[p] ?? null, memory: raw.memory[p] ?? null },
        ]),
      ),
      raw,
    },
    markdown: true,
  });
}
