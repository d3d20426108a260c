import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { authorizationValues, bearerToken, secretEquals } from './bearer.js';

const T = 's3cr3t-Token.value_~+/=';

describe('bearerToken (issue 25 item 5)', () => {
  it('takes exactly one "Bearer <token>", scheme in any case', () => {
    assert.equal(bearerToken([`Bearer ${T}`]), T);
    assert.equal(bearerToken([`bearer ${T}`]), T);
    assert.equal(bearerToken([`BEARER ${T}`]), T);
  });

  for (const [label, values] of [
    ['no header', []],
    ['no scheme', [T]],
    ['Basic', [`Basic ${T}`]],
    ['two spaces', [`Bearer  ${T}`]],
    ['a tab', [`Bearer\t${T}`]],
    ['trailing junk', [`Bearer ${T} x`]],
    ['trailing space', [`Bearer ${T} `]],
    ['empty token', ['Bearer ']],
    ['scheme alone', ['Bearer']],
    ['no space', [`Bearer${T}`]],
    ['non-ASCII token', ['Bearer tökén']],
    ['repeated (same)', [`Bearer ${T}`, `Bearer ${T}`]],
    ['repeated (good, bad)', [`Bearer ${T}`, 'Bearer x']],
  ] as const) {
    it(`refuses ${label}`, () => assert.equal(bearerToken(values as unknown as string[]), undefined));
  }

  it('property: a one-character edit of "Bearer <token>" passes only when it changes the scheme case', () => {
    const good = `Bearer ${T}`;
    fc.assert(
      fc.property(
        fc.nat(good.length),
        fc.constantFrom('insert', 'delete', 'replace'),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
        (at, op, ch) => {
          const i = Math.min(at, op === 'insert' ? good.length : good.length - 1);
          const h =
            op === 'insert'
              ? good.slice(0, i) + ch + good.slice(i)
              : op === 'delete'
                ? good.slice(0, i) + good.slice(i + 1)
                : good.slice(0, i) + ch + good.slice(i + 1);
          const same = h.length === good.length && h.slice(0, 6).toLowerCase() === 'bearer' && h.slice(6) === good.slice(6);
          const got = bearerToken([h]);
          return same ? got === T : got === undefined || got !== T;
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('property: only an exact copy of the token is equal to it', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => secretEquals(a, b) === (a === b)));
    assert.ok(secretEquals(T, T));
    assert.ok(!secretEquals(T, `${T}x`));
    assert.ok(!secretEquals(T, T.slice(0, -1)));
  });

  it('authorizationValues finds every copy in rawHeaders, any case', () => {
    assert.deepEqual(authorizationValues(['Host', 'h', 'Authorization', 'a', 'AUTHORIZATION', 'b']), ['a', 'b']);
  });
});
