import { test } from 'node:test';
import assert from 'node:assert/strict';
import { admit, compileSchema, SchemaError, type SchemaCause } from './index.js';
import { policySchema, validPolicy } from './testing/policy.js';

const policy = compileSchema(policySchema());

function withRules(field: Record<string, unknown>, rules: Record<string, unknown>[]): ReturnType<typeof compileSchema> {
  return compileSchema({ type: 'object', properties: { spec: { ...field, 'x-kubernetes-validations': rules } } });
}

function causesOf(fn: () => unknown): SchemaCause[] {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof SchemaError, String(e));
    assert.equal(e.code, 'KARS_SCHEMA_INVALID');
    return e.causes;
  }
  assert.fail('expected a SchemaError');
}

void test('a CEL rule that holds produces no cause', () => {
  assert.deepEqual(policy.validate(validPolicy()), []);
});

void test('a failing CEL rule reports its message at the node carrying the rule', () => {
  const obj = { ...validPolicy(), spec: { agent: 'a', tokenBudget: { daily: 500, monthly: 100 } } };
  assert.deepEqual(admit(policy, obj).causes, [
    { reason: 'FieldValueInvalid', message: 'Invalid value: "object": daily must not exceed monthly', field: 'spec.tokenBudget' },
  ]);
});

void test('integers are CEL ints and numbers are doubles', () => {
  const s = withRules({ type: 'object', properties: { i: { type: 'integer' }, d: { type: 'number' } } }, [
    { rule: 'self.i >= 0 && self.i + 1 == 3 && self.d > 1.0 && type(self.i) == int && type(self.d) == double' },
  ]);
  assert.deepEqual(s.validate({ spec: { i: 2, d: 2 } }), []);
});

void test('without message a failing rule says failed rule', () => {
  const s = withRules({ type: 'object', properties: { a: { type: 'integer' } } }, [{ rule: 'self.a > 1' }]);
  assert.match(s.validate({ spec: { a: 0 } })[0]!.message, /failed rule: self\.a > 1/);
});

void test('messageExpression is evaluated and used as the message', () => {
  const s = withRules({ type: 'object', properties: { a: { type: 'integer' } } }, [
    { rule: 'self.a < 3', message: 'static', messageExpression: "'a is ' + string(self.a) + ', want < 3'" },
  ]);
  assert.equal(s.validate({ spec: { a: 7 } })[0]!.message, 'Invalid value: "object": a is 7, want < 3');
});

void test('a messageExpression that fails falls back to message', () => {
  const s = withRules({ type: 'object', properties: { a: { type: 'integer' } } }, [
    // Fails at run time (7 / 0); an undeclared field would not compile at all, as in kube-apiserver.
    { rule: 'self.a < 3', message: 'static', messageExpression: 'string(self.a / (self.a - 7))' },
  ]);
  assert.equal(s.validate({ spec: { a: 7 } })[0]!.message, 'Invalid value: "object": static');
});

void test('fieldPath and reason shape the cause', () => {
  const s = withRules({ type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'string' } } } } }, [
    { rule: "self.a.b != 'x'", message: 'b must not be x', fieldPath: '.a.b', reason: 'FieldValueForbidden' },
  ]);
  assert.deepEqual(s.validate({ spec: { a: { b: 'x' } } }), [
    { reason: 'FieldValueForbidden', message: 'Forbidden: b must not be x', field: 'spec.a.b' },
  ]);
});

void test('has(), size(), all(), exists() and string functions work on self', () => {
  const s = withRules(
    {
      type: 'object',
      properties: {
        name: { type: 'string' },
        list: { type: 'array', items: { type: 'integer' } },
        m: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
    [
      { rule: "!has(self.name) || self.name.startsWith('ag')", message: 'prefix' },
      { rule: 'self.list.size() <= 3', message: 'size' },
      { rule: 'self.list.all(x, x > 0)', message: 'all' },
      { rule: 'self.list.exists(x, x == 2)', message: 'exists' },
      { rule: 'self.m.all(k, self.m[k].lowerAscii() == self.m[k])', message: 'map' },
      { rule: "self.name.matches('^[a-z-]+$') && self.list.isSorted()", message: 'lib' },
    ],
  );
  assert.deepEqual(s.validate({ spec: { name: 'agent-x', list: [1, 2], m: { a: 'low' } } }), []);
  const msgs = s
    .validate({ spec: { name: 'Bob', list: [3, 1, 0, -1], m: { a: 'UP' } } })
    .map((c) => c.message.replace('Invalid value: "object": ', ''));
  assert.deepEqual(msgs, ['prefix', 'size', 'all', 'exists', 'map', 'lib']);
});

void test('property names are escaped in CEL as kube does', () => {
  const s = withRules({ type: 'object', properties: { 'max-tokens': { type: 'integer' } } }, [{ rule: 'self.max__dash__tokens > 0' }]);
  assert.deepEqual(s.validate({ spec: { 'max-tokens': 1 } }), []);
  assert.equal(s.validate({ spec: { 'max-tokens': 0 } }).length, 1);
});

void test('a runtime CEL error becomes a FieldValueInvalid cause', () => {
  const s = withRules({ type: 'object', properties: { a: { type: 'integer' } } }, [{ rule: 'self.a > 0' }]);
  const [c] = s.validate({ spec: {} });
  assert.equal(c?.reason, 'FieldValueInvalid');
  assert.match(c!.message, /evaluating rule: self\.a > 0/);
});

void test('a transition rule is skipped on create and enforced on update', () => {
  const created = { ...validPolicy(), spec: { agent: 'a', owner: 'alice' } };
  assert.deepEqual(policy.validate(created), []);
  const updated = { ...validPolicy(), spec: { agent: 'a', owner: 'bob' } };
  assert.deepEqual(policy.validate(updated, created), [
    { reason: 'FieldValueInvalid', message: 'Invalid value: "string": owner is immutable', field: 'spec.owner' },
  ]);
  assert.deepEqual(policy.validate(created, created), []);
});

void test('a transition rule is skipped when the old object lacks the field', () => {
  const old = { ...validPolicy(), spec: { agent: 'a' } };
  assert.deepEqual(policy.validate({ ...validPolicy(), spec: { agent: 'a', owner: 'bob' } }, old), []);
});

void test('transition rules correlate list-type map items by key', () => {
  const s = compileSchema({
    type: 'object',
    properties: {
      spec: {
        type: 'array',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
        items: {
          type: 'object',
          required: ['name'],
          properties: {
            name: { type: 'string' },
            size: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self >= oldSelf', message: 'cannot shrink' }] },
          },
        },
      },
    },
  });
  const old = {
    spec: [
      { name: 'a', size: 5 },
      { name: 'b', size: 5 },
    ],
  };
  const causes = s.validate(
    {
      spec: [
        { name: 'b', size: 1 },
        { name: 'a', size: 9 },
        { name: 'c', size: 1 },
      ],
    },
    old,
  );
  assert.deepEqual(
    causes.map((c) => c.field),
    ['spec[0].size'],
  );
});

void test('a message expression that reads oldSelf gets it on an update, though its rule reads only self', () => {
  const s = compileSchema({
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        properties: { size: { type: 'integer' } },
        'x-kubernetes-validations': [
          { rule: 'self.size < 10', messageExpression: "'size ' + string(self.size) + ' was ' + string(oldSelf.size)" },
          { rule: 'self.size >= oldSelf.size', message: 'cannot shrink' },
        ],
      },
    },
  });
  const causes = s.validate({ spec: { size: 3 } }, { spec: { size: 12 } });
  assert.deepEqual(
    causes.map((c) => c.message),
    ['Invalid value: "object": cannot shrink'],
  );
  const grown = s.validate({ spec: { size: 15 } }, { spec: { size: 12 } });
  assert.deepEqual(
    grown.map((c) => c.message),
    ['Invalid value: "object": size 15 was 12'],
  );
  // Without an old object the transition rule is skipped; the message expression then cannot read oldSelf.
  const created = s.validate({ spec: { size: 15 } });
  assert.equal(created.length, 1);
  assert.equal(created[0]?.field, 'spec');
});

void test('CEL rules are skipped when schema validation already failed with a blocking error', () => {
  const obj = { ...validPolicy(), spec: { agent: 'a', tokenBudget: { daily: 'lots', monthly: 1 } } };
  const causes = policy.validate(obj);
  assert.equal(causes[0]?.reason, 'FieldValueTypeInvalid');
  assert.match(causes.at(-1)!.message, /some validation rules were not checked/);
  assert.ok(!causes.some((c) => /daily must not exceed/.test(c.message)));
});

void test('a CEL rule that does not compile makes compileSchema throw SchemaError', () => {
  const causes = causesOf(() => withRules({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true }, [{ rule: 'self.a >' }]));
  assert.equal(causes[0]?.field, 'properties[spec].x-kubernetes-validations[0].rule');
  assert.match(causes[0]!.message, /compilation failed/);
});

void test('unknown functions and variables are compile errors', () => {
  assert.match(
    causesOf(() => withRules({ type: 'object' }, [{ rule: 'frobnicate(self)' }]))[0]!.message,
    /undeclared reference to 'frobnicate'/,
  );
  assert.match(causesOf(() => withRules({ type: 'object' }, [{ rule: 'other > 1' }]))[0]!.message, /undeclared reference to 'other'/);
});

void test('a rule selecting a field its object schema does not declare is a compile error, as in kube-apiserver', () => {
  // Found on a real kube-apiserver (issue 18): an InferencePolicy CRD with spec.displayName removed but still named by
  // its CEL rule is refused there ("undefined field 'displayName'"); kars apiserver accepted it.
  const typed = {
    type: 'object',
    properties: {
      a: { type: 'string' },
      'x-y': { type: 'string' },
      nested: { type: 'object', properties: { leaf: { type: 'integer' } } },
      list: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' } } } },
      labels: { type: 'object', additionalProperties: { type: 'string' } },
      free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { typed: { type: 'boolean' } } },
    },
  };
  const refused = (rule: string): string => {
    const causes = causesOf(() => withRules(typed, [{ rule }]));
    assert.equal(causes.length, 1, rule);
    assert.equal(causes[0]?.field, 'properties[spec].x-kubernetes-validations[0].rule');
    return causes[0]!.message;
  };
  assert.match(refused('has(self.displayName)'), /compilation failed: undefined field 'displayName'/);
  assert.match(refused('!has(self.a) || has(self.b)'), /undefined field 'b'/);
  assert.match(refused('self.nested.leaf > 0 && self.nested.leef > 0'), /undefined field 'leef'/);
  assert.match(refused('self.list.all(i, i.nme != "")'), /undefined field 'nme'/);
  assert.match(refused('self.list.exists(i, has(i.name)) && self.oldSelfX == 1'), /undefined field 'oldSelfX'/);
  assert.match(refused('has(self.x_y)'), /undefined field 'x_y'/);
  // Declared fields (escaped as kube escapes them), maps, preserve-unknown-fields and oldSelf compile.
  for (const rule of [
    'has(self.a) && self.nested.leaf >= 0',
    'self.x__dash__y != ""',
    'self.list.all(i, i.name != "")',
    'self.labels.all(k, self.labels[k] != "") && !has(self.labels.anything)',
    'has(self.free.typed) || has(self.free.whatever.deeper)',
    'self.a == oldSelf.a',
    '[self.nested].all(n, n.leaf > 0)',
  ])
    assert.doesNotThrow(() => withRules(typed, [{ rule }]), rule);
  assert.match(
    causesOf(() => withRules(typed, [{ rule: 'self.a == oldSelf.b' }]))[0]!.message,
    /undefined field 'b'/,
    'oldSelf has the type of self',
  );
});

void test('bad rule reason, fieldPath and messageExpression are rejected', () => {
  assert.equal(causesOf(() => withRules({ type: 'object' }, [{ rule: 'true', reason: 'Nope' }]))[0]!.reason, 'FieldValueNotSupported');
  assert.match(
    causesOf(() => withRules({ type: 'object', properties: { a: { type: 'string' } } }, [{ rule: 'true', fieldPath: '.b' }]))[0]!.message,
    /fieldPath/,
  );
  assert.match(
    causesOf(() => withRules({ type: 'object' }, [{ rule: 'true', messageExpression: '1 +' }]))[0]!.message,
    /messageExpression/,
  );
});
