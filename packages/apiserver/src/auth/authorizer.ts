import { bearerToken, secretEquals } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import type { Registry } from '../registry/registry.js';
import type { ResourceInfo } from '../registry/resource.js';
import type { ObjectService } from '../service.js';
import type { WatchCache } from '../watch/cache.js';
import { rbacDecide, rulesFor, serviceAccountUsername } from './rbac.js';
import type { BindingLike, PolicyRule, RbacDecision, RbacSource, RequestAttributes, RoleLike, UserInfo } from './rbac.js';
import type { ServiceAccountTokens } from './tokens.js';

/** `AlwaysAllow` (the quickstart default: every authenticated request is allowed) or `RBAC`. */
export type AuthorizationMode = 'AlwaysAllow' | 'RBAC';

/** The superuser group: members are allowed everything, in every mode (kube's system:masters). */
export const MASTERS_GROUP = 'system:masters';
/** The user the admin token authenticates as. */
export const ADMIN_USER: UserInfo = { name: 'kars:admin', groups: [MASTERS_GROUP, 'system:authenticated'] };

const RBAC = 'rbac.authorization.k8s.io';

/** One authorization decision, for the audit hook. */
export interface AuditRecord {
  user: UserInfo;
  attributes: RequestAttributes;
  allowed: boolean;
}

/**
 * The RBAC objects, read from storage once and kept until one of them changes (the watch cache tells
 * us), so an authorization check costs no storage reads in the steady state.
 */
class RbacIndex implements RbacSource {
  private crbs: BindingLike[] | undefined;
  private rbs = new Map<string, BindingLike[]>();
  private crs: Map<string, RoleLike> | undefined;
  private roles = new Map<string, Map<string, RoleLike>>();

  constructor(
    private readonly service: ObjectService,
    private readonly registry: Registry,
  ) {}

  invalidate(): void {
    this.crbs = undefined;
    this.rbs.clear();
    this.crs = undefined;
    this.roles.clear();
  }

  private read<T>(resource: string, ns: string | undefined): T[] {
    const ri = this.registry.get(RBAC, resource);
    if (!ri) return [];
    return this.service.snapshot(ri, ns).bodies.map((b) => JSON.parse(b) as T);
  }

  clusterRoleBindings(): readonly BindingLike[] {
    return (this.crbs ??= this.read<BindingLike>('clusterrolebindings', undefined));
  }
  roleBindings(namespace: string): readonly BindingLike[] {
    let v = this.rbs.get(namespace);
    if (!v) this.rbs.set(namespace, (v = this.read<BindingLike>('rolebindings', namespace)));
    return v;
  }
  private clusterRoleMap(): Map<string, RoleLike> {
    return (this.crs ??= new Map(this.read<RoleLike>('clusterroles', undefined).map((r) => [r.metadata.name ?? '', r])));
  }
  clusterRole(name: string): RoleLike | undefined {
    return this.clusterRoleMap().get(name);
  }
  clusterRoles(): readonly RoleLike[] {
    return [...this.clusterRoleMap().values()];
  }
  role(namespace: string, name: string): RoleLike | undefined {
    let m = this.roles.get(namespace);
    if (!m) this.roles.set(namespace, (m = new Map(this.read<RoleLike>('roles', namespace).map((r) => [r.metadata.name ?? '', r]))));
    return m.get(name);
  }
}

/**
 * Authentication and authorization for kars apiserver, in one place the handler calls twice:
 * `authenticate(header)` then `authorize(user, attributes)`.
 *
 * Authentication: the admin token (a superuser in system:masters) or a ServiceAccount token issued
 * through TokenRequest, accepted only while the ServiceAccount exists with the uid the token names.
 * Authorization: AlwaysAllow, or RBAC (system:masters always allowed).
 *
 * Caveats: verified tokens are cached for at most 10 s or until any ServiceAccount changes, so a
 * deleted ServiceAccount's tokens stop working on the next request.
 */
export class Auth {
  private readonly index: RbacIndex;
  private readonly tokenCache = new Map<string, { user: UserInfo; untilMs: number }>();
  private readonly stops: Array<() => void> = [];

  constructor(
    readonly mode: AuthorizationMode,
    private readonly adminToken: string,
    readonly tokens: ServiceAccountTokens,
    private readonly service: ObjectService,
    private readonly registry: Registry,
    cache: WatchCache,
    private readonly audit?: (r: AuditRecord) => void,
  ) {
    this.index = new RbacIndex(service, registry);
    const from = service.currentRv();
    for (const r of ['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings'])
      this.stops.push(cache.subscribe({ gr: `${RBAC}/${r}` }, from, () => this.index.invalidate()));
    this.stops.push(cache.subscribe({ gr: '/serviceaccounts' }, from, () => this.tokenCache.clear()));
  }

  /** Stop following storage changes. */
  close(): void {
    for (const s of this.stops.splice(0)) s();
  }

  /**
   * The user behind the request's `Authorization` header, or undefined (401). `header`: every copy
   * of the header (see {@link authorizationValues}), or one value; only exactly one
   * `Bearer <token>` is read ({@link bearerToken}, ADR 0028).
   */
  async authenticate(header: string | readonly string[] | undefined): Promise<UserInfo | undefined> {
    const token = bearerToken(header === undefined ? [] : typeof header === 'string' ? [header] : header);
    if (token === undefined) return undefined;
    if (secretEquals(token, this.adminToken)) return ADMIN_USER;
    const now = Date.now();
    const hit = this.tokenCache.get(token);
    if (hit && hit.untilMs > now) return hit.user;
    const claims = await this.tokens.verify(token);
    if (!claims) return undefined;
    const sa = this.serviceAccount(claims.namespace, claims.name);
    if (!sa || sa.metadata.uid !== claims.uid || sa.metadata.deletionTimestamp) return undefined;
    const user: UserInfo = {
      name: serviceAccountUsername(claims.namespace, claims.name),
      uid: claims.uid,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${claims.namespace}`, 'system:authenticated'],
      // kube's ServiceAccountInfo.UserInfo: the token id as the credential id (CredentialIDForJTI).
      ...(claims.jti ? { extra: { 'authentication.kubernetes.io/credential-id': [`JTI=${claims.jti}`] } } : {}),
    };
    if (this.tokenCache.size > 10_000) this.tokenCache.clear();
    this.tokenCache.set(token, { user, untilMs: Math.min(now + 10_000, claims.expiresAtMs) });
    return user;
  }

  /** The ServiceAccount object, if it exists. */
  serviceAccount(namespace: string, name: string): KubeObject | undefined {
    const ri = this.registry.get('', 'serviceaccounts');
    if (!ri) return undefined;
    try {
      return this.service.get({ ri, version: 'v1', ns: namespace, name });
    } catch {
      return undefined;
    }
  }

  /** Whether `user` may do what `a` describes; every decision goes to the audit hook. */
  authorize(user: UserInfo, a: RequestAttributes): boolean {
    const allowed = this.decide(user, a);
    this.audit?.({ user, attributes: a, allowed });
    return allowed;
  }

  /** The decision alone, without auditing (SelfSubjectAccessReview asks hypothetically). */
  decide(user: UserInfo, a: RequestAttributes): boolean {
    return this.review(user, a).allowed;
  }

  /** The decision with kube's reason (RBAC names the binding that allowed; the other authorizers give none). */
  review(user: UserInfo, a: RequestAttributes): RbacDecision {
    if (user.groups.includes(MASTERS_GROUP) || this.mode === 'AlwaysAllow') return { allowed: true, reason: '' };
    return rbacDecide(user, a, this.index);
  }

  /** The rules that apply to `user` in `namespace` (SelfSubjectRulesReview). */
  rules(user: UserInfo, namespace: string): { resourceRules: PolicyRule[]; nonResourceRules: PolicyRule[]; incomplete: boolean } {
    if (user.groups.includes(MASTERS_GROUP) || this.mode === 'AlwaysAllow') {
      return {
        resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
        nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
        incomplete: false,
      };
    }
    const all = rulesFor(user, namespace, this.index);
    return {
      resourceRules: all
        .filter((r) => (r.resources ?? []).length > 0)
        .map((r) => ({
          verbs: r.verbs ?? [],
          apiGroups: r.apiGroups ?? [],
          resources: r.resources ?? [],
          ...(r.resourceNames?.length ? { resourceNames: r.resourceNames } : {}),
        })),
      nonResourceRules: all
        .filter((r) => (r.nonResourceURLs ?? []).length > 0)
        .map((r) => ({ verbs: r.verbs ?? [], nonResourceURLs: r.nonResourceURLs ?? [] })),
      incomplete: false,
    };
  }
}

/** A resource that exists only as a verb (a review), not as stored objects. */
export function isVirtual(ri: ResourceInfo): boolean {
  return ri.verbs !== undefined && !ri.verbs.includes('get');
}
