/**
 * RBAC evaluation as kube-apiserver does it (plugin/pkg/auth/authorizer/rbac and
 * pkg/apis/rbac/v1 helpers), as pure functions over plain objects: no I/O, no storage.
 *
 * Guarantees: a request is allowed only when some binding that applies to the user, in scope for
 * the request (every ClusterRoleBinding; RoleBindings of the request's namespace), grants a rule that
 * matches every attribute: verb, API group, resource or `resource/subresource` (or `*`, or
 * `* /subresource`), resourceName (a rule with resourceNames never matches a request without a name),
 * or a non-resource URL (exact, `*`, or a `prefix*`). Rules only add; nothing denies.
 *
 * Caveats: a binding whose role does not exist grants nothing (kube logs it; we do too, by returning
 * nothing). Aggregated ClusterRoles are expanded at evaluation time rather than written back into the
 * object by a controller, so `kubectl get clusterrole X -o yaml` shows the rules it was given.
 */
import { labelSelectorFromObject, matchesLabels } from '@kars/kube-core';
import type { LabelSelectorObject } from '@kars/kube-core';

/** Who is asking. */
export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
  /** kube's user extra, e.g. `authentication.kubernetes.io/credential-id` of a ServiceAccount token. */
  extra?: Record<string, string[]>;
}

/** What is being asked, as kube's authorizer.Attributes. */
export interface RequestAttributes {
  verb: string;
  /** True for /api/… and /apis/… object requests; false for discovery, health and other paths. */
  resourceRequest: boolean;
  apiGroup: string;
  apiVersion: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  /** The URL path, for non-resource requests. */
  path: string;
}

/** One rbac.authorization.k8s.io/v1 PolicyRule. */
export interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
  apiGroup?: string;
}

export interface RoleRef {
  kind?: string;
  name?: string;
  apiGroup?: string;
}

/** A Role or ClusterRole, reduced to what evaluation reads. */
export interface RoleLike {
  metadata: { name?: string; namespace?: string; labels?: Record<string, string> };
  rules?: PolicyRule[] | null;
  aggregationRule?: {
    clusterRoleSelectors?: LabelSelectorObject[];
  } | null;
}

/** A RoleBinding or ClusterRoleBinding, reduced to what evaluation reads. */
export interface BindingLike {
  metadata: { name?: string; namespace?: string };
  subjects?: Subject[] | null;
  roleRef?: RoleRef;
}

/** The RBAC objects evaluation reads; the authorizer supplies them from storage. */
export interface RbacSource {
  clusterRoleBindings(): readonly BindingLike[];
  roleBindings(namespace: string): readonly BindingLike[];
  clusterRole(name: string): RoleLike | undefined;
  clusterRoles(): readonly RoleLike[];
  role(namespace: string, name: string): RoleLike | undefined;
}

export function verbMatches(rule: PolicyRule, verb: string): boolean {
  return (rule.verbs ?? []).some((v) => v === '*' || v === verb);
}

export function apiGroupMatches(rule: PolicyRule, group: string): boolean {
  return (rule.apiGroups ?? []).some((g) => g === '*' || g === group);
}

/** kube's ResourceMatches: `*`, the exact `resource` or `resource/subresource`, or `* /subresource`. */
export function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  for (const r of rule.resources ?? []) {
    if (r === '*' || r === combined) return true;
    if (subresource === '') continue;
    if (r.length === subresource.length + 2 && r.startsWith('*/') && r.endsWith(subresource)) return true;
  }
  return false;
}

export function resourceNameMatches(rule: PolicyRule, name: string): boolean {
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(name);
}

export function nonResourceURLMatches(rule: PolicyRule, path: string): boolean {
  for (const u of rule.nonResourceURLs ?? []) {
    if (u === '*' || u === path) return true;
    if (u.endsWith('*') && path.startsWith(u.slice(0, -1))) return true;
  }
  return false;
}

/** Whether one rule allows the request. */
export function ruleAllows(a: RequestAttributes, rule: PolicyRule): boolean {
  if (a.resourceRequest) {
    const combined = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
    return (
      verbMatches(rule, a.verb) &&
      apiGroupMatches(rule, a.apiGroup) &&
      resourceMatches(rule, combined, a.subresource) &&
      resourceNameMatches(rule, a.name)
    );
  }
  return verbMatches(rule, a.verb) && nonResourceURLMatches(rule, a.path);
}

/** The username of a ServiceAccount: `system:serviceaccount:<ns>:<name>`. */
export function serviceAccountUsername(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/** kube's appliesToUser; a ServiceAccount subject without a namespace takes the binding's. */
export function subjectMatches(user: UserInfo, s: Subject, bindingNamespace: string): boolean {
  switch (s.kind) {
    case 'User':
      return user.name === s.name;
    case 'Group':
      return s.name !== undefined && user.groups.includes(s.name);
    case 'ServiceAccount': {
      const ns = s.namespace !== undefined && s.namespace !== '' ? s.namespace : bindingNamespace;
      if (ns === '' || s.name === undefined) return false;
      return user.name === serviceAccountUsername(ns, s.name);
    }
    default:
      return false;
  }
}

function selectorMatches(sel: LabelSelectorObject, labels: Record<string, string>): boolean {
  const reqs = labelSelectorFromObject(sel);
  return reqs !== undefined && matchesLabels(reqs, labels);
}

/**
 * The rules of a ClusterRole, with aggregation: a role with an aggregationRule has the union of the
 * rules of every ClusterRole one of its selectors matches (itself excluded), as kube's
 * clusterrole-aggregation controller would write them. An empty selector list aggregates nothing.
 */
export function clusterRoleRules(role: RoleLike, src: RbacSource): PolicyRule[] {
  const sels = role.aggregationRule?.clusterRoleSelectors;
  if (!sels || sels.length === 0) return role.rules ?? [];
  const out: PolicyRule[] = [...(role.rules ?? [])];
  for (const other of src.clusterRoles()) {
    if (other.metadata.name === role.metadata.name) continue;
    const labels = other.metadata.labels ?? {};
    if (sels.some((s) => selectorMatches(s, labels))) out.push(...(other.rules ?? []));
  }
  return out;
}

function rulesOf(ref: RoleRef | undefined, bindingNamespace: string, src: RbacSource): PolicyRule[] {
  if (!ref?.name) return [];
  if (ref.kind === 'ClusterRole') {
    const r = src.clusterRole(ref.name);
    return r ? clusterRoleRules(r, src) : [];
  }
  if (ref.kind === 'Role' && bindingNamespace !== '') return src.role(bindingNamespace, ref.name)?.rules ?? [];
  return [];
}

/** kube's describeSubject: `ServiceAccount "name/ns"`, `User "name"`, `Group "name"`. */
function describeSubject(s: Subject, bindingNamespace: string): string {
  if (s.kind === 'ServiceAccount') {
    const ns = s.namespace !== undefined && s.namespace !== '' ? s.namespace : bindingNamespace;
    return `${s.kind} ${JSON.stringify(`${s.name ?? ''}/${ns}`)}`;
  }
  return `${s.kind} ${JSON.stringify(s.name ?? '')}`;
}

/** RBAC's decision and, when allowed, kube's reason: `RBAC: allowed by RoleBinding "rb/ns" of Role "r" to ServiceAccount "sa/ns"`. */
export interface RbacDecision {
  allowed: boolean;
  reason: string;
}

/** RBAC's decision: the first applicable binding (cluster-wide first, as kube visits them) that grants a matching rule. */
export function rbacDecide(user: UserInfo, a: RequestAttributes, src: RbacSource): RbacDecision {
  const check = (b: BindingLike, ns: string): string | undefined => {
    const subject = (b.subjects ?? []).find((s) => subjectMatches(user, s, ns));
    if (!subject || !rulesOf(b.roleRef, ns, src).some((r) => ruleAllows(a, r))) return undefined;
    const what =
      ns === ''
        ? `ClusterRoleBinding ${JSON.stringify(b.metadata.name ?? '')}`
        : `RoleBinding ${JSON.stringify(`${b.metadata.name ?? ''}/${ns}`)}`;
    return `RBAC: allowed by ${what} of ${b.roleRef?.kind ?? ''} ${JSON.stringify(b.roleRef?.name ?? '')} to ${describeSubject(subject, ns)}`;
  };
  for (const b of src.clusterRoleBindings()) {
    const reason = check(b, '');
    if (reason !== undefined) return { allowed: true, reason };
  }
  if (a.namespace !== '')
    for (const b of src.roleBindings(a.namespace)) {
      const reason = check(b, a.namespace);
      if (reason !== undefined) return { allowed: true, reason };
    }
  return { allowed: false, reason: '' };
}

/** Whether RBAC allows the request: some applicable binding grants a matching rule. */
export function rbacAllows(user: UserInfo, a: RequestAttributes, src: RbacSource): boolean {
  return rbacDecide(user, a, src).allowed;
}

/** The rules that apply to a user in a namespace (for SelfSubjectRulesReview). */
export function rulesFor(user: UserInfo, namespace: string, src: RbacSource): PolicyRule[] {
  const out: PolicyRule[] = [];
  for (const b of src.clusterRoleBindings())
    if ((b.subjects ?? []).some((s) => subjectMatches(user, s, ''))) out.push(...rulesOf(b.roleRef, '', src));
  if (namespace !== '')
    for (const b of src.roleBindings(namespace))
      if ((b.subjects ?? []).some((s) => subjectMatches(user, s, namespace))) out.push(...rulesOf(b.roleRef, namespace, src));
  return out;
}

/**
 * kube-apiserver's forbidden message (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
 * forbiddenMessage, wrapped by apierrors.NewForbidden): `configmaps "x" is forbidden: User "u" cannot get
 * resource "configmaps" in API group "" in the namespace "ns"`.
 */
export function forbiddenMessage(user: UserInfo | undefined, a: RequestAttributes): string {
  const u = JSON.stringify(user?.name ?? '');
  if (!a.resourceRequest) return `forbidden: User ${u} cannot ${a.verb} path ${JSON.stringify(a.path)}`;
  const res = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
  const scope = a.namespace !== '' ? `in the namespace ${JSON.stringify(a.namespace)}` : 'at the cluster scope';
  const why = `User ${u} cannot ${a.verb} resource ${JSON.stringify(res)} in API group ${JSON.stringify(a.apiGroup)} ${scope}`;
  const qualified = a.apiGroup === '' ? a.resource : `${a.resource}.${a.apiGroup}`;
  if (qualified === '') return `forbidden: ${why}`;
  return a.name === '' ? `${qualified} is forbidden: ${why}` : `${qualified} ${JSON.stringify(a.name)} is forbidden: ${why}`;
}
