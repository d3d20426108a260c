import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ToolPolicySpec } from '@kars/policy-api';
import { compileToolPolicy, type CompiledToolPolicy } from './tool-policy.js';
import { canonicalDigest, versionHash } from '../digest.js';
import { parseToolProfile } from '../router-view.js';

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

  describe('toolPins and unpinnedTools (ADR 0043)', () => {
    const A = `sha256:${'a'.repeat(64)}`;
    const B = `sha256:${'b'.repeat(64)}`;
    const base: ToolPolicySpec = { appliesTo: { tool: '*' } };

    it('writes nothing new for a policy without them: same bytes, same digest as before', () => {
      const r = ok(base);
      assert.ok(!r.profileJson.includes('toolPins') && !r.profileJson.includes('unpinnedTools'));
      assert.deepEqual(Object.keys(JSON.parse(r.profileJson)), ['appliesTo', 'commerce', 'rateLimit', 'approval', 'displayName']);
    });

    it('compiles pins sorted (any-server first, then by server and name) after displayName, and unpinnedTools last', () => {
      const r = ok({
        ...base,
        unpinnedTools: 'Deny',
        toolPins: [
          { name: 'search', server: 'gh', digest: A },
          { name: 'write_file', digest: B },
          { name: 'read_file', server: 'fs', digest: A },
          { name: 'read_file', digest: A },
        ],
      });
      const p = JSON.parse(r.profileJson);
      assert.deepEqual(Object.keys(p), ['appliesTo', 'commerce', 'rateLimit', 'approval', 'displayName', 'toolPins', 'unpinnedTools']);
      assert.deepEqual(p.toolPins, [
        { server: null, name: 'read_file', digest: A },
        { server: null, name: 'write_file', digest: B },
        { server: 'fs', name: 'read_file', digest: A },
        { server: 'gh', name: 'search', digest: A },
      ]);
      assert.equal(p.unpinnedTools, 'Deny');
    });

    it('the digest covers the pins: a pin added, a digest changed, a name changed, unpinnedTools set each change it; order does not', () => {
      const pins = [
        { name: 'read_file', digest: A },
        { name: 'search', digest: B },
      ];
      const d = (spec: ToolPolicySpec): string => ok(spec).profileDigest;
      const one = d({ ...base, toolPins: pins });
      const all = [
        d(base),
        one,
        d({ ...base, toolPins: [pins[0]!] }),
        d({ ...base, toolPins: [pins[0]!, { ...pins[1]!, digest: A }] }),
        d({ ...base, toolPins: [pins[0]!, { ...pins[1]!, name: 'Search' }] }),
        d({ ...base, toolPins: [pins[0]!, { ...pins[1]!, server: 'gh' }] }),
        d({ ...base, toolPins: pins, unpinnedTools: 'Deny' }),
        d({ ...base, toolPins: pins, unpinnedTools: 'Allow' }),
        d({ ...base, toolPins: [] }),
      ];
      assert.equal(new Set(all).size, all.length, 'every variant has its own digest');
      assert.equal(d({ ...base, toolPins: [...pins].reverse() }), one, 'the order pins are written in does not count');
      assert.notEqual(ok({ ...base, toolPins: pins }).versionHash, ok(base).versionHash);
    });

    it('refuses a malformed pin, a duplicate (names ignoring case) and an unknown unpinnedTools', () => {
      const bad = (spec: ToolPolicySpec): [string, string] | undefined => {
        const r = compileToolPolicy({ metadata: { name: 'p' }, spec });
        return r.ok ? undefined : [r.reason, r.field];
      };
      assert.deepEqual(bad({ ...base, toolPins: [{ name: 'x', digest: 'sha256:x' }] }), ['InvalidSpec', 'spec.toolPins[0]']);
      assert.deepEqual(
        bad({
          ...base,
          toolPins: [
            { name: 'x', digest: A },
            { name: 'X', digest: B },
          ],
        }),
        ['InvalidSpec', 'spec.toolPins[1]'],
      );
      assert.deepEqual(bad({ ...base, unpinnedTools: 'deny' as never }), ['InvalidSpec', 'spec.unpinnedTools']);
    });

    it('a router parses what the compiler writes, and refuses what it does not know (strict reader)', () => {
      const caps = { mcpServers: ['fs'], guardrailProviders: [] };
      const r = ok({ ...base, toolPins: [{ name: 'read_file', server: 'fs', digest: A }], unpinnedTools: 'Deny' });
      const parsed = parseToolProfile('p', r.profileJson, undefined, caps);
      assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
      assert.deepEqual(parsed.rules.toolPins, [{ server: 'fs', name: 'read_file', digest: A }]);
      assert.equal(parsed.rules.unpinnedTools, 'Deny');
      const plain = parseToolProfile('p', ok(base).profileJson, undefined, caps);
      assert.ok(plain.ok);
      assert.deepEqual([plain.rules.toolPins, plain.rules.unpinnedTools], [[], 'Allow']);
      const refused = (profile: Record<string, unknown>): string => {
        const x = parseToolProfile('p', JSON.stringify({ ...JSON.parse(ok(base).profileJson), ...profile }), undefined, caps);
        return x.ok ? 'accepted' : x.error;
      };
      assert.match(refused({ toolPins: [{ server: null, name: 'x', digest: 'sha256:1' }] }), /toolPins\[0\]\.digest/);
      assert.match(refused({ toolPins: [{ server: null, name: 'x', digest: A, title: 't' }] }), /toolPins\[0\]\.title: unknown field/);
      assert.match(
        refused({
          toolPins: [
            { server: null, name: 'x', digest: A },
            { server: null, name: 'X', digest: A },
          ],
        }),
        /second pin/,
      );
      assert.match(refused({ unpinnedTools: 'Block' }), /unpinnedTools: must be one of Allow, Deny/);
      assert.match(refused({ toolPinz: [] }), /toolPinz: unknown field/);
    });
  });
});
