import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { GENERATED_HEADER, crdFiles, crdYaml } from './crd-yaml.js';
import { allCrds } from './crds.js';
import { chartCrdFiles, defaultChartCrdDir, defaultCrdDir, staleCrdFiles } from './generate-crds.js';

const REGENERATE =
  'run `npx tsc -b packages/policy-api && node packages/policy-api/dist/generate-crds.js` and commit deploy/crds/ and deploy/helm/kars/crds/';

describe('CRD YAML', () => {
  it('parses back to exactly the CRD objects, in order, four documents', () => {
    const docs = parseAllDocuments(crdYaml());
    assert.ok(Array.isArray(docs));
    assert.deepEqual(
      docs.map((d) => d.toJS() as unknown),
      allCrds().map((c) => JSON.parse(JSON.stringify(c)) as unknown),
    );
  });

  it('is deterministic and free of YAML anchors and aliases', () => {
    assert.equal(crdYaml(), crdYaml());
    assert.doesNotMatch(crdYaml(), /(^|\s)[&*]a\d+(\s|$)/m);
    assert.ok(crdYaml().startsWith(GENERATED_HEADER));
  });

  it('names one file per CRD as <plural>.<group>.yaml plus all.yaml', () => {
    assert.deepEqual(
      [...crdFiles().keys()],
      [
        'inferencepolicies.kars.azure.com.yaml',
        'toolpolicies.kars.azure.com.yaml',
        'egressapprovals.kars.azure.com.yaml',
        'karssandboxes.kars.azure.com.yaml',
        'all.yaml',
      ],
    );
  });

  it(`matches the committed deploy/crds files byte for byte (if not, ${REGENERATE})`, () => {
    const dir = defaultCrdDir();
    for (const [name, text] of crdFiles()) {
      assert.equal(readFileSync(join(dir, name), 'utf8'), text, `deploy/crds/${name} is stale: ${REGENERATE}`);
    }
    assert.deepEqual(staleCrdFiles(dir), []);
  });

  it('has no stray generated-looking files in deploy/crds', () => {
    const expected = new Set(crdFiles().keys());
    const yamls = readdirSync(defaultCrdDir()).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml'); // kustomization.yaml is hand-written (deploy/base uses it)
    assert.deepEqual(
      yamls.filter((f) => !expected.has(f)),
      [],
    );
  });

  it(`the Helm chart's crds/ holds exactly the four per-kind files, byte for byte (if not, ${REGENERATE})`, () => {
    const dir = defaultChartCrdDir();
    assert.deepEqual(
      [...chartCrdFiles().keys()],
      [...crdFiles().keys()].filter((n) => n !== 'all.yaml'),
    );
    for (const [name, text] of chartCrdFiles()) {
      assert.equal(readFileSync(join(dir, name), 'utf8'), text, `deploy/helm/kars/crds/${name} is stale: ${REGENERATE}`);
    }
    // Helm installs every manifest in crds/, so a stray file (an all.yaml, a kustomization) would be installed too.
    assert.deepEqual(readdirSync(dir).sort(), [...chartCrdFiles().keys()].sort());
  });
});
