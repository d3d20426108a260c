import { createHash } from 'node:crypto';
import { isObject } from '@kars/kube-core';
import type { Registry } from '../registry/registry.js';
import { definitionsFor, kindOperations, servedKinds, WRITE_PARAMS } from './model.js';
import type { ServedKind } from './model.js';

/**
 * OpenAPI v3, as kube-apiserver serves it: `/openapi/v3` lists one document per group-version
 * with a `serverRelativeURL` whose `hash` changes whenever the document does (kubectl caches by
 * it), and `/openapi/v3/apis/<group>/<version>` (or `api/v1`) is that document.
 *
 * Each document has `components.schemas` (the kinds of that group-version and everything they
 * reference, so `kubectl explain` works) and, per kind, get/put/patch operations tagged with
 * `x-kubernetes-group-version-kind` and the `fieldValidation` parameter (so kubectl uses
 * server-side field validation).
 *
 * Memory: documents are cached per group-version and rebuilt only when the set of resources
 * (their ResourceInfo objects, replaced whenever a CRD changes) differs.
 */
export class OpenApiV3 {
  private readonly cache = new Map<string, { kinds: ServedKind[]; doc: unknown; text: string; hash: string }>();

  constructor(private readonly reg: Registry) {}

  /** The JSON text for a path under /openapi/v3, or undefined when there is no such document. */
  serve(path: string): string | undefined {
    const rel = path.replace(/^\/openapi\/v3\/?/, '').replace(/\/$/, '');
    const byGv = this.groupVersions();
    if (rel === '') {
      const paths: Record<string, unknown> = {};
      for (const key of [...byGv.keys()].sort())
        paths[key] = { serverRelativeURL: `/openapi/v3/${key}?hash=${this.doc(key, byGv.get(key) ?? []).hash}` };
      return JSON.stringify({ paths });
    }
    const kinds = byGv.get(rel);
    return kinds ? this.doc(rel, kinds).text : undefined;
  }

  private groupVersions(): Map<string, ServedKind[]> {
    const out = new Map<string, ServedKind[]>();
    for (const k of servedKinds(this.reg)) {
      const key = k.group === '' ? `api/${k.version}` : `apis/${k.group}/${k.version}`;
      const list = out.get(key) ?? [];
      list.push(k);
      out.set(key, list);
    }
    return out;
  }

  private doc(key: string, kinds: ServedKind[]): { text: string; hash: string } {
    const hit = this.cache.get(key);
    if (hit && hit.kinds.length === kinds.length && hit.kinds.every((k, i) => k.ri === kinds[i]?.ri && k.version === kinds[i]?.version))
      return hit;
    const doc = gvDocument(kinds);
    const text = JSON.stringify(doc);
    const entry = { kinds, doc, text, hash: createHash('sha512').update(text).digest('hex').toUpperCase() };
    this.cache.set(key, entry);
    return entry;
  }
}

function gvDocument(kinds: ServedKind[]): unknown {
  const paths: Record<string, unknown> = {};
  const params = WRITE_PARAMS.map((name) => ({
    name,
    in: 'query',
    schema: { type: name === 'force' ? 'boolean' : 'string', uniqueItems: true },
  }));
  for (const k of kinds) {
    const ref = { $ref: `#/components/schemas/${k.definition}` };
    Object.assign(
      paths,
      kindOperations(k, {
        responses: { '200': { description: 'OK', content: { 'application/json': { schema: ref } } } },
        write: (action) =>
          action === 'patch'
            ? { parameters: params }
            : { parameters: params, requestBody: { content: { '*/*': { schema: ref } }, required: true } },
      }),
    );
  }
  const schemas: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(definitionsFor(kinds))) schemas[name] = toV3(def);
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.31.0-kars' }, paths, components: { schemas } };
}

/**
 * Rewrite a v2-style schema for v3: references point into components.schemas, and a reference
 * that carries its own description becomes `allOf: [{$ref}]` plus the description, as
 * kube-apiserver publishes it (siblings of $ref are ignored in OpenAPI 3.0).
 */
export function toV3(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toV3);
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === '$ref' && typeof v === 'string') out[k] = v.replace('#/definitions/', '#/components/schemas/');
    else if (k.startsWith('x-') || k === 'default' || k === 'enum' || k === 'example') out[k] = v;
    else out[k] = toV3(v);
  }
  if (typeof out['$ref'] === 'string' && Object.keys(out).length > 1) {
    const { $ref, ...rest } = out;
    return { allOf: [{ $ref }], ...rest };
  }
  return out;
}
