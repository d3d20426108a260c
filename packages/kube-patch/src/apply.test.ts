import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeObject } from '@kars/kube-core';
import { serverSideApply, type ApplyRequest, type ApplyResult } from './apply.js';
import { trackUpdate } from './managed.js';
import { PatchError } from './errors.js';

const T1 = '2024-01-01T00:00:00Z';
const T2 = '2024-01-01T00:01:00Z';

function cm(data: Record<string, string>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: 'ns', ...extra }, data };
}

function apply(
  live: KubeObject | undefined,
  applied: Record<string, unknown>,
  manager: string,
  more: Partial<ApplyRequest> = {},
): ApplyResult {
  return serverSideApply({ live, applied, manager, force: false, apiVersion: 'v1', now: T2, ...more });
}

function ok(r: ApplyResult): KubeObject {
  if (!r.ok) assert.fail(`unexpected conflicts: ${JSON.stringify(r.conflicts)}`);
  return r.object;
}

function owners(obj: KubeObject): Record<string, unknown> {
  return Object.fromEntries((obj.metadata.managedFields ?? []).map((e) => [`${e.manager}/${e.operation}`, e.fieldsV1]));
}

void test('an apply that creates the object returns the config plus an Apply entry', () => {
  const obj = ok(apply(undefined, cm({ a: '1' }, { labels: { app: 'x' } }), 'A', { now: T1 }));
  assert.deepEqual(obj.data, { a: '1' });
  assert.deepEqual(obj.metadata.managedFields, [
    {
      manager: 'A',
      operation: 'Apply',
      apiVersion: 'v1',
      time: T1,
      fieldsType: 'FieldsV1',
      fieldsV1: { 'f:data': { 'f:a': {} }, 'f:metadata': { 'f:labels': { 'f:app': {} } } },
    },
  ]);
});

void test('two managers applying different keys of one ConfigMap coexist', () => {
  let obj = ok(apply(undefined, cm({ a: '1' }), 'A', { now: T1 }));
  obj = ok(apply(obj, cm({ b: '2' }), 'B'));
  assert.deepEqual(obj.data, { a: '1', b: '2' });
  obj = ok(apply(obj, cm({ a: '1' }), 'A'));
  assert.deepEqual(obj.data, { a: '1', b: '2' });
  assert.deepEqual(owners(obj), { 'A/Apply': { 'f:data': { 'f:a': {} } }, 'B/Apply': { 'f:data': { 'f:b': {} } } });
});

void test('applying a different value to a field another manager owns is a conflict naming manager and field', () => {
  const obj = ok(apply(undefined, cm({ a: '1', b: '1' }), 'A', { now: T1 }));
  const r = apply(obj, cm({ a: '2' }), 'B');
  assert.deepEqual(r, { ok: false, conflicts: [{ manager: 'A', field: '.data.a', operation: 'Apply', apiVersion: 'v1' }] });
});

void test('applying the same value as another manager shares ownership without conflict', () => {
  let obj = ok(apply(undefined, cm({ a: '1' }), 'A', { now: T1 }));
  obj = ok(apply(obj, cm({ a: '1' }), 'B'));
  assert.deepEqual(owners(obj), { 'A/Apply': { 'f:data': { 'f:a': {} } }, 'B/Apply': { 'f:data': { 'f:a': {} } } });
  // A dropping the shared field leaves it in place, because B still owns it.
  obj = ok(apply(obj, cm({}), 'A'));
  assert.deepEqual(obj.data, { a: '1' });
});

void test('force takes ownership away from the other manager', () => {
  let obj = ok(apply(undefined, cm({ a: '1', b: '1' }), 'A', { now: T1 }));
  obj = ok(apply(obj, cm({ a: '2' }), 'B', { force: true }));
  assert.deepEqual(obj.data, { a: '2', b: '1' });
  assert.deepEqual(owners(obj), { 'A/Apply': { 'f:data': { 'f:b': {} } }, 'B/Apply': { 'f:data': { 'f:a': {} } } });
});

void test('a field the manager applied before and now omits is removed', () => {
  let obj = ok(apply(undefined, cm({ a: '1', b: '2' }, { labels: { x: '1', y: '2' } }), 'A', { now: T1 }));
  obj = ok(apply(obj, cm({ a: '1' }, { labels: { x: '1' } }), 'A'));
  assert.deepEqual(obj.data, { a: '1' });
  assert.deepEqual(obj.metadata.labels, { x: '1' });
  // B applying {c} never removes A's fields.
  obj = ok(apply(obj, cm({ c: '3' }), 'B'));
  assert.deepEqual(obj.data, { a: '1', c: '3' });
});

void test('re-applying the same full object is a no-op', () => {
  const manifest = { ...cm({ a: '1' }, { labels: { app: 'x' }, annotations: { n: 'v' } }) };
  const first = ok(apply(undefined, manifest, 'kubectl', { now: T1 }));
  const live = { ...first, metadata: { ...first.metadata, uid: 'u1', resourceVersion: '5', creationTimestamp: T1 } };
  const second = ok(apply(live, manifest, 'kubectl'));
  assert.deepEqual(second, live);
});

void test('applying over a field owned by an Update manager conflicts', () => {
  const created = trackUpdate(undefined, cm({ a: '1' }) as KubeObject, 'kubectl-create', 'v1', T1);
  assert.deepEqual(owners(created), { 'kubectl-create/Update': { 'f:data': { '.': {}, 'f:a': {} } } });
  const r = apply(created, cm({ a: '2' }), 'kubectl');
  assert.deepEqual(r, { ok: false, conflicts: [{ manager: 'kubectl-create', field: '.data.a', operation: 'Update', apiVersion: 'v1' }] });
  assert.equal(apply(created, cm({ a: '1' }), 'kubectl').ok, true);
});

void test('trackUpdate transfers ownership so a later apply by the old owner conflicts', () => {
  const applied = ok(apply(undefined, cm({ a: '1', b: '1' }), 'A', { now: T1 }));
  const edited = structuredClone(applied);
  edited.data = { a: 'edited', b: '1' };
  const updated = trackUpdate(applied, edited, 'ctrl', 'v1', T2);
  assert.deepEqual(owners(updated), { 'A/Apply': { 'f:data': { 'f:b': {} } }, 'ctrl/Update': { 'f:data': { 'f:a': {} } } });
  const r = apply(updated, cm({ a: '1', b: '1' }), 'A');
  assert.deepEqual(r, { ok: false, conflicts: [{ manager: 'ctrl', field: '.data.a', operation: 'Update', apiVersion: 'v1' }] });
});

void test('an apply configuration carrying managedFields or lacking apiVersion/kind throws PatchError', () => {
  const withMf = cm({ a: '1' }, { managedFields: [] });
  assert.throws(
    () => apply(undefined, withMf, 'A'),
    (e: unknown) => e instanceof PatchError && /managedFields must be nil/.test(e.message),
  );
  assert.throws(() => apply(undefined, { kind: 'ConfigMap', metadata: { name: 'x' } }, 'A'), PatchError);
  assert.throws(() => apply(undefined, { apiVersion: 'v1', metadata: { name: 'x' } }, 'A'), PatchError);
});

void test('apply never mutates the live object or the applied configuration', () => {
  const live = ok(apply(undefined, cm({ a: '1', b: '2' }), 'A', { now: T1 }));
  const applied = cm({ a: '1' });
  const l0 = structuredClone(live);
  const a0 = structuredClone(applied);
  const out = ok(apply(live, applied, 'A'));
  (out.data as Record<string, string>)['a'] = 'mutated';
  assert.deepEqual(live, l0);
  assert.deepEqual(applied, a0);
});

void test('an object without managedFields belongs to before-first-apply at the first apply', () => {
  const live = cm({ a: '1' }) as KubeObject;
  const r = apply(live, cm({ a: '2' }), 'A');
  assert.deepEqual(r, {
    ok: false,
    conflicts: [{ manager: 'before-first-apply', field: '.data.a', operation: 'Update', apiVersion: 'v1' }],
  });
  const forced = ok(apply(live, cm({ a: '2' }), 'A', { force: true }));
  assert.deepEqual(Object.keys(owners(forced)), ['A/Apply', 'before-first-apply/Update']);
});

void test('associative lists merge per key and each applier keeps its own items', () => {
  const options = { listKeys: { 'spec.containers': ['name'] } };
  const pod = (containers: unknown[]): Record<string, unknown> => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p' },
    spec: { containers },
  });
  let obj = ok(apply(undefined, pod([{ name: 'a', image: 'a:1' }]), 'A', { options, now: T1 }));
  obj = ok(apply(obj, pod([{ name: 'b', image: 'b:1' }]), 'B', { options }));
  assert.deepEqual((obj['spec'] as { containers: unknown[] }).containers, [
    { name: 'a', image: 'a:1' },
    { name: 'b', image: 'b:1' },
  ]);
  assert.deepEqual(owners(obj)['B/Apply'], {
    'f:spec': { 'f:containers': { 'k:{"name":"b"}': { '.': {}, 'f:image': {}, 'f:name': {} } } },
  });
  const r = apply(obj, pod([{ name: 'a', image: 'a:2' }]), 'B', { options });
  assert.deepEqual(r, {
    ok: false,
    conflicts: [{ manager: 'A', field: '.spec.containers[name="a"].image', operation: 'Apply', apiVersion: 'v1' }],
  });
  obj = ok(apply(obj, pod([]), 'A', { options }));
  assert.deepEqual((obj['spec'] as { containers: unknown[] }).containers, [{ name: 'b', image: 'b:1' }]);
});

void test('status is ignored on the main resource and is the only thing applied through /status', () => {
  const options = { ignoreStatus: true };
  const cr = (spec: unknown, status: unknown): Record<string, unknown> => ({
    apiVersion: 'kars.azure.com/v1alpha1',
    kind: 'Sandbox',
    metadata: { name: 's' },
    spec,
    status,
  });
  let obj = ok(apply(undefined, cr({ x: 1 }, { phase: 'Ignored' }), 'A', { options, apiVersion: 'kars.azure.com/v1alpha1' }));
  assert.equal(obj['status'], undefined);
  obj = ok(
    apply(obj, cr({ x: 99 }, { phase: 'Ready' }), 'ctrl', { options, apiVersion: 'kars.azure.com/v1alpha1', subresource: 'status' }),
  );
  assert.deepEqual(obj['spec'], { x: 1 });
  assert.deepEqual(obj['status'], { phase: 'Ready' });
  assert.deepEqual(
    obj.metadata.managedFields?.map((e) => [e.manager, e.subresource ?? '', e.fieldsV1]),
    [
      ['A', '', { 'f:spec': { 'f:x': {} } }],
      ['ctrl', 'status', { 'f:status': { 'f:phase': {} } }],
    ],
  );
});

void test('applying null to a field another manager owns is a conflict, and with force removes it', () => {
  const obj = ok(apply(undefined, cm({ a: '1', b: '1' }), 'A', { now: T1 }));
  const nulled = { ...cm({}), data: { a: null } };
  assert.deepEqual(apply(obj, nulled, 'B'), {
    ok: false,
    conflicts: [{ manager: 'A', field: '.data.a', operation: 'Apply', apiVersion: 'v1' }],
  });
  const forced = ok(apply(obj, nulled, 'B', { force: true }));
  assert.deepEqual(forced.data, { b: '1' });
});

/** Freeze a JSON value and everything in it, so any write into it throws (modules are strict). */
function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

void test('never writes into a deep-frozen live object or configuration on the prune, forced-conflict and status paths (the apiserver passes its stored copy)', () => {
  // The paths that build the result: merge into a nested map, prune a field the manager dropped,
  // a keyed list, a forced conflict taking a field from another manager, and a status apply.
  let live = ok(apply(undefined, cm({ a: '1', b: '2' }, { labels: { x: '1', y: '2' } }), 'A', { now: T1 }));
  live = ok(apply(live, cm({ c: '3' }), 'B'));
  deepFreeze(live);
  const snapshot = JSON.stringify(live);
  const steps: Array<[Record<string, unknown>, string, Partial<ApplyRequest>]> = [
    [cm({ a: '9' }, { labels: { x: '1' } }), 'A', {}],
    [cm({ c: '4', a: '5' }), 'B', { force: true }],
    [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: 'ns' }, status: { phase: 'x' } },
      'S',
      { subresource: 'status' },
    ],
    [{ ...cm({}), spec: { items: [{ name: 'k', v: 1 }] } }, 'A', {}],
  ];
  for (const [applied, manager, more] of steps) {
    deepFreeze(applied);
    const r = apply(live, applied, manager, more);
    assert.equal(r.ok, true);
  }
  assert.equal(JSON.stringify(live), snapshot);
  // And the result shares nothing mutable with the input that a later write could reach.
  const out = ok(apply(live, cm({ a: '1', b: '2', d: '7' }, { labels: { x: '1', y: '2' } }), 'A'));
  assert.doesNotThrow(() => {
    (out.data as Record<string, string>)['e'] = '8';
    out.metadata.labels = { z: '1' };
  });
});

void test('an entry another write leaves alone keeps its fieldsV1 as stored, in a copy that shares nothing with the input', () => {
  let live = ok(apply(undefined, cm({ a: '1' }, { labels: { x: '1' } }), 'A', { now: T1 }));
  live = ok(apply(live, cm({ b: '2' }), 'B'));
  const before = (live.metadata.managedFields ?? []).find((e) => e.manager === 'A');
  const out = ok(apply(live, cm({ b: '3' }), 'B'));
  const after = (out.metadata.managedFields ?? []).find((e) => e.manager === 'A');
  assert.deepEqual(after?.fieldsV1, before?.fieldsV1);
  assert.notEqual(after?.fieldsV1, before?.fieldsV1, 'a copy, not the stored object');
  // An entry that loses fields is re-encoded: A's data.a goes when C takes it by force.
  const taken = ok(apply(out, cm({ a: '9' }), 'C', { force: true }));
  assert.deepEqual(owners(taken)['A/Apply'], { 'f:metadata': { 'f:labels': { 'f:x': {} } } });
  // managedFields a client sends are re-encoded in kube's form, never stored as sent.
  const sent = trackUpdate(
    taken,
    {
      ...taken,
      managedFields: undefined,
      metadata: {
        ...taken.metadata,
        managedFields: [
          { manager: 'D', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:b': { '.': {} } } } },
        ],
      },
    } as KubeObject,
    'D',
    'v1',
    T2,
  );
  assert.deepEqual(owners(sent)['D/Update'], { 'f:data': { 'f:b': {} } });
});
