import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileSchema, SchemaError } from './index.js';
import { policySchema } from './testing/policy.js';

function rejects(schema: unknown, pattern: RegExp): void {
  try {
    compileSchema(schema);
  } catch (e) {
    assert.ok(e instanceof SchemaError);
    assert.ok(
      e.causes.some((c) => pattern.test(`${c.field}: ${c.message}`)),
      JSON.stringify(e.causes),
    );
    return;
  }
  assert.fail('expected compileSchema to throw');
}

const spec = (s: Record<string, unknown>): Record<string, unknown> => ({ type: 'object', properties: { spec: s } });

void test('the realistic policy schema compiles', () => {
  assert.doesNotThrow(() => compileSchema(policySchema()));
});

void test('a non-object or non-object-typed root is rejected', () => {
  rejects('nope', /openAPIV3Schema must be an object/);
  rejects({ type: 'string' }, /must be object at the root/);
});

void test('a node without type is not structural', () => {
  rejects(spec({ properties: { a: { type: 'string' } } }), /^properties\[spec\]\.type: Required value/);
});

void test('arrays must declare items', () => {
  rejects(spec({ type: 'array' }), /items: Required value/);
});

void test('kube-forbidden keywords are rejected', () => {
  rejects(spec({ type: 'array', items: { type: 'string' }, uniqueItems: true }), /uniqueItems cannot be set to true/);
  rejects(spec({ $ref: '#/x' }), /\$ref is not supported/);
  rejects(spec({ type: 'object', patternProperties: {} }), /patternProperties is not supported/);
  rejects(spec({ type: 'null' }), /type cannot be set to null/);
  rejects(spec({ type: 'object', 'x-kubernetes-preserve-unknown-fields': false }), /must be true or undefined/);
});

void test('properties and additionalProperties are mutually exclusive', () => {
  rejects(spec({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'string' } }), /mutual exclusive/);
});

void test('types inside value validations are rejected except for int-or-string', () => {
  rejects(spec({ type: 'object', anyOf: [{ type: 'string' }] }), /must not be used inside of value validations/);
  assert.doesNotThrow(() =>
    compileSchema(
      spec({ type: 'object', properties: { p: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }] } } }),
    ),
  );
});

void test('value validations may only constrain fields the skeleton declares', () => {
  rejects(
    spec({ type: 'object', properties: { a: { type: 'string' } }, allOf: [{ properties: { b: { maxLength: 1 } } }] }),
    /corresponding property/,
  );
});

void test('list-type map needs keys that are scalar item properties, required or defaulted', () => {
  rejects(
    spec({ type: 'array', 'x-kubernetes-list-type': 'map', items: { type: 'object' } }),
    /x-kubernetes-list-map-keys: Required value/,
  );
  rejects(
    spec({
      type: 'array',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['k'],
      items: { type: 'object', properties: { k: { type: 'string' } } },
    }),
    /must have a default or be a required property/,
  );
  rejects(spec({ type: 'array', 'x-kubernetes-list-type': 'bag', items: { type: 'string' } }), /Unsupported value: "bag"/);
});

void test('defaults must be valid and already pruned', () => {
  rejects(spec({ type: 'object', properties: { n: { type: 'integer', minimum: 0, default: -1 } } }), /default.*greater than or equal to 0/);
  rejects(
    spec({ type: 'object', properties: { o: { type: 'object', properties: { a: { type: 'string' } }, default: { b: 1 } } } }),
    /must not have unknown fields/,
  );
  rejects({ type: 'object', properties: { metadata: { type: 'object', default: {} } } }, /must not be set in top-level metadata/);
});

void test('top-level metadata may only restrict name and generateName', () => {
  rejects(
    { type: 'object', properties: { metadata: { type: 'object', properties: { labels: { type: 'object' } } } } },
    /only metadata.name and metadata.generateName/,
  );
  assert.doesNotThrow(() =>
    compileSchema({
      type: 'object',
      properties: { metadata: { type: 'object', properties: { name: { type: 'string', maxLength: 20 } } } },
    }),
  );
});

void test('an invalid regular expression in pattern is rejected', () => {
  rejects(spec({ type: 'string', pattern: '(' }), /must be a valid regular expression/);
});

void test('SchemaError carries every cause and a summary message', () => {
  try {
    compileSchema(spec({ type: 'object', properties: { a: {}, b: { type: 'array' } } }));
    assert.fail('expected a SchemaError');
  } catch (e) {
    assert.ok(e instanceof SchemaError);
    assert.equal(e.causes.length, 2);
    assert.match(e.message, /and 1 more/);
  }
});
