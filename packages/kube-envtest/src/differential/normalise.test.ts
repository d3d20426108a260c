import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { differences, judge, readKnownDifferences } from './compare.js';
import { normaliseTranscript } from './normalise.js';
import type { StepResult, Transcript } from './types.js';

const obj = (rv: string, uid: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  kind: 'ConfigMap',
  metadata: { name: 'a', namespace: 'd-ns-1', uid, resourceVersion: rv, creationTimestamp: '2026-12-02T03:00:00Z' },
  ...extra,
});

describe('normaliseTranscript', () => {
  it('keeps the order and equality of resourceVersions, not their digits; numbers uids; hides times and the namespace', () => {
    const a: StepResult[] = [
      { step: 0, status: 201, body: obj('17', '11111111-1111-4111-8111-111111111111') },
      { step: 1, status: 200, body: obj('230', '11111111-1111-4111-8111-111111111111') },
      { step: 2, status: 200, body: obj('230', '11111111-1111-4111-8111-111111111111', { message: 'in namespace "d-ns-1"' }) },
    ];
    const b: StepResult[] = [
      { step: 0, status: 201, body: obj('5', '22222222-2222-4222-8222-222222222222') },
      { step: 1, status: 200, body: obj('6', '22222222-2222-4222-8222-222222222222') },
      { step: 2, status: 200, body: obj('6', '22222222-2222-4222-8222-222222222222', { message: 'in namespace "d-ns-1"' }) },
    ];
    assert.deepEqual(normaliseTranscript(a, 'd-ns-1'), normaliseTranscript(b, 'd-ns-1'));
    const n = normaliseTranscript(a, 'd-ns-1');
    assert.deepEqual((n[0]!.body as { metadata: unknown }).metadata, {
      name: 'a',
      namespace: '$NS',
      uid: 'UID1',
      resourceVersion: 'RV1',
      creationTimestamp: '$TIME',
    });
    assert.equal((n[2]!.body as { message: string }).message, 'in namespace "$NS"');
  });

  it('tells apart a resourceVersion that did not change from one that did', () => {
    const same: StepResult[] = [
      { step: 0, body: obj('5', 'u') },
      { step: 1, body: obj('5', 'u') },
    ];
    const bumped: StepResult[] = [
      { step: 0, body: obj('5', 'u') },
      { step: 1, body: obj('9', 'u') },
    ];
    assert.notDeepEqual(normaliseTranscript(same, 'x'), normaliseTranscript(bumped, 'x'));
  });

  it('flags a list whose resourceVersion is older than an item', () => {
    const list = { kind: 'ConfigMapList', metadata: { resourceVersion: '3' }, items: [obj('7', 'u')] };
    const n = normaliseTranscript([{ step: 0, body: list }], 'x');
    assert.equal((n[0]!.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion, '$LISTRV-BELOW-ITEMS(3)');
  });

  it("treats a Table's resourceVersion as a list's, with its rows as the items", () => {
    const table = (rv: string): unknown => ({ kind: 'Table', metadata: { resourceVersion: rv }, rows: [{ object: obj('7', 'u') }] });
    const rvOf = (b: unknown): string =>
      (normaliseTranscript([{ step: 0, body: b }], 'x')[0]!.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    assert.equal(rvOf(table('7')), '$LISTRV');
    assert.equal(rvOf(table('9')), '$LISTRV', 'a newer list revision is the same answer');
    assert.equal(rvOf(table('3')), '$LISTRV-BELOW-ITEMS(3)');
  });

  it("rewrites a Table's Age cells (and date columns), which follow the wall clock, and keeps the others", () => {
    const table = (age: string | null, size: number): unknown => ({
      kind: 'Table',
      metadata: {},
      columnDefinitions: [
        { name: 'Name', type: 'string' },
        { name: 'Size', type: 'integer' },
        { name: 'Created', type: 'date' },
        { name: 'Age', type: 'string' },
      ],
      rows: [{ cells: ['g', size, age, age] }],
    });
    const n = (b: unknown): unknown => normaliseTranscript([{ step: 0, body: b }], 'x')[0]!.body;
    assert.deepEqual(n(table('0s', 1)), n(table('1s', 1)));
    assert.deepEqual((n(table('0s', 1)) as { rows: Array<{ cells: unknown[] }> }).rows[0]!.cells, ['g', 1, '$AGE', '$AGE']);
    assert.notDeepEqual(n(table('0s', 1)), n(table('0s', 2)), 'other cells still count');
    assert.notDeepEqual(n(table('0s', 1)), n(table(null, 1)), 'an absent value is not an age');
  });

  it('numbers uids the same whatever order the members of an object come in (and still tells two uids apart)', () => {
    const owner = '33333333-3333-4333-8333-333333333333';
    const self = '44444444-4444-4444-8444-444444444444';
    const kars = { metadata: { ownerReferences: [{ uid: owner }], uid: self } };
    const kube = { metadata: { uid: self, ownerReferences: [{ uid: owner }] } };
    const swapped = { metadata: { uid: owner, ownerReferences: [{ uid: self }] } };
    const n = (b: unknown): unknown => normaliseTranscript([{ step: 0, body: b }], 'x');
    assert.deepEqual(n(kars), n(kube));
    assert.notDeepEqual(
      n(kars),
      n({ metadata: { uid: self, ownerReferences: [{ uid: self }] } }),
      'an object owning itself is not the same answer',
    );
    assert.deepEqual(n(swapped), n(kube), 'numbering is by position, so swapping two uids consistently is the same answer');
  });

  it('numbers allocated cluster IPs by first appearance, so that only their equality counts', () => {
    const svc = (ip: string, ips: string[]): unknown => ({
      kind: 'Service',
      spec: { clusterIP: ip, clusterIPs: ips, externalName: '10.0.0.9' },
    });
    const n = (...bodies: unknown[]): unknown =>
      normaliseTranscript(
        bodies.map((body, step) => ({ step, body })),
        'x',
      );
    assert.deepEqual(n(svc('10.0.0.7', ['10.0.0.7'])), n(svc('10.0.0.200', ['10.0.0.200'])));
    assert.notDeepEqual(n(svc('10.0.0.7', ['10.0.0.8'])), n(svc('10.0.0.7', ['10.0.0.7'])), 'clusterIP and clusterIPs[0] must agree');
    assert.notDeepEqual(
      n(svc('10.0.0.7', ['10.0.0.7']), svc('10.0.0.7', ['10.0.0.7'])),
      n(svc('10.0.0.7', ['10.0.0.7']), svc('10.0.0.8', ['10.0.0.8'])),
      'a changed address is a different answer',
    );
    const headless = n(svc('None', ['None'])) as Array<{ body: { spec: { clusterIP: string; externalName: string } } }>;
    assert.equal(headless[0]!.body.spec.clusterIP, 'None', 'a headless Service keeps "None"');
    assert.equal(headless[0]!.body.spec.externalName, '10.0.0.9', 'only the allocated fields are rewritten');
  });

  it('ranks the stored resourceVersion a precondition conflict quotes, and keeps the one the client sent', () => {
    const conflict = (rv: string): unknown => ({
      kind: 'Status',
      message: `the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${rv}). The object might have been modified`,
    });
    const n = (b: unknown): string => (normaliseTranscript([{ step: 0, body: b }], 'x')[0]!.body as { message: string }).message;
    assert.equal(n(conflict('893')), n(conflict('1512')));
    assert.match(n(conflict('893')), /precondition \(1\) .* in record \(\$RV\)/);
    const withObject = normaliseTranscript(
      [
        { step: 0, body: { metadata: { resourceVersion: '77' } } },
        { step: 1, body: conflict('77') },
      ],
      'x',
    );
    assert.match((withObject[1]!.body as { message: string }).message, /in record \(RV1\)/, 'a known resourceVersion keeps its rank');
  });

  it('numbers generated names by their prefix', () => {
    const g = { kind: 'ConfigMap', metadata: { name: 'gen-x7k2p', generateName: 'gen-' } };
    const n = normaliseTranscript([{ step: 0, body: g }], 'x');
    assert.equal((n[0]!.body as { metadata: { name: string } }).metadata.name, 'gen-$GEN1');
  });
});

describe('judge', () => {
  const t = (id: string, status: number): Transcript => ({ id, results: [{ step: 0, status }] });
  it('fails on an unlisted difference and on a listed one that no longer occurs', () => {
    const known = [
      { scenario: 'b', kars: 'x', kube: 'y', why: 'z' },
      { scenario: 'c', kars: 'x', kube: 'y', why: 'z' },
      { scenario: 'd', kars: 'x', kube: 'y', why: 'z', versions: ['1.37'] },
    ];
    const v = judge([t('a', 200), t('b', 200), t('c', 404), t('d', 1)], [t('a', 201), t('b', 200), t('c', 403), t('d', 2)], known, '1.34');
    assert.deepEqual(v.unlisted, ['a', 'd']);
    assert.deepEqual(v.stale, ['b']);
    assert.equal(v.identical, 1);
    const unstable = judge([t('b', 200)], [t('b', 200)], [{ scenario: 'b', kars: 'x', kube: 'y', why: 'z', unstable: true }], '1.34');
    assert.deepEqual(unstable.stale, [], 'an unstable entry that happens to agree is not stale');
  });
  it('names the path where two answers differ', () => {
    assert.deepEqual(differences({ a: { b: [1, 2] } }, { a: { b: [1, 3] } }), ['$.a.b[1]: kars 2 | kube 3']);
  });
});

describe('readKnownDifferences', () => {
  it('expands a group of scenarios with one cause, and refuses a scenario listed twice', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kd-'));
    try {
      const f = join(dir, 'k.yaml');
      writeFileSync(
        f,
        'differences:\n  - scenarios: [a, b]\n    kars: x\n    kube: y\n    why: z\n  - scenario: c\n    kars: x\n    kube: y\n    why: z\n',
      );
      assert.deepEqual(
        readKnownDifferences(f).map((d) => d.scenario),
        ['a', 'b', 'c'],
      );
      writeFileSync(
        f,
        'differences:\n  - scenarios: [a, b]\n    kars: x\n    kube: y\n    why: z\n  - scenario: b\n    kars: x\n    kube: y\n    why: z\n',
      );
      assert.throws(() => readKnownDifferences(f), /b is listed twice/);
      writeFileSync(f, 'differences:\n  - scenarios: []\n    kars: x\n    kube: y\n    why: z\n');
      assert.throws(() => readKnownDifferences(f), /names no scenario/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
