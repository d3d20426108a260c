/**
 * Admission over real HTTP equals kube-schema's admit() (the function `kars compile` runs) for a CRD
 * with everything admission knows: x-kubernetes-preserve-unknown-fields, defaults, lists, maps, CEL.
 * And field validation on hostile field names: Strict refuses, Warn warns in ASCII, Ignore is silent.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { admit, compileSchema } from '@kars/kube-schema';
import { createCrds, startTestServer, warningTexts } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const GADGETS = '/apis/example.com/v1/namespaces/default/gadgets';

const schema = {
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      'x-kubernetes-validations': [
        { rule: '!has(self.min) || !has(self.max) || self.min <= self.max', message: 'min must not exceed max' },
      ],
      properties: {
        min: { type: 'integer' },
        max: { type: 'integer', default: 10 },
        mode: { type: 'string', enum: ['a', 'b'], default: 'a' },
        items: {
          type: 'array',
          maxItems: 4,
          items: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string', minLength: 1 }, weight: { type: 'integer', default: 1 } },
          },
        },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
        free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { typed: { type: 'boolean' } } },
        nested: { type: 'object', properties: { deeper: { type: 'object', properties: { leaf: { type: 'string', nullable: true } } } } },
      },
    },
  },
};

function gadgetCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'gadgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema } }],
    },
  };
}

function warnings(header: string | string[] | undefined): string[] {
  const text = Array.isArray(header) ? header.join(', ') : (header ?? '');
  assert.match(text, /^[\x20-\x7e]*$/, `warning headers are printable ASCII: ${JSON.stringify(text)}`);
  return warningTexts(text);
}

describe('admission over HTTP equals kube-schema admit()', () => {
  let ts: TestServer;
  let seq = 0;
  const compiled = compileSchema(schema);
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, gadgetCrd());
  });
  after(async () => ts.close());

  /** POST with Warn and with Strict (dry run); compare with admit() on a copy of the same body. */
  async function check(spec: unknown, extra: Record<string, unknown> = {}): Promise<void> {
    const name = `g-${++seq}`;
    const body = { apiVersion: 'example.com/v1', kind: 'Gadget', metadata: { name }, spec, ...extra };
    const local = admit(compiled, structuredClone(body) as Record<string, unknown>);
    const what = JSON.stringify(body);
    const expectWarn = local.unknownFields.map((p) => `unknown field "${p}"`);

    const strict = await ts.client.request('POST', `${GADGETS}?fieldValidation=Strict&dryRun=All`, body);
    if (local.unknownFields.length > 0) {
      assert.equal(strict.status, 400, `${what}: ${strict.text}`);
      assert.equal(
        strict.body.message,
        `Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: ${expectWarn.join(', ')}`,
        what,
      );
    } else {
      assert.notEqual(strict.status, 400, `${what}: ${strict.text}`);
    }

    const warn = await ts.client.request('POST', `${GADGETS}?fieldValidation=Warn`, body);
    if (local.causes.length > 0) {
      assert.equal(warn.status, 422, `${what}: ${warn.text}`);
      assert.deepEqual(
        warn.body.details.causes.map((c: { field: string; message: string }) => [c.field, c.message]),
        // kube-schema names the root ""; the server prints kube's nil path, `<nil>`.
        local.causes.map((c) => [c.field === '' ? '<nil>' : c.field, c.message]),
        what,
      );
      return;
    }
    assert.equal(warn.status, 201, `${what}: ${warn.text}`);
    assert.deepEqual(warnings(warn.headers['warning']), expectWarn, what);
    assert.deepEqual(warn.body.spec, local.object['spec'], `stored spec ${what}`);
    const ignore = await ts.client.request('POST', `${GADGETS}?fieldValidation=Ignore&dryRun=All`, {
      ...body,
      metadata: { name: `${name}-i` },
    });
    assert.equal(ignore.status, 201, ignore.text);
    assert.equal(ignore.headers['warning'], undefined, 'Ignore sends no warning');
  }

  it('agrees on golden documents: defaults, preserve-unknown-fields, unknown fields at depth, types, CEL', async () => {
    await check({ min: 1 });
    await check({ min: 1, items: [{ name: 'x' }, { name: 'y', weight: 5, junk: true }], labels: { a: 'b' } });
    await check({ free: { anything: { goes: [1, { here: true }] }, typed: true }, nested: { deeper: { leaf: null, extra: 1 } } });
    await check({ free: { typed: 'not a bool' } });
    await check({ min: 20 }); // CEL against the default max
    await check({ min: 'x', max: 1, mode: 'c', items: [{}] }); // blocking errors: CEL skipped
    await check({ min: 1, unknownTop: 1 }, { status: { x: 1 }, extraRoot: { y: 2 } });
    await check({ min: 1, ключ: 1, 'quote"d': 2, 'back\\slash': 3, 'ctl\u0001char': 4, 'emoji😀': 5 });
    await check({ items: [{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd' }, { name: 'e' }] });
  });

  it('agrees on random specs (fast-check)', async () => {
    const leaf = fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: -3, max: 30 }), fc.string({ maxLength: 5 }));
    const key = fc.oneof(
      fc.constantFrom('min', 'max', 'mode', 'items', 'labels', 'free', 'nested', 'name', 'weight', 'typed', 'deeper', 'leaf'),
      fc.string({ maxLength: 4 }),
    );
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(key, tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    await fc.assert(
      fc.asyncProperty(fc.dictionary(key, value, { maxKeys: 5 }), async (spec) => check(spec)),
      { numRuns: 80 },
    );
  });
});
