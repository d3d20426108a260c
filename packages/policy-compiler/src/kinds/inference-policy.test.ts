import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InferencePolicySpec } from '@kars/policy-api';
import { compileInferencePolicy, type CompiledInferencePolicy } from './inference-policy.js';
import { canonicalDigest } from '../digest.js';

function policy(spec: InferencePolicySpec, name = 'prod-chat', namespace = 'kars-system') {
  return { metadata: { name, namespace }, spec };
}

function ok(spec: InferencePolicySpec): CompiledInferencePolicy {
  const r = compileInferencePolicy(policy(spec));
  if (!r.ok) assert.fail(`compile failed: ${r.field}: ${r.message}`);
  return r;
}

const full: InferencePolicySpec = {
  appliesTo: { sandboxName: 'agent-x', sandboxMatchLabels: { tier: 'gold', env: 'prod' }, action: 'chat' },
  tokenBudget: { perRequestTokens: 8192, dailyTokens: 1_000_000, monthlyTokens: 20_000_000 },
  contentSafety: { hate: 'Medium', selfHarm: 'Low', sexual: 'Medium', violence: 'High', requirePromptShields: true },
  modelPreference: {
    primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
    fallback: [{ provider: 'anthropic', deployment: 'claude' }],
  },
  provider: 'anthropic',
  guardrails: [{ provider: 'openai-moderation', applyTo: 'output' }, { provider: 'openai-moderation' }],
  displayName: 'Prod chat',
};

describe('compileInferencePolicy', () => {
  it('emits the contract key order at every level, with inner optional scalars as null', () => {
    const r = ok(full);
    assert.equal(
      r.body,
      '{"appliesTo":{"sandboxName":"agent-x","sandboxMatchLabels":{"env":"prod","tier":"gold"},"action":"chat"},' +
        '"tokenBudget":{"perRequestTokens":8192,"dailyTokens":1000000,"monthlyTokens":20000000},' +
        '"contentSafety":{"hate":"Medium","selfHarm":"Low","sexual":"Medium","violence":"High","requirePromptShields":true},' +
        '"modelPreference":{"primary":{"provider":"azure-openai","deployment":"gpt-4o"},"fallback":[{"provider":"anthropic","deployment":"claude"}]},' +
        '"provider":"anthropic",' +
        '"guardrails":[{"provider":"openai-moderation","applyTo":"output"},{"provider":"openai-moderation","applyTo":null}],' +
        '"displayName":"Prod chat"}',
    );
  });

  it('is deterministic: the same input compiles to the same bytes, digest and hash', () => {
    const a = ok(full);
    const b = ok(structuredClone(full));
    assert.equal(a.body, b.body);
    assert.equal(a.compiledDigest, b.compiledDigest);
    assert.equal(a.versionHash, b.versionHash);
  });

  it('does not depend on the order of sandboxMatchLabels or of spec keys in the input', () => {
    const reordered: InferencePolicySpec = {
      displayName: 'Prod chat',
      guardrails: full.guardrails!,
      provider: 'anthropic',
      modelPreference: full.modelPreference!,
      contentSafety: { requirePromptShields: true, violence: 'High', sexual: 'Medium', selfHarm: 'Low', hate: 'Medium' },
      tokenBudget: { monthlyTokens: 20_000_000, dailyTokens: 1_000_000, perRequestTokens: 8192 },
      appliesTo: { action: 'chat', sandboxMatchLabels: { env: 'prod', tier: 'gold' }, sandboxName: 'agent-x' },
    };
    assert.equal(ok(reordered).body, ok(full).body);
  });

  it('compiles a selector-only spec with every content block null', () => {
    const r = ok({ appliesTo: { sandboxName: 'agent-x' } });
    assert.equal(
      r.body,
      '{"appliesTo":{"sandboxName":"agent-x","sandboxMatchLabels":{},"action":null},"tokenBudget":null,"contentSafety":null,"modelPreference":null,"provider":null,"guardrails":null,"displayName":null}',
    );
  });

  it('fills null for absent inner scalars and [] for an absent fallback list', () => {
    const r = ok({
      appliesTo: {},
      tokenBudget: { dailyTokens: 5 },
      contentSafety: { hate: 'Low' },
      modelPreference: { primary: { provider: 'ollama', deployment: 'llama' } },
    });
    const doc = JSON.parse(r.body) as Record<string, unknown>;
    assert.deepEqual(doc['appliesTo'], { sandboxName: null, sandboxMatchLabels: {}, action: null });
    assert.deepEqual(doc['tokenBudget'], { perRequestTokens: null, dailyTokens: 5, monthlyTokens: null });
    assert.deepEqual(doc['contentSafety'], { hate: 'Low', selfHarm: null, sexual: null, violence: null, requirePromptShields: null });
    assert.deepEqual(doc['modelPreference'], { primary: { provider: 'ollama', deployment: 'llama' }, fallback: [] });
  });

  it('digests the exact body with the inference-policy.json separator and hashes it to 32 hex', () => {
    const r = ok(full);
    assert.equal(r.compiledDigest, canonicalDigest('inference-policy.json', r.body));
    assert.match(r.versionHash, /^[0-9a-f]{32}$/);
  });

  it('changes versionHash and compiledDigest when the budget changes', () => {
    const changed = ok({ ...full, tokenBudget: { ...full.tokenBudget, dailyTokens: 999_999 } });
    assert.notEqual(changed.versionHash, ok(full).versionHash);
    assert.notEqual(changed.compiledDigest, ok(full).compiledDigest);
  });

  it('changes versionHash when the provider changes, and when guardrails change', () => {
    assert.notEqual(ok({ ...full, provider: 'ollama' }).versionHash, ok(full).versionHash);
    assert.notEqual(ok({ ...full, guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] }).versionHash, ok(full).versionHash);
  });

  it('builds the inferencepolicy-<name>-profile ConfigMap in the policy namespace', () => {
    const r = ok(full);
    assert.deepEqual(r.configMap, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'inferencepolicy-prod-chat-profile',
        namespace: 'kars-system',
        labels: {
          'app.kubernetes.io/managed-by': 'kars-controller',
          'kars.azure.com/inferencepolicy': 'prod-chat',
          'kars.azure.com/artifact': 'inference-policy-profile',
        },
        annotations: {
          'kars.azure.com/inferencepolicy-version-hash': r.versionHash,
          'kars.azure.com/inference-policy-digest': r.compiledDigest,
        },
      },
      data: { 'inference-policy.json': r.body },
    });
  });

  it('fails with InvalidRef, without throwing, for a bundleRef spec', () => {
    const r = compileInferencePolicy(
      policy({ appliesTo: {}, bundleRef: { registry: 'r.example', repository: 'p', digest: 'sha256:' + '0'.repeat(64) } }),
    );
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.reason, 'InvalidRef');
    assert.equal(!r.ok && r.field, 'spec.bundleRef');
  });

  it('fails with InvalidSpec naming the clashing field when bundleRef is set beside content', () => {
    const r = compileInferencePolicy(
      policy({ appliesTo: {}, provider: 'ollama', bundleRef: { registry: 'r', repository: 'p', digest: 'sha256:x' } }),
    );
    assert.deepEqual(r.ok ? undefined : [r.reason, r.field], ['InvalidSpec', 'spec.provider']);
  });

  it('rejects a token count that JSON would mangle (NaN, fractions, beyond 2^53) instead of writing it', () => {
    for (const bad of [Number.NaN, 1.5, -1, 2 ** 60]) {
      const r = compileInferencePolicy(policy({ appliesTo: {}, tokenBudget: { dailyTokens: bad } }));
      assert.equal(r.ok ? undefined : r.field, 'spec.tokenBudget.dailyTokens', `value ${bad}`);
    }
  });

  it('returns a failure rather than throwing for a spec without appliesTo', () => {
    const r = compileInferencePolicy({ metadata: { name: 'x' }, spec: {} as InferencePolicySpec });
    assert.equal(r.ok ? undefined : r.field, 'spec.appliesTo');
  });
});
