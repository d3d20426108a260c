import { ApiError } from '@kars/kube-core';
import type { Route } from '../http/route.js';
import { serveAuthApi } from './api.js';
import type { AuthApiResponse } from './api.js';
import type { Auth } from './authorizer.js';
import { forbiddenMessage } from './rbac.js';
import type { UserInfo } from './rbac.js';
import { requestAttributes } from './request-info.js';

/** The outcome of {@link checkAccess} for a request that may proceed. */
export interface Access {
  user: UserInfo;
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
): Promise<Access> {
  const user = await auth.authenticate(authorization);
  if (!user) throw new ApiError(401, 'Unauthorized', 'Unauthorized');
  const attrs = requestAttributes(route, method, url.pathname, url.searchParams);
  if (!auth.authorize(user, attrs)) {
    throw new ApiError(
      403,
      'Forbidden',
      forbiddenMessage(user, attrs),
      attrs.resourceRequest ? { name: attrs.name, group: attrs.apiGroup, kind: attrs.resource } : {},
    );
  }
  const answer = await serveAuthApi(auth, user, route, method, readJson);
  return answer ? { user, answer } : { user };
}
