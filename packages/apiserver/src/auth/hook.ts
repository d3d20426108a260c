import { ApiError } from '@kars/kube-core';
import type { Route } from '../http/route.js';
import { serveAuthApi } from './api.js';
import type { AuthApiResponse } from './api.js';
import type { Auth } from './authorizer.js';
import { forbiddenMessage } from './rbac.js';
import type { RequestAttributes, UserInfo } from './rbac.js';
import { requestAttributes } from './request-info.js';

/** The outcome of {@link checkAccess} for a request that may proceed. */
export interface Access {
  user: UserInfo;
  /** The request's authorization attributes (allowed). */
  attributes: RequestAttributes;
  /** Set when the auth module answered the request itself (TokenRequest, the self-reviews). */
  answer?: AuthApiResponse;
}

/**
 * The one call the HTTP handler makes before serving a non-public request: authenticate (401 as
 * metav1.Status when no valid token), authorize (403 Forbidden with kube-apiserver's message), and
 * answer the auth module's own endpoints. Throws ApiError; the handler maps it to a Status.
 */
export async function checkAccess(
  auth: Auth,
  /** Every copy of the `Authorization` header, in order (`authorizationValues(req.rawHeaders)`). */
  authorization: readonly string[],
  route: Route,
  method: string,
  url: URL,
  readJson: () => Promise<unknown>,
  manager?: string,
): Promise<Access> {
  const user = await auth.authenticate(authorization);
  if (!user) throw new ApiError(401, 'Unauthorized', 'Unauthorized');
  const attrs = requestAttributes(route, method, url.pathname, url.searchParams);
  requireAllowed(auth, user, attrs);
  const answer = await serveAuthApi(auth, user, route, method, readJson, manager);
  return answer ? { user, attributes: attrs, answer } : { user, attributes: attrs };
}

/** Authorize `attrs` for `user` (audited), or throw 403 Forbidden with kube-apiserver's message. */
function requireAllowed(auth: Auth, user: UserInfo, attrs: RequestAttributes): void {
  if (!auth.authorize(user, attrs)) {
    throw new ApiError(
      403,
      'Forbidden',
      forbiddenMessage(user, attrs),
      // kube's NewForbidden: empty name and group are omitted (omitempty).
      attrs.resourceRequest
        ? { ...(attrs.name ? { name: attrs.name } : {}), ...(attrs.apiGroup ? { group: attrs.apiGroup } : {}), kind: attrs.resource }
        : {},
    );
  }
}

/**
 * The second check kube-apiserver makes on a PATCH that would create the object (a server-side
 * apply of a missing object): `create` on the same resource, name and namespace, as well as the
 * `patch` the request was authorized for. Throws 403 Forbidden when refused.
 */
export function authorizeCreateOnPatch(auth: Auth, access: Access): void {
  requireAllowed(auth, access.user, { ...access.attributes, verb: 'create' });
}
