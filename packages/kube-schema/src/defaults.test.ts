import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileSchema } from './index.js';
import { policySchema } from './testing/policy.js';

const schema = compileSchema(policySchema());

void test('defaults fill missing nested properties', () => {
  const obj = schema.applyDefaults({ spec: { agent: 'a', tokenBudget: { daily: 1 } } });
  assert.deepEqual(obj, { spec: { agent: 'a', mode: 'enforce', tokenBudget: { daily: 1, monthly: 100000 } } });
});

void test('defaults apply inside array items and additionalProperties map values', () => {
  const obj = schema.applyDefaults({
    spec: { agent: 'a', egress: [{ host: 'h' }, { host: 'g', port: 'http' }], limits: { x: { cpu: 0.5 } } },
  });
  const spec = obj['spec'] as Record<string, unknown>;
  assert.deepEqual(spec['egress'], [
    { host: 'h', port: 443, protocol: 'TCP' },
    { host: 'g', port: 'http', protocol: 'TCP' },
  ]);
  assert.deepEqual(spec['limits'], { x: { cpu: 0.5, burst: 1 } });
});

void test('defaults do not create parent objects that are absent', () => {
  const obj = schema.applyDefaults({ spec: { agent: 'a' } });
  assert.equal((obj['spec'] as Record<string, unknown>)['tokenBudget'], undefined);
});

void test('null for a non-nullable field is replaced by its default, or dropped without one', () => {
  const obj = schema.applyDefaults({ spec: { agent: 'a', mode: null, owner: null } });
  assert.deepEqual(obj, { spec: { agent: 'a', mode: 'enforce' } });
});

void test('null for a nullable field is kept and not defaulted', () => {
  const s = compileSchema({
    type: 'object',
    properties: { spec: { type: 'object', properties: { x: { type: 'string', nullable: true, default: 'd' } } } },
  });
  assert.deepEqual(s.applyDefaults({ spec: { x: null } }), { spec: { x: null } });
  assert.deepEqual(s.applyDefaults({ spec: {} }), { spec: { x: 'd' } });
});

void test('default values are copied, never shared between objects', () => {
  const s = compileSchema({
    type: 'object',
    properties: { spec: { type: 'object', properties: { l: { type: 'array', items: { type: 'string' }, default: ['a'] } } } },
  });
  const a = s.applyDefaults({ spec: {} });
  ((a['spec'] as Record<string, unknown>)['l'] as string[]).push('b');
  assert.deepEqual(s.applyDefaults({ spec: {} }), { spec: { l: ['a'] } });
});
