import type { KubeObject, OwnerReference } from '@kars/kube-core';

/**
 * The ownerReference (none for an object without a uid) a compiled ConfigMap carries to the kars object it was compiled from, so the
 * garbage collector removes the ConfigMap when the owner is gone without the controller's finalizer
 * having run (the finalizer removed by hand, the controller never coming back; ADR 0032).
 *
 * `controller: true` marks the one owner of a profile ConfigMap; the shared egress-approvals
 * ConfigMap has one reference per approval and none of them is its controller. No
 * `blockOwnerDeletion`: nothing deletes a policy in the foreground, and setting it would need
 * `update` on the owner's `finalizers` subresource under kube-apiserver's
 * OwnerReferencesPermissionEnforcement admission, which the controller's RBAC does not grant.
 */
export function ownerReferencesOf(
  ref: { group: string; version: string },
  kind: string,
  obj: Pick<KubeObject, 'metadata'>,
  { controller }: { controller: boolean },
): OwnerReference[] {
  // An object without a uid or name (never one from the API) cannot be referenced: the apiserver would refuse the write.
  if (!obj.metadata.uid || !obj.metadata.name) return [];
  return [
    {
      apiVersion: `${ref.group}/${ref.version}`,
      kind,
      name: obj.metadata.name,
      uid: obj.metadata.uid,
      ...(controller ? { controller: true } : {}),
    },
  ];
}

/** Whether `have` already holds every reference of `want` (same uid, apiVersion, kind, name and controller flag). */
export function holdsOwnerReferences(have: readonly OwnerReference[] | undefined, want: readonly OwnerReference[]): boolean {
  return want.every((w) =>
    (have ?? []).some(
      (h) =>
        h.uid === w.uid && h.apiVersion === w.apiVersion && h.kind === w.kind && h.name === w.name && !!h.controller === !!w.controller,
    ),
  );
}
