// deploy/ renders with the real kubectl's kustomize, every overlay, and kars apiserver (RBAC on) accepts
// each rendering through `kubectl apply --server-side`; the CRDs in it are the ones `kars crds` prints.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { findKubectl, runKubectl, startTestServer } from '@kars/apiserver/testing';
import type { KubectlRun, TestServer } from '@kars/apiserver/testing';
import { crdYaml } from '@kars/policy-api';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
const KUBECTL = findKubectl();

void describe(
  'deploy/ with kubectl kustomize and kubectl apply --server-side',
  { skip: KUBECTL ? false : 'kubectl not found on PATH' },
  () => {
    let ts: TestServer;
    const kubectl = (args: string[], input?: string): Promise<KubectlRun> =>
      runKubectl(KUBECTL ?? 'kubectl', ts.server.kubeconfigPath, args, input === undefined ? {} : { input });
    before(async () => {
      ts = await startTestServer({ authorizationMode: 'RBAC' });
    });
    after(() => ts.close());

    for (const [path, replicas] of [
      ['deploy/base', 2],
      ['deploy/overlays/dev', 1],
      ['deploy/overlays/production', 2],
      ['deploy/examples/sandbox-router', undefined],
    ] as const) {
      it(`renders ${path} and the server accepts it`, async () => {
        const r = await kubectl(['kustomize', join(ROOT, path)]);
        assert.equal(r.code, 0, r.stderr);
        const docs = parseAllDocuments(r.stdout).map(
          (d) => d.toJS() as { kind: string; metadata: { name: string }; spec?: Record<string, unknown> },
        );
        if (replicas !== undefined) {
          const dep = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'kars-controller');
          assert.equal(dep?.spec?.['replicas'], replicas);
          const crds = docs
            .filter((d) => d.kind === 'CustomResourceDefinition')
            .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
          const want = parseAllDocuments(crdYaml())
            .map((d) => d.toJS() as { metadata: { name: string } })
            .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
          assert.deepEqual(crds, want, 'the rendered CRDs are exactly `kars crds`');
        }
        const applied = await kubectl(['apply', '--server-side', '-f', '-'], r.stdout);
        assert.equal(applied.code, 0, applied.stderr);
        assert.equal(applied.stdout.trim().split('\n').length, docs.length, applied.stdout);
      });
    }
  },
);
