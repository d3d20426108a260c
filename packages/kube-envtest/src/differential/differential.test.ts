// The differential suite (issue 19): kars apiserver and kube-apiserver answer the same scripted
// requests, each fresh, and every normalised answer must agree except the reviewed differences in
// fixtures/differential/known-differences.yaml. With the kube binaries built the comparison is live
// (one control plane at a time); without them it is against the recording made by `npm run diff:record`.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { findKubeBinaries } from '../binaries.js';
import { startControlPlane } from '../control-plane.js';
import type { ControlPlane } from '../control-plane.js';
import { readPins } from '../versions.js';
import { closeAgents } from './client.js';
import { describeVerdict, judge, readKnownDifferences } from './compare.js';
import { allScenarios } from './scenarios.js';
import { FIXTURE_DIR, KNOWN_DIFFERENCES_FILE, SUITE_CONTROLLERS, fixtureFile, readRecording, runSuite } from './suite.js';
import { kubeTarget, startKarsTarget } from './targets.js';
import type { Transcript } from './types.js';

const pins = readPins();
const scenarios = allScenarios();
const known = readKnownDifferences(KNOWN_DIFFERENCES_FILE);

describe('differential suite: the recordings and the known differences', () => {
  it('the recording of the first pinned Kubernetes exists, and every recording was made by the pinned versions', (t) => {
    const first = pins.kubernetes[0]!;
    if (!readRecording(first.version)) {
      const found = findKubeBinaries(first.minor);
      // Only a machine with the binaries can record; elsewhere the absence is reported, not hidden.
      assert.equal(found.binaries, null, `no recording ${fixtureFile(first.version)}: run npm run diff:record`);
      t.skip(`no recording ${fixtureFile(first.version)} and ${found.reason}`);
      return;
    }
    for (const f of readdirSync(FIXTURE_DIR).filter((n) => n.startsWith('kube-') && n.endsWith('.json'))) {
      const version = f.slice('kube-'.length, -'.json'.length);
      assert.ok(
        pins.kubernetes.some((p) => p.version === version),
        `${f} records ${version}, which kube/versions.json no longer pins (delete it, or run npm run diff:record)`,
      );
      const rec = readRecording(version)!;
      assert.equal(rec.kubernetes, version, `${f} is stamped ${rec.kubernetes}`);
      assert.equal(rec.etcd, pins.etcd.version, `${f} was recorded with etcd ${rec.etcd}; the pin is ${pins.etcd.version}`);
      assert.equal(rec.scenarios, rec.transcripts.length);
      assert.deepEqual(
        rec.transcripts.map((t) => t.id),
        scenarios.map((s) => s.id),
        `${f} does not hold the current scenarios: run npm run diff:record`,
      );
    }
  });

  it('every known difference names a scenario that exists', () => {
    const ids = new Set(scenarios.map((s) => s.id));
    assert.deepEqual(
      known.filter((d) => !ids.has(d.scenario)).map((d) => d.scenario),
      [],
    );
    assert.ok(scenarios.length >= 300, `only ${scenarios.length} scenarios`);
  });
});

describe('differential suite: kars apiserver against kube-apiserver', () => {
  let kars: Transcript[] = [];
  before(async () => {
    const t = await startKarsTarget();
    try {
      kars = await runSuite(t, scenarios);
    } finally {
      await t.stop();
    }
  });
  after(() => closeAgents());

  for (const pin of pins.kubernetes) {
    const found = findKubeBinaries(pin.minor);
    const recording = found.binaries ? undefined : readRecording(pin.version);
    const skip = !found.binaries && !recording ? `${found.reason}; and no recording of ${pin.version}` : false;
    const against = found.binaries ? `kube-apiserver ${pin.version} (live)` : `the recording of kube-apiserver ${pin.version}`;
    describe(against, { skip }, () => {
      let kube: Transcript[] = [];
      let cp: ControlPlane | undefined;
      before(async () => {
        if (!found.binaries) {
          kube = recording!.transcripts;
          return;
        }
        cp = await startControlPlane({ binaries: found.binaries, controllers: SUITE_CONTROLLERS });
        kube = await runSuite(kubeTarget(cp), scenarios);
      });
      after(() => cp?.stop());

      it('answers identically after normalisation, except the listed differences; each listed one still occurs', (t) => {
        const v = judge(kars, kube, known, pin.minor);
        t.diagnostic(describeVerdict(v, against).split('\n')[0]!);
        assert.deepEqual(
          { unlisted: v.unlisted, stale: v.stale, missing: v.missing },
          { unlisted: [], stale: [], missing: [] },
          describeVerdict(v, against),
        );
      });
    });
  }
});
