/**
 * The drift check is a type-level assertion, so its real test is `tsc`: every `@ts-expect-error` below must see an
 * error, or the build fails ("Unused '@ts-expect-error' directive"). If SameType/FromSchema ever became too lenient
 * to notice a kind of drift, this file stops compiling.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admit, compileSchema } from '@kars/kube-schema';
import type { Assert, FromSchema, JSONSchemaProps, SameType } from './schema-types.js';
import { inferencePolicySpecSchema } from './crds.js';
import type { InferencePolicySpec } from './types.js';

const schema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string' },
    size: { type: 'integer', default: 1 },
    mode: { type: 'string', enum: ['a', 'b'] },
    digest: { type: 'string', nullable: true },
    tags: { type: 'array', items: { type: 'string' } },
    labels: { type: 'object', additionalProperties: { type: 'string' } },
    nested: { type: 'object', required: ['x'], properties: { x: { type: 'boolean' } } },
  },
} as const satisfies JSONSchemaProps;

interface Exact {
  name: string;
  size?: number;
  mode?: 'a' | 'b';
  digest?: string | null;
  tags?: string[];
  labels?: Record<string, string>;
  nested?: { x: boolean };
}

type Shape = FromSchema<typeof schema>;

export type _Exact = Assert<SameType<Shape, Exact>>;
// @ts-expect-error a field the schema has but the type lacks is drift
export type _MissingOptional = Assert<SameType<Shape, Omit<Exact, 'tags'>>>;
// @ts-expect-error a field the type has but the schema lacks is drift
export type _ExtraField = Assert<SameType<Shape, Exact & { extra?: string }>>;
// @ts-expect-error required in the schema, optional in the type
export type _OptionalVsRequired = Assert<SameType<Shape, Omit<Exact, 'name'> & { name?: string }>>;
// @ts-expect-error an enum member the schema does not allow
export type _EnumWider = Assert<SameType<Shape, Omit<Exact, 'mode'> & { mode?: 'a' | 'b' | 'c' }>>;
// @ts-expect-error nullable in the schema, not in the type
export type _NotNullable = Assert<SameType<Shape, Omit<Exact, 'digest'> & { digest?: string }>>;
// @ts-expect-error a nested required field made optional
export type _NestedOptional = Assert<SameType<Shape, Omit<Exact, 'nested'> & { nested?: { x?: boolean } }>>;
// @ts-expect-error an element type changed
export type _ItemType = Assert<SameType<Shape, Omit<Exact, 'tags'> & { tags?: number[] }>>;
// @ts-expect-error the real InferencePolicy spec schema is checked the same way
export type _RealSpecDrift = Assert<SameType<FromSchema<typeof inferencePolicySpecSchema>, Omit<InferencePolicySpec, 'displayName'>>>;

describe('schema/type drift check', () => {
  it('maps a schema to a type whose values the schema itself admits', () => {
    const v: Shape = { name: 'n', mode: 'a', digest: null, tags: ['t'], labels: { k: 'v' }, nested: { x: true } };
    const e: Exact = v;
    const { causes, object } = admit(compileSchema(schema), { ...e });
    assert.deepEqual(causes, []);
    assert.equal(object['size'], 1, 'a defaulted field is optional in the type and filled in by the server');
  });
});
