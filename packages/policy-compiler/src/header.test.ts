import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileInferencePolicy } from './kinds/inference-policy.js';
import { compileToolPolicy } from './kinds/tool-policy.js';

// Both compilers start with policyHeader(); malformed input (whatever its TS type says) must come
// back as an InvalidSpec failure naming the first missing part, never throw.
const compilers = { InferencePolicy: compileInferencePolicy, ToolPolicy: compileToolPolicy } as const;

describe('policyHeader, as every compiler sees it', () => {
  for (const [kind, compile] of Object.entries(compilers)) {
    const run = (policy: unknown): ReturnType<typeof compile> => (compile as (p: unknown) => ReturnType<typeof compile>)(policy);
    it(`${kind}: a missing name, spec or appliesTo fails as InvalidSpec on that field, in that order`, () => {
      const cases: Array<[unknown, string]> = [
        [{ metadata: {}, spec: { appliesTo: {} } }, 'metadata.name'],
        [{ metadata: { name: '' }, spec: undefined }, 'metadata.name'],
        [{ metadata: { name: 'p' } }, 'spec'],
        [{ metadata: { name: 'p' }, spec: null }, 'spec'],
        [{ metadata: { name: 'p' }, spec: [] }, 'spec'],
        [{ metadata: { name: 'p' }, spec: {} }, 'spec.appliesTo'],
        [{ metadata: { name: 'p' }, spec: { appliesTo: 'all' } }, 'spec.appliesTo'],
        [{ metadata: { name: 'p' }, spec: { appliesTo: [] } }, 'spec.appliesTo'],
      ];
      for (const [policy, field] of cases) {
        const r = run(policy);
        assert.equal(r.ok, false, JSON.stringify(policy));
        if (r.ok) continue;
        assert.deepEqual([r.reason, r.field, r.message], ['InvalidSpec', field, `${field} is required`], JSON.stringify(policy));
      }
      assert.equal(run({ metadata: { name: 'p' }, spec: { appliesTo: {} } }).ok, true, 'the smallest valid policy compiles');
    });
  }
});
