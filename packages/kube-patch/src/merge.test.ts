import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyMergePatch } from './merge.js';

const rfc7386: [unknown, unknown, unknown][] = [
  [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
  [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
  [{ a: 'b' }, { a: null }, {}],
  [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
  [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
  [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
  [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
  [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
  [
    ['a', 'b'],
    ['c', 'd'],
    ['c', 'd'],
  ],
  [{ a: 'b' }, ['c'], ['c']],
  [{ a: 'foo' }, null, null],
  [{ a: 'foo' }, 'bar', 'bar'],
  [{ e: null }, { a: 1 }, { e: null, a: 1 }],
  [[1, 2], { a: 'b', c: null }, { a: 'b' }],
  [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
];

void test('merge patch reproduces every example of RFC 7386 appendix A', () => {
  for (const [target, patch, want] of rfc7386) assert.deepEqual(applyMergePatch(target, patch), want, JSON.stringify({ target, patch }));
});

void test('merge patch never mutates its inputs', () => {
  const target = { a: { b: 1, c: [1, 2] } };
  const patch = { a: { b: null, d: { e: 1 } } };
  const t0 = structuredClone(target);
  const p0 = structuredClone(patch);
  const out = applyMergePatch(target, patch) as { a: { d: { e: number } } };
  out.a.d.e = 99;
  assert.deepEqual(target, t0);
  assert.deepEqual(patch, p0);
});

void test('merge patch treats a "__proto__" key as plain data', () => {
  const out = applyMergePatch({}, JSON.parse('{"__proto__":{"polluted":true}}')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(out), ['__proto__']);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
});
