import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_CONTROLLERS } from '../control-plane.js';
import { readPins } from '../versions.js';
import { ScenarioRunner } from './runner.js';
import type { Target } from './runner.js';
import { prepareTarget } from './targets.js';
import type { Scenario, Transcript } from './types.js';

/** Where the recordings and the known-differences file live. */
export const FIXTURE_DIR = fileURLToPath(new URL('../../fixtures/differential/', import.meta.url));
export const KNOWN_DIFFERENCES_FILE = `${FIXTURE_DIR}known-differences.yaml`;

/** The recording of kube-apiserver `version`'s answers: `fixtures/differential/kube-v1.34.4.json`. */
export const fixtureFile = (version: string): string => `${FIXTURE_DIR}kube-${version}.json`;

/** kube-controller-manager's controllers for the suite: the defaults and ClusterRole aggregation. */
export const SUITE_CONTROLLERS: readonly string[] = [...DEFAULT_CONTROLLERS, 'clusterrole-aggregation-controller'];

/** A recording: the pinned versions that made it, and kube-apiserver's normalised answers. */
export interface Recording {
  $comment: string;
  kubernetes: string;
  etcd: string;
  scenarios: number;
  transcripts: Transcript[];
}

/** Install the suite's CRDs, then run every scenario (a few at a time, each in its own namespace). */
export async function runSuite(target: Target, scenarios: Scenario[], concurrency = 4): Promise<Transcript[]> {
  await prepareTarget(target);
  const runner = new ScenarioRunner(target);
  const out: Transcript[] = new Array<Transcript>(scenarios.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < scenarios.length) {
      const i = next++;
      const sc = scenarios[i]!;
      const t0 = Date.now();
      try {
        out[i] = await runner.run(sc);
        if (process.env['DIFF_TIMING']) process.stderr.write(`${Date.now() - t0} ms ${sc.id}\n`);
      } catch (e) {
        // A scenario that cannot run is an answer too (e.g. setup refused): it is compared like one.
        out[i] = { id: sc.id, results: [{ step: -1, error: (e as Error).message.replace(target.name, 'SERVER') }] };
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out;
}

/** Write kube-apiserver's answers as the recording for `version`, stamped with the pins. */
export function writeRecording(version: string, transcripts: Transcript[]): string {
  const rec: Recording = {
    $comment: 'kube-apiserver answers to the differential suite, normalised. Regenerate with `npm run diff:record`; do not edit.',
    kubernetes: version,
    etcd: readPins().etcd.version,
    scenarios: transcripts.length,
    transcripts,
  };
  const file = fixtureFile(version);
  writeFileSync(file, `${JSON.stringify(rec, null, 1)}\n`);
  return file;
}

/** Read the recording for `version`, or undefined when there is none. */
export function readRecording(version: string): Recording | undefined {
  try {
    return JSON.parse(readFileSync(fixtureFile(version), 'utf8')) as Recording;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}
