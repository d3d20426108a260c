/**
 * Admission of a create or update, as kube-apiserver does it before storing: metadata validation,
 * for custom resources the CRD schema through kube-schema's `admit()` (prune, default, validate,
 * CEL: the same function `kars compile` uses), for built-in kinds the unknown fields of the Go type,
 * field validation (`Strict` / `Warn` / `Ignore`) on the unknown fields, and a CRD's own checks.
 *
 * Guarantees: pure over its inputs (no I/O); `obj` is mutated (pruned, defaulted) and returned.
 * Throws kube's ApiErrors: 400 `strict decoding error: unknown field "…"` (Strict), 422 with causes.
 */
import { admit } from '@kars/kube-schema';
import { badRequest, invalid, notFound } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { builtinSchema, pruneUnknownFields, pruneUnknownMetadata } from './kinds/unknown-fields.js';
import { builtinKindCauses, metadataUpdateCauses } from './builtin-validation.js';
import { validateMeta } from './meta.js';
import { crdStoredVersionsCauses, resourceFromCrd } from './registry/crd.js';
import { grKey, servedVersion } from './registry/resource.js';
import type { ResourceInfo } from './registry/resource.js';

/** Field-validation directive of a write (the `fieldValidation` query parameter). */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

const CRD_GR = grKey('apiextensions.k8s.io', 'customresourcedefinitions');

/** The object as it will be stored, and the warnings for the client (`Warning: 299` headers). */
export interface Admitted {
  obj: KubeObject;
  warnings: string[];
}

/**
 * Admit `obj` (named `name`) as resource `ri` at API version `version`; `old` is the stored object
 * on an update (for CEL transition rules); `strictErrors` are those the body's decoder found
 * (duplicate fields), judged with the unknown fields by `fv`.
 */
export function admitObject(
  ri: ResourceInfo,
  version: string,
  name: string,
  obj: KubeObject,
  old: KubeObject | undefined,
  fv: FieldValidation,
  strictErrors: string[] = [],
): Admitted {
  const errTarget = { group: ri.group, resource: ri.resource, name, kind: ri.kind };
  const warnings: string[] = [];
  const causes: StatusCause[] = [
    ...(old ? metadataUpdateCauses(obj, old) : []),
    ...validateMeta(obj, {
      namespaced: ri.namespaced,
      nameIsLabel: ri.resource === 'namespaces',
      nameIsDns1035Label: ri.builtin && ri.group === '' && ri.resource === 'services',
      // kube checks only the path-segment rule on RBAC objects and on core Events (which skip the DNS-subdomain check).
      namePathSegment: ri.group === 'rbac.authorization.k8s.io' || (ri.group === '' && ri.resource === 'events'),
    }),
    ...builtinKindCauses(ri, obj, old),
  ];
  let out = obj;
  let unknownFields: string[] = [];
  if (!ri.builtin) {
    const v = servedVersion(ri, version);
    if (!v) throw notFound(errTarget);
    // kube round-trips a custom resource's metadata through ObjectMeta, which drops what it does not know.
    const metaUnknown = pruneUnknownMetadata(obj as unknown as Record<string, unknown>);
    if (v.schema) {
      const r = admit(v.schema, obj as unknown as Record<string, unknown>, old as unknown as Record<string, unknown> | undefined);
      out = r.object as unknown as KubeObject;
      // kube-schema names the root ""; kube's field path of the root is nil, printed `<nil>`.
      causes.push(...r.causes.map((c) => (c.field === '' ? { ...c, field: '<nil>' } : c)));
      unknownFields = r.unknownFields;
    }
    unknownFields = [...metaUnknown, ...unknownFields];
  } else {
    // Built-in kinds: a field the Go type lacks is dropped, as kube's decoder drops it.
    const schema = builtinSchema(ri.group, version, ri.kind);
    if (schema) unknownFields = pruneUnknownFields(obj as unknown as Record<string, unknown>, schema);
  }
  if (unknownFields.length > 0 || strictErrors.length > 0) {
    const msgs = [...strictErrors, ...unknownFields.map((p) => `unknown field "${p}"`)];
    // kube's unstructured decoder (custom resources) prefixes the GVK it could not decode strictly.
    const prefix = ri.builtin ? '' : `${ri.kind} in version ${JSON.stringify(version)} cannot be handled as a ${ri.kind}: `;
    if (fv === 'Strict') throw badRequest(`${prefix}strict decoding error: ${msgs.join(', ')}`);
    if (fv === 'Warn') warnings.push(...msgs);
  }
  if (grKey(ri.group, ri.resource) === CRD_GR) causes.push(...resourceFromCrd(out).causes, ...crdStoredVersionsCauses(out, old));
  if (causes.length > 0) throw invalid(errTarget, causes);
  return { obj: out, warnings };
}
