/**
 * kube's per-resource rules for a write, as pure functions (what kube-apiserver's REST strategies
 * do: PrepareForCreate, PrepareForUpdate, generation, status, preconditions): decoding a body for a
 * target, server-owned metadata, no-op detection, the CRD status, and kube's messages. The object
 * service (service.ts) calls them inside its one write path; nothing here reads or writes storage.
 */
import { randomUUID } from 'node:crypto';
import { badRequest, conflict, invalid, isObject } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import type { FieldOptions } from '@kars/kube-patch';
import { typedFieldOptions } from './kinds/field-types.js';
import { decodeBuiltin } from './kinds/decoding.js';
import { BUILTIN_KINDS } from './kinds/generated.js';
import { clone, nowRfc3339, shapeCauses } from './meta.js';
import { jsonEqual } from '@kars/kube-core';
import { grKey, servedVersion } from './registry/resource.js';
import type { ResourceInfo } from './registry/resource.js';
import { labelNamespace, prepareNamespaceForCreate, prepareNamespaceForUpdate, specFinalizers } from './namespace.js';

/** Which object a request is about. `ns` is '' for cluster-scoped resources. */
export interface Target {
  ri: ResourceInfo;
  version: string;
  ns: string;
  name: string;
  subresource?: 'status';
}

/** Conditions the current object must meet for a write to proceed (metav1.Preconditions). */
export interface Preconditions {
  uid?: string;
  resourceVersion?: string;
}

/** Storage key of CustomResourceDefinitions. */
export const CRD_GR = grKey('apiextensions.k8s.io', 'customresourcedefinitions');
/** Storage key of Namespaces. */
export const NS_GR = grKey('', 'namespaces');
/** The finalizer of an owner deleted with `propagationPolicy: Orphan` (metav1.FinalizerOrphanDependents). */
export const ORPHAN_FINALIZER = 'orphan';
/** The finalizer of an owner deleted in the foreground (metav1.FinalizerDeleteDependents). */
export const FOREGROUND_FINALIZER = 'foregroundDeletion';
/** The finalizer a deleted CRD carries until all its instances are gone. */
export const CRD_CLEANUP = 'customresourcecleanup.apiextensions.k8s.io';

/** The object a Status names (kind, group, resource, name). */
export function target(t: Target): { group: string; resource: string; name: string; kind: string } {
  return { group: t.ri.group, resource: t.ri.resource, name: t.name, kind: t.ri.kind };
}

/** `group/version`, or just `version` for the core group. */
export function apiVersionOf(ri: ResourceInfo, version: string): string {
  return ri.group === '' ? version : `${ri.group}/${version}`;
}

/** Everything outside metadata (and outside status when status is a subresource): what bumps generation. */
function specPart(obj: KubeObject, ri: ResourceInfo): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'metadata' || k === 'apiVersion' || k === 'kind') continue;
    if (k === 'status' && ri.hasStatus) continue;
    out[k] = v;
  }
  return out;
}

/**
 * Whether an update changes nothing but managedFields timestamps (and resourceVersion): then kube
 * stores nothing and bumps nothing. Compares in place, without copying either object.
 */
export function sameIgnoringManagedTimes(a: KubeObject, b: KubeObject): boolean {
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  if (!sameExcept(ao, bo, 'metadata')) return false;
  const am = a.metadata as Record<string, unknown>;
  const bm = b.metadata as Record<string, unknown>;
  if (!sameExcept(am, bm, 'resourceVersion', 'managedFields')) return false;
  const af = am['managedFields'];
  const bf = bm['managedFields'];
  if (!Array.isArray(af) || !Array.isArray(bf)) return jsonEqual(af, bf);
  return af.length === bf.length && af.every((e, i) => isObject(e) && isObject(bf[i]) && sameExcept(e, bf[i], 'time'));
}

/** deepEqual of two objects, ignoring the named keys (and, as deepEqual does, undefined members). */
function sameExcept(a: Record<string, unknown>, b: Record<string, unknown>, ...skip: string[]): boolean {
  let n = 0;
  for (const k of Object.keys(a)) {
    if (a[k] === undefined || skip.includes(k)) continue;
    n++;
    if (!jsonEqual(a[k], b[k])) return false;
  }
  for (const k of Object.keys(b)) if (b[k] !== undefined && !skip.includes(k)) n--;
  return n === 0;
}

/** Whether `apiVersion` + `kind` name a built-in kind kars knows (kube's scheme would decode it). */
function isBuiltinKind(apiVersion: string, kind: string): boolean {
  return BUILTIN_KINDS.some((k) => (k.group === '' ? k.version : `${k.group}/${k.version}`) === apiVersion && k.kind === kind);
}

/** Decode and sanity-check a request body into an object for this target. */
export function coerceBody(t: Target, body: unknown, forCreate: boolean): KubeObject {
  const causes = shapeCauses(body);
  if (causes.length > 0) throw invalid(target(t), causes);
  const obj = clone(body) as KubeObject;
  obj.metadata ??= {};
  // Go's ObjectMeta omits empty maps and lists (omitempty), so kube never stores `annotations: {}`;
  // kubectl diff relies on that. (managedFields: [] is left alone: it means "reset ownership".)
  const meta = obj.metadata as Record<string, unknown>;
  for (const f of ['labels', 'annotations', 'finalizers', 'ownerReferences']) {
    const v = meta[f];
    if (v === null || (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0)) delete meta[f];
  }
  decodeBuiltin(t.ri.group, t.ri.resource, obj as Record<string, unknown>);
  // kube defaults a Namespace's name label as it decodes it, so the writer's managedFields own it.
  if (grKey(t.ri.group, t.ri.resource) === NS_GR) labelNamespace(obj);
  const want = apiVersionOf(t.ri, t.version);
  if (obj.apiVersion === undefined || obj.apiVersion === '') obj.apiVersion = want;
  if (obj.kind === undefined || obj.kind === '') obj.kind = t.ri.kind;
  if (t.ri.builtin && (obj.apiVersion !== want || obj.kind !== t.ri.kind) && !isBuiltinKind(String(obj.apiVersion), String(obj.kind))) {
    // kube's scheme cannot decode a group/version/kind it does not know (runtime.notRegisteredErr).
    const version = String(obj.apiVersion).split('/').pop() ?? '';
    throw badRequest(
      `${obj.kind} in version ${JSON.stringify(version)} cannot be handled as a ${t.ri.kind}: no kind ${JSON.stringify(obj.kind)} is registered for version ${JSON.stringify(obj.apiVersion)} in scheme "pkg/runtime/scheme.go:110"`,
    );
  }
  if (obj.apiVersion !== want)
    throw badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${want})`);
  if (obj.kind !== t.ri.kind) throw badRequest(`the kind in the data (${obj.kind}) does not match the expected kind (${t.ri.kind})`);
  if (t.ri.namespaced) {
    if (obj.metadata.namespace !== undefined && obj.metadata.namespace !== '' && obj.metadata.namespace !== t.ns) {
      throw badRequest(`the namespace of the provided object does not match the namespace sent on the request`);
    }
    obj.metadata.namespace = t.ns;
  } else {
    delete obj.metadata.namespace;
  }
  if (!forCreate && obj.metadata.name !== undefined && obj.metadata.name !== t.name) {
    throw badRequest(`the name of the object (${obj.metadata.name}) does not match the name on the URL (${t.name})`);
  }
  return obj;
}

export function fieldOptions(t: Target): FieldOptions {
  const v = servedVersion(t.ri, t.version);
  const o: FieldOptions = { ignoreStatus: t.ri.hasStatus && t.subresource !== 'status' };
  if (v?.listKeys) o.listKeys = v.listKeys;
  // Built-in kinds are tracked against their Go types (zero-value structs, atomic values, list keys).
  const typed = t.ri.builtin ? typedFieldOptions(t.ri.group, t.version, t.ri.kind) : undefined;
  if (typed) Object.assign(o, typed);
  return o;
}

/** Prepare a new object for storage: server-owned metadata, status, generation. */
export function finalizeForCreate(t: Target, obj: KubeObject): KubeObject {
  const m = obj.metadata;
  if (m.resourceVersion !== undefined && m.resourceVersion !== '')
    throw badRequest('resourceVersion should not be set on objects to be created');
  m.uid = randomUUID();
  m.creationTimestamp = nowRfc3339();
  delete m.deletionTimestamp;
  delete m.deletionGracePeriodSeconds;
  if (t.ri.tracksGeneration) m.generation = 1;
  else delete m.generation;
  // With a status subresource, the main resource never sets status: kube drops it on create too.
  if (t.ri.hasStatus) delete obj['status'];
  if (grKey(t.ri.group, t.ri.resource) === NS_GR) {
    labelNamespace(obj);
    prepareNamespaceForCreate(obj);
    obj['status'] = { phase: 'Active' };
  }
  // A Deployment's status is a value struct without omitempty: kube writes `status: {}` from the start,
  // and a Service's holds the value struct loadBalancer.
  if (t.ri.builtin && t.ri.group === 'apps' && t.ri.resource === 'deployments') obj['status'] = {};
  if (t.ri.builtin && t.ri.group === '' && t.ri.resource === 'services') obj['status'] = { loadBalancer: {} };
  if (grKey(t.ri.group, t.ri.resource) === CRD_GR) obj['status'] = crdStatus(obj);
  return obj;
}

/** Carry server-owned fields from the old object into an update and maintain generation. */
export function finalizeForUpdate(t: Target, old: KubeObject, obj: KubeObject): KubeObject {
  const m = obj.metadata;
  // A uid the update names is kept, so that admission refuses it when it is not the stored one (kube's BeforeUpdate).
  if (!m.uid) m.uid = old.metadata.uid ?? '';
  m.creationTimestamp = old.metadata.creationTimestamp ?? '';
  m.name = old.metadata.name ?? t.name;
  if (old.metadata.deletionTimestamp) m.deletionTimestamp = old.metadata.deletionTimestamp;
  else delete m.deletionTimestamp;
  if (old.metadata.deletionGracePeriodSeconds !== undefined) m.deletionGracePeriodSeconds = old.metadata.deletionGracePeriodSeconds;
  if (t.subresource === 'status') {
    const next = clone(old);
    if (obj['status'] === undefined) delete next['status'];
    else next['status'] = obj['status'];
    if (m.managedFields) next.metadata.managedFields = m.managedFields;
    return next;
  }
  if (t.ri.hasStatus) {
    if (old['status'] === undefined) delete obj['status'];
    else obj['status'] = old['status'];
  }
  if (grKey(t.ri.group, t.ri.resource) === NS_GR) {
    labelNamespace(obj);
    prepareNamespaceForUpdate(obj, old);
  }
  return obj;
}

/**
 * The object whose fields a write's managedFields track. kube's field manager compares the request
 * with the stored object before the strategy resets what the endpoint may not change, and a custom
 * resource's status strategy names only `spec` as reset: so a status write records (or, left out,
 * removes from every manager) the metadata the request carried, though the stored metadata stays.
 * Any other write is tracked as it is stored.
 */
export function managedFieldsView(t: Target, requested: KubeObject, stored: KubeObject): KubeObject {
  if (t.subresource !== 'status' || t.ri.builtin) return stored;
  return { ...stored, metadata: requested.metadata };
}

/**
 * Whether an update of `old` to `obj` deletes the object instead (kube's ShouldDeleteDuringUpdate):
 * `old` is marked for deletion (grace 0 or none) and `obj` has no finalizers left; a Namespace also
 * needs its spec finalizers gone.
 */
export function deletesDuringUpdate(gr: string, old: KubeObject, obj: KubeObject): boolean {
  if ((obj.metadata.finalizers ?? []).length > 0 || old.metadata.deletionTimestamp === undefined) return false;
  if ((old.metadata.deletionGracePeriodSeconds ?? 0) !== 0) return false;
  return gr !== NS_GR || specFinalizers(obj).length === 0;
}

/**
 * 409 unless `old` meets a delete's preconditions, as kube's rest.BeforeDelete words it: the conflict
 * names the Kind (`ConfigMap "x"`, `Role.rbac.authorization.k8s.io "x"`), not the resource.
 */
export function checkPreconditions(t: Target, old: KubeObject, pre: Preconditions): void {
  const byKind = { group: t.ri.group, resource: t.ri.kind, name: t.name };
  if (pre.uid !== undefined && pre.uid !== old.metadata.uid) {
    throw conflict(
      byKind,
      `the UID in the precondition (${pre.uid}) does not match the UID in record (${old.metadata.uid ?? ''}). The object might have been deleted and then recreated`,
    );
  }
  if (pre.resourceVersion !== undefined && pre.resourceVersion !== old.metadata.resourceVersion) {
    throw conflict(
      byKind,
      `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${old.metadata.resourceVersion ?? ''}). The object might have been modified`,
    );
  }
}

/** How kube names a conflicting manager: `"a"` for an applier, `"a" using group/version` for an updater. */
export function conflictingManager(c: { manager: string; operation?: string; apiVersion?: string }): string {
  return c.operation === 'Update' && c.apiVersion ? `${JSON.stringify(c.manager)} using ${c.apiVersion}` : JSON.stringify(c.manager);
}

/** kube-apiserver's wording for apply conflicts. */
export function applyConflictMessage(
  conflicts: Array<{ manager: string; field: string; operation?: string; apiVersion?: string }>,
): string {
  if (conflicts.length === 1) {
    const c = conflicts[0]!;
    return `Apply failed with 1 conflict: conflict with ${conflictingManager(c)}: ${c.field}`;
  }
  const byManager = new Map<string, string[]>();
  for (const c of conflicts) byManager.set(conflictingManager(c), [...(byManager.get(conflictingManager(c)) ?? []), c.field]);
  const parts = [...byManager.entries()].map(([m, fields]) => `conflicts with ${m}:\n${fields.map((f) => `- ${f}`).join('\n')}`);
  return `Apply failed with ${conflicts.length} conflicts: ${parts.join('\n')}`;
}

/** uids of metadata.ownerReferences, for the store's owner index (garbage collection). */
export function ownerUids(obj: KubeObject): string[] {
  return (obj.metadata.ownerReferences ?? []).map((r) => r.uid).filter((u): u is string => typeof u === 'string' && u !== '');
}

/** Keep metadata.generation: unchanged unless the spec part changed (after pruning and defaulting). */
export function bumpGeneration(ri: ResourceInfo, old: KubeObject, obj: KubeObject): void {
  if (!ri.tracksGeneration) {
    delete obj.metadata.generation;
    return;
  }
  const gen = old.metadata.generation ?? 1;
  obj.metadata.generation = jsonEqual(specPart(old, ri), specPart(obj, ri)) ? gen : gen + 1;
}

/** The status kube-apiserver gives an accepted CRD: Established and NamesAccepted. */
function crdStatus(crd: KubeObject): Record<string, unknown> {
  const spec = isObject(crd['spec']) ? crd['spec'] : {};
  const now = nowRfc3339();
  const versions = Array.isArray(spec['versions']) ? spec['versions'].filter(isObject) : [];
  const storage = versions.find((v) => v['storage'] === true);
  const cond = (type: string, reason: string, message: string): Record<string, unknown> => ({
    type,
    status: 'True',
    lastTransitionTime: now,
    reason,
    message,
  });
  return {
    conditions: [
      cond('NamesAccepted', 'NoConflicts', 'no conflicts found'),
      cond('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
    ],
    acceptedNames: spec['names'] ?? {},
    storedVersions: storage ? [storage['name']] : [],
  };
}
