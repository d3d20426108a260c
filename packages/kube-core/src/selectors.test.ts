import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { labelSelectorFromObject, matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';

describe('label selectors', () => {
  it('parses equality, inequality, set and existence terms', () => {
    const sel = parseLabelSelector('app=web, tier!=db,env in (prod, staging),!legacy,owner');
    assert.deepEqual(
      sel.map((r) => r.op),
      ['=', '!=', 'in', '!', 'exists'],
    );
    assert.deepEqual(sel[2]?.values, ['prod', 'staging']);
  });

  it('matches only when every requirement holds', () => {
    const sel = parseLabelSelector('app=web,env in (prod),!legacy');
    assert.equal(matchesLabels(sel, { app: 'web', env: 'prod' }), true);
    assert.equal(matchesLabels(sel, { app: 'web', env: 'dev' }), false);
    assert.equal(matchesLabels(sel, { app: 'web', env: 'prod', legacy: 'yes' }), false);
    assert.equal(matchesLabels(parseLabelSelector('tier!=db'), {}), true);
    assert.equal(matchesLabels(parseLabelSelector('x notin (a)'), { x: 'b' }), true);
  });

  it("rejects a malformed term with a 400 error and kube-apiserver's message", () => {
    assert.throws(
      () => parseLabelSelector('app=web,in valid=('),
      (e: any) => e.code === 400 && e.message === "unable to parse requirement: found 'valid', expected: in, notin, =, ==, !=, gt, lt",
    );
  });
});

describe('field selectors', () => {
  it('parses and matches metadata.name and metadata.namespace', () => {
    const reqs = parseFieldSelector('metadata.name=a,metadata.namespace!=kube-system');
    const get = (o: Record<string, string>) => (f: string) => o[f];
    assert.equal(matchesFields(reqs, get({ 'metadata.name': 'a', 'metadata.namespace': 'default' })), true);
    assert.equal(matchesFields(reqs, get({ 'metadata.name': 'a', 'metadata.namespace': 'kube-system' })), false);
    assert.throws(() => parseFieldSelector('justtext'));
  });
});

describe('label selector objects (metav1.LabelSelector)', () => {
  it('match as matchLabels AND every expression, with kube operator names; an unknown operator matches nothing', () => {
    const sel = labelSelectorFromObject({
      matchLabels: { app: 'web' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['a', 'b'] },
        { key: 'legacy', operator: 'DoesNotExist' },
        { key: 'zone', operator: 'Exists' },
        { key: 'env', operator: 'NotIn', values: ['prod'] },
      ],
    });
    assert.ok(sel);
    assert.equal(matchesLabels(sel, { app: 'web', tier: 'a', zone: 'z' }), true);
    assert.equal(matchesLabels(sel, { app: 'web', tier: 'a', zone: 'z', env: 'prod' }), false);
    assert.equal(matchesLabels(sel, { app: 'web', tier: 'c', zone: 'z' }), false);
    assert.equal(matchesLabels(sel, { app: 'web', tier: 'a', zone: 'z', legacy: '' }), false);
    assert.equal(matchesLabels(sel, { app: 'api', tier: 'a', zone: 'z' }), false);
    assert.equal(matchesLabels(labelSelectorFromObject({})!, {}), true, 'the empty selector matches everything');
    assert.equal(labelSelectorFromObject({ matchExpressions: [{ key: 'a', operator: 'in', values: ['x'] }] }), undefined);
    assert.equal(labelSelectorFromObject({ matchExpressions: [{ key: 'a', operator: 'constructor' }] }), undefined);
  });

  it('property: agrees with the string syntax for the same requirements', () => {
    const key = fc.constantFrom('a', 'b', 'c');
    const val = fc.constantFrom('x', 'y', 'z');
    const expr = fc.oneof(
      fc.record({ key, operator: fc.constantFrom('In', 'NotIn'), values: fc.array(val, { minLength: 1, maxLength: 3 }) }),
      fc.record({ key, operator: fc.constantFrom('Exists', 'DoesNotExist') }),
    );
    fc.assert(
      fc.property(fc.dictionary(key, val), fc.array(expr, { maxLength: 4 }), fc.dictionary(key, val), (ml, exprs, labels) => {
        const text = [
          ...Object.entries(ml).map(([k, v]) => `${k}=${v}`),
          ...exprs.map((e) =>
            e.operator === 'Exists'
              ? e.key
              : e.operator === 'DoesNotExist'
                ? `!${e.key}`
                : `${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${(e as { values: string[] }).values.join(',')})`,
          ),
        ].join(',');
        const obj = labelSelectorFromObject({ matchLabels: ml, matchExpressions: exprs });
        assert.ok(obj);
        assert.equal(matchesLabels(obj, labels), matchesLabels(parseLabelSelector(text), labels), text);
      }),
    );
  });
});
