/**
 * Typed OpenAPI v3 schemas, and the type-level machinery that keeps the CRD schemas and the TS types in `types.ts`
 * from drifting apart.
 *
 * ## How drift is prevented
 * Every CRD schema in `crds.ts` is a literal written `as const satisfies JSONSchemaProps`, so its exact shape is a
 * TypeScript type (and a typo in a keyword is a compile error: `satisfies` checks excess properties).
 * {@link FromSchema} maps such a schema to the TS type a client sees on the wire:
 * - `type: string|integer|number|boolean` → `string|number|boolean`; `enum` → the union of its literals;
 * - `nullable: true` → `T | null`;
 * - `type: array` + `items` → `T[]`;
 * - `type: object` + `properties` → an object whose keys in `required` are required and the others optional
 *   (`default` does not make a field required: clients may omit it and the server fills it in);
 * - `type: object` + `additionalProperties` (no `properties`) → `Record<string, T>`.
 * `crds.ts` then asserts `SameType<FromSchema<typeof schema>, HandWrittenInterface>` for every spec and status.
 * {@link SameType} is strict: a missing or extra field, optional vs required, an enum member, `| null`, all fail
 * `tsc -b`. `schema-types.test.ts` proves each of those cases is caught.
 *
 * ## Caveats
 * - `x-kubernetes-preserve-unknown-fields` on an object that also has `properties` maps to the declared properties
 *   only: the unknown fields survive on the wire but are deliberately untyped.
 * - Value constraints (min/max, patterns, CEL) have no type-level meaning; `validate.ts` and the admission tests
 *   cover them.
 */

/** The `reason` a CEL rule may report (apiextensions.k8s.io/v1 ValidationRule). */
export type RuleReason = 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';

/** One `x-kubernetes-validations` entry. */
export interface ValidationRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  readonly reason?: RuleReason;
  /** Relative JSON path (`.bundleRef`) of the field the cause names. */
  readonly fieldPath?: string;
  readonly optionalOldSelf?: boolean;
}

/** The subset of apiextensions.k8s.io/v1 JSONSchemaProps kars CRDs use. */
export interface JSONSchemaProps {
  readonly type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  readonly description?: string;
  readonly format?: string;
  readonly enum?: readonly (string | number | boolean)[];
  readonly default?: unknown;
  readonly nullable?: boolean;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly minProperties?: number;
  readonly maxProperties?: number;
  readonly required?: readonly string[];
  readonly properties?: { readonly [name: string]: JSONSchemaProps };
  readonly additionalProperties?: JSONSchemaProps | boolean;
  readonly items?: JSONSchemaProps;
  readonly 'x-kubernetes-preserve-unknown-fields'?: boolean;
  readonly 'x-kubernetes-validations'?: readonly ValidationRule[];
  readonly 'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  readonly 'x-kubernetes-list-map-keys'?: readonly string[];
  readonly 'x-kubernetes-map-type'?: 'atomic' | 'granular';
}

/** The TS type of a JSON value valid against schema `S` (see the module comment). */
export type FromSchema<S> = S extends { readonly nullable: true } ? BaseType<S> | null : BaseType<S>;

type BaseType<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly type: 'string' }
    ? string
    : S extends { readonly type: 'integer' | 'number' }
      ? number
      : S extends { readonly type: 'boolean' }
        ? boolean
        : S extends { readonly type: 'array'; readonly items: infer I }
          ? FromSchema<I>[]
          : S extends { readonly type: 'object'; readonly properties: infer P }
            ? ObjectOf<P, RequiredKeys<S>>
            : S extends { readonly type: 'object'; readonly additionalProperties: infer A extends JSONSchemaProps }
              ? Record<string, FromSchema<A>>
              : unknown;

type RequiredKeys<S> = S extends { readonly required: readonly (infer K)[] } ? K : never;

type ObjectOf<P, R> = Flatten<
  { -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } & {
    -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]>;
  }
>;

type Flatten<T> = { [K in keyof T]: T[K] };

/**
 * Rebuild a type as plain structural object types, so that an interface and an equivalent mapped type compare as
 * identical (the strict check below otherwise tells `A & B` from `{...A, ...B}`).
 */
export type Normalize<T> = T extends readonly (infer U)[] ? Normalize<U>[] : T extends object ? { [K in keyof T]: Normalize<T[K]> } : T;

/** `true` when A and B are the same type, modifiers (`?`, `readonly`) and `| null` included; otherwise `false`. */
export type SameType<A, B> = (<T>() => T extends Normalize<A> ? 1 : 2) extends <T>() => T extends Normalize<B> ? 1 : 2 ? true : false;

/** Compile-time assertion: `Assert<SameType<X, Y>>` fails to type-check unless X and Y are the same. */
export type Assert<T extends true> = T;
