import { createHash } from 'node:crypto';
import type { Registry } from '../registry/registry.js';

/**
 * A minimal OpenAPI v3 surface. kubectl reads it to learn that the server supports the
 * `fieldValidation` query parameter (server-side field validation); without it kubectl refuses
 * to apply with validation on. Each group-version document lists one PATCH operation per
 * resource, tagged with x-kubernetes-group-version-kind and the fieldValidation parameter.
 * Schemas are not published (so `kubectl explain` is not supported).
 */
export function openapiV3(reg: Registry, path: string): unknown {
  const gvs = new Map<string, { group: string; version: string }>();
  for (const ri of reg.all()) for (const v of ri.versions) if (v.served) gvs.set(ri.group === '' ? `api/${v.name}` : `apis/${ri.group}/${v.name}`, { group: ri.group, version: v.name });
  const rel = path.replace(/^\/openapi\/v3\/?/, '').replace(/\/$/, '');
  if (rel === '') {
    const paths: Record<string, unknown> = {};
    for (const key of [...gvs.keys()].sort()) paths[key] = { serverRelativeURL: `/openapi/v3/${key}?hash=${hashOf(gvDoc(reg, gvs.get(key) ?? { group: '', version: 'v1' }))}` };
    return { paths };
  }
  const gv = gvs.get(rel);
  return gv ? gvDoc(reg, gv) : undefined;
}

function hashOf(doc: unknown): string {
  return createHash('sha512').update(JSON.stringify(doc)).digest('hex').slice(0, 128).toUpperCase();
}

function gvDoc(reg: Registry, gv: { group: string; version: string }): unknown {
  const prefix = gv.group === '' ? `/api/${gv.version}` : `/apis/${gv.group}/${gv.version}`;
  const paths: Record<string, unknown> = {};
  for (const ri of reg.all()) {
    if (ri.group !== gv.group || !ri.versions.some((v) => v.name === gv.version && v.served)) continue;
    const p = ri.namespaced ? `${prefix}/namespaces/{namespace}/${ri.resource}/{name}` : `${prefix}/${ri.resource}/{name}`;
    const gvk = { group: ri.group, version: gv.version, kind: ri.kind };
    const params = ['dryRun', 'fieldManager', 'fieldValidation', 'force'].map((name) => ({ name, in: 'query', schema: { type: name === 'force' ? 'boolean' : 'string' }, uniqueItems: true }));
    paths[p] = {
      get: { operationId: `read${ri.kind}`, 'x-kubernetes-action': 'get', 'x-kubernetes-group-version-kind': gvk, responses: { '200': { description: 'OK' } } },
      put: { operationId: `replace${ri.kind}`, 'x-kubernetes-action': 'put', 'x-kubernetes-group-version-kind': gvk, parameters: params, responses: { '200': { description: 'OK' } } },
      patch: { operationId: `patch${ri.kind}`, 'x-kubernetes-action': 'patch', 'x-kubernetes-group-version-kind': gvk, parameters: params, responses: { '200': { description: 'OK' } } },
    };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes (kars apiserver)', version: 'v1.31.0' }, paths, components: { schemas: {} } };
}
