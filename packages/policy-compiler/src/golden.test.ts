import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { compileDocuments } from './compile-docs.js';

const testdata = fileURLToPath(new URL('../testdata/', import.meta.url));
const NOW = '2026-05-14T19:00:00Z';

function compileFile(name: string): string {
  const docs = parseAllDocuments(readFileSync(testdata + name + '.yaml', 'utf8')).map((d) => d.toJS() as unknown);
  const r = compileDocuments(docs, { now: NOW, env: {} });
  assert.deepEqual(r.errors, []);
  return JSON.stringify({ configMaps: r.configMaps, digests: r.digests }, null, 2) + '\n';
}

describe('golden files', () => {
  for (const name of ['inference-policy', 'tool-policy', 'egress-approvals']) {
    it(`compiles testdata/${name}.yaml to exactly testdata/${name}.expected.json`, () => {
      assert.equal(compileFile(name), readFileSync(testdata + name + '.expected.json', 'utf8'));
    });
  }
});
