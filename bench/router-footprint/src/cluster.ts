/**
 * What the routers load from kars apiserver: the CRDs, namespace `bench`, KarsSandbox `sb` and the
 * compiled ConfigMap of one InferencePolicy (compileInferencePolicy, as the controller writes it).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, expectStatus, sleep } from '../../lib/dist/index.js';
import type { HttpsJsonClient } from '../../lib/dist/index.js';
import { NS, POLICY, SANDBOX } from './peers.js';

/** The compiled policy: the ConfigMap to create and the digest its routers echo. */
export interface CompiledPolicy {
  configMap: unknown;
  compiledDigest: string;
}

/** Compile the InferencePolicy the routers load (throws when it does not compile). */
export async function compilePolicy(): Promise<CompiledPolicy> {
  const { compileInferencePolicy } = await import('@kars/policy-compiler');
  const compiled = compileInferencePolicy({
    metadata: { name: POLICY, namespace: NS },
    spec: {
      appliesTo: { sandboxName: SANDBOX },
      tokenBudget: { perRequestTokens: 1024, dailyTokens: 1_000_000_000_000, monthlyTokens: 10_000_000_000_000 },
      contentSafety: { hate: 'Medium', selfHarm: 'Low', sexual: 'Medium', violence: 'Medium', requirePromptShields: true },
      modelPreference: { primary: { provider: 'azure-openai', deployment: 'gpt-4o' } },
    },
  });
  if (!compiled.ok) throw new Error(`compileInferencePolicy: ${JSON.stringify(compiled)}`);
  return compiled;
}

/** Create the CRDs (deploy/crds/all.yaml), the namespace, the sandbox and the compiled ConfigMap. */
export async function seed(api: HttpsJsonClient, compiled: CompiledPolicy): Promise<void> {
  const YAML = (await import('yaml')).default;
  for (const crd of YAML.parseAllDocuments(readFileSync(join(ROOT, 'deploy/crds/all.yaml'), 'utf8'))
    .map((d) => d.toJSON() as { kind?: string; metadata: { name: string } } | null)
    .filter((d) => d?.kind === 'CustomResourceDefinition'))
    expectStatus(
      await api.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd),
      [201],
      `create CRD ${crd?.metadata.name}`,
    );
  expectStatus(
    await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
    [201],
    `create namespace ${NS}`,
  );
  for (let i = 0; ; i++) {
    const r = await api.request('POST', `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: SANDBOX },
      spec: { inferenceRef: { name: POLICY } },
    });
    if (r.status === 201) break;
    // The CRD's resource is served a moment after its create returns.
    if (r.status !== 404 || i > 100) throw new Error(`create KarsSandbox: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    await sleep(100);
  }
  expectStatus(
    await api.request('POST', `/api/v1/namespaces/${NS}/configmaps`, compiled.configMap),
    [201],
    'create the compiled ConfigMap',
  );
}
