/**
 * parseStrictJson: duplicate keys (compared after unescaping) and nesting depth, checked against a
 * plain character-by-character reference scan on generated JSON with random escape spellings and
 * repeated keys, and the scan's cost on hostile shapes (it must stay linear).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseStrictJson } from './strict.js';

/** The reference: the first scan this module shipped (one JS step per character). */
function referenceVerdict(text: string, maxDepth = 128): 'ok' | 'invalid_json' | 'duplicate_key' | 'too_deep' {
  try {
    JSON.parse(text);
  } catch {
    return 'invalid_json';
  }
  const stack: Array<Set<string> | null> = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) {
      if (stack.length >= maxDepth) return 'too_deep';
      stack.push(c === 0x7b ? new Set() : null);
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      i++;
    } else if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j++;
        } else if (d === 0x22) break;
      }
      const end = j + 1;
      const top = stack.at(-1);
      if (top !== undefined && top !== null) {
        let k = end;
        while (k < n && ' \n\r\t'.includes(text[k] ?? '')) k++;
        if (text[k] === ':') {
          const key = escaped ? (JSON.parse(text.slice(i, end)) as string) : text.slice(i + 1, j);
          if (top.has(key)) return 'duplicate_key';
          top.add(key);
        }
      }
      i = end;
    } else i++;
  }
  return 'ok';
}

const verdict = (text: string): string => {
  const r = parseStrictJson(text);
  return r.ok ? 'ok' : r.code;
};

/**
 * A JSON string literal of `s`, each character spelled plainly, as a short escape (`\"`, `\\`,
 * `\/`, `\n`) or as `\uXXXX`, chosen by the bits of `mask`.
 */
function spell(s: string, mask: number): string {
  const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '/': '\\/', '\n': '\\n' };
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] as string;
    const code = ch.charCodeAt(0);
    const bits = (mask >>> ((i * 2) % 30)) & 3;
    const must = ch === '"' || ch === '\\' || code < 0x20;
    const u = `\\u${code.toString(16).padStart(4, '0')}`;
    if (bits === 1 || (must && SHORT[ch] === undefined)) out += u;
    else if (bits >= 2 && SHORT[ch] !== undefined) out += SHORT[ch];
    else if (must) out += SHORT[ch] ?? u;
    else out += ch;
  }
  return `${out}"`;
}

type Tree = { k: 'obj'; entries: Array<[string, Tree]> } | { k: 'arr'; items: Tree[] } | { k: 'str'; v: string } | { k: 'num'; v: number };

const tree: fc.Arbitrary<Tree> = fc.letrec<{ t: Tree }>((tie) => ({
  t: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({
      k: fc.constant('str' as const),
      v: fc.oneof(fc.string({ maxLength: 8, unit: 'binary' }), fc.stringMatching(/^[ab"\\/:{}\n]{0,6}$/)),
    }),
    fc.record({ k: fc.constant('num' as const), v: fc.integer() }),
    fc.record({ k: fc.constant('arr' as const), items: fc.array(tie('t'), { maxLength: 4 }) }),
    fc.record({
      k: fc.constant('obj' as const),
      // Keys from a tiny alphabet (with a quote and a backslash), so repeats are common.
      entries: fc.array(fc.tuple(fc.stringMatching(/^[ab"\\/\n\u00e9]{0,2}$/), tie('t')), { maxLength: 4 }),
    }),
  ),
})).t;

function render(t: Tree, mask: number): string {
  switch (t.k) {
    case 'str':
      return spell(t.v, mask);
    case 'num':
      return String(t.v);
    case 'arr':
      return `[${t.items.map((x) => render(x, mask)).join(',')}]`;
    case 'obj':
      return `{${t.entries.map(([k, v], i) => `${spell(k, (mask * (i + 7)) ^ (i * 0x2545f491))} : ${render(v, mask >>> 1)}`).join(', ')}}`;
  }
}

describe('parseStrictJson', () => {
  it('agrees with the character-by-character reference on generated JSON with repeated keys and random escapes', () => {
    fc.assert(
      fc.property(tree, fc.integer({ min: 0, max: 2 ** 31 - 1 }), (t, mask) => {
        const text = render(t, mask);
        assert.equal(verdict(text), referenceVerdict(text), text);
      }),
      { numRuns: 3000 },
    );
  });

  it('finds duplicates however the key is spelled, and around escaped quotes and backslashes', () => {
    assert.equal(verdict('{"a":1,"\\u0061":2}'), 'duplicate_key');
    assert.equal(verdict('{"a":"x\\"","a":1}'), 'duplicate_key');
    assert.equal(verdict('{"a\\\\":1,"a\\\\":2}'), 'duplicate_key');
    assert.equal(verdict('{"a\\\\":1,"a":2}'), 'ok');
    assert.equal(verdict('{"x":"\\\\","x\\"":1,"x\\u0022":2}'), 'duplicate_key');
    assert.equal(verdict('{"k":"\\"a\\":1","a":1}'), 'ok', 'a key inside a string value is not a key');
    assert.equal(verdict(`{"a":${'['.repeat(200)}${']'.repeat(200)}}`), 'too_deep');
  });

  it('stays linear on hostile shapes: a string of escapes, many short strings, one backslash at the end', () => {
    const shapes = [
      `{"m":"${'\\n'.repeat(500_000)}"}`,
      `[${'"ab",'.repeat(200_000)}"\\\\"]`,
      `{${Array.from({ length: 50_000 }, (_, i) => `"k${i}":"v"`).join(',')},"z":"\\u0041"}`,
    ];
    for (const text of shapes) {
      const t0 = performance.now();
      assert.equal(verdict(text), 'ok');
      const ms = performance.now() - t0;
      // Linear: ~1 MB in well under a second even on a loaded VM; a quadratic scan takes minutes.
      assert.ok(ms < 3000, `${text.length} bytes took ${Math.round(ms)} ms`);
    }
  });
});
