/**
 * Properties (issue 9 item 8) of the glob matcher and of tool-name normalisation.
 *
 * - The glob matcher agrees with a reference regular expression (`*` → `.*`, `?` → `.`, the rest
 *   literal, case-insensitive, dot-all) on every input.
 * - `*X*` matches every name that contains X in any case, whatever separators surround it: a deny
 *   like `*delete*` cannot be side-stepped by namespacing or re-casing.
 * - An accepted tool name is NFKC-stable, ASCII, and has no whitespace or control characters; a
 *   name that changes under NFKC is always refused.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { globMatch } from './agt.js';
import { checkToolName } from './names.js';

function reference(pattern: string, text: string): boolean {
  const src = [...pattern.toLowerCase()]
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')))
    .join('');
  return new RegExp(`^${src}$`, 'su').test(text.toLowerCase());
}

const alphabet = fc.constantFrom('a', 'b', 'D', 'e', '/', '_', '*', '?', '.', 'é', 'x');
const str = (max: number): fc.Arbitrary<string> => fc.array(alphabet, { maxLength: max }).map((a) => a.join(''));
const nameChar = fc.constantFrom(...'abcXYZ019_-./:'.split(''));

describe('globMatch (property)', () => {
  it('agrees with the reference regular expression', () => {
    fc.assert(
      fc.property(str(8), str(12), (p, t) => {
        // fast-check strings may contain * and ? as text too; the reference treats them as globs in the pattern only.
        assert.equal(globMatch(p, t), reference(p, t), `pattern ${JSON.stringify(p)} text ${JSON.stringify(t)}`);
      }),
      { numRuns: 3000 },
    );
  });

  it('*X* matches any name containing X, in any case and behind any namespace', () => {
    fc.assert(
      fc.property(
        fc.array(nameChar, { maxLength: 10 }),
        fc.array(nameChar, { minLength: 1, maxLength: 6 }),
        fc.array(nameChar, { maxLength: 10 }),
        fc.boolean(),
        (pre, mid, post, upper) => {
          const x = mid.join('').replace(/[*?]/g, '');
          if (x === '') return;
          const name = `${pre.join('')}${upper ? x.toUpperCase() : x}${post.join('')}`;
          assert.equal(globMatch(`*${x}*`, name), true, `*${x}* vs ${name}`);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('checkToolName (property)', () => {
  it('accepts only NFKC-stable ASCII names without whitespace or control characters', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (s) => {
        const r = checkToolName(s);
        if (r.ok) {
          assert.equal(s.normalize('NFKC'), s);
          assert.match(s, /^[\x21-\x7e]+$/);
          assert.equal(r.key, s.toLowerCase());
        }
        if (s.normalize('NFKC') !== s) assert.equal(r.ok, false);
      }),
      { numRuns: 3000 },
    );
  });

  it('refuses every name that differs from an accepted one by inserted whitespace or a zero-width character', () => {
    fc.assert(
      fc.property(
        fc.array(nameChar, { minLength: 1, maxLength: 20 }),
        fc.nat(),
        fc.constantFrom(' ', '\t', '\n', '\u0000', '\u00a0', '\u200b', '\u200e', '\u2028', '\ufeff'),
        (chars, at, ws) => {
          const name = chars.join('');
          const i = at % (name.length + 1);
          assert.equal(checkToolName(name).ok, true);
          assert.equal(checkToolName(name.slice(0, i) + ws + name.slice(i)).ok, false);
        },
      ),
    );
  });
});
