import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeObject } from '@kars/kube-core';
import { trackUpdate } from './managed.js';
import { fieldSetOf } from './fieldset.js';

const T1 = '2024-01-01T00:00:00Z';
const T2 = '2024-01-01T00:01:00Z';

const base = (): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', labels: { app: 'x' } }, data: { a: '1' } });

void test('a create attributes every tracked field to the manager with operation Update', () => {
  const out = trackUpdate(undefined, base(), 'kubectl-create', 'v1', T1);
  assert.deepEqual(out.metadata.managedFields, [
    {
      manager: 'kubectl-create',
      operation: 'Update',
      apiVersion: 'v1',
      time: T1,
      fieldsType: 'FieldsV1',
      fieldsV1: { 'f:data': { '.': {}, 'f:a': {} }, 'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } } },
    },
  ]);
});

void test('an update only moves the changed fields and removes deleted fields from every manager', () => {
  const created = trackUpdate(undefined, base(), 'creator', 'v1', T1);
  const next = structuredClone(created);
  next.data = { b: '2' };
  const out = trackUpdate(created, next, 'editor', 'v1', T2);
  assert.deepEqual(
    out.metadata.managedFields?.map((e) => [e.manager, e.fieldsV1, e.time]),
    [
      ['creator', { 'f:data': {}, 'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } } }, T1],
      ['editor', { 'f:data': { 'f:b': {} } }, T2],
    ],
  );
});

void test('an update that changes nothing keeps managedFields as they were', () => {
  const created = trackUpdate(undefined, base(), 'creator', 'v1', T1);
  const out = trackUpdate(created, structuredClone(created), 'other', 'v1', T2);
  assert.deepEqual(out, created);
});

void test('managedFields set to [] or [{}] by the client clear them, absent keeps the live ones', () => {
  const created = trackUpdate(undefined, base(), 'creator', 'v1', T1);
  for (const reset of [[], [{}]]) {
    const next = structuredClone(created) as KubeObject;
    next.metadata.managedFields = reset as never;
    assert.equal(trackUpdate(created, next, 'm', 'v1', T2).metadata.managedFields, undefined);
  }
  const next = structuredClone(created);
  delete next.metadata.managedFields;
  assert.deepEqual(trackUpdate(created, next, 'm', 'v1', T2).metadata.managedFields, created.metadata.managedFields);
});

void test('managedFields written explicitly by the client replace the live ones', () => {
  const created = trackUpdate(undefined, base(), 'creator', 'v1', T1);
  const next = structuredClone(created);
  const mine = [
    {
      manager: 'someone',
      operation: 'Apply' as const,
      apiVersion: 'v1',
      time: T1,
      fieldsType: 'FieldsV1' as const,
      fieldsV1: { 'f:data': { 'f:a': {} } },
    },
  ];
  next.metadata.managedFields = mine;
  assert.deepEqual(trackUpdate(created, next, 'm', 'v1', T2).metadata.managedFields, mine);
});

void test('an existing object without managedFields stays untracked on update', () => {
  const next = base();
  next.data = { a: '2' };
  assert.equal(trackUpdate(base(), next, 'm', 'v1', T2).metadata.managedFields, undefined);
});

void test('a status subresource write gets its own entry and ignores client managedFields', () => {
  const obj: KubeObject = { apiVersion: 'x/v1', kind: 'S', metadata: { name: 's' }, spec: { a: 1 } };
  const created = trackUpdate(undefined, obj, 'creator', 'x/v1', T1, undefined, { ignoreStatus: true });
  const next = structuredClone(created);
  next['status'] = { phase: 'Ready' };
  next.metadata.managedFields = [];
  const out = trackUpdate(created, next, 'ctrl', 'x/v1', T2, 'status');
  assert.deepEqual(
    out.metadata.managedFields?.map((e) => [e.manager, e.subresource ?? '', e.fieldsV1]),
    [
      ['creator', '', { 'f:spec': { '.': {}, 'f:a': {} } }],
      ['ctrl', 'status', { 'f:status': { '.': {}, 'f:phase': {} } }],
    ],
  );
});

void test('more than ten Update managers fold the oldest into ancient-changes', () => {
  let obj = trackUpdate(undefined, base(), 'm0', 'v1', '2024-01-01T00:00:00Z');
  for (let i = 1; i <= 11; i++) {
    const next = structuredClone(obj);
    (next.data as Record<string, string>)[`k${i}`] = 'v';
    obj = trackUpdate(obj, next, `m${i}`, 'v1', `2024-01-01T00:${String(i).padStart(2, '0')}:00Z`);
  }
  const names = obj.metadata.managedFields?.map((e) => e.manager) ?? [];
  assert.equal(names.length, 10);
  assert.ok(names.includes('ancient-changes'));
  assert.ok(!names.includes('m0') && !names.includes('m1'));
});

void test('fieldSetOf tracks labels, annotations, finalizers and ownerReferences but not server metadata', () => {
  const obj = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: 'd',
      namespace: 'n',
      uid: 'u',
      resourceVersion: '1',
      generation: 2,
      creationTimestamp: 't',
      labels: { a: 'b' },
      annotations: { c: 'd' },
      finalizers: ['f'],
      ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'u1' }],
    },
    spec: { replicas: 1, selector: { matchLabels: {} }, template: { spec: { containers: [{ name: 'app', image: 'i', args: ['a'] }] } } },
    status: { replicas: 1 },
  };
  assert.deepEqual(fieldSetOf(obj, { ignoreStatus: true, listKeys: { 'spec.template.spec.containers': ['name'] } }), {
    'f:metadata': {
      'f:annotations': { 'f:c': {} },
      'f:finalizers': { 'v:"f"': {} },
      'f:labels': { 'f:a': {} },
      // OwnerReference is +structType=atomic: the element is owned whole.
      'f:ownerReferences': { 'k:{"uid":"u1"}': {} },
    },
    'f:spec': {
      'f:replicas': {},
      'f:selector': { 'f:matchLabels': {} },
      'f:template': { 'f:spec': { 'f:containers': { 'k:{"name":"app"}': { '.': {}, 'f:args': {}, 'f:image': {}, 'f:name': {} } } } },
    },
  });
});
