import type { KubeObject, StatusCause } from '@kars/kube-core';
import { isObject } from '@kars/kube-core';
import type { VersionInfo } from './registry/resource.js';
import { clone } from './meta.js';

/** Field-validation directive of a write (the `fieldValidation` query parameter). */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

/** Paths present in `before` but gone from `after` (the fields pruning removed). */
export function removedPaths(before: unknown, after: unknown, path = ''): string[] {
  if (!isObject(before)) return [];
  if (!isObject(after)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(before)) {
    const p = path === '' ? k : `${path}.${k}`;
    if (!(k in after)) out.push(p);
    else if (isObject(v)) out.push(...removedPaths(v, after[k], p));
    else if (Array.isArray(v) && Array.isArray(after[k])) {
      const a = after[k] as unknown[];
      v.forEach((item, i) => out.push(...removedPaths(item, a[i], `${p}[${i}]`)));
    }
  }
  return out;
}

/** Outcome of admitting a custom resource body. */
export interface AdmissionResult {
  object: KubeObject;
  causes: StatusCause[];
  unknownFields: string[];
}

/**
 * Run kube-apiserver's custom-resource pipeline: prune unknown fields, apply defaults,
 * validate against the schema and its CEL rules (with the old object for transition rules).
 */
export function admitCustomResource(version: VersionInfo, obj: KubeObject, old: KubeObject | undefined): AdmissionResult {
  const schema = version.schema;
  if (!schema) return { object: obj, causes: [], unknownFields: [] };
  const raw = obj as unknown as Record<string, unknown>;
  const before = clone(raw);
  const pruned = schema.prune(raw);
  const unknownFields = removedPaths(before, pruned).filter((p) => p !== 'metadata' && !p.startsWith('metadata.'));
  const defaulted = schema.applyDefaults(pruned);
  const causes = schema.validate(defaulted, old as unknown as Record<string, unknown> | undefined);
  return { object: defaulted as unknown as KubeObject, causes, unknownFields };
}
