import { test } from 'node:test';
import assert from 'node:assert/strict';
import { admit, compileSchema, type SchemaCause } from './index.js';
import { policySchema, validPolicy } from './testing/policy.js';

const policy = compileSchema(policySchema());

/** Compile a schema for a single field `spec.v` and validate one value for it. */
function check(fieldSchema: Record<string, unknown>, value: unknown): SchemaCause[] {
  const s = compileSchema({ type: 'object', properties: { spec: { type: 'object', properties: { v: fieldSchema } } } });
  return s.validate({ spec: { v: value } }).filter((c) => c.field !== '');
}

function only(causes: SchemaCause[]): SchemaCause {
  assert.equal(causes.length, 1, JSON.stringify(causes));
  return causes[0]!;
}

void test('a valid policy has no causes', () => {
  assert.deepEqual(admit(policy, validPolicy()).causes, []);
});

void test('a wrong type is FieldValueTypeInvalid naming the field and the expected type', () => {
  // kube (go-openapi's InvalidType) shows the value's type name as the "value", not the value itself.
  const c = only(check({ type: 'integer' }, 'big'));
  assert.equal(c.reason, 'FieldValueTypeInvalid');
  assert.equal(c.field, 'spec.v');
  assert.equal(c.message, 'Invalid value: "string": spec.v in body must be of type integer: "string"');
  assert.equal(only(check({ type: 'string' }, 7)).message, 'Invalid value: "integer": spec.v in body must be of type string: "integer"');
});

void test('integer rejects fractions while number accepts integers', () => {
  assert.equal(only(check({ type: 'integer' }, 1.5)).reason, 'FieldValueTypeInvalid');
  assert.deepEqual(check({ type: 'number' }, 3), []);
  assert.deepEqual(check({ type: 'boolean' }, true), []);
  assert.equal(only(check({ type: 'array', items: { type: 'string' } }, {})).reason, 'FieldValueTypeInvalid');
});

void test('a missing required field is Required value at the field path', () => {
  const causes = policy.validate({ ...validPolicy(), spec: {} });
  assert.deepEqual(causes[0], { reason: 'FieldValueRequired', message: 'Required value', field: 'spec.agent' });
});

void test('enum violations list the supported values', () => {
  const c = only(check({ type: 'string', enum: ['a', 'b'] }, 'x'));
  assert.equal(c.reason, 'FieldValueNotSupported');
  assert.equal(c.message, 'Unsupported value: "x": supported values: "a", "b"');
});

void test('maximum and minimum, inclusive and exclusive', () => {
  assert.match(only(check({ type: 'integer', maximum: 5 }, 6)).message, /should be less than or equal to 5/);
  assert.deepEqual(check({ type: 'integer', maximum: 5 }, 5), []);
  assert.match(only(check({ type: 'integer', maximum: 5, exclusiveMaximum: true }, 5)).message, /should be less than 5/);
  assert.match(only(check({ type: 'integer', minimum: 0 }, -1)).message, /spec\.v in body should be greater than or equal to 0/);
  assert.match(only(check({ type: 'number', minimum: 0, exclusiveMinimum: true }, 0)).message, /should be greater than 0/);
  assert.match(only(check({ type: 'integer', multipleOf: 3 }, 4)).message, /multiple of 3/);
});

void test('string length and pattern', () => {
  const long = only(check({ type: 'string', maxLength: 3 }, 'abcd'));
  assert.equal(long.reason, 'FieldValueTooLong');
  assert.match(long.message, /may not be more than 3/);
  assert.deepEqual(check({ type: 'string', maxLength: 3 }, 'äöü'), []);
  assert.match(only(check({ type: 'string', minLength: 2 }, 'a')).message, /at least 2 chars long/);
  assert.match(only(check({ type: 'string', pattern: '^[a-z]+$' }, 'A1')).message, /should match '\^\[a-z\]\+\$'/);
  assert.deepEqual(check({ type: 'string', pattern: '^[a-z]+$' }, 'ab'), []);
});

void test('minItems, maxItems, minProperties and maxProperties', () => {
  const many = only(check({ type: 'array', items: { type: 'integer' }, maxItems: 1 }, [1, 2]));
  assert.equal(many.reason, 'FieldValueTooMany');
  assert.match(many.message, /must have at most 1 items/);
  assert.match(only(check({ type: 'array', items: { type: 'integer' }, minItems: 1 }, [])).message, /at least 1 items/);
  assert.equal(
    only(check({ type: 'object', additionalProperties: { type: 'string' }, maxProperties: 1 }, { a: 'x', b: 'y' })).reason,
    'FieldValueTooMany',
  );
  assert.match(
    only(check({ type: 'object', additionalProperties: { type: 'string' }, minProperties: 1 }, {})).message,
    /at least 1 properties/,
  );
});

void test('nullable allows null and its absence rejects null', () => {
  assert.deepEqual(check({ type: 'string', nullable: true }, null), []);
  const c = only(check({ type: 'string' }, null));
  assert.equal(c.reason, 'FieldValueTypeInvalid');
  assert.match(c.message, /must be of type string: "null"/);
});

void test('x-kubernetes-int-or-string accepts integers and strings only', () => {
  const ios = { 'x-kubernetes-int-or-string': true };
  assert.deepEqual(check(ios, 8080), []);
  assert.deepEqual(check(ios, 'http'), []);
  assert.match(only(check(ios, 1.5)).message, /must be of type integer,string/);
  assert.equal(only(check(ios, true)).reason, 'FieldValueTypeInvalid');
  const withAnyOf = { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string', pattern: '^[0-9]+%$' }] };
  assert.deepEqual(check(withAnyOf, '50%'), []);
  assert.ok(check(withAnyOf, 'fifty').some((c) => /anyOf/.test(c.message)));
});

void test('format date-time and others are checked; unknown formats pass', () => {
  assert.deepEqual(check({ type: 'string', format: 'date-time' }, '2024-01-02T03:04:05Z'), []);
  assert.match(only(check({ type: 'string', format: 'date-time' }, 'yesterday')).message, /must be of type date-time/);
  assert.equal(only(check({ type: 'string', format: 'uuid' }, 'nope')).reason, 'FieldValueTypeInvalid');
  assert.deepEqual(check({ type: 'string', format: 'ipv4' }, '10.0.0.1'), []);
  assert.deepEqual(check({ type: 'string', format: 'my-own' }, 'anything'), []);
});

void test('x-kubernetes-list-type set reports duplicates at the later index', () => {
  const causes = policy.validate({ ...validPolicy(), spec: { agent: 'a', tools: ['git', 'sh', 'git'] } });
  assert.deepEqual(causes[0], { reason: 'FieldValueDuplicate', message: 'Duplicate value: "git"', field: 'spec.tools[2]' });
});

void test('x-kubernetes-list-type map reports items with duplicate keys', () => {
  const causes = policy.validate({
    ...validPolicy(),
    spec: { agent: 'a', egress: [{ host: 'a' }, { host: 'b' }, { host: 'a', port: 1 }] },
  });
  assert.equal(causes[0]?.reason, 'FieldValueDuplicate');
  assert.equal(causes[0]?.field, 'spec.egress[2]');
  assert.match(causes[0]!.message, /"host":"a"/);
});

void test('oneOf, allOf and not are enforced as value validations', () => {
  const base = { type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } } };
  const oneOf = { ...base, oneOf: [{ required: ['a'] }, { required: ['b'] }] };
  assert.deepEqual(check(oneOf, { a: 'x' }), []);
  assert.ok(check(oneOf, { a: 'x', b: 'y' }).some((c) => /one and only one/.test(c.message)));
  assert.ok(check(oneOf, {}).some((c) => /one and only one/.test(c.message)));
  const not = { ...base, not: { required: ['a'] } };
  assert.ok(check(not, { a: 'x' }).some((c) => /must not validate/.test(c.message)));
  const allOf = { ...base, allOf: [{ properties: { a: { maxLength: 1 } } }] };
  assert.ok(check(allOf, { a: 'xy' }).some((c) => c.field === 'spec.v.a' && c.reason === 'FieldValueTooLong'));
});

void test('additionalProperties map values are validated with key paths', () => {
  const causes = policy.validate({ ...validPolicy(), spec: { agent: 'a', labels: { ok: 'x', bad: 'far-too-long-value' } } });
  assert.equal(causes[0]?.field, 'spec.labels[bad]');
  assert.equal(causes[0]?.reason, 'FieldValueTooLong');
});

void test('embedded resources require apiVersion and kind', () => {
  const causes = policy.validate({ ...validPolicy(), spec: { agent: 'a', template: { spec: {} } } });
  assert.deepEqual(
    causes.slice(0, 2).map((c) => c.field),
    ['spec.template.apiVersion', 'spec.template.kind'],
  );
});

void test('array items are validated with index paths', () => {
  const causes = policy.validate({ ...validPolicy(), spec: { agent: 'a', egress: [{ host: 'a' }, { host: 3 }] } });
  assert.equal(causes[0]?.field, 'spec.egress[1].host');
});

void test('metadata is not validated against the schema', () => {
  assert.deepEqual(policy.validate({ ...validPolicy(), metadata: { name: 5, weird: [] } }), []);
});

void test('ratcheting: an update does not re-validate a root child it left unchanged, and does validate one it changed', () => {
  // The stored object predates a tightened schema (maxLength 3): kube reports no error for the
  // unchanged spec on a status write, and does for a spec that changed.
  const s = compileSchema({
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 3 } },
        'x-kubernetes-validations': [{ rule: "self.name != 'bad'", message: 'name must not be bad' }],
      },
      status: { type: 'object', properties: { phase: { type: 'string', enum: ['Ok', 'Failed'] } } },
    },
  });
  const old = { metadata: { name: 'o' }, spec: { name: 'toolong' }, status: { phase: 'Ok' } };
  assert.deepEqual(s.validate({ metadata: { name: 'o' }, spec: { name: 'toolong' }, status: { phase: 'Failed' } }, old), []);
  // The changed child is still validated in full.
  assert.equal(only(s.validate({ ...old, status: { phase: 'Lost' } }, old).filter((c) => c.field !== '')).field, 'status.phase');
  assert.equal(only(s.validate({ ...old, spec: { name: 'longer' } }, old).filter((c) => c.field !== '')).field, 'spec.name');
  assert.equal(
    only(s.validate({ ...old, spec: { name: 'bad' } }, { ...old, spec: { name: 'ok' } })).message,
    'Invalid value: "object": name must not be bad',
  );
  // Without an old object (a create), everything is validated.
  assert.equal(only(s.validate({ spec: { name: 'toolong' } }).filter((c) => c.field !== '')).field, 'spec.name');
});

void test('ratcheting never skips a child whose rules read oldSelf, nor rules on the root', () => {
  const s = compileSchema({
    type: 'object',
    'x-kubernetes-validations': [
      { rule: "!has(self.status) || self.status.phase != 'Stuck' || self.spec.v > 0", message: 'stuck needs v' },
    ],
    properties: {
      spec: {
        type: 'object',
        properties: {
          v: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self != oldSelf', message: 'must change on every write' }] },
        },
      },
      status: { type: 'object', properties: { phase: { type: 'string' } } },
    },
  });
  const old = { spec: { v: 0 }, status: { phase: 'Ok' } };
  const causes = s.validate({ spec: { v: 0 }, status: { phase: 'Stuck' } }, old);
  assert.deepEqual(causes.map((c) => c.message).sort(), [
    'Invalid value: "integer": must change on every write',
    'Invalid value: "object": stuck needs v',
  ]);
});
