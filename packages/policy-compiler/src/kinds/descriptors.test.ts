/**
 * What every profile kind's descriptor promises (ADR 0051), checked for each entry of PROFILE_KINDS,
 * so a new kind is held to the same: its ConfigMap names round-trip and collide with no other kind's;
 * a compile of a policy a router can enforce yields the ConfigMap its descriptor names, labelled as it
 * says; and a router's `load` of
 * those bytes, echoed as `echoesOf` says, reports exactly the digests `status` tells the controller
 * to wait for.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { samples } from '@kars/policy-api/testing';
import type { KarsSandbox } from '@kars/policy-api';
import { ARTIFACT_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../configmaps.js';
import type { RouterCapabilities } from '../router-view.js';
import { egressApprovalsConfigMapName } from './egress-approval.js';
import { PROFILE_KINDS, type ProfileKind } from './index.js';

const CAPS: RouterCapabilities = { mcpServers: ['github'], guardrailProviders: ['openai-moderation'] };
const dnsLabel = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/);

/** A sample policy of each kind, and a sandbox that refers to it. */
const SAMPLES = {
  InferencePolicy: {
    policy: samples.inferencePolicy('budget', 'team'),
    sandbox: { spec: { inferenceRef: { name: 'budget' } } },
  },
  ToolPolicy: {
    // The shared sample carries AP2 commerce, which no router here enforces: one the router can.
    policy: {
      ...samples.toolPolicy('tools', 'team'),
      spec: {
        appliesTo: { tool: '*', mcpServer: 'github' },
        rateLimit: { rps: 5, burst: 10 },
        agtProfile: { inline: 'default: allow\nrules:\n  - deny: "*delete*"\n' },
      },
    },
    sandbox: { spec: { governance: { enabled: true, toolPolicyRef: { name: 'tools' } } } },
  },
} as const;

/** The checks of one descriptor, over its sample. */
function roundTrip<P extends { metadata: { name?: string; namespace?: string }; spec?: unknown }, C, L>(
  d: ProfileKind<P, C, L>,
  policy: P,
): void {
  const c = d.compile(policy);
  assert.ok(c.ok, c.ok ? '' : `${d.kind} sample does not compile: ${c.message}`);
  const s = d.status(c);
  const name = policy.metadata.name ?? '';
  const cm = s.configMap;
  assert.equal(cm.metadata.name, d.configMap.name(name));
  assert.equal(cm.metadata.namespace, policy.metadata.namespace);
  assert.equal(cm.metadata.labels[d.configMap.policyLabel], name);
  assert.equal(cm.metadata.labels[ARTIFACT_LABEL], d.configMap.artifact);
  assert.equal(cm.metadata.labels[MANAGED_BY_LABEL], MANAGED_BY_VALUE);
  assert.ok(d.configMap.bodyKey in cm.data, `${d.kind}: the body key ${d.configMap.bodyKey} is not in the ConfigMap`);
  assert.ok(d.echoKinds.includes(d.statusDigestKind));
  assert.ok(s.expect.length > 0);
  for (const e of s.expect) assert.ok(d.echoKinds.includes(e.kind), `${d.kind} expects ${e.kind}, not one of its echo kinds`);
  if (s.digest !== undefined)
    assert.equal(s.expect.find((e) => e.kind === d.statusDigestKind)?.digest, s.digest, 'status.compiledDigest is the status kind echo');

  // What a router reads back from those bytes, and echoes.
  const echoed = d.echoesOf(d.load(name, cm.data, 'test', CAPS));
  assert.deepEqual(
    echoed.map((e) => e.kind),
    [...d.echoKinds],
    `${d.kind}: a load echoes every echo kind`,
  );
  for (const e of s.expect) {
    const o = echoed.find((x) => x.kind === e.kind)?.outcome;
    assert.equal(o?.kind, 'loaded', `${d.kind}/${e.kind}: the router refused the compiled bytes`);
    assert.equal(o.kind === 'loaded' ? o.digest : undefined, e.digest, `${d.kind}/${e.kind}: the router echoes another digest`);
  }
}

describe('profile kind descriptors', () => {
  it('covers both profile kinds', () => {
    assert.deepEqual(
      PROFILE_KINDS.map((d) => d.kind),
      ['InferencePolicy', 'ToolPolicy'],
    );
  });

  it('property: a ConfigMap name reads back as its policy under its own kind, and under no other', () => {
    fc.assert(
      fc.property(dnsLabel, (name) => {
        for (const d of PROFILE_KINDS) {
          assert.equal(d.configMap.policyOf(d.configMap.name(name)), name);
          for (const other of PROFILE_KINDS) if (other !== d) assert.equal(other.configMap.policyOf(d.configMap.name(name)), undefined);
          assert.equal(d.configMap.policyOf(egressApprovalsConfigMapName(name)), undefined);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('no two kinds share a label, an artifact, a finalizer or a field manager', () => {
    for (const field of ['finalizer', 'fieldManager', 'statusManager'] as const)
      assert.equal(new Set(PROFILE_KINDS.map((d) => d[field])).size, PROFILE_KINDS.length, field);
    assert.equal(new Set(PROFILE_KINDS.map((d) => d.configMap.policyLabel)).size, PROFILE_KINDS.length);
    assert.equal(new Set(PROFILE_KINDS.map((d) => d.configMap.artifact)).size, PROFILE_KINDS.length);
  });

  for (const d of PROFILE_KINDS)
    it(`${d.kind}: compile → ConfigMap → router load → echo reports exactly what the controller awaits`, () => {
      roundTrip(d as ProfileKind<typeof SAMPLES.InferencePolicy.policy, unknown, unknown>, SAMPLES[d.kind].policy);
    });

  for (const d of PROFILE_KINDS)
    it(`${d.kind}: a sandbox refers to the policy its spec names, and to none without`, () => {
      assert.equal(d.referencedBy(SAMPLES[d.kind].sandbox as Pick<KarsSandbox, 'spec'>), SAMPLES[d.kind].policy.metadata.name);
      assert.equal(d.referencedBy({ spec: {} } as Pick<KarsSandbox, 'spec'>), undefined);
    });
});
