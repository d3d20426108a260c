import { createHash } from 'node:crypto';
import { isObject } from '@kars/kube-core';
import type { Registry } from '../registry/registry.js';
import { crdSchemaToV2 } from './crd-v2.js';
import { encodeGnosticDocument } from './gnostic.js';
import { definitionsFor, kindOperations, servedKinds, WRITE_PARAMS } from './model.js';
import type { ServedKind } from './model.js';

/**
 * `/openapi/v2`: one Swagger 2.0 document for everything served, as JSON or as the gnostic
 * OpenAPIv2 protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), which is
 * what kubectl 1.27 and 1.28 fetch before `apply`, `diff` and `explain`.
 *
 * kubectl uses it to (1) find, for a kind, the PATCH operation tagged with its
 * x-kubernetes-group-version-kind and see the `fieldValidation` parameter (then it leaves
 * validation to the server), (2) read patch strategies of built-in kinds for client-side apply,
 * and (3) print `kubectl explain` from the definitions.
 *
 * CRD schemas are reduced to what Swagger 2.0 can say (no nullable, anyOf, oneOf, not), as
 * kube-apiserver does for its v2 document.
 */
export class OpenApiV2 {
  private cached: { kinds: ServedKind[]; json: string; proto: Buffer; etag: string } | undefined;

  constructor(private readonly reg: Registry) {}

  /** The document as JSON text and as protobuf bytes, with an ETag for both. */
  current(): { json: string; proto: Buffer; etag: string } {
    const kinds = servedKinds(this.reg);
    const hit = this.cached;
    if (hit && hit.kinds.length === kinds.length && hit.kinds.every((k, i) => k.ri === kinds[i]?.ri && k.version === kinds[i]?.version))
      return hit;
    const doc = document(kinds);
    const json = JSON.stringify(doc);
    const proto = encodeGnosticDocument(doc);
    this.cached = { kinds, json, proto, etag: `"${createHash('sha512').update(json).digest('hex').slice(0, 64).toUpperCase()}"` };
    return this.cached;
  }
}

/** Media type kubectl asks for the gnostic OpenAPIv2 protobuf document with. */
export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';
/** The same media type spelled so Go's mime parser accepts it; kube-apiserver answers with this one. */
export const OPENAPI_V2_PROTOBUF_RESPONSE = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

function document(kinds: ServedKind[]): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const params = WRITE_PARAMS.map((name) => ({ name, in: 'query', type: name === 'force' ? 'boolean' : 'string', uniqueItems: true }));
  for (const k of kinds) {
    const ref = { $ref: `#/definitions/${k.definition}` };
    Object.assign(
      paths,
      kindOperations(k, {
        responses: { '200': { description: 'OK', schema: ref } },
        write: (action) => ({
          parameters: [{ name: 'body', in: 'body', required: true, schema: action === 'patch' ? { type: 'object' } : ref }, ...params],
        }),
      }),
    );
  }
  const definitions: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(definitionsFor(kinds, crdSchemaV2))) definitions[name] = toV2(def);
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.31.0-kars' }, paths, definitions };
}

/**
 * A CRD schema as kube-apiserver publishes it in v2: reduced by crdSchemaToV2, or, when the
 * whole object preserves unknown fields, nothing but `type: object` (kubectl would otherwise
 * refuse the fields the schema does not list).
 */
function crdSchemaV2(schema: Record<string, unknown>): Record<string, unknown> | undefined {
  return schema['x-kubernetes-preserve-unknown-fields'] === true ? undefined : crdSchemaToV2(schema);
}

const V2_KEYS = new Set([
  '$ref',
  'format',
  'title',
  'description',
  'default',
  'multipleOf',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'maxProperties',
  'minProperties',
  'required',
  'enum',
  'additionalProperties',
  'type',
  'items',
  'allOf',
  'properties',
  'discriminator',
  'readOnly',
  'example',
]);

/** Keep what a Swagger 2.0 schema can say, and the x- extensions. */
export function toV2(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-')) out[k] = v;
    else if (!V2_KEYS.has(k)) continue;
    else if (k === 'properties' && isObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, toV2(s)]));
    else if (k === 'items') out[k] = Array.isArray(v) ? v.map(toV2) : toV2(v);
    else if (k === 'allOf' && Array.isArray(v)) out[k] = v.map(toV2);
    else if (k === 'additionalProperties' && isObject(v)) out[k] = toV2(v);
    else out[k] = v;
  }
  return out;
}
