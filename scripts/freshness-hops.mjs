#!/usr/bin/env node
// Per-hop timeline of freshness probe edits, from KARS_TRACE_HOPS traces.
//
// Run each process with KARS_TRACE_HOPS=<name> (controller: ctl, router: rtr, probe: probe), send
// their stderr to files, then:   node scripts/freshness-hops.mjs ctl.err rtr.err probe.err [-v]
// It merges the `HOP {...}` lines by time, cuts the timeline at each probe edit, and prints, per
// milestone of edit → controller watch → ConfigMap write → router watch → load → echo Lease write →
// probe observes, the time after the edit started (min / median / p90 / max) and the median of each
// hop. -v prints every edit's merged timeline.
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const verbose = args.includes('-v');
const events = [];
for (const f of args.filter((a) => a !== '-v')) {
  for (const line of readFileSync(f, 'utf8').split('\n')) {
    if (!line.startsWith('HOP ')) continue;
    try {
      events.push(JSON.parse(line.slice(4)));
    } catch {
      // a line cut by a crash
    }
  }
}
events.sort((a, b) => a.t - b.t);

// [name, match, the milestone this hop is measured from]
const MILESTONES = [
  ['edit acknowledged', (e) => e.p === 'probe' && e.hop === 'probe.ack', null],
  ['controller sees the edit', (e) => e.p === 'ctl' && e.hop === 'cli.watch' && /policies$/.test(e.r), null],
  [
    'controller writes ConfigMap',
    (e) => e.p === 'ctl' && e.hop === 'cli.req' && /^apply configmaps /.test(e.what),
    'controller sees the edit',
  ],
  [
    'ConfigMap write answered',
    (e) => e.p === 'ctl' && e.hop === 'cli.res' && /^apply configmaps /.test(e.what),
    'controller writes ConfigMap',
  ],
  ['probe sees ConfigMap', (e) => e.hop === 'probe.cm', 'ConfigMap write answered'],
  [
    'router sees ConfigMap',
    (e) => e.p === 'rtr' && e.hop === 'cli.watch' && e.r === 'configmaps' && e.name !== 'kars-heartbeat',
    'ConfigMap write answered',
  ],
  ['router loaded', (e) => e.p === 'rtr' && e.hop === 'router.loaded', 'router sees ConfigMap'],
  ['router writes echo Lease', (e) => e.p === 'rtr' && e.hop === 'cli.req' && /^apply leases /.test(e.what), 'router loaded'],
  ['echo write answered', (e) => e.p === 'rtr' && e.hop === 'cli.res' && /^apply leases /.test(e.what), 'router writes echo Lease'],
  ['probe sees echo', (e) => e.hop === 'probe.echo', 'echo write answered'],
];

const starts = events.flatMap((e, i) => (e.hop === 'probe.edit' ? [i] : []));
const at = new Map(MILESTONES.map(([name]) => [name, []]));
starts.forEach((s, k) => {
  const t0 = events[s].t;
  const slice = events.slice(s, starts[k + 1] ?? events.length);
  if (verbose) console.log(`--- edit ${events[s].n}`);
  let after = 0;
  for (const [name, match] of MILESTONES) {
    // Router milestones follow the router's view of the ConfigMap; the others are searched from the edit.
    const from = name.startsWith('router ') || name.startsWith('echo ') ? after : 0;
    const hit = slice.find((e) => e.t - t0 >= from && match(e));
    at.get(name).push(hit ? hit.t - t0 : null);
    if (name === 'router sees ConfigMap' && hit) after = hit.t - t0;
  }
  if (verbose)
    for (const e of slice) {
      const { p, hop, t, ...rest } = e;
      console.log(`${(t - t0).toFixed(1).padStart(8)} ${p.padEnd(5)} ${hop.padEnd(16)} ${JSON.stringify(rest).slice(0, 120)}`);
      if (hop === 'probe.echo') break;
    }
});

const q = (xs, p) => xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(p * xs.length) - 1))];
const fmt = (v) => (v === undefined ? '-' : v.toFixed(1)).padStart(8);
console.log(`${starts.length} edits; ms after the edit started`);
console.log(
  `${'milestone'.padEnd(30)}${'min'.padStart(8)}${'p50'.padStart(8)}${'p90'.padStart(8)}${'max'.padStart(8)}${'hop p50'.padStart(9)}`,
);
for (const [name, , from] of MILESTONES) {
  const xs = at.get(name);
  const vals = xs.filter((v) => v !== null).sort((a, b) => a - b);
  const prev = from ? at.get(from) : undefined;
  let hop;
  if (prev) {
    const d = xs.flatMap((v, i) => (v !== null && prev[i] !== null ? [v - prev[i]] : [])).sort((a, b) => a - b);
    hop = d.length ? q(d, 0.5) : undefined;
  }
  console.log(`${name.padEnd(30)}${fmt(vals[0])}${fmt(q(vals, 0.5))}${fmt(q(vals, 0.9))}${fmt(vals.at(-1))} ${fmt(hop)}`);
}
