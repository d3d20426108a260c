import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FieldSet, type FieldPath } from './paths.js';
import { allFields, compareObjects } from './fieldset.js';

const element = fc.oneof(
  fc.constantFrom('f:a', 'f:b', 'f:data', 'k:{"name":"x"}', 'v:"y"', 'i:0'),
  fc.string({ maxLength: 3 }).map((s) => `f:${s}`),
);
const path = fc.array(element, { minLength: 1, maxLength: 4 });
const paths = fc.array(path, { maxLength: 12 });
const key = (p: FieldPath): string => JSON.stringify(p);

describe('FieldSet', () => {
  it('union, difference, intersection, equals and has agree with plain sets of paths', () => {
    fc.assert(
      fc.property(paths, paths, (a, b) => {
        const sa = FieldSet.of(a);
        const sb = FieldSet.of(b);
        const ka = new Set(a.map(key));
        const kb = new Set(b.map(key));
        const keys = (s: FieldSet): string[] => s.paths().map(key).sort();
        assert.deepEqual(keys(sa.union(sb)), [...new Set([...ka, ...kb])].sort());
        assert.deepEqual(keys(sa.difference(sb)), [...ka].filter((k) => !kb.has(k)).sort());
        assert.deepEqual(keys(sa.intersection(sb)), [...ka].filter((k) => kb.has(k)).sort());
        assert.equal(sa.equals(sb), ka.size === kb.size && [...ka].every((k) => kb.has(k)));
        for (const p of b) assert.equal(sa.has(p), ka.has(key(p)));
        // the operands are left as they were
        assert.deepEqual(keys(sa), [...ka].sort());
      }),
    );
  });

  it('reads back what it writes as FieldsV1', () => {
    fc.assert(
      fc.property(paths, (a) => {
        const s = FieldSet.of(a);
        assert.ok(FieldSet.fromFieldsV1(s.toFieldsV1()).equals(s));
      }),
    );
  });

  it('finds a changed path by the key it was built with', () => {
    const before = { metadata: { labels: { a: '1' } }, data: { x: '1', y: '2' } };
    const after = { metadata: { labels: { a: '2' } }, data: { x: '1', z: '3' } };
    const cmp = compareObjects(before, after);
    assert.ok(cmp.modified.has(['f:metadata', 'f:labels', 'f:a']));
    assert.ok(cmp.added.has(['f:data', 'f:z']));
    assert.ok(cmp.removed.has(['f:data', 'f:y']));
    assert.ok(!cmp.modified.has(['f:data', 'f:x']));
    assert.ok(allFields(after).has(['f:data', 'f:x']));
  });
});
