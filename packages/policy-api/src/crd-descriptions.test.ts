/**
 * Issue 24 item 6: every property of the four kinds carries a description, so `kubectl explain`
 * documents kars (before, `kubectl explain inferencepolicy.spec.tokenBudget` printed
 * `<no description>` for every field).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { allCrds } from './crds.js';
import type { JSONSchemaProps } from './schema-types.js';

/** Paths under `node` (in kubectl explain's dotted form; `[]` for items, `{}` for map values) whose schema has no description. */
function undescribed(node: JSONSchemaProps, path: string, out: string[]): string[] {
  const check = (child: JSONSchemaProps, at: string): void => {
    if (typeof child.description !== 'string' || child.description.trim() === '') out.push(at);
    undescribed(child, at, out);
  };
  for (const [name, child] of Object.entries(node.properties ?? {})) check(child, `${path}.${name}`);
  if (node.items !== undefined) check(node.items, `${path}[]`);
  if (typeof node.additionalProperties === 'object') check(node.additionalProperties, `${path}{}`);
  return out;
}

describe('CRD field descriptions (issue 24 item 6)', () => {
  for (const crd of allCrds()) {
    it(`${crd.spec.names.kind}: every property, item and map value has a description`, () => {
      const root = crd.spec.versions[0].schema.openAPIV3Schema;
      assert.ok(root.description, 'the root schema');
      // The root `metadata` may carry no description: kube-apiserver refuses one there (the server
      // supplies ObjectMeta's own documentation), so it is the one property exempt.
      assert.deepEqual(
        undescribed(root, crd.spec.names.singular, []).filter((p) => p !== `${crd.spec.names.singular}.metadata`),
        [],
      );
      assert.deepEqual(Object.keys(root.properties?.metadata ?? {}), ['type'], 'root metadata: type only, as kube-apiserver requires');
    });
  }

  it('the walker finds a missing description at any depth (items and map values too)', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: {
        a: {
          type: 'array',
          description: 'x',
          items: { type: 'object', description: 'x', properties: { b: { type: 'string' } } },
        },
        m: { type: 'object', description: 'x', additionalProperties: { type: 'string' } },
      },
    };
    assert.deepEqual(undescribed(schema, 'k', []), ['k.a[].b', 'k.m{}']);
  });
});
