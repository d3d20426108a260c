import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { cloneJson, jsonEqual } from './json.js';

describe('cloneJson', () => {
  it('returns an equal value that shares no object or array with the original', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const c = cloneJson(v);
        assert.deepStrictEqual(c, v);
        const walk = (a: unknown, b: unknown): void => {
          if (a === null || typeof a !== 'object') return;
          assert.notEqual(a, b, 'a nested object or array is shared');
          for (const k of Object.keys(a)) walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
        };
        walk(c, v);
      }),
    );
  });

  it('copies an own "__proto__" key as a property, never as the prototype', () => {
    const v = JSON.parse('{"__proto__":{"polluted":true},"a":[{"__proto__":1}]}') as Record<string, unknown>;
    const c = cloneJson(v);
    assert.equal(Object.getPrototypeOf(c), Object.prototype);
    assert.equal((c as { polluted?: unknown }).polluted, undefined);
    assert.deepEqual(Object.getOwnPropertyDescriptor(c, '__proto__')?.value, { polluted: true });
    assert.deepEqual(Object.keys(c), ['__proto__', 'a']);
    assert.equal(({} as { polluted?: unknown }).polluted, undefined);
  });

  it('keeps an undefined member, as structuredClone does', () => {
    const c = cloneJson({ a: undefined, b: 1 });
    assert.deepEqual(Object.keys(c), ['a', 'b']);
  });
});

describe('jsonEqual', () => {
  /** The oracle: JSON with sorted keys (undefined members dropped, as JSON drops them). */
  const canonical = (v: unknown): string =>
    JSON.stringify(v, (_k, x: unknown) =>
      x !== null && typeof x === 'object' && !Array.isArray(x)
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, (x as Record<string, unknown>)[k]]),
          )
        : x,
    );

  it('agrees with comparing sorted-key JSON, for equal and unequal values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        assert.equal(jsonEqual(a, b), canonical(a) === canonical(b));
        assert.equal(jsonEqual(a, cloneJson(a)), true);
      }),
      { numRuns: 500 },
    );
  });

  it('ignores key order and undefined members, not null ones, and survives deep nesting', () => {
    assert.equal(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }), true);
    assert.equal(jsonEqual({ a: 1, u: undefined }, { a: 1 }), true);
    assert.equal(jsonEqual({ a: 1 }, { a: 1, u: undefined }), true);
    assert.equal(jsonEqual({ a: null }, {}), false);
    assert.equal(jsonEqual([1, 2], { 0: 1, 1: 2 }), false);
    assert.equal(jsonEqual({ __proto__: 1 } as unknown, JSON.parse('{"__proto__":1}') as unknown), false);
    let deep: unknown = 1;
    let deep2: unknown = 1;
    for (let i = 0; i < 100_000; i++) {
      deep = [deep];
      deep2 = [deep2];
    }
    assert.equal(jsonEqual(deep, deep2), true);
  });
});
