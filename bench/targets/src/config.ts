// Configuration: the targets (from --targets or BENCH_TARGETS) and the BENCH_* settings.

import { pinFor, readPins } from '@kars/kube-envtest';
import type { KubePin } from '@kars/kube-envtest';
import { envInt } from '../../lib/dist/index.js';
import { ALL_PEERS, PEERS } from '../../watch-peers/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';

/** One server to run against: kars apiserver, or a pinned kube-apiserver. */
export type Target = { id: string; kind: 'kars' } | { id: string; kind: 'kube'; pin: KubePin };

/** What a run does; written as is to the results file and the first log line. */
export interface Config {
  targetSpec: string;
  edits: number;
  warmupEdits: number;
  editGapMs: number;
  editTimeoutMs: number;
  trials: number;
  capSecs: number;
  objects: number;
  faultDelayMaxSecs: number;
  rerunStuck: boolean;
  etcdFsync: boolean;
  peers: PeerKind[];
}

/**
 * The targets to run, from `--targets` or BENCH_TARGETS (default `kars,kube`): `kars` is kars
 * apiserver; `kube` the newest pinned kube-apiserver, `kube-1.34` (any pinned minor or version) that
 * one, `kube-all` every pinned one. Returns `[{ id, kind: 'kars' } | { id, kind: 'kube', pin }]`.
 */
export function parseTargets(spec: string): Target[] {
  const pins = readPins().kubernetes;
  const out: Target[] = [];
  const add = (t: Target): void => {
    if (!out.some((o) => o.id === t.id)) out.push(t);
  };
  for (const raw of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (raw === 'kars') add({ id: 'kars', kind: 'kars' });
    else if (raw === 'kube-all') for (const pin of pins) add({ id: `kube-${pin.minor}`, kind: 'kube', pin });
    else if (raw === 'kube' || raw.startsWith('kube-')) {
      const pin = pinFor(raw === 'kube' ? undefined : raw.slice(5));
      if (!pin) throw new Error(`target "${raw}": not a pinned Kubernetes version (pinned: ${pins.map((p) => p.minor).join(', ')})`);
      add({ id: `kube-${pin.minor}`, kind: 'kube', pin });
    } else throw new Error(`unknown target "${raw}" (use kars, kube, kube-<minor> such as kube-${pins[0]?.minor}, or kube-all)`);
  }
  if (out.length === 0) throw new Error('no target given');
  return out;
}

const isPeerKind = (p: string): p is PeerKind => Object.hasOwn(PEERS, p);

/** The configuration from the command line and BENCH_*; throws on a bad value. */
export function readConfig(): Config {
  const argTargets = ((): string | undefined => {
    const i = process.argv.indexOf('--targets');
    if (i >= 0) return process.argv[i + 1] ?? '';
    return process.argv.find((a) => a.startsWith('--targets='))?.slice('--targets='.length);
  })();
  const peers: PeerKind[] = [];
  for (const p of (process.env['BENCH_PEERS'] ?? 'kars,client-node,kfc')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (!isPeerKind(p)) throw new Error(`BENCH_PEERS: unknown peer "${p}" (use ${ALL_PEERS.join(', ')})`);
    peers.push(p);
  }
  const cap = Number(process.env['BENCH_FRESHNESS_CAP_SECS'] ?? 60);
  if (!Number.isFinite(cap) || cap < 1) throw new Error(`BENCH_FRESHNESS_CAP_SECS must be a number >= 1`);
  const delay = Number(process.env['BENCH_FAULT_DELAY_MAX_SECS'] ?? 10);
  if (!Number.isFinite(delay) || delay < 0) throw new Error(`BENCH_FAULT_DELAY_MAX_SECS must be a number >= 0`);
  return {
    targetSpec: argTargets ?? process.env['BENCH_TARGETS'] ?? 'kars,kube',
    edits: envInt('BENCH_EDITS', 40, { min: 0 }),
    warmupEdits: envInt('BENCH_WARMUP_EDITS', 5, { min: 0 }),
    editGapMs: envInt('BENCH_EDIT_GAP_MS', 100, { min: 0 }),
    editTimeoutMs: envInt('BENCH_EDIT_TIMEOUT_SECS', 30) * 1000,
    trials: envInt('BENCH_TRIALS', 3),
    capSecs: cap,
    objects: envInt('BENCH_OBJECTS', 50),
    faultDelayMaxSecs: delay,
    rerunStuck: process.env['BENCH_RERUN_STUCK'] === '1',
    etcdFsync: process.env['BENCH_ETCD_FSYNC'] !== '0',
    peers,
  };
}
