import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds, KARS_RESOURCES, validateObject } from '@kars/policy-api';
import type { KarsObject } from '@kars/policy-api';
import { REPO_ROOT, runKars } from '../testing/stack.js';

const DIR = join(REPO_ROOT, 'examples');
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

/** The CLI command that applies an example of each kind. */
function cliApply(obj: KarsObject, file: string): string[] {
  switch (obj.kind) {
    case 'InferencePolicy':
      return ['ip', 'apply', '-f', file];
    case 'ToolPolicy':
      return ['tp', 'apply', '-f', file];
    case 'KarsSandbox':
      return ['sandbox', 'create', '-f', file];
    case 'EgressApproval':
      return ['egress', 'allow-extra', obj.spec.sandbox, '-f', file];
  }
}

describe('every file in examples/ applies through kars apiserver and through the CLI', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    for (const ns of ['via-api', 'via-cli', 'via-kubectl'])
      await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  });
  after(() => ts.close());

  it('has one example of every kind, each valid by policy-api', () => {
    const kinds = new Set<string>();
    for (const f of files) {
      for (const doc of parseAllDocuments(readFileSync(join(DIR, f), 'utf8'))) {
        const obj = doc.toJS() as KarsObject;
        kinds.add(obj.kind);
        assert.deepEqual(validateObject(obj, { clientSide: true }), [], f);
      }
    }
    assert.deepEqual([...kinds].sort(), KARS_RESOURCES.map((r) => r.kind).sort());
  });

  for (const f of files) {
    it(`${f}: created through the API, then applied with the kars CLI`, async () => {
      const obj = parseAllDocuments(readFileSync(join(DIR, f), 'utf8'))[0]?.toJS() as KarsObject;
      const res = KARS_RESOURCES.find((r) => r.kind === obj.kind);
      assert.ok(res, `${f}: unknown kind ${obj.kind}`);
      const path = `/apis/${res.group}/${res.version}/namespaces/via-api/${res.resource}`;
      const name = obj.metadata.name ?? '';
      await ts.client.delete(`${path}/${name}`);
      const created = await ts.client.post(path, { ...obj, metadata: { ...obj.metadata, namespace: 'via-api' } });
      assert.equal(created.status, 201, `${f}: ${created.text}`);
      const cli = await runKars([...cliApply(obj, `examples/${f}`), '-n', 'via-cli', '--kubeconfig', ts.server.kubeconfigPath]);
      assert.equal(cli.code, 0, `${f}: ${cli.stderr}`);
      assert.match(cli.stdout, new RegExp(`^${res.singular}\\.kars\\.azure\\.com/${name} (created|configured)\\n$`));
      const got = await ts.client.get(`/apis/${res.group}/${res.version}/namespaces/via-cli/${res.resource}/${name}`);
      assert.deepEqual(got.body.spec, created.body.spec, `${f}: the CLI wrote the same spec the API stored`);
    });
  }

  it('kubectl apply -f examples/ applies them all (skipped without kubectl)', async (t) => {
    let ok = true;
    try {
      await promisify(execFile)('kubectl', ['version', '--client']);
    } catch {
      ok = false;
    }
    if (!ok) return t.skip('kubectl not on PATH');
    // The examples hold two versions of demo-budget and demo-tools (edits of the same object); kubectl applies them in order.
    const { stdout } = await promisify(execFile)('kubectl', [
      '--kubeconfig',
      ts.server.kubeconfigPath,
      '-n',
      'via-kubectl',
      'apply',
      '-f',
      DIR,
    ]);
    for (const f of files) {
      const obj = parseAllDocuments(readFileSync(join(DIR, f), 'utf8'))[0]?.toJS() as KarsObject;
      assert.match(
        stdout,
        new RegExp(`${obj.kind.toLowerCase()}\\.kars\\.azure\\.com/${obj.metadata.name ?? ''} (created|configured|unchanged)`),
      );
    }
  });
});
