/**
 * The parts of kube-apiserver's per-kind validation that kars apiserver runs for built-in kinds,
 * and the uid check of an update that every kind shares (the rest of metadata is `meta.ts`'s). Found missing by the differential
 * suite (issue 19, ADR 0052); the messages are k8s.io/kubernetes v1.34's
 * (pkg/apis/core/validation, pkg/apis/rbac/validation).
 *
 * Pure functions over the object as it will be stored (and the stored one, on an update); each
 * returns the causes in kube's order, to be joined with the rest of admission's.
 */
import { isObject } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { invalidValue } from './meta.js';
import type { ResourceInfo } from './registry/resource.js';

/** kube's MaxSecretSize: a ConfigMap's data and binaryData together, in bytes. */
const MAX_CONFIG_MAP_BYTES = 1024 * 1024;
const CONFIG_MAP_KEY = /^[-._a-zA-Z0-9]+$/;
const CONFIG_MAP_KEY_MSG =
  "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/** apimachinery's IsConfigMapKey. */
function configMapKeyProblems(key: string): string[] {
  const out: string[] = [];
  if (key.length > 253) out.push('must be no more than 253 characters');
  if (!CONFIG_MAP_KEY.test(key)) out.push(CONFIG_MAP_KEY_MSG);
  if (key === '.') out.push("must not be '.'");
  else if (key === '..') out.push("must not be '..'");
  else if (key.startsWith('..')) out.push("must not start with '..'");
  return out;
}

const record = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});

/** ValidateConfigMap: keys, keys in both bags, and the total size. */
function configMapCauses(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const data = record(obj['data']);
  const binary = record(obj['binaryData']);
  let total = 0;
  for (const [k, v] of Object.entries(data)) {
    for (const p of configMapKeyProblems(k)) causes.push(invalidValue(`data[${k}]`, k, p));
    // Own keys only: a key named `constructor` or `__proto__` is a key like any other.
    if (Object.hasOwn(binary, k)) causes.push(invalidValue(`data[${k}]`, k, 'duplicate of key present in binaryData'));
    total += typeof v === 'string' ? Buffer.byteLength(v) : 0;
  }
  for (const [k, v] of Object.entries(binary)) {
    for (const p of configMapKeyProblems(k)) causes.push(invalidValue(`binaryData[${k}]`, k, p));
    total += typeof v === 'string' ? Buffer.from(v, 'base64').length : 0;
  }
  // kube's path for "the whole object" is the empty one, printed `[]`.
  if (total > MAX_CONFIG_MAP_BYTES)
    causes.push({ reason: 'FieldValueTooLong', field: '[]', message: `Too long: may not be more than ${MAX_CONFIG_MAP_BYTES} bytes` });
  return causes;
}

/** ValidateConfigMapUpdate: an immutable ConfigMap keeps its data, its binaryData and its immutability. */
function configMapUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  if (old['immutable'] !== true) return [];
  const causes: StatusCause[] = [];
  const forbidden = (field: string): StatusCause => ({
    reason: 'FieldValueForbidden',
    field,
    message: 'Forbidden: field is immutable when `immutable` is set',
  });
  if (obj['immutable'] !== true) causes.push(forbidden('immutable'));
  if (!sameMap(obj['data'], old['data'])) causes.push(forbidden('data'));
  if (!sameMap(obj['binaryData'], old['binaryData'])) causes.push(forbidden('binaryData'));
  return causes;
}

/** Go's reflect.DeepEqual of two decoded maps, where an empty map and none are not the same. */
function sameMap(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  const ka = Object.keys(record(a)).sort();
  const kb = Object.keys(record(b)).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && record(a)[k] === record(b)[k]);
}

/** ValidateRoleBindingUpdate (and the ClusterRoleBinding one): roleRef never changes. The value prints as the Go struct's JSON. */
function roleRefUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  const ref = record(obj['roleRef']);
  const was = record(old['roleRef']);
  const go = (r: Record<string, unknown>): Record<string, unknown> => ({
    APIGroup: r['apiGroup'] ?? '',
    Kind: r['kind'] ?? '',
    Name: r['name'] ?? '',
  });
  if (JSON.stringify(go(ref)) === JSON.stringify(go(was))) return [];
  return [{ reason: 'FieldValueInvalid', field: 'roleRef', message: `Invalid value: ${JSON.stringify(go(ref))}: cannot change roleRef` }];
}

/**
 * ValidateObjectMetaUpdate's uid rule. kube-apiserver runs it twice on every update (once as the
 * common check of every resource, once in the kind's own validation), so the cause is listed twice.
 */
export function metadataUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  const uid = obj.metadata.uid ?? '';
  if (uid === '' || uid === (old.metadata.uid ?? '')) return [];
  const cause = invalidValue('metadata.uid', uid, 'field is immutable');
  return [cause, { ...cause }];
}

/** The per-kind validation of built-in `ri` for `obj` (and, on an update, the stored `old`). */
export function builtinKindCauses(ri: ResourceInfo, obj: KubeObject, old: KubeObject | undefined): StatusCause[] {
  if (!ri.builtin) return [];
  const gr = `${ri.group}/${ri.resource}`;
  if (gr === '/configmaps') return [...(old ? configMapUpdateCauses(obj, old) : []), ...configMapCauses(obj)];
  if (old && (gr === 'rbac.authorization.k8s.io/rolebindings' || gr === 'rbac.authorization.k8s.io/clusterrolebindings'))
    return roleRefUpdateCauses(obj, old);
  return [];
}
