import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkJsonDepth, MAX_DEPTH } from './limits.js';

/** The nesting depth of JSON text, brackets inside strings ignored. */
function depthOf(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') max = Math.max(max, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return max;
}

const refused = (text: string): boolean => {
  try {
    checkJsonDepth(text);
    return false;
  } catch {
    return true;
  }
};

describe('checkJsonDepth', () => {
  it('refuses JSON nested deeper than MAX_DEPTH and nothing else, brackets in strings aside', () => {
    const nest = (n: number, inner = '1'): string => `${'['.repeat(n)}${inner}${']'.repeat(n)}`;
    assert.equal(refused(nest(MAX_DEPTH)), false);
    assert.equal(refused(nest(MAX_DEPTH + 1)), true);
    assert.equal(refused(`{"a":${'{"b":'.repeat(MAX_DEPTH)}1${'}'.repeat(MAX_DEPTH)}}`), true);
    // many brackets, little depth: the quick count is not enough, the scan decides
    assert.equal(refused(`[${Array.from({ length: 600 }, () => '[]').join(',')}]`), false);
    assert.equal(refused(`["${'['.repeat(1000)}"]`), false, 'brackets inside a string do not nest');
    fc.assert(
      fc.property(
        fc.integer({ min: MAX_DEPTH - 3, max: MAX_DEPTH + 3 }),
        fc.integer({ min: 0, max: 400 }),
        fc.string({ maxLength: 8 }),
        (levels, siblings, s) => {
          const text = `{"s":${JSON.stringify(s)},"x":[${Array.from({ length: siblings }, () => '{}').join(',')}],"y":${nest(levels)}}`;
          assert.equal(refused(text), depthOf(text) > MAX_DEPTH);
        },
      ),
      { numRuns: 300 },
    );
  });
});
