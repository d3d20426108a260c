/**
 * The differential suite from the command line (issue 19):
 *   node packages/kube-envtest/dist/differential/cli.js record [--version 1.34]   (npm run diff:record)
 *   node packages/kube-envtest/dist/differential/cli.js compare [--version 1.34] [--live] [--out FILE]
 * `record` runs every scenario against a fresh kube-apiserver of each pinned version whose binaries
 * are built and writes fixtures/differential/kube-<version>.json. `compare` runs kars apiserver and
 * compares it with the recording (or, with --live, a fresh kube-apiserver), printing the share of
 * identical scenarios and every difference (all of them, listed or not, to --out as JSON).
 */
import { writeFileSync } from 'node:fs';
import { findKubeBinaries } from '../binaries.js';
import { startControlPlane } from '../control-plane.js';
import { readPins } from '../versions.js';
import { closeAgents } from './client.js';
import { describeVerdict, judge, readKnownDifferences } from './compare.js';
import { allScenarios } from './scenarios.js';
import { KNOWN_DIFFERENCES_FILE, SUITE_CONTROLLERS, readRecording, runSuite, writeRecording } from './suite.js';
import { kubeTarget, startKarsTarget } from './targets.js';
import type { Transcript } from './types.js';

const args = process.argv.slice(2);
const cmd = args[0];
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const only = opt('--version');
const pins = readPins().kubernetes.filter((p) => !only || p.minor === only);

async function kubeAnswers(minor: string): Promise<Transcript[]> {
  const found = findKubeBinaries(minor);
  if (!found.binaries) throw new Error(found.reason);
  const cp = await startControlPlane({ binaries: found.binaries, controllers: SUITE_CONTROLLERS });
  try {
    return await runSuite(kubeTarget(cp), allScenarios());
  } finally {
    await cp.stop();
  }
}

async function main(): Promise<void> {
  if (cmd === 'record') {
    let recorded = 0;
    for (const pin of pins) {
      const found = findKubeBinaries(pin.minor);
      if (!found.binaries) {
        console.log(`kube-apiserver ${pin.version}: not built, not recorded (${found.reason})`);
        continue;
      }
      const started = Date.now();
      const file = writeRecording(pin.version, await kubeAnswers(pin.minor));
      console.log(
        `kube-apiserver ${pin.version}: recorded ${allScenarios().length} scenarios in ${((Date.now() - started) / 1000).toFixed(1)} s → ${file}`,
      );
      recorded++;
    }
    if (recorded === 0) process.exitCode = 1;
    return;
  }
  if (cmd === 'compare') {
    const known = readKnownDifferences(KNOWN_DIFFERENCES_FILE);
    const kars = await startKarsTarget();
    let karsAnswers: Transcript[];
    try {
      karsAnswers = await runSuite(kars, allScenarios());
    } finally {
      await kars.stop();
    }
    const report: Record<string, unknown> = {};
    for (const pin of pins) {
      const kube = args.includes('--live') ? await kubeAnswers(pin.minor) : readRecording(pin.version)?.transcripts;
      if (!kube) {
        console.log(`kube-apiserver ${pin.version}: no recording`);
        continue;
      }
      const v = judge(karsAnswers, kube, known, pin.minor);
      console.log(describeVerdict(v, `kube-apiserver ${pin.version}`).split('\n')[0]);
      report[pin.version] = {
        identical: v.identical,
        total: v.total,
        unlisted: v.unlisted,
        stale: v.stale,
        differing: Object.fromEntries(v.differing),
        kars: Object.fromEntries(karsAnswers.filter((t) => v.differing.has(t.id)).map((t) => [t.id, t.results])),
        kube: Object.fromEntries(kube.filter((t) => v.differing.has(t.id)).map((t) => [t.id, t.results])),
      };
    }
    const out = opt('--out');
    if (out) writeFileSync(out, JSON.stringify(report, null, 1));
    return;
  }
  console.error('usage: cli.js record|compare [--version MINOR] [--live] [--out FILE]');
  process.exitCode = 2;
}

try {
  await main();
} finally {
  closeAgents();
}
