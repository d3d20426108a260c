import { parseFieldSelector } from '@kars/kube-core';
import type { Route } from '../http/route.js';
import type { RequestAttributes } from './rbac.js';

/** The attributes of a non-resource request (`verb` on `path`, every resource field empty). */
export function nonResourceAttributes(verb: string, path: string): RequestAttributes {
  return { verb, resourceRequest: false, apiGroup: '', apiVersion: '', resource: '', subresource: '', namespace: '', name: '', path };
}

/**
 * The authorization attributes of a request, as kube-apiserver's RequestInfoFactory derives them:
 * GET on a name is `get`, on a collection `list`, with `watch=true` (or the legacy `/watch/` prefix)
 * `watch`; POST `create`, PUT `update`, PATCH `patch`, DELETE on a name `delete`, on a collection
 * `deletecollection`. A list or watch whose field selector pins `metadata.name` carries that name, so
 * a rule with resourceNames can allow watching one object. Everything that is not under /api or /apis
 * with a resource is a non-resource request whose verb is the lower-cased HTTP method.
 */
export function requestAttributes(route: Route, method: string, path: string, q: URLSearchParams): RequestAttributes {
  const m = method.toUpperCase();
  const base = nonResourceAttributes(m.toLowerCase(), path);
  if (route.kind !== 'object') {
    // A namespace-less "/api/v1/namespaces" style path is an object route; discovery is not.
    return base;
  }
  let name = route.name ?? '';
  const isWatch = route.watchPath || q.get('watch') === 'true' || q.get('watch') === '1';
  let verb: string;
  switch (m) {
    case 'GET':
    case 'HEAD':
      verb = isWatch ? 'watch' : name === '' ? 'list' : 'get';
      break;
    case 'POST':
      verb = 'create';
      break;
    case 'PUT':
      verb = 'update';
      break;
    case 'PATCH':
      verb = 'patch';
      break;
    case 'DELETE':
      verb = name === '' ? 'deletecollection' : 'delete';
      break;
    default:
      verb = m.toLowerCase();
  }
  if ((verb === 'list' || verb === 'watch') && name === '') {
    const fs = q.get('fieldSelector');
    if (fs) {
      try {
        for (const r of parseFieldSelector(fs)) if (r.field === 'metadata.name' && r.op === '=') name = r.value;
      } catch {
        // a malformed selector is rejected later with 400; for authorization it names nothing
      }
    }
  }
  // `/api/v1/namespaces/NAME` is the namespace object itself: cluster-scoped resource "namespaces",
  // whose namespace attribute is its own name (as in kube).
  const namespace =
    route.namespace ?? (route.resource === 'namespaces' && route.group === '' && route.name !== undefined ? route.name : '');
  return {
    verb,
    resourceRequest: true,
    apiGroup: route.group,
    apiVersion: route.version,
    resource: route.resource,
    subresource: route.subresource ?? '',
    namespace,
    name,
    path,
  };
}
