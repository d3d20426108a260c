import { test } from 'node:test';
import assert from 'node:assert/strict';
import { admit, compileSchema } from './index.js';
import { policySchema, validPolicy } from './testing/policy.js';

const schema = compileSchema(policySchema());

void test('prune removes fields the schema does not declare, at every level', () => {
  const obj = { ...validPolicy(), bogus: 1, spec: { agent: 'a', unknown: true, tokenBudget: { daily: 1, junk: 'x' } } };
  schema.prune(obj);
  assert.deepEqual(obj, { ...validPolicy(), spec: { agent: 'a', tokenBudget: { daily: 1 } } });
});

void test('prune never touches top-level apiVersion, kind or metadata', () => {
  const obj = { apiVersion: 'a/v1', kind: 'K', metadata: { name: 'n', anything: { deep: 1 } } };
  schema.prune(obj);
  assert.deepEqual(obj.metadata, { name: 'n', anything: { deep: 1 } });
  assert.equal(obj.apiVersion, 'a/v1');
});

void test('prune keeps unknown fields under x-kubernetes-preserve-unknown-fields but still prunes declared ones', () => {
  const s = compileSchema({
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
        properties: { inner: { type: 'object', properties: { a: { type: 'string' } } } },
      },
    },
  });
  const obj = s.prune({ spec: { free: { x: 1 }, inner: { a: 'k', b: 'dropped' } } });
  assert.deepEqual(obj, { spec: { free: { x: 1 }, inner: { a: 'k' } } });
});

void test('prune recurses into array items and additionalProperties maps', () => {
  const obj = schema.prune({
    spec: {
      egress: [{ host: 'h', junk: 1 }],
      limits: { a: { cpu: 1, junk: 2 } },
      labels: { x: 'y' },
    },
  });
  assert.deepEqual(obj, { spec: { egress: [{ host: 'h' }], limits: { a: { cpu: 1 } }, labels: { x: 'y' } } });
});

void test('prune keeps apiVersion, kind and metadata of an embedded resource and prunes the rest', () => {
  const obj = schema.prune({
    spec: { template: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' }, spec: { image: 'i', junk: 1 }, junk: 2 } },
  });
  assert.deepEqual(obj, { spec: { template: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' }, spec: { image: 'i' } } } });
});

void test('prune drops every field of an object whose additionalProperties is false', () => {
  const s = compileSchema({ type: 'object', properties: { spec: { type: 'object', additionalProperties: false } } });
  assert.deepEqual(s.prune({ spec: { a: 1 } }), { spec: {} });
});

void test('admit reports every pruned field as an unknown field, in kube path syntax and document order', () => {
  const s = compileSchema({
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        properties: {
          list: { type: 'array', items: { type: 'object', properties: { a: { type: 'string' } } } },
          map: { type: 'object', additionalProperties: { type: 'object', properties: { v: { type: 'integer' } } } },
          free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          n: { type: 'integer', default: 3 },
        },
      },
    },
  });
  const r = admit(s, {
    apiVersion: 'g/v1',
    kind: 'K',
    metadata: { name: 'x', junk: 1 },
    spec: { list: [{ a: 'ok' }, { a: 'ok', b: 1 }], map: { 'k.1': { v: 1, w: 2 } }, free: { any: { thing: 1 } }, top: true },
    extra: 1,
  });
  assert.deepEqual(r.unknownFields, ['spec.list[1].b', 'spec.map.k.1.w', 'spec.top', 'extra']);
  assert.deepEqual(r.object, {
    apiVersion: 'g/v1',
    kind: 'K',
    metadata: { name: 'x', junk: 1 },
    spec: { list: [{ a: 'ok' }, { a: 'ok' }], map: { 'k.1': { v: 1 } }, free: { any: { thing: 1 } }, n: 3 },
  });
  assert.deepEqual(r.causes, []);
  assert.deepEqual(admit(s, { spec: { n: 1 } }).unknownFields, [], 'a clean object has none');
});
