/** Phase 4a: a ConfigMap volume swap (the `..data` symlink) → enforced by the router on `--policy-dir`. */
import { fmt1, fmt2, log } from '../../../lib/dist/index.js';
import { chatBody } from '../apis.js';
import { CAP_HIGH, CAP_LOW, PROBE_TOKENS, REALISTIC_CAP } from '../config.js';
import type { KubeletMount } from '../mount.js';
import { Prober } from '../prober.js';
import { need, type Run } from '../run.js';
import { reloadPhase } from './reload.js';

/** Swap the mounted policy `cfg.changes` times and time each swap until the router enforces it; one control-plane row. */
export async function dirPhase(run: Run, mount: KubeletMount): Promise<void> {
  const { cfg } = run;
  const t0 = performance.now();
  run.checkChildren();
  log(`dir: ${cfg.changes} ..data symlink swaps, probe every ${cfg.probeMs} ms`);
  const dir = await reloadPhase({
    cfg,
    prober: new Prober(need(run.procs.router, 'the router').url, chatBody(PROBE_TOKENS), cfg.probeMs),
    currentCap: REALISTIC_CAP,
    change: (cap) => Promise.resolve({ t: mount.write(run.compiled(cap).body) }),
    failures: run.failures,
    label: 'dir',
    checkChildren: run.checkChildren,
  });
  run.raw.dir = dir;
  const s = dir.stats;
  run.ctlRows.push({
    metric: '--policy-dir: ..data swap → enforced p50 / p99',
    display: `${fmt1(s.p50)} / ${fmt1(s.p99)} ms`,
    goal: '–',
    notes: `${s.n} of ${cfg.changes} changes (per-request cap ${CAP_HIGH} ↔ ${CAP_LOW}, random 50–250 ms apart): from the atomic rename of ..data until the first probe answered with the new decision; max ${fmt1(s.max)} ms, min ${fmt1(s.min)} ms; probe every ${cfg.probeMs} ms (resolution ≈ interval + probe RTT ${fmt2(dir.probeRtt.p50)} ms); ${dir.samplesMs.filter((x) => x < 250).length} within 250 ms (fs.watch), ${dir.samplesMs.filter((x) => x >= 250).length} later (the 500 ms mtime poll); ${dir.flipBacks} probes saw the old decision after the new one`,
  });
  run.phaseTimes.dir = (performance.now() - t0) / 1000;
}
