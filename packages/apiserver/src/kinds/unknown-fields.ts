import { isObject } from '@kars/kube-core';
import { BUILTIN_KINDS, DEFINITIONS } from './generated.js';

/**
 * Unknown fields of built-in kinds, as kube-apiserver finds them: a field its Go type does not
 * have cannot be decoded, so it is dropped, and with `fieldValidation=Strict` the write fails
 * (`strict decoding error: unknown field "spec.foo"`). The Go types are known here through the
 * generated OpenAPI definitions (src/kinds/generated.ts).
 *
 * Guarantees: only objects whose schema lists `properties` and no `additionalProperties` are
 * checked; maps, int-or-string, Quantity, FieldsV1 and RawExtension accept anything, as in kube.
 * Caveats: paths name list items by index (`spec.ports[0].bogus`); kube names them the same way.
 */

type Schema = Record<string, unknown>;

/** Resolved schemas, by the schema they were resolved from (all come from the constant DEFINITIONS). */
const resolvedOf = new WeakMap<Schema, Schema>();

function resolve(s: Schema): Schema {
  let hit = resolvedOf.get(s);
  if (hit === undefined) {
    hit = resolveRefs(s);
    resolvedOf.set(s, hit);
  }
  return hit;
}

function resolveRefs(s: Schema): Schema {
  let cur = s;
  for (let i = 0; i < 16; i++) {
    const ref =
      typeof cur['$ref'] === 'string'
        ? cur['$ref']
        : Array.isArray(cur['allOf']) && isObject(cur['allOf'][0]) && typeof cur['allOf'][0]['$ref'] === 'string'
          ? cur['allOf'][0]['$ref']
          : undefined;
    if (ref === undefined) return cur;
    const next = DEFINITIONS[ref.replace('#/definitions/', '')];
    if (!next) return {};
    cur = next;
  }
  return cur;
}

/** The definition of a built-in group/version/kind, if kars has one. */
export function builtinSchema(group: string, version: string, kind: string): Schema | undefined {
  const key = `${group}/${version}/${kind}`;
  if (schemaOf.has(key)) return schemaOf.get(key);
  const k = BUILTIN_KINDS.find((x) => x.group === group && x.version === version && x.kind === kind);
  const schema = k ? DEFINITIONS[k.definition] : undefined;
  if (schemaOf.size < 1000) schemaOf.set(key, schema);
  return schema;
}
const schemaOf = new Map<string, Schema | undefined>();

/**
 * Remove the fields `schema` does not know from `obj` (in place) and return their paths.
 * `apiVersion` and `kind` at the root are always known.
 */
export function pruneUnknownFields(obj: Record<string, unknown>, schema: Schema): string[] {
  const out: string[] = [];
  walk(obj, schema, '', out);
  return out;
}

const OBJECT_META: Schema = { properties: { metadata: { $ref: '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' } } };

/**
 * Remove the fields ObjectMeta does not know from a custom resource's `metadata` (in place) and
 * return their paths (`metadata.bogus`), sorted, as kube's round trip of the metadata through
 * JSON (whose map keys are sorted) into ObjectMeta finds them.
 */
export function pruneUnknownMetadata(obj: Record<string, unknown>): string[] {
  if (!isObject(obj['metadata'])) return [];
  const out: string[] = [];
  walk({ metadata: obj['metadata'] }, OBJECT_META, '', out);
  return out.sort();
}

function walk(value: unknown, schema: Schema, path: string, out: string[]): void {
  const s = resolve(schema);
  if (Array.isArray(value)) {
    if (isObject(s['items'])) value.forEach((v, i) => walk(v, s['items'] as Schema, `${path}[${i}]`, out));
    return;
  }
  if (!isObject(value)) return;
  const props = isObject(s['properties']) ? (s['properties'] as Record<string, Schema>) : undefined;
  if (props) {
    for (const key of Object.keys(value)) {
      const p = path === '' ? key : `${path}.${key}`;
      const sub = props[key];
      if (sub === undefined) {
        if (path === '' && (key === 'apiVersion' || key === 'kind')) continue;
        out.push(p);
        delete value[key];
      } else walk(value[key], sub, p, out);
    }
    return;
  }
  if (isObject(s['additionalProperties'])) {
    for (const [k, v] of Object.entries(value)) walk(v, s['additionalProperties'] as Schema, path === '' ? k : `${path}.${k}`, out);
  }
}
