import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyJsonPatch } from './jsonpatch.js';
import { PatchError } from './errors.js';

const doc = { metadata: { labels: { a: '1' } }, spec: { list: [1, 2, 3] } };

void test('json patch add, remove, replace, move, copy and test all apply in order', () => {
  const out = applyJsonPatch(doc, [
    { op: 'add', path: '/metadata/labels/b', value: '2' },
    { op: 'add', path: '/spec/list/-', value: 4 },
    { op: 'add', path: '/spec/list/0', value: 0 },
    { op: 'remove', path: '/spec/list/1' },
    { op: 'replace', path: '/metadata/labels/a', value: 'one' },
    { op: 'copy', from: '/metadata/labels/a', path: '/spec/copied' },
    { op: 'move', from: '/metadata/labels/b', path: '/spec/moved' },
    { op: 'test', path: '/spec/list', value: [0, 2, 3, 4] },
  ]);
  assert.deepEqual(out, { metadata: { labels: { a: 'one' } }, spec: { list: [0, 2, 3, 4], copied: 'one', moved: '2' } });
});

void test('json patch escapes ~0 and ~1 in pointers', () => {
  const out = applyJsonPatch({ a: {} }, [
    { op: 'add', path: '/a/app.kubernetes.io~1name', value: 'x' },
    { op: 'add', path: '/a/t~0', value: 1 },
  ]);
  assert.deepEqual(out, { a: { 'app.kubernetes.io/name': 'x', 't~': 1 } });
});

void test('a failing test operation throws KARS_PATCH_TEST_FAILED and changes nothing', () => {
  const input = structuredClone(doc);
  assert.throws(
    () =>
      applyJsonPatch(input, [
        { op: 'replace', path: '/metadata/labels/a', value: 'x' },
        { op: 'test', path: '/metadata/labels/a', value: '1' },
      ]),
    (e: unknown) => e instanceof PatchError && e.code === 'KARS_PATCH_TEST_FAILED' && e.httpStatus === 422,
  );
  assert.deepEqual(input, doc);
});

void test('a path that does not exist is an invalid patch answered with 422', () => {
  for (const ops of [
    [{ op: 'remove', path: '/nope' }],
    [{ op: 'replace', path: '/spec/x', value: 1 }],
    [{ op: 'add', path: '/a/b/c', value: 1 }],
    [{ op: 'add', path: '/spec/list/9', value: 1 }],
  ]) {
    assert.throws(
      () => applyJsonPatch(doc, ops),
      (e: unknown) => e instanceof PatchError && e.code === 'KARS_PATCH_INVALID' && e.httpStatus === 422,
      JSON.stringify(ops),
    );
  }
});

void test('a malformed operation list is rejected', () => {
  const cases: [unknown, number][] = [
    [{ op: 'add' }, 400],
    [['x'], 400],
    [[{ op: 'frobnicate', path: '/a' }], 422],
    [[{ op: 'add', path: '/a' }], 422],
    [[{ op: 'move', path: '/a' }], 422],
    [[{ op: 'add', path: 'a', value: 1 }], 422],
  ];
  for (const [ops, status] of cases) {
    assert.throws(
      () => applyJsonPatch(doc, ops),
      (e: unknown) => e instanceof PatchError && e.code === 'KARS_PATCH_INVALID' && e.httpStatus === status,
      JSON.stringify(ops),
    );
  }
});

void test('moving a value into its own child is rejected', () => {
  assert.throws(() => applyJsonPatch(doc, [{ op: 'move', from: '/spec', path: '/spec/inner' }]), PatchError);
});

void test('json patch never mutates its input and values it adds are copies', () => {
  const input = structuredClone(doc);
  const value = { deep: [1] };
  const out = applyJsonPatch(input, [{ op: 'add', path: '/spec/v', value }]) as { spec: { v: { deep: number[] } } };
  out.spec.v.deep.push(2);
  assert.deepEqual(input, doc);
  assert.deepEqual(value, { deep: [1] });
});

void test('replacing the root with an empty path returns the new value', () => {
  assert.deepEqual(applyJsonPatch({ a: 1 }, [{ op: 'replace', path: '', value: { b: 2 } }]), { b: 2 });
});
