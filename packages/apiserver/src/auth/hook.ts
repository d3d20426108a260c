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
  /** Set when the auth module answered the request itself (TokenRequest, the self-reviews). */
  answer?: AuthApiResponse;
  /**
   * Authorize this same request as `verb` too, throwing 403 as the first check does: kube-apiserver
   * does so for a server-side apply that finds no object (it becomes a create, so `create` is checked).
   */
  alsoAs(verb: string): void;
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
  const check = (a: RequestAttributes): void => {
    if (!auth.authorize(user, a))
      throw new ApiError(
        403,
        'Forbidden',
        forbiddenMessage(user, a),
        a.resourceRequest ? { name: a.name, group: a.apiGroup, kind: a.resource } : {},
      );
  };
  check(attrs);
  const alsoAs = (verb: string): void => check({ ...attrs, verb });
  const answer = await serveAuthApi(auth, user, route, method, readJson);
  return answer ? { user, answer, alsoAs } : { user, alsoAs };
}
