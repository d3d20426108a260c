/** Names a REST collection: group, version, plural resource, and whether it is namespaced. */
export interface ResourceRef {
  group: string;
  version: string;
  resource: string;
  namespaced: boolean;
}

/** The path of a collection or object: `/api/v1/namespaces/ns/configmaps/name/status`. */
export function resourcePath(
  ref: ResourceRef,
  opts: { namespace?: string | undefined; name?: string | undefined; subresource?: string | undefined } = {},
): string {
  const base = ref.group === '' ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
  const ns = ref.namespaced && opts.namespace ? `/namespaces/${encodeURIComponent(opts.namespace)}` : '';
  const name = opts.name !== undefined ? `/${encodeURIComponent(opts.name)}` : '';
  const sub = opts.name !== undefined && opts.subresource ? `/${opts.subresource}` : '';
  return `${base}${ns}/${ref.resource}${name}${sub}`;
}

/** Append query parameters, skipping undefined values. */
export function withQuery(path: string, query: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s === '' ? path : `${path}?${s}`;
}

/** Well-known resources kars uses. */
export const Resources = {
  namespaces: { group: '', version: 'v1', resource: 'namespaces', namespaced: false },
  configmaps: { group: '', version: 'v1', resource: 'configmaps', namespaced: true },
  secrets: { group: '', version: 'v1', resource: 'secrets', namespaced: true },
  events: { group: '', version: 'v1', resource: 'events', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', namespaced: true },
  customresourcedefinitions: { group: 'apiextensions.k8s.io', version: 'v1', resource: 'customresourcedefinitions', namespaced: false },
} as const satisfies Record<string, ResourceRef>;
