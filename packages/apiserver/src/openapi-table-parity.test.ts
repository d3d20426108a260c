// Regression tests for the differential suite's OpenAPI and Table scenarios (discovery/openapi-v2-*,
// custom/*-table, list/list-table): each asserts kube-apiserver v1.34's answer over HTTP.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { crdSchemaToV2 } from './openapi/crd-v2.js';
import { createCrds, eventually, simpleCrd, startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
const CREATION_TIMESTAMP_DOC =
  'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata';
const CONFIG_MAP_DATA_DOC =
  "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";

/** A spec schema using every feature kube's v2 publishing reduces. */
const SPEC = {
  type: 'object',
  required: ['size', 'maybe', 'items'],
  properties: {
    size: { type: 'integer', default: 3, minimum: 0 },
    mode: { type: 'string', default: 'open', enum: ['open', 'locked'] },
    maybe: { type: 'string', nullable: true, description: 'null or a string' },
    nullObject: { type: 'object', nullable: true, properties: { a: { type: 'string' } } },
    free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { kept: { type: 'string' } } },
    freeList: { type: 'array', 'x-kubernetes-preserve-unknown-fields': true, items: { type: 'string' } },
    port: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }] },
    items: { type: 'array', default: [], items: { type: 'object', properties: { n: { type: 'integer', default: 1 } } } },
    digests: { type: 'object', required: ['x'], additionalProperties: { type: 'string', nullable: true } },
    labels: { type: 'object', default: {}, additionalProperties: { type: 'string' } },
  },
};

void describe('kube-apiserver parity: OpenAPI v2 publishing of CRD schemas', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(
      ts.client,
      simpleCrd('v2.example.com', 'Reduced', { type: 'object', properties: { spec: SPEC } }),
      simpleCrd('v2.example.com', 'Opaque', { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
    );
  });
  after(async () => ts?.close());

  const definition = (name: string): Promise<Record<string, any>> =>
    eventually(async () => {
      const r = await ts.client.get('/openapi/v2');
      return r.status === 200 ? (r.body.definitions[name] as Record<string, any> | undefined) : undefined;
    });

  it('drops defaults, nullable (with the type, items, properties and required entry), junctors, and the type of a preserve-unknown-fields object or an item-less array', async () => {
    const def = await definition('com.example.v2.v1.Reduced');
    assert.deepEqual(def.properties.spec, {
      type: 'object',
      required: ['size', 'items'],
      properties: {
        size: { type: 'integer', minimum: 0 },
        mode: { type: 'string', enum: ['open', 'locked'] },
        maybe: { description: 'null or a string' },
        nullObject: {},
        free: { 'x-kubernetes-preserve-unknown-fields': true },
        freeList: { 'x-kubernetes-preserve-unknown-fields': true },
        port: { 'x-kubernetes-int-or-string': true },
        items: { type: 'array', items: { type: 'object', properties: { n: { type: 'integer' } } } },
        digests: { type: 'object', additionalProperties: {} },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
      },
    });
  });

  it('publishes a kind whose whole schema preserves unknown fields as an object with no properties', async () => {
    assert.deepEqual(await definition('com.example.v2.v1.Opaque'), {
      type: 'object',
      'x-kubernetes-group-version-kind': [{ group: 'v2.example.com', kind: 'Opaque', version: 'v1' }],
    });
  });

  it('leaves nothing Swagger 2.0 cannot say and no default anywhere (property)', () => {
    const leaf = fc.record(
      { type: fc.constantFrom('string', 'integer', 'object', 'array'), default: fc.jsonValue(), nullable: fc.boolean() },
      { requiredKeys: [] },
    );
    const { node } = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        leaf,
        fc.record(
          {
            type: fc.constantFrom('object', 'array'),
            nullable: fc.boolean(),
            'x-kubernetes-preserve-unknown-fields': fc.boolean(),
            properties: fc.dictionary(fc.constantFrom('a', 'b', 'c'), tie('node')),
            items: tie('node'),
            additionalProperties: tie('node'),
            anyOf: fc.array(leaf, { maxLength: 2 }),
            required: fc.subarray(['a', 'b', 'c']),
            default: fc.jsonValue(),
          },
          { requiredKeys: [] },
        ),
      ),
    }));
    const walk = (s: unknown, visit: (n: Record<string, unknown>) => void): void => {
      if (s === null || typeof s !== 'object') return;
      const n = s as Record<string, unknown>;
      visit(n);
      for (const p of Object.values((n['properties'] as Record<string, unknown>) ?? {})) walk(p, visit);
      walk(n['items'], visit);
      walk(n['additionalProperties'], visit);
    };
    fc.assert(
      fc.property(node, (schema) => {
        const before = JSON.stringify(schema);
        walk(crdSchemaToV2(schema as Record<string, unknown>), (n) => {
          for (const k of ['default', 'nullable', 'anyOf', 'allOf', 'oneOf', 'not']) assert.equal(k in n, false, k);
          if (n['x-kubernetes-preserve-unknown-fields'] === true) assert.equal('properties' in n || 'items' in n, false);
          if (n['type'] === 'array') assert.ok('items' in n);
          if (Array.isArray(n['required'])) assert.ok(n['required'].length > 0);
        });
        assert.equal(JSON.stringify(schema), before, 'the input is not changed');
      }),
    );
  });
});

void describe('kube-apiserver parity: Table answers', () => {
  let ts: TestServer;
  const GADGETS = '/apis/table.example.com/v1/namespaces/default/gadgets';
  before(async () => {
    ts = await startTestServer();
    const crd = simpleCrd('table.example.com', 'Gadget', {
      type: 'object',
      properties: {
        spec: { type: 'object', properties: { size: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } } },
        status: { type: 'object', properties: { phase: { type: 'string' } } },
      },
    }) as { spec: { versions: Array<Record<string, unknown>> } };
    crd.spec.versions[0]!['additionalPrinterColumns'] = [
      { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Size Text', type: 'string', jsonPath: '.spec.size' },
      { name: 'Tags', type: 'string', jsonPath: '.spec.tags' },
      { name: 'Size Flag', type: 'boolean', jsonPath: '.spec.size' },
    ];
    await createCrds(ts.client, crd);
    const g = { apiVersion: 'table.example.com/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { size: 2, tags: ['a', 'b'] } };
    assert.equal((await ts.client.post(GADGETS, g)).status, 201);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm' }, data: { k: 'v' } };
    assert.equal((await ts.client.post('/api/v1/namespaces/default/configmaps', cm)).status, 201);
  });
  after(async () => ts?.close());

  const table = async (path: string): Promise<Record<string, any>> => {
    const r = await ts.client.request('GET', path, undefined, { accept: TABLE });
    assert.equal(r.status, 200, r.text);
    return r.body as Record<string, any>;
  };

  it('a custom resource cell is null where the path finds nothing or the value does not fit the type; a string column prints any value', async () => {
    for (const path of [GADGETS, `${GADGETS}/g`]) {
      const t = await table(path);
      assert.deepEqual(t.rows[0].cells, ['g', 2, null, '2', '["a","b"]', null], path);
    }
  });

  it('includeObject=None gives each row a null object', async () => {
    const t = await table(`${GADGETS}/g?includeObject=None`);
    assert.equal(t.rows[0].object, null);
    assert.ok('object' in t.rows[0]);
    const list = await table('/api/v1/namespaces/default/configmaps?includeObject=None');
    assert.equal(list.rows[0].object, null);
  });

  it("a ConfigMap Table types Data and Age as string and describes them with the Go types' docs", async () => {
    const t = await table('/api/v1/namespaces/default/configmaps');
    assert.deepEqual(t.columnDefinitions.slice(1), [
      { name: 'Data', type: 'string', format: '', description: CONFIG_MAP_DATA_DOC, priority: 0 },
      { name: 'Age', type: 'string', format: '', description: CREATION_TIMESTAMP_DOC, priority: 0 },
    ]);
    assert.equal(t.rows[0].cells[1], 1);
    assert.match(t.rows[0].cells[2], /^\d+s$/);
  });
});
