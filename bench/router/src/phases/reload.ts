/** How fast a policy change is enforced: change the cap back and forth, probe until the router's decision follows. */
import { sleep } from '../../../lib/dist/index.js';
import { CAP_HIGH, CAP_LOW, PROBE_TOKENS, type Config } from '../config.js';
import type { Probe, Prober } from '../prober.js';
import { stats, type Stats } from '../stats.js';

/** What {@link reloadPhase} needs. */
export interface ReloadOptions {
  cfg: Config;
  prober: Prober;
  /** The cap in force before the first change. */
  currentCap: number;
  /** Make the change; resolves with performance.now() when it took effect from the writer's side (`t`), and when it was sent (`tSend`). */
  change: (cap: number) => Promise<{ t: number; tSend?: number }>;
  failures: string[];
  label: string;
  checkChildren: () => void;
}

/** What {@link reloadPhase} measured (ms). */
export interface ReloadResult {
  stats: Stats;
  statsFromSend: Stats;
  samplesMs: number[];
  samplesFromSendMs: number[];
  missed: number;
  flipBacks: number;
  probes: number;
  probeRtt: Stats;
  /** The PUTs' own latency (API phase only). */
  putMs?: Stats;
}

/**
 * Change the policy `cfg.changes` times, alternating the per-request cap between CAP_LOW and
 * CAP_HIGH, and time each change until a probe (max_tokens PROBE_TOKENS) gets the new decision.
 * `change(cap)` makes the change and returns `{ t, tSend? }` (performance.now() when it took effect
 * from the writer's point of view, and when it was sent).
 */
export async function reloadPhase({
  cfg,
  prober,
  currentCap,
  change,
  failures,
  label,
  checkChildren,
}: ReloadOptions): Promise<ReloadResult> {
  const lat: number[] = [];
  const latFromSend: number[] = [];
  let flipBacks = 0;
  let missed = 0;
  let cap = currentCap;
  prober.start();
  // Warm-up: wait until probes see the current decision.
  const want = (c: number): number => (PROBE_TOKENS > c ? 429 : 200);
  const ok0 = await prober.waitFor((r) => r.status === want(cap), cfg.changeTimeoutMs);
  if (!ok0) {
    prober.stop();
    throw new Error(`${label}: probes never saw the initial decision (${want(cap)})`);
  }
  await sleep(100);
  for (let i = 0; i < cfg.changes; i++) {
    checkChildren();
    cap = cap === CAP_LOW ? CAP_HIGH : CAP_LOW;
    const expect = want(cap);
    const idx0 = prober.results.length;
    const { t, tSend } = await change(cap);
    // A probe answered before the change was made cannot carry the new decision. With the API the
    // router may enforce before the PUT response is read, so look at what arrived meanwhile too.
    const pred = (x: Probe): boolean => x.status === expect && x.recvT > (tSend ?? t);
    const r = prober.results.slice(idx0).find(pred) ?? (await prober.waitFor(pred, cfg.changeTimeoutMs));
    if (!r) {
      missed++;
      failures.push(`${label}: change ${i + 1} (cap → ${cap}) not enforced within ${cfg.changeTimeoutMs} ms`);
      continue;
    }
    lat.push(r.recvT - t);
    if (tSend !== undefined) latFromSend.push(r.recvT - tSend);
    const fromIdx = prober.results.indexOf(r);
    await sleep(50 + Math.random() * 200);
    // Every probe answered after the first new decision (until now) must carry the new decision.
    for (const x of prober.results.slice(fromIdx + 1)) if (x.status !== expect) flipBacks++;
  }
  prober.stop();
  const bad = prober.results.filter((x) => x.status !== 200 && x.status !== 429).length;
  if (bad > 0) failures.push(`${label}: ${bad} probes answered neither 200 nor 429`);
  if (prober.errors.length > 0) failures.push(`${label}: ${prober.errors.length} probe errors (${prober.errors.slice(0, 3).join('; ')})`);
  if (flipBacks > 0) failures.push(`${label}: ${flipBacks} probes saw the old decision after the new one had been enforced`);
  const rtt = stats(prober.results.map((x) => x.recvT - x.sendT));
  return {
    stats: stats(lat),
    statsFromSend: stats(latFromSend),
    samplesMs: lat,
    samplesFromSendMs: latFromSend,
    missed,
    flipBacks,
    probes: prober.results.length,
    probeRtt: rtt,
  };
}
