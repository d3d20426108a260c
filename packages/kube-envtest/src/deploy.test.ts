// The kars manifests on a real kube-apiserver: the CRDs and the kustomize base apply with
// `kubectl apply --server-side` (so every CEL rule compiles there), `kubectl explain` works on each
// kars kind, and a CEL rule is enforced. Skips (naming `npm run kube:build`) without the binaries.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
      // The CRDs' field descriptions (issue 24 item 6) reach kubectl explain through the real apiserver's OpenAPI.
      const budget = await k(['explain', 'inferencepolicy.spec.tokenBudget']);
      assert.equal(budget.code, 0, budget.stderr);
      assert.match(budget.stdout, /perRequestTokens\s+<integer>\s+Tokens\. Most completion tokens one request may ask for/);
      assert.doesNotMatch(budget.stdout, /<no description>/);
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

    it('kars ip apply -f refuses a misspelt budget field and writes nothing, on the real apiserver too (issue 24)', async () => {
      // Runs the real CLI (apps/cli/bin/kars.js) with the admin kubeconfig; the example applied above is the last good spec.
      const kars = (args: string[]): ReturnType<typeof kubectl> =>
        kubectl(process.execPath, cp.kubeconfig, [repo('apps/cli/bin/kars.js'), ...args]);
      const before = JSON.parse((await k(['get', 'inferencepolicy', 'demo-budget', '-n', 'default', '-o', 'json'])).stdout);
      const typo = [
        'apiVersion: kars.azure.com/v1alpha1',
        'kind: InferencePolicy',
        'metadata: {name: demo-budget}',
        'spec:',
        '  appliesTo: {sandboxName: demo-agent}',
        '  tokenBuget: {perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000}',
      ].join('\n');
      const dir = mkdtempSync(join(tmpdir(), 'kars-envtest-typo-'));
      try {
        const file = join(dir, 'typo.yaml');
        writeFileSync(file, typo);
        const r = await kars(['ip', 'apply', '-n', 'default', '-f', file]);
        assert.equal(r.code, 1, r.stdout + r.stderr);
        assert.match(r.stderr, /unknown field "spec\.tokenBuget" \(did you mean spec\.tokenBudget\?\)/);
        assert.match(r.stderr, /nothing was written/);
        const after = JSON.parse((await k(['get', 'inferencepolicy', 'demo-budget', '-n', 'default', '-o', 'json'])).stdout);
        assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
        assert.deepEqual(after.spec.tokenBudget, { perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000 });
        // The same CLI writes a correct file through the real apiserver (client certificate auth, Strict field validation).
        const good = await kars([
          'ip',
          'apply',
          '-n',
          'default',
          '-f',
          repo('examples/inference-policy.yaml'),
          '--per-request-tokens',
          '900',
        ]);
        assert.equal(good.code, 0, good.stderr);
        const edited = JSON.parse((await k(['get', 'inferencepolicy', 'demo-budget', '-n', 'default', '-o', 'json'])).stdout);
        assert.equal(edited.spec.tokenBudget.perRequestTokens, 900);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
