import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { parse as yamlParse } from 'yaml';
import type { Transcript } from './types.js';

/** One reviewed difference: a scenario where kars apiserver may answer otherwise, and why. */
export interface KnownDifference {
  scenario: string;
  kars: string;
  kube: string;
  why: string;
  /** The Kubernetes minors it applies to (`"1.34"`); every pinned one when absent. */
  versions?: string[];
  /**
   * kube-apiserver's own answer varies from run to run (Go map order, cache timing): the scenario may
   * differ or not, so it is never reported as stale. Its why must say what varies.
   */
  unstable?: boolean;
}

/**
 * Read and check the known-differences file. An entry names one `scenario`, or a group of
 * `scenarios` with one cause; each says what kars and kube-apiserver do and why kars may differ.
 * Groups are expanded: the result has one entry per scenario, and a scenario may be listed once.
 */
export function readKnownDifferences(file: string): KnownDifference[] {
  type Entry = Omit<KnownDifference, 'scenario'> & { scenario?: string; scenarios?: string[] };
  const doc = yamlParse(readFileSync(file, 'utf8')) as { differences?: Entry[] } | null;
  const list: KnownDifference[] = [];
  const seen = new Set<string>();
  for (const d of doc?.differences ?? []) {
    for (const k of ['kars', 'kube', 'why'] as const) {
      if (typeof d[k] !== 'string' || d[k].trim() === '') throw new Error(`${file}: an entry lacks "${k}": ${JSON.stringify(d)}`);
    }
    const ids = d.scenarios ?? (d.scenario !== undefined ? [d.scenario] : []);
    if (ids.length === 0 || !ids.every((id) => typeof id === 'string' && id !== ''))
      throw new Error(`${file}: an entry names no scenario: ${JSON.stringify(d)}`);
    for (const id of ids) {
      if (seen.has(id)) throw new Error(`${file}: ${id} is listed twice`);
      seen.add(id);
      const e: KnownDifference = { scenario: id, kars: d.kars, kube: d.kube, why: d.why };
      if (d.versions) e.versions = d.versions;
      if (d.unstable === true) e.unstable = true;
      list.push(e);
    }
  }
  return list;
}

/** Where two normalised values differ: up to `max` JSON paths, each with both values (shortened). */
export function differences(a: unknown, b: unknown, max = 8, path = '$'): string[] {
  if (isDeepStrictEqual(a, b)) return [];
  const short = (v: unknown): string => {
    const s = JSON.stringify(v) ?? 'undefined';
    return s.length > 300 ? `${s.slice(0, 300)}…` : s;
  };
  const bothObjects = typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && Array.isArray(a) === Array.isArray(b);
  if (!bothObjects) return [`${path}: kars ${short(a)} | kube ${short(b)}`];
  const out: string[] = [];
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  for (const k of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
    if (out.length >= max) break;
    out.push(...differences(ao[k], bo[k], max - out.length, Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`));
  }
  return out;
}

/** What comparing kars's transcripts with kube-apiserver's found. */
export interface Verdict {
  total: number;
  identical: number;
  /** scenario id → where the answers differ. */
  differing: Map<string, string[]>;
  /** Differing and not in the known-differences file: the suite fails on these. */
  unlisted: string[];
  /** Listed but answering identically now: the suite fails on these too (remove the entry). */
  stale: string[];
  /** Scenarios one side has and the other lacks (a stale recording). */
  missing: string[];
}

/** Compare scenario by scenario, and hold the outcome against the reviewed differences for `minor`. */
export function judge(kars: Transcript[], kube: Transcript[], known: KnownDifference[], minor: string): Verdict {
  const kubeById = new Map(kube.map((t) => [t.id, t]));
  const listed = new Set(known.filter((d) => !d.versions || d.versions.includes(minor)).map((d) => d.scenario));
  const differing = new Map<string, string[]>();
  const missing: string[] = [];
  let identical = 0;
  for (const t of kars) {
    const k = kubeById.get(t.id);
    if (!k) {
      missing.push(t.id);
      continue;
    }
    const d = differences(t.results, k.results);
    if (d.length === 0) identical++;
    else differing.set(t.id, d);
  }
  for (const k of kube) if (!kars.some((t) => t.id === k.id)) missing.push(k.id);
  const unlisted = [...differing.keys()].filter((id) => !listed.has(id));
  const unstable = new Set(known.filter((d) => d.unstable === true).map((d) => d.scenario));
  const stale = [...listed].filter((id) => !unstable.has(id) && kars.some((t) => t.id === id) && !differing.has(id));
  return { total: kars.length, identical, differing, unlisted, stale, missing };
}

/** A verdict as text: the share identical, then each unlisted and stale scenario with its differences. */
export function describeVerdict(v: Verdict, against: string): string {
  const lines = [
    `${v.identical}/${v.total} scenarios identical to ${against} (${((100 * v.identical) / Math.max(1, v.total)).toFixed(1)}%)`,
  ];
  for (const id of v.unlisted) lines.push(`unlisted difference ${id}:\n    ${(v.differing.get(id) ?? []).join('\n    ')}`);
  for (const id of v.stale) lines.push(`listed in known-differences but identical now (remove the entry): ${id}`);
  for (const id of v.missing) lines.push(`scenario on one side only (re-record with npm run diff:record): ${id}`);
  return lines.join('\n');
}
