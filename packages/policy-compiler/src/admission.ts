/**
 * Server-side admission of a kars document, offline: the CRD schema's prune/default/validate
 * through kube-schema's `admit()` (the function kars apiserver runs), plus the unknown fields of
 * `metadata` (kube-apiserver decodes ObjectMeta strictly, which the CRD schema does not describe).
 * One detector of unknown fields, used by `kars compile` (compileDocuments) and by every `kars`
 * command that writes an object, so the two refuse the same documents with the same field paths.
 */
import {
  egressApprovalCrd,
  inferencePolicyCrd,
  karsSandboxCrd,
  toolPolicyCrd,
  type CustomResourceDefinition,
  type KarsObject,
} from '@kars/policy-api';
import { admit, compileSchema, type Admission, type CompiledSchema } from '@kars/kube-schema';
import { isObject } from '@kars/kube-core';
import { nearestName } from './nearest.js';

/** A kars kind: InferencePolicy, ToolPolicy, EgressApproval, KarsSandbox. */
export type KarsKind = KarsObject['kind'];

const CRDS: Record<KarsKind, () => CustomResourceDefinition> = {
  InferencePolicy: inferencePolicyCrd,
  ToolPolicy: toolPolicyCrd,
  EgressApproval: egressApprovalCrd,
  KarsSandbox: karsSandboxCrd,
};

/** Whether `k` names one of the four kars kinds. */
export function isKarsKind(k: string): k is KarsKind {
  return Object.prototype.hasOwnProperty.call(CRDS, k);
}

/** The fields of kube's ObjectMeta (meta/v1), the only ones `metadata` may hold. */
export const OBJECT_META_FIELDS: readonly string[] = [
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
];
const META = new Set(OBJECT_META_FIELDS);

/** Raw and compiled CRD schemas, built on first use (never at import time) and reused: they are immutable. */
const raw = new Map<KarsKind, Record<string, unknown>>();
const compiled = new Map<KarsKind, CompiledSchema>();

function rawSchemaFor(kind: KarsKind): Record<string, unknown> {
  let s = raw.get(kind);
  if (s === undefined) {
    s = CRDS[kind]().spec.versions[0].schema.openAPIV3Schema as unknown as Record<string, unknown>;
    raw.set(kind, s);
  }
  return s;
}

/** The kind's compiled CRD schema. Throws kube-schema's SchemaError only if the CRD in @kars/policy-api is broken. */
export function schemaFor(kind: KarsKind): CompiledSchema {
  let s = compiled.get(kind);
  if (s === undefined) {
    s = compileSchema(rawSchemaFor(kind));
    compiled.set(kind, s);
  }
  return s;
}

/**
 * Admit `obj` (a document of `kind`) as kube-apiserver would on create: kube-schema's `admit()`
 * against the kind's CRD, with `unknownFields` also naming every key of `metadata` that ObjectMeta
 * lacks (`metadata.labelz`), before the schema's own (`spec.tokenBuget`), in document order within
 * each. Mutates `obj` (pruned, defaulted) as admit() does; never throws for any input object.
 */
export function admitKarsObject(kind: KarsKind, obj: Record<string, unknown>): Admission {
  const meta = obj['metadata'];
  const metaUnknown = isObject(meta) ? Object.keys(meta as Record<string, unknown>).filter((k) => !META.has(k)) : [];
  const a = admit(schemaFor(kind), obj);
  return { ...a, unknownFields: [...metaUnknown.map((k) => `metadata.${k}`), ...a.unknownFields] };
}

/**
 * The known field nearest to the unknown field at `path` (`spec.tokenBuget` → `spec.tokenBudget`,
 * `spec.hosts[0].prot` → `spec.hosts[0].port`), among its siblings in the kind's CRD schema (or
 * ObjectMeta's fields under `metadata`), by edit distance ({@link nearestName}). Undefined when the
 * path does not lead through the schema or no sibling is close enough to be a plausible typo.
 */
export function suggestKnownField(kind: KarsKind, path: string): string | undefined {
  const segs: Array<{ name?: string; index?: number; end: number }> = [];
  const re = /\.?([^.[\]]+)|\[(\d+)\]/gy;
  let m: RegExpExecArray | null;
  while ((m = re.exec(path)) !== null) {
    segs.push(m[1] !== undefined ? { name: m[1], end: re.lastIndex } : { index: Number(m[2]), end: re.lastIndex });
    if (re.lastIndex === path.length) break;
  }
  const last = segs.at(-1);
  if (last?.name === undefined || last.end !== path.length) return undefined;
  const parents = segs.slice(0, -1);
  const prefix = path.slice(0, parents.at(-1)?.end ?? 0);
  let candidates: readonly string[];
  if (parents.length === 1 && parents[0]?.name === 'metadata') candidates = OBJECT_META_FIELDS;
  else {
    let node: unknown = rawSchemaFor(kind);
    for (const s of parents) {
      if (!isObject(node)) return undefined;
      const n = node as Record<string, unknown>;
      if (s.index !== undefined) node = n['items'];
      else {
        const props = n['properties'];
        const ap = n['additionalProperties'];
        node = isObject(props) && Object.hasOwn(props as object, s.name ?? '') ? (props as Record<string, unknown>)[s.name ?? ''] : ap;
      }
    }
    if (!isObject(node) || !isObject((node as Record<string, unknown>)['properties'])) return undefined;
    candidates = Object.keys((node as Record<string, unknown>)['properties'] as object);
  }
  const near = nearestName(last.name, candidates);
  return near === undefined ? undefined : prefix === '' ? near : `${prefix}.${near}`;
}
