import { randomUUID } from 'node:crypto';
import { ApiError, badRequest, invalid, isObject, notFound } from '@kars/kube-core';
import type { KubeObject, ManagedFieldsEntry, StatusCause } from '@kars/kube-core';
import { trackUpdate } from '@kars/kube-patch';
import { typedFieldOptions } from '../kinds/field-types.js';
import { nowRfc3339 } from '../meta.js';
import type { Route } from '../http/route.js';
import type { ObjectService } from '../service.js';
import type { Registry } from '../registry/registry.js';
import type { ResourceInfo } from '../registry/resource.js';
import type { Auth } from './authorizer.js';
import type { RequestAttributes, UserInfo } from './rbac.js';
import { DEFAULT_TOKEN_SECONDS, MAX_TOKEN_SECONDS, MIN_TOKEN_SECONDS, TOKEN_ISSUER } from './tokens.js';
import { nonResourceAttributes } from './request-info.js';

/** An answer for the handler to send. */
export interface AuthApiResponse {
  code: number;
  body: unknown;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/**
 * Serve the endpoints that belong to authentication and authorization rather than to storage:
 * `serviceaccounts/NAME/token` (TokenRequest), SelfSubjectAccessReview (`kubectl auth can-i`),
 * SelfSubjectRulesReview (`kubectl auth can-i --list`) and SelfSubjectReview (`kubectl auth whoami`).
 * Returns undefined for every other route. The request has already been authorized.
 */
export async function serveAuthApi(
  auth: Auth,
  user: UserInfo,
  route: Route,
  method: string,
  readJson: () => Promise<unknown>,
  /** The field manager of the request (`fieldManager`, else the User-Agent's product). */
  manager = 'unknown',
): Promise<AuthApiResponse | undefined> {
  if (route.kind !== 'object') return undefined;
  const key = `${route.group}/${route.resource}`;
  const isToken = key === '/serviceaccounts' && route.subresource === 'token';
  const isReview =
    key === 'authorization.k8s.io/selfsubjectaccessreviews' ||
    key === 'authorization.k8s.io/selfsubjectrulesreviews' ||
    key === 'authentication.k8s.io/selfsubjectreviews';
  if (!isToken && !isReview) return undefined;
  if (method !== 'POST' || (isReview && route.name !== undefined))
    throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
  const body = await readJson();
  if (!isObject(body)) throw badRequest('the request body must be a JSON object');
  const spec = isObject(body['spec']) ? body['spec'] : {};
  if (isToken) return tokenRequest(auth, route.namespace ?? '', route.name ?? '', spec, manager);
  switch (route.resource) {
    case 'selfsubjectaccessreviews':
      return accessReview(auth, user, spec, manager);
    case 'selfsubjectrulesreviews': {
      const ns = str(spec['namespace']);
      const r = auth.rules(user, ns);
      return {
        code: 201,
        body: {
          kind: 'SelfSubjectRulesReview',
          apiVersion: 'authorization.k8s.io/v1',
          metadata: { creationTimestamp: null },
          spec: { namespace: ns },
          status: r,
        },
      };
    }
    default:
      return {
        code: 201,
        body: {
          kind: 'SelfSubjectReview',
          apiVersion: 'authentication.k8s.io/v1',
          metadata: { creationTimestamp: nowRfc3339() },
          status: {
            userInfo: {
              username: user.name,
              ...(user.uid ? { uid: user.uid } : {}),
              groups: user.groups,
              ...(user.extra ? { extra: user.extra } : {}),
            },
          },
        },
      };
  }
}

/**
 * The managedFields kube's field manager records on a created review or token request: an Update by
 * `manager` owning the fields the client sent in `spec` (tracked against the kind's Go type).
 */
function createdFields(
  group: string,
  kind: string,
  spec: Record<string, unknown>,
  manager: string,
  subresource?: string,
): ManagedFieldsEntry[] | undefined {
  const apiVersion = `${group}/v1`;
  const obj = { apiVersion, kind, metadata: {}, spec } as unknown as KubeObject;
  const opts = typedFieldOptions(group, 'v1', kind) ?? {};
  const tracked = trackUpdate(undefined, obj, manager, apiVersion, nowRfc3339(), subresource, opts);
  return tracked.metadata.managedFields;
}

async function tokenRequest(
  auth: Auth,
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
  manager: string,
): Promise<AuthApiResponse> {
  const sa = auth.serviceAccount(namespace, name);
  if (!sa?.metadata.uid) throw notFound({ group: '', resource: 'serviceaccounts', name });
  const exp = spec['expirationSeconds'];
  let seconds = DEFAULT_TOKEN_SECONDS;
  if (exp !== undefined && exp !== null) {
    // kube validates the request it has named after the ServiceAccount, but names no object in the error.
    const at = { group: 'authentication.k8s.io', resource: 'tokenrequests', kind: 'TokenRequest', name: '' };
    const bad = (why: string): ApiError =>
      invalid(at, [
        { reason: 'FieldValueInvalid', field: 'spec.expirationSeconds', message: `Invalid value: ${JSON.stringify(exp)}: ${why}` },
      ]);
    if (typeof exp !== 'number' || !Number.isInteger(exp)) throw bad('must be an integer');
    if (exp < MIN_TOKEN_SECONDS) throw bad('may not specify a duration less than 10 minutes');
    if (exp > 2 ** 32) throw bad('may not specify a duration larger than 2^32 seconds');
    seconds = Math.min(exp, MAX_TOKEN_SECONDS);
  }
  const rawAud = spec['audiences'];
  const audiences = Array.isArray(rawAud) && rawAud.length > 0 ? rawAud.map(str).filter((a) => a !== '') : [TOKEN_ISSUER];
  const { token, expiresAtMs } = await auth.tokens.issue({ namespace, name, uid: sa.metadata.uid }, audiences, seconds);
  // kube creates the TokenRequest like any object (a uid, a creation time) and records who sent which spec fields.
  const managedFields = createdFields('authentication.k8s.io', 'TokenRequest', spec, manager, 'token');
  return {
    code: 201,
    body: {
      kind: 'TokenRequest',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { name, namespace, uid: randomUUID(), creationTimestamp: nowRfc3339(), ...(managedFields ? { managedFields } : {}) },
      spec: { audiences, expirationSeconds: seconds, boundObjectRef: null },
      status: { token, expirationTimestamp: new Date(expiresAtMs).toISOString().replace(/\.\d{3}Z$/, 'Z') },
    },
  };
}

/**
 * ValidateSelfSubjectAccessReviewSpec's rule that exactly one of the attributes is set. Both causes print the
 * nonResourceAttributes as Go marshals the internal struct (no JSON tags: `Path`, `Verb`), or null.
 */
function accessReviewSpecCauses(ra: Record<string, unknown> | undefined, nra: Record<string, unknown> | undefined): StatusCause[] {
  const value = nra ? JSON.stringify({ Path: str(nra['path']), Verb: str(nra['verb']) }) : 'null';
  const cause = (field: string, why: string): StatusCause => ({
    reason: 'FieldValueInvalid',
    field,
    message: `Invalid value: ${value}: ${why}`,
  });
  if (ra && nra) return [cause('spec.nonResourceAttributes', 'cannot be specified in combination with resourceAttributes')];
  if (!ra && !nra)
    return [cause('spec.resourceAttributes', 'exactly one of nonResourceAttributes or resourceAttributes must be specified')];
  return [];
}

function accessReview(auth: Auth, user: UserInfo, spec: Record<string, unknown>, manager: string): AuthApiResponse {
  const ra = isObject(spec['resourceAttributes']) ? spec['resourceAttributes'] : undefined;
  const nra = isObject(spec['nonResourceAttributes']) ? spec['nonResourceAttributes'] : undefined;
  const causes = accessReviewSpecCauses(ra, nra);
  // kube names the GroupKind of the decoded review, whose kind is empty: `.authorization.k8s.io "" is invalid`.
  if (causes.length > 0) throw invalid({ group: 'authorization.k8s.io', resource: 'selfsubjectaccessreviews', kind: '', name: '' }, causes);
  const a: RequestAttributes = ra
    ? {
        verb: str(ra['verb']),
        resourceRequest: true,
        apiGroup: str(ra['group']),
        apiVersion: str(ra['version']),
        resource: str(ra['resource']),
        subresource: str(ra['subresource']),
        namespace: str(ra['namespace']),
        name: str(ra['name']),
        path: '',
      }
    : nonResourceAttributes(str(nra?.['verb']), str(nra?.['path']));
  const { allowed, reason } = auth.review(user, a);
  // kube 1.34 omits a zero creationTimestamp; the field manager still records the spec's fields.
  const managedFields = createdFields('authorization.k8s.io', 'SelfSubjectAccessReview', spec, manager);
  return {
    code: 201,
    body: {
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: managedFields ? { managedFields } : {},
      spec,
      status: { allowed, ...(reason ? { reason } : {}) },
    },
  };
}

/**
 * kube's bootstrap ClusterRoles every authenticated user gets, so discovery, health and the
 * self-reviews work for a ServiceAccount with no other rules: system:discovery, system:basic-user and
 * system:public-info-viewer, each bound to system:authenticated. Created once when RBAC starts
 * (like kube, an operator may edit them afterwards; an existing object is left alone).
 */
export async function bootstrapPolicy(service: ObjectService, registry: Registry): Promise<void> {
  const crRi = registry.get('rbac.authorization.k8s.io', 'clusterroles');
  const crbRi = registry.get('rbac.authorization.k8s.io', 'clusterrolebindings');
  if (!crRi || !crbRi) return;
  const labels = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
  const annotations = { 'rbac.authorization.kubernetes.io/autoupdate': 'true' };
  const roles: Array<[string, unknown[]]> = [
    [
      'system:discovery',
      [
        {
          verbs: ['get'],
          nonResourceURLs: [
            '/api',
            '/api/*',
            '/apis',
            '/apis/*',
            '/healthz',
            '/livez',
            '/openapi',
            '/openapi/*',
            '/readyz',
            '/version',
            '/version/',
          ],
        },
      ],
    ],
    [
      'system:basic-user',
      [
        { verbs: ['create'], apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'] },
        { verbs: ['create'], apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'] },
      ],
    ],
    ['system:public-info-viewer', [{ verbs: ['get'], nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'] }]],
  ];
  const opts = { dryRun: false, manager: 'kars-apiserver', fieldValidation: 'Ignore' as const };
  for (const [name, rules] of roles) {
    const exists = (ri: ResourceInfo): boolean => {
      try {
        service.get({ ri, version: 'v1', ns: '', name });
        return true;
      } catch {
        return false;
      }
    };
    if (!exists(crRi))
      await service.create(
        { ri: crRi, version: 'v1', ns: '', name },
        { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name, labels, annotations }, rules },
        opts,
      );
    if (!exists(crbRi))
      await service.create(
        { ri: crbRi, version: 'v1', ns: '', name },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name, labels, annotations },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:authenticated' }],
        },
        opts,
      );
  }
}
