import { isObject } from '@kars/kube-core';
import { DEFINITIONS, BUILTIN_KINDS } from '../kinds/generated.js';
import type { Registry } from '../registry/registry.js';
import type { ResourceInfo } from '../registry/resource.js';

/**
 * What both OpenAPI documents are built from: for each served resource version, the definition
 * (schema) of its kind and the operations kubectl looks for. Schemas here are OpenAPI v2 style
 * (`$ref: '#/definitions/<name>'`); v2.ts serves them as they are, v3.ts rewrites the references.
 *
 * Built-in kinds use the definitions generated from Kubernetes' sources (src/kinds); custom
 * resources use their CRD's openAPIV3Schema, wrapped as kube-apiserver does (apiVersion, kind,
 * metadata → ObjectMeta, x-kubernetes-group-version-kind).
 */

/** One served group/version/kind and the definition that describes it. */
export interface ServedKind {
  ri: ResourceInfo;
  group: string;
  version: string;
  kind: string;
  definition: string;
}

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';
const API_VERSION_DOC =
  'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
const KIND_DOC =
  'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';
const METADATA_DOC =
  "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/** The definition name kube-apiserver gives a custom resource: reversed group, version, kind. */
export function crdDefinitionName(group: string, version: string, kind: string): string {
  return `${group.split('.').reverse().join('.')}.${version}.${kind}`;
}

/** Every served resource version with its definition name, in a stable order. */
export function servedKinds(reg: Registry): ServedKind[] {
  const out: ServedKind[] = [];
  for (const ri of reg.all()) {
    for (const v of ri.versions) {
      if (!v.served) continue;
      let definition: string | undefined;
      if (ri.builtin)
        definition = BUILTIN_KINDS.find((k) => k.group === ri.group && k.version === v.name && k.kind === ri.kind)?.definition;
      else if (v.openAPIV3Schema !== undefined) definition = crdDefinitionName(ri.group, v.name, ri.kind);
      if (definition === undefined) continue;
      out.push({ ri, group: ri.group, version: v.name, kind: ri.kind, definition });
    }
  }
  return out.sort((a, b) => a.definition.localeCompare(b.definition));
}

/**
 * The definitions for a set of served kinds and everything they reference, by name.
 * Custom-resource schemas are copied, reduced by `crdSchema` when given (undefined from it: publish
 * the kind as an object with no properties); built-in definitions are shared (treat as read-only).
 */
export function definitionsFor(kinds: ServedKind[], crdSchema?: CrdSchemaReducer): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  const pending: string[] = [];
  for (const k of kinds) {
    if (k.ri.builtin) pending.push(k.definition);
    else {
      out[k.definition] = crdDefinition(k, crdSchema);
      pending.push(OBJECT_META);
    }
  }
  while (pending.length > 0) {
    const name = pending.pop() as string;
    if (out[name] !== undefined) continue;
    const def = DEFINITIONS[name];
    if (def === undefined) continue;
    out[name] = def;
    collectRefs(def, pending);
  }
  return out;
}

function collectRefs(schema: unknown, into: string[]): void {
  if (Array.isArray(schema)) {
    for (const s of schema) collectRefs(s, into);
    return;
  }
  if (!isObject(schema)) return;
  for (const [k, v] of Object.entries(schema)) {
    if (k === '$ref' && typeof v === 'string') into.push(v.replace('#/definitions/', ''));
    else if (typeof v === 'object') collectRefs(v, into);
  }
}

/** How one OpenAPI version reduces a copy of a CRD's schema; undefined: an object with no properties. */
export type CrdSchemaReducer = (schema: Record<string, unknown>) => Record<string, unknown> | undefined;

function crdDefinition(k: ServedKind, reduce?: CrdSchemaReducer): Record<string, unknown> {
  const v = k.ri.versions.find((x) => x.name === k.version);
  const copy = structuredClone(isObject(v?.openAPIV3Schema) ? v.openAPIV3Schema : {}) as Record<string, unknown>;
  const gvk = [{ group: k.group, kind: k.kind, version: k.version }];
  const schema = reduce ? reduce(copy) : copy;
  if (schema === undefined) return { type: 'object', 'x-kubernetes-group-version-kind': gvk };
  const props = isObject(schema['properties']) ? schema['properties'] : {};
  schema['type'] ??= 'object';
  schema['properties'] = {
    apiVersion: { type: 'string', description: API_VERSION_DOC },
    kind: { type: 'string', description: KIND_DOC },
    metadata: { $ref: `#/definitions/${OBJECT_META}`, description: METADATA_DOC },
    ...Object.fromEntries(Object.entries(props).filter(([name]) => name !== 'apiVersion' && name !== 'kind' && name !== 'metadata')),
  };
  schema['x-kubernetes-group-version-kind'] = gvk;
  return schema;
}

/** The query parameters of write operations, which tell kubectl the server validates fields. */
export const WRITE_PARAMS = ['dryRun', 'fieldManager', 'fieldValidation', 'force'] as const;

/** The REST paths of one served kind: the object path and its collection path. */
export function objectPaths(k: ServedKind): { collection: string; object: string } {
  const prefix = k.group === '' ? `/api/${k.version}` : `/apis/${k.group}/${k.version}`;
  const collection = k.ri.namespaced ? `${prefix}/namespaces/{namespace}/${k.ri.resource}` : `${prefix}/${k.ri.resource}`;
  return { collection, object: `${collection}/{name}` };
}

/** How one OpenAPI version spells the parts of an operation that differ between v2 and v3. */
export interface OperationSpelling {
  /** The `responses` of every operation: 200 with the kind's schema. */
  responses: unknown;
  /** What a write carries between its GVK and its responses: parameters and, in v3, a request body. */
  write(action: 'post' | 'put' | 'patch'): Record<string, unknown>;
}

/**
 * The operations kubectl looks for on one served kind, by path: create on the collection; read,
 * replace and patch on the object, each with its operationId, x-kubernetes-action and
 * x-kubernetes-group-version-kind. v2.ts and v3.ts differ only in the `spelling`.
 */
export function kindOperations(k: ServedKind, spelling: OperationSpelling): Record<string, Record<string, unknown>> {
  const gvk = { group: k.group, version: k.version, kind: k.kind };
  const op = (action: 'get' | 'post' | 'put' | 'patch', verb: string): Record<string, unknown> => ({
    operationId: `${verb}${k.kind}`,
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk,
    ...(action === 'get' ? {} : spelling.write(action)),
    responses: spelling.responses,
  });
  const { collection, object } = objectPaths(k);
  return {
    [collection]: { post: op('post', 'create') },
    [object]: { get: op('get', 'read'), put: op('put', 'replace'), patch: op('patch', 'patch') },
  };
}
