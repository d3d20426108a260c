import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admitKarsObject, suggestKnownField } from './admission.js';

const V = 'kars.azure.com/v1alpha1';

describe('admitKarsObject', () => {
  it('names unknown fields of metadata (ObjectMeta) before the schema ones, at every depth', () => {
    const a = admitKarsObject('InferencePolicy', {
      apiVersion: V,
      kind: 'InferencePolicy',
      metadata: { name: 'p', labelz: { a: 'b' }, creationTimestamp: '2026-01-01T00:00:00Z', resourceVersion: '5' },
      spec: {
        appliesTo: {},
        tokenBuget: { dailyTokens: 1 },
        tokenBudget: { dailyToken: 1 },
        modelPreference: { primary: { provider: 'p', deployment: 'd' }, fallback: [{ provider: 'a', deployment: 'b', weigth: 1 }] },
      },
      specs: {},
    });
    assert.deepEqual(a.unknownFields, [
      'metadata.labelz',
      'spec.tokenBuget',
      'spec.tokenBudget.dailyToken',
      'spec.modelPreference.fallback[0].weigth',
      'specs',
    ]);
  });

  it('a well-formed object has none', () => {
    const a = admitKarsObject('KarsSandbox', { apiVersion: V, kind: 'KarsSandbox', metadata: { name: 's' }, spec: {} });
    assert.deepEqual(a.unknownFields, []);
  });
});

describe('suggestKnownField', () => {
  it('suggests a sibling from the CRD schema, keeping the path', () => {
    assert.equal(suggestKnownField('InferencePolicy', 'spec.tokenBuget'), 'spec.tokenBudget');
    assert.equal(suggestKnownField('InferencePolicy', 'spec.tokenBudget.dailyToken'), 'spec.tokenBudget.dailyTokens');
    assert.equal(
      suggestKnownField('InferencePolicy', 'spec.modelPreference.fallback[3].deploymnt'),
      'spec.modelPreference.fallback[3].deployment',
    );
    assert.equal(suggestKnownField('EgressApproval', 'spec.hosts[0].prot'), 'spec.hosts[0].port');
    assert.equal(suggestKnownField('KarsSandbox', 'spec.inferenceREF'), 'spec.inferenceRef');
    assert.equal(suggestKnownField('ToolPolicy', 'spec.appliesTo.tol'), 'spec.appliesTo.tool');
    assert.equal(suggestKnownField('InferencePolicy', 'metadata.labelz'), 'metadata.labels');
    assert.equal(suggestKnownField('InferencePolicy', 'specs'), 'spec');
  });

  it('nothing when the path leaves the schema, or nothing is close', () => {
    assert.equal(suggestKnownField('InferencePolicy', 'spec.zzzzzzzzzz'), undefined);
    assert.equal(suggestKnownField('InferencePolicy', 'spec.nope.tokenBuget'), undefined);
    assert.equal(suggestKnownField('InferencePolicy', 'spec.tokenBudget[0].x'), undefined);
    assert.equal(suggestKnownField('InferencePolicy', ''), undefined);
    assert.equal(suggestKnownField('InferencePolicy', 'spec..x'), undefined);
    assert.equal(suggestKnownField('InferencePolicy', 'spec.__proto__.tokenBuget'), undefined);
  });
});
