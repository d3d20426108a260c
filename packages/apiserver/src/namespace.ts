/**
 * kube-apiserver's Namespace rules (k8s.io/kubernetes pkg/registry/core/namespace, pkg/apis/core/v1
 * defaults), as pure functions over the object: the `kubernetes.io/metadata.name` label, the
 * `kubernetes` spec finalizer that the namespace controller removes (through `/finalize` in kube)
 * once the namespace is empty, and what an update may not change.
 */
import { isObject } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';

/** The spec finalizer every Namespace gets on create; the namespace controller removes it. */
export const NAMESPACE_FINALIZER = 'kubernetes';
/** The label kube sets on every Namespace to its name (v1.LabelMetadataName). */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** `spec.finalizers` of a Namespace (none when absent). */
export function specFinalizers(ns: KubeObject): string[] {
  const spec = ns['spec'];
  const f = isObject(spec) ? spec['finalizers'] : undefined;
  return Array.isArray(f) ? f.map(String) : [];
}

/**
 * kube's defaulting (SetDefaults_Namespace) and Canonicalize: the label `kubernetes.io/metadata.name`
 * is the name. A namespace without a name yet (generateName) is left alone.
 */
export function labelNamespace(ns: KubeObject): void {
  const name = ns.metadata.name ?? '';
  if (name === '') return;
  ns.metadata.labels = { ...(ns.metadata.labels ?? {}), [NAMESPACE_NAME_LABEL]: name };
}

/** kube's PrepareForCreate: the `kubernetes` spec finalizer is added when missing. */
export function prepareNamespaceForCreate(ns: KubeObject): void {
  const finalizers = specFinalizers(ns);
  if (finalizers.includes(NAMESPACE_FINALIZER)) return;
  const spec = isObject(ns['spec']) ? ns['spec'] : {};
  ns['spec'] = { ...spec, finalizers: [...finalizers, NAMESPACE_FINALIZER] };
}

/** kube's PrepareForUpdate: an update of the Namespace itself keeps the stored spec finalizers. */
export function prepareNamespaceForUpdate(ns: KubeObject, old: KubeObject): void {
  const spec = isObject(ns['spec']) ? { ...ns['spec'] } : {};
  const was = isObject(old['spec']) ? old['spec']['finalizers'] : undefined;
  if (was === undefined) delete spec['finalizers'];
  else spec['finalizers'] = was;
  if (Object.keys(spec).length === 0 && !isObject(old['spec'])) delete ns['spec'];
  else ns['spec'] = spec;
}

/**
 * kube's finalize strategy (`PUT namespaces/<name>/finalize`): of the request, only `spec.finalizers`
 * is kept, set on the stored Namespace in place (deduplicated; none removes the field). The namespace
 * goes when it is marked and none is left. Without it a spec finalizer other than `kubernetes`, which
 * the namespace controller removes, could never be removed.
 */
export function finalizeNamespace(stored: KubeObject, request: unknown): KubeObject {
  const spec = isObject(request) && isObject(request['spec']) ? request['spec'] : {};
  const asked = Array.isArray(spec['finalizers']) ? spec['finalizers'].map(String) : [];
  const kept: Record<string, unknown> = { ...(isObject(stored['spec']) ? stored['spec'] : {}) };
  if (asked.length > 0) kept['finalizers'] = [...new Set(asked)];
  else delete kept['finalizers'];
  stored['spec'] = kept;
  return stored;
}
