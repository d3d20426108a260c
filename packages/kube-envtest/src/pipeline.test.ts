// The kars pipeline on a real kube-apiserver (issue 18 item 3): the CRDs applied with kubectl, a
// KarsSandbox and an InferencePolicy created, the real `kars controller`, `kars router` and `kars
// stub openai` started as child processes with the admin kubeconfig; the policy goes Ready only on
// the router's echo, an edit of perRequestTokens is Ready again at the new generation and digest and
// the router enforces the new cap, a bundleRef edit goes Degraded with the last good ConfigMap kept,
// and a deleted policy lets its finalizer go and loses its ConfigMap.
// Skips (naming `npm run kube:build`) without the binaries.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { until } from '@kars/kube-core/testing';
import { findKubeBinaries, findKubectlBinary } from './binaries.js';
import { startControlPlane } from './control-plane.js';
import type { ControlPlane } from './control-plane.js';
import { kubectl, processesMentioning } from './testing.js';
import { readPins } from './versions.js';
import { startKars, stopKars } from './kars-process.js';
import type { KarsChild as Child } from './kars-process.js';

const repo = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url));
const WAIT = { timeoutMs: 90_000, everyMs: 500 };
const NS = 'pipeline';
const SANDBOX = 'pipe-agent';
const POLICY = 'pipe-budget';
const CONFIGMAP = `inferencepolicy-${POLICY}-profile`;

interface Condition {
  type: string;
  status: string;
  reason?: string;
  observedGeneration?: number;
}
interface Policy {
  metadata: { generation?: number; finalizers?: string[]; deletionTimestamp?: string };
  status?: {
    phase?: string;
    observedGeneration?: number;
    compiledDigest?: string | null;
    loadedDigest?: string | null;
    conditions?: Condition[];
  };
}

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  const bin = findKubectlBinary();
  const skip = !found.binaries ? found.reason : !bin ? 'no kubectl on PATH' : false;
  describe(`the kars pipeline on kube-apiserver ${pin.version}`, { skip }, () => {
    let cp: ControlPlane;
    const children: Child[] = [];
    let routerUrl = '';
    const k = (args: string[], input?: string): ReturnType<typeof kubectl> =>
      kubectl(bin!, cp.kubeconfig, args, input === undefined ? {} : { input });
    const logs = (): string => children.map((c) => `--- kars ${c.name}:\n${c.output.join('').slice(-3000)}`).join('\n');
    const getPolicy = async (): Promise<Policy | undefined> => {
      const r = await k(['get', 'inferencepolicy', POLICY, '-n', NS, '-o', 'json']);
      return r.code === 0 ? (JSON.parse(r.stdout) as Policy) : undefined;
    };
    const getConfigMap = async (): Promise<
      { data?: Record<string, string>; metadata: { annotations?: Record<string, string> } } | undefined
    > => {
      const r = await k(['get', 'configmap', CONFIGMAP, '-n', NS, '-o', 'json', '--ignore-not-found']);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout.trim() === '' ? undefined : JSON.parse(r.stdout);
    };
    /** Poll until the policy's status reports Ready=True for its current generation; returns it. */
    const readyAt = (what: string, generation: number): Promise<Policy> =>
      until(
        what,
        async () => {
          const p = await getPolicy();
          const ready = p?.status?.conditions?.find((c) => c.type === 'Ready');
          return p?.status?.phase === 'Ready' && p.status.observedGeneration === generation && ready?.status === 'True' ? p : undefined;
        },
        WAIT,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      });
    const chat = async (maxTokens: number): Promise<{ status: number; body: string }> => {
      const r = await fetch(`${routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'client-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: maxTokens }),
      });
      return { status: r.status, body: await r.text() };
    };

    before(async () => {
      // The garbage collector and namespace controllers stay on (the default set).
      cp = await startControlPlane({ binaries: found.binaries! });
    });
    after(async () => {
      await Promise.all(children.map((c) => stopKars(c)));
      for (const c of children) assert.ok(c.proc.exitCode !== null || c.proc.signalCode !== null, `kars ${c.name} has exited`);
      await cp?.stop();
      if (cp) assert.deepEqual(processesMentioning(cp.dir), [], 'no process of this control plane (or a kars child) is left running');
    });

    it('the CRDs apply server-side and become Established; a namespace, KarsSandbox and InferencePolicy are created', async () => {
      const r = await k(['apply', '--server-side', '-f', repo('deploy/crds/all.yaml')]);
      assert.equal(r.code, 0, r.stderr);
      const names = ['inferencepolicies', 'toolpolicies', 'egressapprovals', 'karssandboxes'].map((n) => `crd/${n}.kars.azure.com`);
      const w = await k(['wait', '--for=condition=Established', '--timeout=90s', ...names]);
      assert.equal(w.code, 0, w.stderr);
      assert.equal((await k(['create', 'namespace', NS])).code, 0);
      const objects = [
        'apiVersion: kars.azure.com/v1alpha1',
        'kind: KarsSandbox',
        `metadata: {name: ${SANDBOX}, namespace: ${NS}}`,
        'spec:',
        `  inferenceRef: {name: ${POLICY}}`,
        '---',
        'apiVersion: kars.azure.com/v1alpha1',
        'kind: InferencePolicy',
        `metadata: {name: ${POLICY}, namespace: ${NS}}`,
        'spec:',
        `  appliesTo: {sandboxName: ${SANDBOX}}`,
        '  tokenBudget: {perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000}',
      ].join('\n');
      // The OpenAPI of a just-Established CRD can lag a moment; retry the create until the apiserver takes it.
      await until(
        'creating the KarsSandbox and InferencePolicy',
        async () => {
          const c = await k(['apply', '--server-side', '-f', '-'], objects);
          if (c.code !== 0) throw new Error(c.stderr);
          return true;
        },
        WAIT,
      );
    });

    it('the real controller and router (child processes, admin kubeconfig) bring the policy to Ready on the router echo', async () => {
      const stub = startKars('stub', ['stub', 'openai', '--listen', '127.0.0.1:0']);
      children.push(stub);
      const upstream = await stub.url;
      children.push(
        startKars('controller', ['controller', '--kubeconfig', cp.kubeconfig, '--metrics-addr', 'disabled', '--lease-namespace', NS]),
      );
      const router = startKars('router', [
        'router',
        '--sandbox',
        SANDBOX,
        '--namespace',
        NS,
        '--instance',
        `${SANDBOX}-0`,
        '--listen',
        '127.0.0.1:0',
        '--upstream',
        upstream,
        '--kubeconfig',
        cp.kubeconfig,
      ]);
      children.push(router);
      routerUrl = (await router.url).replace(/\/$/, '');

      const p = await readyAt('InferencePolicy Ready at generation 1', 1);
      assert.match(p.status?.compiledDigest ?? '', /^sha256:[0-9a-f]{64}$/);
      assert.equal(p.status?.loadedDigest, p.status?.compiledDigest);
      assert.ok(p.metadata.finalizers?.length, 'the controller put its finalizer on the policy');
      const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
      assert.equal(ready?.reason, 'RouterEnforcing');
      const cm = await getConfigMap();
      assert.equal(cm?.metadata.annotations?.['kars.azure.com/inference-policy-digest'], p.status?.compiledDigest);
      assert.equal((await chat(1001)).status, 429);
      assert.equal((await chat(1000)).status, 200);
    });

    it('an edit of perRequestTokens is Ready again at the new generation and digest, and the router enforces the new cap', async () => {
      const before = (await getPolicy())!;
      const patch = await k([
        'patch',
        'inferencepolicy',
        POLICY,
        '-n',
        NS,
        '--type=merge',
        '-p',
        '{"spec":{"tokenBudget":{"perRequestTokens":100}}}',
      ]);
      assert.equal(patch.code, 0, patch.stderr);
      const generation = (before.metadata.generation ?? 1) + 1;
      const p = await readyAt(`InferencePolicy Ready at generation ${generation}`, generation);
      assert.notEqual(p.status?.compiledDigest, before.status?.compiledDigest);
      assert.equal(p.status?.loadedDigest, p.status?.compiledDigest, 'the router echoed the new digest');
      const over = await chat(101);
      assert.equal(over.status, 429, over.body);
      assert.equal(JSON.parse(over.body).error.code, 'per_request_tokens_exceeded');
      const under = await chat(99);
      assert.equal(under.status, 200, under.body);
      const cm = await getConfigMap();
      assert.equal(JSON.parse(cm?.data?.['inference-policy.json'] ?? '{}').tokenBudget?.perRequestTokens, 100);
    });

    it('a bundleRef edit (accepted by the schema, refused by the controller) goes Degraded and the ConfigMap keeps its last good content', async () => {
      const good = (await getPolicy())!;
      const goodMap = await getConfigMap();
      const bundle = {
        spec: {
          tokenBudget: null,
          bundleRef: { registry: 'registry.invalid', repository: 'policies/pipe', digest: `sha256:${'a'.repeat(64)}` },
        },
      };
      const patch = await k(['patch', 'inferencepolicy', POLICY, '-n', NS, '--type=merge', '-p', JSON.stringify(bundle)]);
      assert.equal(patch.code, 0, patch.stderr);
      const generation = (good.metadata.generation ?? 1) + 1;
      const p = await until(
        `InferencePolicy Degraded at generation ${generation}`,
        async () => {
          const x = await getPolicy();
          return x?.status?.phase === 'Degraded' && x.status.observedGeneration === generation ? x : undefined;
        },
        WAIT,
      );
      const degraded = p.status?.conditions?.find((c) => c.type === 'Degraded');
      assert.equal(degraded?.status, 'True');
      assert.equal(degraded?.reason, 'InvalidRef');
      assert.equal(p.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
      assert.deepEqual(await getConfigMap(), goodMap, 'the last good ConfigMap is kept as it was');
      const over = await chat(101);
      assert.equal(over.status, 429, 'the router keeps enforcing the last good cap');
      assert.equal((await chat(99)).status, 200);
    });

    it('a deleted policy lets its finalizer go and its compiled ConfigMap is removed', async () => {
      const d = await k(['delete', 'inferencepolicy', POLICY, '-n', NS, '--wait=true', '--timeout=90s']);
      assert.equal(d.code, 0, d.stderr + logs());
      assert.equal(await getPolicy(), undefined);
      await until('the compiled ConfigMap is removed', async () => (await getConfigMap()) === undefined, WAIT);
    });
  });
}
