// The kars manifests on a real kube-apiserver: the CRDs and the kustomize base apply with
// `kubectl apply --server-side` (so every CEL rule compiles there), `kubectl explain` works on each
// kars kind, and a CEL rule is enforced. Skips (naming `npm run kube:build`) without the binaries.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { until } from '@kars/kube-core/testing';
import { findKubeBinaries, findKubectlBinary } from './binaries.js';
import { startControlPlane } from './control-plane.js';
import type { ControlPlane } from './control-plane.js';
import { kubectl } from './testing.js';
import { readPins } from './versions.js';

const repo = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url));
const KINDS = ['inferencepolicy', 'toolpolicy', 'egressapproval', 'karssandbox'];
const WAIT = { timeoutMs: 90_000, everyMs: 500 };

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  const bin = findKubectlBinary();
  const skip = !found.binaries ? found.reason : !bin ? 'no kubectl on PATH' : false;
  describe(`kars manifests on kube-apiserver ${pin.version}`, { skip }, () => {
    let cp: ControlPlane;
    const k = (args: string[], input?: string): ReturnType<typeof kubectl> =>
      kubectl(bin!, cp.kubeconfig, args, input === undefined ? {} : { input });
    // The manifests need no controllers; leaving them out keeps the start light.
    before(async () => {
      cp = await startControlPlane({ binaries: found.binaries!, controllers: false });
    });
    after(() => cp?.stop());

    it('kubectl apply --server-side of deploy/crds/all.yaml succeeds and the CRDs become Established', async () => {
      const r = await k(['apply', '--server-side', '-f', repo('deploy/crds/all.yaml')]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim().split('\n').length, 4, r.stdout);
      const names = ['inferencepolicies', 'toolpolicies', 'egressapprovals', 'karssandboxes'].map((n) => `crd/${n}.kars.azure.com`);
      const w = await k(['wait', '--for=condition=Established', '--timeout=90s', ...names]);
      assert.equal(w.code, 0, w.stderr);
    });

    it('kubectl apply --server-side -k deploy/base succeeds', async () => {
      const r = await k(['apply', '--server-side', '-k', repo('deploy/base')]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /namespace\/kars-system serverside-applied/);
      assert.match(r.stdout, /deployment\.apps\/\S+ serverside-applied/);
    });

    it('kubectl explain works on every kars kind (inferencepolicy.spec first)', async () => {
      // The OpenAPI of a new CRD is published a moment after it is Established.
      const first = await until(
        'kubectl explain inferencepolicy.spec',
        async () => {
          const r = await k(['explain', 'inferencepolicy.spec']);
          return r.code === 0 ? r : undefined;
        },
        WAIT,
      );
      assert.match(first.stdout, /tokenBudget/);
      for (const kind of KINDS) {
        const r = await until(
          `kubectl explain ${kind}`,
          async () => {
            const x = await k(['explain', kind]);
            return x.code === 0 ? x : undefined;
          },
          WAIT,
        );
        assert.match(r.stdout, /GROUP:\s+kars\.azure\.com/);
      }
    });

    it('a CEL rule of the CRDs is enforced by the real apiserver (monthlyTokens < dailyTokens is refused)', async () => {
      const ok = await k(['apply', '--server-side', '-n', 'default', '-f', repo('examples/inference-policy.yaml')]);
      assert.equal(ok.code, 0, ok.stderr);
      const bad = [
        'apiVersion: kars.azure.com/v1alpha1',
        'kind: InferencePolicy',
        'metadata: {name: bad-budget, namespace: default}',
        'spec:',
        '  appliesTo: {sandboxName: demo-agent}',
        '  tokenBudget: {dailyTokens: 10, monthlyTokens: 5}',
      ].join('\n');
      const r = await k(['apply', '--server-side', '-f', '-'], bad);
      assert.notEqual(r.code, 0, r.stdout);
      assert.match(r.stderr, /monthlyTokens must be greater than or equal to dailyTokens/);
    });
  });
}
