/** Aggregate V8 `.cpuprofile` samples into inclusive time per request stage. */
import { SPECIAL, STARTUP, ruleStage } from './rules.js';
import type { CallFrame } from './rules.js';

/** A node of a V8 `.cpuprofile`. */
export interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

/** A V8 `.cpuprofile` (the fields read here). */
export interface CpuProfile {
  nodes: ProfileNode[];
  /** Node id of each sample. */
  samples: number[];
  /** Microseconds before each sample. */
  timeDeltas: number[];
}

/** What the profiles add up to, and how to read them. */
export interface Accumulator {
  /** Microseconds by stage. */
  stages: Map<string, number>;
  /** Microseconds of self time by `<stage>\0<function> <url>:<line>`. */
  self: Map<string, number>;
  /** Microseconds by call path (innermost 6 frames) of `pathStage`. */
  paths: Map<string, number>;
  pathStage: string | undefined;
  /** Every sample, not only the window from the first to the last request. */
  all: boolean;
  windowUs: number;
  skipMs: number;
  takeMs: number;
}

/** A script URL without the file:// prefix up to `packages/` or `node_modules/`. */
export function shortUrl(u: string): string {
  return u.replace(/^file:\/\/.*?\/(packages|node_modules)\//, '$1/');
}

/** Aggregate one profile into `acc`. */
export function addProfile(prof: CpuProfile, acc: Accumulator): void {
  const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
  const node = (id: number): ProfileNode => {
    const n = nodes.get(id);
    if (n === undefined) throw new Error(`profile node ${id} is missing`);
    return n;
  };
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOf = new Map<number, string>();
  const classify = (id: number): string => {
    const hit = stageOf.get(id);
    if (hit) return hit;
    const n = node(id);
    let stage = Object.hasOwn(SPECIAL, n.callFrame.functionName) ? SPECIAL[n.callFrame.functionName] : undefined;
    if (!stage) {
      const chain: CallFrame[] = [];
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) chain.push(node(cur).callFrame);
      if (chain.some((f) => STARTUP.test(f.url))) stage = 'startup (module load)';
      else {
        for (const f of chain) {
          stage = ruleStage(f);
          if (stage) break;
        }
        if (!stage) stage = chain.some((f) => /\/kars|packages\//.test(f.url)) ? 'other kars' : 'other node (timers, microtasks, native)';
      }
    }
    stageOf.set(id, stage);
    return stage;
  };
  const { samples, timeDeltas } = prof;
  // The window: from the first to the last sample with the HTTP handler on its stack (what comes
  // before is startup: key generation, bootstrap; after is idle until SIGTERM). --all: everything.
  const inHandler = new Map<number, boolean>();
  const handles = (id: number): boolean => {
    let v = inHandler.get(id);
    if (v === undefined) {
      v = false;
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur))
        if (/apiserver\/dist\/http\/handler\.js/.test(node(cur).callFrame.url)) v = true;
      inHandler.set(id, v);
    }
    return v;
  };
  const sample = (i: number): number => samples[i] as number;
  let first = 0;
  let last = samples.length - 1;
  if (!acc.all) {
    while (first < samples.length && !handles(sample(first))) first++;
    while (last > first && !handles(sample(last))) last--;
  }
  if (acc.skipMs > 0) {
    for (let t = 0; first < last && t < acc.skipMs * 1000; first++) t += timeDeltas[first + 1] ?? 0;
  }
  if (acc.takeMs > 0) {
    let t = 0;
    let end = first;
    for (; end < last && t < acc.takeMs * 1000; end++) t += timeDeltas[end + 1] ?? 0;
    last = end;
  }
  let windowUs = 0;
  for (let i = first; i <= last; i++) windowUs += timeDeltas[i + 1] ?? 0;
  acc.windowUs += windowUs;
  for (let i = first; i <= last; i++) {
    // timeDeltas[i] is the gap before sample i; the sample stands for the gap after it.
    const us = timeDeltas[i + 1] ?? timeDeltas[i] ?? 0;
    const id = sample(i);
    const stage = classify(id);
    acc.stages.set(stage, (acc.stages.get(stage) ?? 0) + us);
    const f = node(id).callFrame;
    const key = `${stage}\u0000${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}`;
    acc.self.set(key, (acc.self.get(key) ?? 0) + us);
    if (acc.pathStage && stage === acc.pathStage) {
      const path: string[] = [];
      for (let cur: number | undefined = id; cur !== undefined && path.length < 6; cur = parent.get(cur)) {
        const cf = node(cur).callFrame;
        path.push(`${cf.functionName || '(anon)'}@${shortUrl(cf.url).split('/').pop()}`);
      }
      const p = path.join(' < ');
      acc.paths.set(p, (acc.paths.get(p) ?? 0) + us);
    }
  }
}
