import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { cloneJson } from './json.js';

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
