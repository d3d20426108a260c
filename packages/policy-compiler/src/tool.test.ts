import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ToolPolicySpec } from '@kars/policy-api';
import { compileToolPolicy, type CompiledToolPolicy } from './tool.js';
import { canonicalDigest, versionHash } from './digest.js';

function ok(spec: ToolPolicySpec, name = 'pay'): CompiledToolPolicy {
  const r = compileToolPolicy({ metadata: { name, namespace: 'team-a' }, spec });
  if (!r.ok) assert.fail(`compile failed: ${r.field}: ${r.message}`);
  return r;
}

const agtYaml = 'apiVersion: agt/v1\nrules:\n  - deny: "*"\n';

describe('compileToolPolicy', () => {
  it('pretty-prints profile.json with two spaces, in contract key order, with null blocks', () => {
    const r = ok({ appliesTo: { tool: 'pay', sandboxMatchLabels: { z: '1', a: '2' } }, rateLimit: { rps: 5 } });
    assert.equal(
      r.profileJson,
      [
        '{',
        '  "appliesTo": {',
        '    "tool": "pay",',
        '    "mcpServer": null,',
        '    "sandboxMatchLabels": {',
        '      "a": "2",',
        '      "z": "1"',
        '    }',
        '  },',
        '  "commerce": null,',
        '  "rateLimit": {',
        '    "rps": 5,',
        '    "burst": null,',
        '    "window": null',
        '  },',
        '  "approval": null,',
        '  "displayName": null',
        '}',
      ].join('\n'),
    );
  });

  it('hashes the compact profile.json for versionHash, not the pretty one', () => {
    const r = ok({ appliesTo: { tool: '*' } });
    assert.equal(r.profileCompact, JSON.stringify(JSON.parse(r.profileJson)));
    assert.equal(r.versionHash, versionHash(r.profileCompact));
    assert.notEqual(r.versionHash, versionHash(r.profileJson));
  });

  it('writes the inline AGT profile verbatim and digests it with the agt-profile.yaml separator', () => {
    const r = ok({ appliesTo: { tool: '*' }, agtProfile: { inline: agtYaml } });
    assert.equal(r.agtProfileYaml, agtYaml);
    assert.equal(r.agtProfileDigest, canonicalDigest('agt-profile.yaml', agtYaml));
    assert.equal(r.configMap.data['agt-profile.yaml'], agtYaml);
    assert.equal(r.configMap.metadata.annotations['kars.azure.com/agt-profile-digest'], r.agtProfileDigest);
  });

  it('has no AGT key, digest or annotation when the spec has no agtProfile (or an empty inline)', () => {
    for (const spec of [{ appliesTo: { tool: '*' } }, { appliesTo: { tool: '*' }, agtProfile: { inline: '' } }]) {
      const r = ok(spec);
      assert.equal('agtProfileYaml' in r, false);
      assert.equal('agtProfileDigest' in r, false);
      assert.deepEqual(Object.keys(r.configMap.data), ['profile.json']);
      assert.deepEqual(Object.keys(r.configMap.metadata.annotations), ['kars.azure.com/toolpolicy-version-hash']);
    }
  });

  it('builds the toolpolicy-<name>-profile ConfigMap with the contract labels', () => {
    const r = ok({ appliesTo: { tool: '*' } });
    assert.equal(r.configMap.metadata.name, 'toolpolicy-pay-profile');
    assert.equal(r.configMap.metadata.namespace, 'team-a');
    assert.deepEqual(r.configMap.metadata.labels, {
      'app.kubernetes.io/managed-by': 'kars-controller',
      'kars.azure.com/toolpolicy': 'pay',
      'kars.azure.com/artifact': 'compiled-profile',
    });
    assert.equal(r.configMap.metadata.annotations['kars.azure.com/toolpolicy-version-hash'], r.versionHash);
  });

  it('makes the aboveThreshold default explicit when commerce is set without an approval mode', () => {
    const withBlock = JSON.parse(
      ok({ appliesTo: { tool: 'pay' }, commerce: { dailyCap: 'USD 1.00' }, approval: { threshold: 'USD 0.50' } }).profileCompact,
    ) as Record<string, unknown>;
    assert.deepEqual(withBlock['approval'], { mode: 'aboveThreshold', threshold: 'USD 0.50', channel: null });
    const without = JSON.parse(ok({ appliesTo: { tool: 'pay' }, commerce: {} }).profileCompact) as Record<string, unknown>;
    assert.deepEqual(without['approval'], { mode: 'aboveThreshold', threshold: null, channel: null });
    assert.deepEqual(without['commerce'], { dailyCap: null, monthlyCap: null, perTransferCap: null, counterpartyAllowlist: [] });
    const noCommerce = JSON.parse(ok({ appliesTo: { tool: 'pay' }, approval: {} }).profileCompact) as Record<string, unknown>;
    assert.deepEqual(noCommerce['approval'], { mode: null, threshold: null, channel: null });
  });

  it('changes versionHash when a cap changes', () => {
    const a = ok({ appliesTo: { tool: 'pay' }, commerce: { dailyCap: 'USD 100.00' } });
    const b = ok({ appliesTo: { tool: 'pay' }, commerce: { dailyCap: 'USD 999.99' } });
    assert.notEqual(a.versionHash, b.versionHash);
  });

  it('fails with InvalidSpec when both inline and bundleRef are set, and InvalidRef for bundleRef alone', () => {
    const ref = { registry: 'r', repository: 'p', digest: 'sha256:x' };
    const both = compileToolPolicy({ metadata: { name: 'p' }, spec: { appliesTo: {}, agtProfile: { inline: agtYaml, bundleRef: ref } } });
    assert.deepEqual(both.ok ? undefined : [both.reason, both.field], ['InvalidSpec', 'spec.agtProfile']);
    const bundle = compileToolPolicy({ metadata: { name: 'p' }, spec: { appliesTo: {}, agtProfile: { bundleRef: ref } } });
    assert.deepEqual(bundle.ok ? undefined : [bundle.reason, bundle.field], ['InvalidRef', 'spec.agtProfile.bundleRef']);
  });
});
