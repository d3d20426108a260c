import { ApiError } from '@kars/kube-core';
import type { Registry } from '../registry/registry.js';
import type { Res } from './compat.js';

/**
 * The answers kube-apiserver gives before any handler of a resource runs: those of its go-restful
 * container (which serves `/api/...`, `/version` and the built-in groups' `/apis/<group>/...`) and
 * those of the Go mux behind it (every other path, custom resources' included).
 *
 * A path that no go-restful route fits is a NotFound Status with empty details; a path that reaches
 * the end of the handler chain unclaimed (an unknown group, a custom resource's unknown or unserved
 * version or resource, a custom resource asked at the wrong scope) is Go's plain `404 page not found`.
 * A go-restful route whose media types the Accept header names none of is a 406 listing them.
 */

/** The media types a built-in resource's object routes produce (go-restful `Produces`), in kube's order. */
const OBJECT_MEDIA_TYPES = ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'];
/** The media types of a built-in resource's list and watch routes: the object ones and their watch streams. */
const LIST_MEDIA_TYPES = [...OBJECT_MEDIA_TYPES, 'application/json;stream=watch', 'application/vnd.kubernetes.protobuf;stream=watch'];
/** The media types a custom resource's handler encodes (apiextensions' negotiated serializer, CBOR off). */
const CUSTOM_MEDIA_TYPES = OBJECT_MEDIA_TYPES;

/** Answer as Go's http.NotFound does: 404, plain text, `404 page not found`. */
export function sendPageNotFound(res: Res): void {
  const text = '404 page not found\n';
  res.writeHead(404, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-length': String(Buffer.byteLength(text)),
  });
  res.end(text);
}

/** The Status kube's go-restful container answers for a path none of its routes fits (a NotFound with empty details). */
export function routeNotFound(): ApiError {
  return new ApiError(404, 'NotFound', 'the server could not find the requested resource', {});
}

/** Whether `group` is one of the built-in API groups, whose paths kube's go-restful container claims. */
export function isBuiltinGroup(reg: Registry, group: string): boolean {
  return group === '' || reg.all().some((ri) => ri.builtin && ri.group === group);
}

/**
 * Whether kube's go-restful container claims `pathname` (so an unknown path under it is a NotFound
 * Status, not Go's plain 404): `/api/...`, `/version/...` and `/apis/<built-in group>/...`.
 */
export function restfulClaims(reg: Registry, pathname: string): boolean {
  const parts = pathname.split('/').filter((p) => p !== '');
  if (parts[0] === 'api' || parts[0] === 'version') return true;
  return parts[0] === 'apis' && parts[1] !== undefined && isBuiltinGroup(reg, parts[1]);
}

/**
 * Whether a built-in resource has a go-restful route for `method` at a path with a name (`named`) or
 * without, in all namespaces (`allNamespaces`) or not; where it has none, go-restful answers 405
 * before it reads the Accept header.
 */
export function builtinRouteServes(method: string, named: boolean, allNamespaces: boolean): boolean {
  switch (method) {
    case 'GET':
      return true;
    case 'POST':
      return !named && !allNamespaces;
    case 'PUT':
    case 'PATCH':
      return named;
    case 'DELETE':
      return named || !allNamespaces;
    default:
      return false;
  }
}

/**
 * Refuse, as go-restful does, an Accept header that names none of a built-in route's media types
 * (exactly, parameters dropped, or `*` `/` `*`): 406 with go-restful's message. `collection` is a list
 * or watch route (GET of a collection), whose media types include the watch streams.
 */
export function requireRouteAccepts(accept: string | string[] | undefined, collection: boolean): void {
  const header = Array.isArray(accept) ? accept.join(',') : (accept ?? '');
  if (header === '') return;
  const produces = collection ? LIST_MEDIA_TYPES : OBJECT_MEDIA_TYPES;
  for (const range of header.split(',')) {
    const type = (range.split(';')[0] ?? '').trim();
    if (type === '*/*' || produces.includes(type)) return;
  }
  throw new ApiError(406, 'NotAcceptable', `406: Not Acceptable\n\nAvailable representations: ${produces.join(', ')}`, {});
}

/**
 * Refuse, as a custom resource's handler does, an Accept header that names no media type it encodes,
 * nor a wildcard covering one (`*` `/` `*`, `application/*`): 406 naming the types it encodes.
 */
export function requireCustomAccepts(accept: string | string[] | undefined): void {
  const header = Array.isArray(accept) ? accept.join(',') : (accept ?? '');
  if (header.trim() === '') return;
  for (const range of header.split(',')) {
    const type = (range.split(';')[0] ?? '').trim().toLowerCase();
    if (type === '*/*' || type === 'application/*' || CUSTOM_MEDIA_TYPES.includes(type)) return;
  }
  throw new ApiError(406, 'NotAcceptable', `only the following media types are accepted: ${CUSTOM_MEDIA_TYPES.join(', ')}`);
}
