import { test } from 'node:test';
import assert from 'node:assert/strict';
import { admit, compileSchema } from './index.js';
import { policySchema, validPolicy } from './testing/policy.js';

const policy = compileSchema(policySchema());

function nest(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = {};
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? { x: v } : { x: v, l: [1] };
  return v;
}

const garbage: unknown[] = [
  null,
  0,
  -1,
  1e308,
  Number.NaN,
  '',
  'x'.repeat(1_000_000),
  true,
  [],
  [null],
  {},
  { spec: null },
  { spec: [] },
  { spec: 'str' },
  { spec: { agent: null, tokenBudget: null, egress: null, tools: null, labels: null } },
  { spec: { agent: 7, tokenBudget: { daily: 'x', monthly: [] }, egress: [1, null, 'x', [], {}], tools: [{}, {}], labels: [] } },
  { spec: { agent: 'a', tokenBudget: { daily: 1e300, monthly: -1e300 } } },
  { spec: { agent: 'a', tokenBudget: {} } },
  { spec: { agent: 'a', extra: nest(400), limits: { x: nest(300) } } },
  { spec: { agent: 'a', template: { apiVersion: 3, kind: {}, metadata: 'm', spec: [] } } },
  { __proto__: { spec: 1 }, spec: { ['__proto__']: 1, constructor: 2 } },
  JSON.parse('{"spec":{"__proto__":{"agent":"polluted"},"agent":"a"}}'),
];

void test('garbage input never throws from prune, applyDefaults, validate or admit', () => {
  for (const g of garbage) {
    const obj = (typeof g === 'object' && g !== null && !Array.isArray(g) ? structuredClone(g) : { spec: g }) as Record<string, unknown>;
    assert.doesNotThrow(
      () => {
        const r = admit(policy, obj, validPolicy());
        assert.ok(Array.isArray(r.causes));
        policy.validate(structuredClone(obj), obj);
      },
      `input ${JSON.stringify(g)?.slice(0, 80)}`,
    );
  }
});

void test('a rule that throws at runtime on garbage becomes a cause, not an exception', () => {
  const s = compileSchema({
    type: 'object',
    'x-kubernetes-preserve-unknown-fields': true,
    'x-kubernetes-validations': [{ rule: 'self.spec.a.b.c / 0 == 1' }],
  });
  const causes = s.validate({ spec: { a: { b: { c: 1 } } } });
  assert.equal(causes.length, 1);
  assert.equal(causes[0]?.reason, 'FieldValueInvalid');
});

void test('object nesting deeper than the cap is reported as a cause', () => {
  const s = compileSchema({ type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } });
  assert.deepEqual(s.validate({ spec: nest(500) }), []);
  const causes = s.validate({ spec: nest(2000) });
  assert.equal(causes.length, 1);
  assert.match(causes[0]!.message, /maximum depth of 1000/);
  assert.match(causes[0]!.field, /^spec\.x\.x/);
});

void test('schema nesting deeper than the cap is a SchemaError', () => {
  const deep: Record<string, unknown> = { type: 'object', properties: {} };
  let cur = deep;
  for (let i = 0; i < 150; i++) {
    const nxt: Record<string, unknown> = { type: 'object', properties: {} };
    (cur['properties'] as Record<string, unknown>)['x'] = nxt;
    cur = nxt;
  }
  assert.throws(() => compileSchema(deep), /nesting exceeds 100 levels/);
});

void test('compileSchema throws only SchemaError on garbage schemas', () => {
  for (const g of [
    null,
    1,
    'x',
    [],
    { type: 5 },
    { type: 'object', properties: [] },
    { type: 'object', properties: { a: null } },
    { type: 'object', 'x-kubernetes-validations': 'x' },
    { type: 'object', 'x-kubernetes-validations': [{ rule: 5 }] },
  ]) {
    assert.throws(
      () => compileSchema(g),
      (e: unknown) => e instanceof Error && (e as { code?: string }).code === 'KARS_SCHEMA_INVALID',
    );
  }
});
