import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileDocuments, type EgressApprovalDigest, type InferencePolicyDigest } from './compile-docs.js';
import { compileInferencePolicy } from './kinds/inference-policy.js';
import { mergedAllowlist } from './egress.js';

const NOW = '2026-05-14T19:00:00Z';
const V = 'kars.azure.com/v1alpha1';

function ip(name: string, spec: Record<string, unknown>, namespace = 'team-a'): Record<string, unknown> {
  return { apiVersion: V, kind: 'InferencePolicy', metadata: { name, namespace }, spec };
}
function approval(name: string, spec: Record<string, unknown>, status?: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: V,
    kind: 'EgressApproval',
    metadata: { name, namespace: 'team-a' },
    spec: { sandbox: 'demo', reason: 'r', ttl: 'PT1H', ...spec },
    ...(status ? { status } : {}),
  };
}
const sandbox = {
  apiVersion: V,
  kind: 'KarsSandbox',
  metadata: { name: 'demo', namespace: 'team-a' },
  spec: { networkPolicy: { allowedEndpoints: [{ host: 'api.github.com' }] } },
};

describe('compileDocuments', () => {
  it('compiles what the API server would store: CRD defaults such as appliesTo.action "*" are applied first', () => {
    const doc = ip('p', { appliesTo: { sandboxName: 'sb' } });
    const r = compileDocuments([doc], { now: NOW });
    assert.deepEqual(r.errors, []);
    const d = r.digests[0] as InferencePolicyDigest;
    const stored = compileInferencePolicy({
      metadata: { name: 'p', namespace: 'team-a' },
      spec: { appliesTo: { sandboxName: 'sb', sandboxMatchLabels: {}, action: '*' } },
    });
    assert.ok(stored.ok);
    assert.equal(d.compiledDigest, stored.compiledDigest);
    assert.equal(r.configMaps[0]?.data['inference-policy.json'], stored.body);
  });

  it('does not modify the documents it is given', () => {
    const doc = ip('p', { appliesTo: {} });
    const copy = structuredClone(doc);
    compileDocuments([doc], { now: NOW });
    assert.deepEqual(doc, copy);
  });

  it('is deterministic, and label order in the input does not change the output', () => {
    const a = compileDocuments([ip('p', { appliesTo: { sandboxMatchLabels: { b: '2', a: '1' } } })], { now: NOW });
    const b = compileDocuments([ip('p', { appliesTo: { sandboxMatchLabels: { a: '1', b: '2' } } })], { now: NOW });
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });

  it('reports every invalid document with its index, kind, name and field, not just the first', () => {
    const r = compileDocuments(
      [
        ip('bad-severity', { appliesTo: {}, contentSafety: { hate: 'Extreme' } }),
        ip('good', { appliesTo: {} }),
        ip('bad-budget', { appliesTo: {}, tokenBudget: { dailyTokens: 10, monthlyTokens: 5 } }),
      ],
      { now: NOW },
    );
    const where = r.errors.map((e) => [e.index, e.kind, e.name, e.field]);
    assert.ok(
      where.some(([i, k, n, f]) => i === 0 && k === 'InferencePolicy' && n === 'bad-severity' && f === 'spec.contentSafety.hate'),
      JSON.stringify(where),
    );
    assert.ok(
      where.some(([i, , n, f]) => i === 2 && n === 'bad-budget' && String(f).startsWith('spec.tokenBudget')),
      JSON.stringify(where),
    );
    assert.ok(!where.some(([i]) => i === 1));
  });

  it('rejects unknown fields, naming their path, instead of silently dropping them', () => {
    const r = compileDocuments([ip('p', { appliesTo: {}, tokenBudgt: { dailyTokens: 1 } })], { now: NOW });
    assert.deepEqual(
      r.errors.map((e) => e.field),
      ['spec.tokenBudgt'],
    );
  });

  it('fails a bundleRef policy with reason InvalidRef (no OCI access offline)', () => {
    const r = compileDocuments(
      [ip('p', { appliesTo: {}, bundleRef: { registry: 'r.example', repository: 'p', digest: 'sha256:' + 'a'.repeat(64) } })],
      { now: NOW },
    );
    assert.deepEqual(
      r.errors.map((e) => [e.field, e.reason]),
      [['spec.bundleRef', 'InvalidRef']],
    );
    assert.deepEqual(r.configMaps, []);
  });

  it('rejects the pre-rename group with a hint, and a duplicate object', () => {
    const old = { ...ip('p', { appliesTo: {} }), apiVersion: 'azureclaw.azure.com/v1alpha1' };
    const r = compileDocuments([old, ip('q', { appliesTo: {} }), ip('q', { appliesTo: {} })], { now: NOW });
    assert.equal(r.errors[0]?.field, 'apiVersion');
    assert.match(r.errors[0]?.message ?? '', /pre-rename/);
    assert.deepEqual([r.errors[1]?.index, r.errors[1]?.field], [2, 'metadata.name']);
  });

  it('skips documents of other kinds with a warning, and ignores empty documents', () => {
    const r = compileDocuments([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } }, null, ip('p', { appliesTo: {} })], {
      now: NOW,
    });
    assert.deepEqual(r.errors, []);
    assert.equal(r.warnings.length, 1);
    assert.equal(r.warnings[0]?.index, 0);
    assert.equal(r.digests.length, 1);
  });

  it('puts documents without a namespace in opts.namespace, else "default"', () => {
    const doc = { apiVersion: V, kind: 'InferencePolicy', metadata: { name: 'p' }, spec: { appliesTo: {} } };
    assert.equal(compileDocuments([doc], { now: NOW }).configMaps[0]?.metadata.namespace, 'default');
    assert.equal(compileDocuments([doc], { now: NOW, namespace: 'ops' }).configMaps[0]?.metadata.namespace, 'ops');
  });

  it('returns an error rather than throwing when now is not a time', () => {
    const r = compileDocuments([], { now: 'yesterday' });
    assert.equal(r.errors[0]?.field, 'now');
  });
});

describe('compileDocuments with EgressApprovals', () => {
  it('puts two approvals for one sandbox in one ConfigMap, both echoing the digest over baseline ∪ both', () => {
    const a = approval('a', { hosts: [{ host: 'pypi.org' }] });
    const b = approval('b', { hosts: [{ host: 'registry.example.com', port: 5000 }], ticket: 'INC-1' });
    const r = compileDocuments([sandbox, a, b], { now: NOW });
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.warnings, []);
    assert.equal(r.configMaps.length, 1);
    assert.equal(r.configMaps[0]?.metadata.name, 'kars-demo-egress-approvals');
    assert.equal(r.configMaps[0]?.metadata.namespace, 'team-a');
    assert.deepEqual(Object.keys(r.configMaps[0]?.data ?? {}), ['approval-a.json', 'approval-b.json']);
    const expected = mergedAllowlist(
      [{ host: 'api.github.com' }],
      [[{ host: 'pypi.org' }], [{ host: 'registry.example.com', port: 5000 }]],
    ).digest;
    assert.deepEqual(
      r.digests.map((d) => (d as EgressApprovalDigest).mergedDigest),
      [expected, expected],
    );
  });

  it('stamps effectiveAt from status when present, else now, and expiresAt = effectiveAt + ttl', () => {
    const r = compileDocuments(
      [
        sandbox,
        approval('a', { hosts: [{ host: 'x.example' }], ttl: 'PT1H30M' }, { effectiveAt: '2026-05-14T18:00:00Z' }),
        approval('b', { hosts: [{ host: 'y.example' }], ttl: 'P1D' }),
      ],
      {
        now: '2026-05-14T19:00:00.750Z',
      },
    );
    const [a, b] = r.digests as EgressApprovalDigest[];
    assert.deepEqual([a?.effectiveAt, a?.expiresAt], ['2026-05-14T18:00:00Z', '2026-05-14T19:30:00Z']);
    assert.deepEqual([b?.effectiveAt, b?.expiresAt], ['2026-05-14T19:00:00Z', '2026-05-15T19:00:00Z']);
  });

  it('leaves an expired approval out of the ConfigMap and out of the merged digest', () => {
    const expired = approval('old', { hosts: [{ host: 'old.example' }], ttl: 'PT1H' }, { effectiveAt: '2026-05-14T17:00:00Z' });
    const live = approval('new', { hosts: [{ host: 'new.example' }] });
    const r = compileDocuments([sandbox, expired, live], { now: NOW });
    assert.deepEqual(Object.keys(r.configMaps[0]?.data ?? {}), ['approval-new.json']);
    const [old, fresh] = r.digests as EgressApprovalDigest[];
    assert.deepEqual([old?.expired, old?.mergedDigest, old?.configMap], [true, null, null]);
    assert.equal(fresh?.mergedDigest, mergedAllowlist([{ host: 'api.github.com' }], [[{ host: 'new.example' }]]).digest);
  });

  it('warns and assumes an empty baseline when the sandbox is not among the documents', () => {
    const r = compileDocuments([approval('a', { hosts: [{ host: 'example.com' }] })], { now: NOW });
    assert.equal(r.warnings.length, 1);
    assert.match(r.warnings[0]?.message ?? '', /empty baseline/);
    assert.equal(
      (r.digests[0] as EgressApprovalDigest).mergedDigest,
      'sha256:fe6cf9580a22eaacff45a3c8d3bb06f5f635b34c5981558b4587524c45e9c8a5',
    );
  });

  it('checks the TTL against the ceiling from opts.env, with the frozen condition reasons', () => {
    const long = approval('a', { hosts: [{ host: 'example.com' }], ttl: 'PT48H' });
    assert.deepEqual(
      compileDocuments([long], { now: NOW }).errors.map((e) => [e.field, e.reason]),
      [['spec.ttl', 'TtlExceedsCeiling']],
    );
    assert.deepEqual(compileDocuments([long], { now: NOW, env: { EGRESS_APPROVAL_MAX_TTL_SECONDS: String(72 * 3600) } }).errors, []);
    const r = compileDocuments([approval('b', { hosts: [{ host: 'example.com' }], ttl: 'P1W' })], { now: NOW });
    assert.equal(r.errors[0]?.field, 'spec.ttl');
  });
});
