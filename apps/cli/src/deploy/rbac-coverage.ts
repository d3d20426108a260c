/**
 * Least privilege as a check: compare the calls a component actually made (recorded by kars
 * apiserver's audit hook) with the RBAC rules `deploy/` grants its ServiceAccount.
 *
 * Each rule is expanded into elements (one verb × one API group × one resource, with the rule's
 * resourceNames, in the scope of the binding that grants it: a namespace, or every namespace for a
 * ClusterRoleBinding). A call is covered when some element matches it; an element is used when some
 * call matches it. Least privilege holds when every call is covered and every element is used, so
 * removing any element leaves some call uncovered.
 */
import { ruleAllows } from '@kars/apiserver';
import type { PolicyRule, RequestAttributes } from '@kars/apiserver';

/** One rendered manifest, as parsed YAML. */
export interface Manifest {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  rules?: PolicyRule[];
  roleRef?: { kind?: string; name?: string };
  subjects?: Array<{ kind?: string; name?: string; namespace?: string }>;
}

/** One grantable permission: a single verb on a single resource, in one scope. */
export interface Element {
  /** `ClusterRole/kars-controller#0` or `Role/ns/kars-router#2`: which rule it came from. */
  rule: string;
  verb: string;
  apiGroup: string;
  resource: string;
  resourceNames: string[];
  /** '' for every namespace (ClusterRoleBinding); else the binding's namespace. */
  scope: string;
}

/** A recorded call, reduced to what authorization looks at. */
export type Call = Pick<RequestAttributes, 'verb' | 'apiGroup' | 'resource' | 'subresource' | 'namespace' | 'name'>;

/** The elements `manifests` grant to ServiceAccount `namespace/name` (through bindings to it). */
export function grantedElements(manifests: Manifest[], sa: { namespace: string; name: string }): Element[] {
  const out: Element[] = [];
  const find = (kind: string, name: string, ns: string | undefined): Manifest | undefined =>
    manifests.find((m) => m.kind === kind && m.metadata?.name === name && (kind === 'ClusterRole' || m.metadata?.namespace === ns));
  for (const b of manifests) {
    if (b.kind !== 'RoleBinding' && b.kind !== 'ClusterRoleBinding') continue;
    const bns = b.kind === 'RoleBinding' ? (b.metadata?.namespace ?? '') : '';
    const binds = (b.subjects ?? []).some(
      (s) => s.kind === 'ServiceAccount' && s.name === sa.name && (s.namespace ?? bns) === sa.namespace,
    );
    if (!binds || !b.roleRef?.name || !b.roleRef.kind) continue;
    const role = find(b.roleRef.kind, b.roleRef.name, bns);
    if (!role) continue;
    const id =
      role.kind === 'ClusterRole'
        ? `ClusterRole/${role.metadata?.name ?? ''}`
        : `Role/${role.metadata?.namespace ?? ''}/${role.metadata?.name ?? ''}`;
    (role.rules ?? []).forEach((r, i) => {
      for (const verb of r.verbs ?? [])
        for (const apiGroup of r.apiGroups ?? [])
          for (const resource of r.resources ?? [])
            out.push({ rule: `${id}#${i}`, verb, apiGroup, resource, resourceNames: r.resourceNames ?? [], scope: bns });
    });
  }
  return out;
}

/** Whether one element allows one call (RBAC's own matcher, and the binding's scope). */
export function elementAllows(e: Element, c: Call): boolean {
  if (e.scope !== '' && e.scope !== c.namespace) return false;
  const attrs: RequestAttributes = { ...c, resourceRequest: true, apiVersion: '', path: '' };
  return ruleAllows(attrs, {
    verbs: [e.verb],
    apiGroups: [e.apiGroup],
    resources: [e.resource],
    ...(e.resourceNames.length ? { resourceNames: e.resourceNames } : {}),
  });
}

/** Calls no element covers, and elements no call uses. */
export function coverage(elements: Element[], calls: Call[]): { uncovered: Call[]; unused: Element[] } {
  return {
    uncovered: calls.filter((c) => !elements.some((e) => elementAllows(e, c))),
    unused: elements.filter((e) => !calls.some((c) => elementAllows(e, c))),
  };
}

/** `verb group/resource[/sub] [ns] [name]`, for messages and the distinct call set. */
export function describeCall(c: Call): string {
  const res = c.subresource ? `${c.resource}/${c.subresource}` : c.resource;
  return `${c.verb} ${c.apiGroup === '' ? 'core' : c.apiGroup}/${res}${c.namespace ? ` ns=${c.namespace}` : ' (all namespaces)'}${c.name ? ` name=${c.name}` : ''}`;
}

export function describeElement(e: Element): string {
  return `${e.rule}: ${e.verb} ${e.apiGroup === '' ? 'core' : e.apiGroup}/${e.resource}${e.resourceNames.length ? ` names=[${e.resourceNames.join(',')}]` : ''}${e.scope ? ` in ${e.scope}` : ' cluster-wide'}`;
}
