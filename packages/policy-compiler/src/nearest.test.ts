import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { editDistance, nearestName, suggestionThreshold } from './nearest.js';

const word = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd', 'A', 'é', '😀'), maxLength: 12 });

/** One random single-character edit (insert, delete or substitute) of `s`. */
const oneEdit = (s: string) =>
  fc.tuple(fc.nat(), fc.constantFrom('ins', 'del', 'sub'), fc.constantFrom('x', 'y', 'z')).map(([i, op, ch]) => {
    const at = s.length === 0 ? 0 : i % (s.length + (op === 'ins' ? 1 : 0));
    if (op === 'ins' || s.length === 0) return s.slice(0, at) + ch + s.slice(at);
    if (op === 'del') return s.slice(0, at) + s.slice(at + 1);
    return s.slice(0, at) + ch + s.slice(at + 1);
  });

describe('editDistance', () => {
  it('known values', () => {
    assert.equal(editDistance('tokenBuget', 'tokenBudget'), 1);
    assert.equal(editDistance('dailyToken', 'dailyTokens'), 1);
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(editDistance('prot', 'port'), 2);
    assert.equal(editDistance('', 'abc'), 3);
    assert.equal(editDistance('abc', ''), 3);
  });

  it('is a metric: zero exactly for equal strings, symmetric, triangle inequality', () => {
    fc.assert(
      fc.property(word, word, word, (a, b, c) => {
        assert.equal(editDistance(a, b) === 0, a === b);
        assert.equal(editDistance(a, b), editDistance(b, a));
        assert.ok(editDistance(a, c) <= editDistance(a, b) + editDistance(b, c));
      }),
    );
  });

  it('is bounded by the longer length and at least the length difference', () => {
    fc.assert(
      fc.property(word, word, (a, b) => {
        const d = editDistance(a, b);
        assert.ok(d <= Math.max(a.length, b.length));
        assert.ok(d >= Math.abs(a.length - b.length));
      }),
    );
  });

  it('one insertion, deletion or substitution is at most distance 1', () => {
    fc.assert(
      fc.property(
        word.chain((s) => fc.tuple(fc.constant(s), oneEdit(s))),
        ([s, t]) => assert.ok(editDistance(s, t) <= 1),
      ),
    );
  });
});

describe('nearestName', () => {
  const spec = ['appliesTo', 'tokenBudget', 'contentSafety', 'modelPreference', 'provider', 'bundleRef', 'displayName'];

  it('suggests the intended field for common typos, and nothing for unrelated names', () => {
    assert.equal(nearestName('tokenBuget', spec), 'tokenBudget');
    assert.equal(nearestName('TokenBudget', spec), 'tokenBudget');
    assert.equal(nearestName('contentsafety', spec), 'contentSafety');
    assert.equal(nearestName('prot', ['host', 'port']), 'port'); // a swapped pair is distance 2; host is 3
    assert.equal(nearestName('ab', ['xb', 'ax']), 'xb'); // both at 1: the earlier wins
    assert.equal(nearestName('ab', ['ax', 'xb']), 'ax');
    assert.equal(nearestName('somethingElse', spec), undefined);
    assert.equal(nearestName('x', ['ttl', 'y']), undefined);
    assert.equal(nearestName('tokenBudget', spec), undefined); // a known name is not its own suggestion
  });

  it('a single edit of a known name of 3+ characters finds a candidate at distance ≤ 1 (the name or one as close)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd', 'e'), minLength: 3, maxLength: 10 }), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.nat(),
        (names, i) => {
          const target = names[i % names.length] ?? '';
          return fc.assert(
            fc.property(oneEdit(target), (typo) => {
              fc.pre(typo !== target && !names.includes(typo));
              const got = nearestName(typo, names);
              assert.ok(got !== undefined, `${typo} → nothing among ${names.join(',')}`);
              assert.ok(editDistance(typo.toLowerCase(), got.toLowerCase()) <= 1);
            }),
            { numRuns: 20 },
          );
        },
      ),
      { numRuns: 50 },
    );
  });

  it('never suggests past the threshold, never the name itself, and the suggestion is a minimum', () => {
    fc.assert(
      fc.property(word, fc.array(word, { maxLength: 8 }), (name, cands) => {
        const got = nearestName(name, cands);
        if (got === undefined) {
          for (const c of cands) if (c !== name) assert.ok(editDistance(name.toLowerCase(), c.toLowerCase()) > suggestionThreshold(name));
          return;
        }
        assert.ok(cands.includes(got));
        assert.notEqual(got, name);
        const d = editDistance(name.toLowerCase(), got.toLowerCase());
        assert.ok(d <= suggestionThreshold(name));
        for (const c of cands) if (c !== name) assert.ok(editDistance(name.toLowerCase(), c.toLowerCase()) >= d);
      }),
    );
  });
});
