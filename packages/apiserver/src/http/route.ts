/** A parsed API path. */
export type Route =
  | { kind: 'health'; check: 'healthz' | 'livez' | 'readyz' }
  | { kind: 'version' }
  | { kind: 'legacyRoot' }
  | { kind: 'groupList' }
  | { kind: 'group'; group: string }
  | { kind: 'resourceList'; group: string; version: string }
  | { kind: 'openapi'; path: string }
  | { kind: 'faults'; action: string }
  | {
      kind: 'object';
      group: string;
      version: string;
      namespace?: string;
      resource: string;
      name?: string;
      subresource?: string;
      watchPath: boolean;
    }
  | { kind: 'unknown' };

/**
 * Parse a request path the way kube-apiserver's request-info resolver does:
 * `/api/v1/...` for the core group, `/apis/<group>/<version>/...` otherwise,
 * `namespaces/<ns>/<resource>` for namespaced collections, and the legacy `watch/` prefix.
 */
export function parseRoute(pathname: string): Route {
  // Every request passes here: decode only the segments that hold an escape (the rest decode to
  // themselves), and slice once.
  const parts: string[] = [];
  for (const p of pathname.split('/')) if (p !== '') parts.push(p.includes('%') ? decodeURIComponent(p) : p);
  const first = parts[0];
  const rest = parts.slice(1);
  if (first === undefined) return { kind: 'unknown' };
  if (parts.length === 1 && (first === 'healthz' || first === 'livez' || first === 'readyz')) return { kind: 'health', check: first };
  if ((first === 'healthz' || first === 'livez' || first === 'readyz') && parts.length > 1) return { kind: 'health', check: first };
  if (first === 'version' && parts.length === 1) return { kind: 'version' };
  if (first === 'openapi') return { kind: 'openapi', path: pathname };
  if (first === 'debug' && rest[0] === 'faults' && rest[1]) return { kind: 'faults', action: rest[1] };
  let group: string;
  let version: string | undefined;
  let tail: string[];
  if (first === 'api') {
    if (rest.length === 0) return { kind: 'legacyRoot' };
    group = '';
    version = rest[0];
    tail = rest.slice(1);
  } else if (first === 'apis') {
    if (rest.length === 0) return { kind: 'groupList' };
    group = rest[0] ?? '';
    if (rest.length === 1) return { kind: 'group', group };
    version = rest[1];
    tail = rest.slice(2);
  } else return { kind: 'unknown' };
  if (version === undefined) return { kind: 'unknown' };
  if (tail.length === 0) return { kind: 'resourceList', group, version };
  let watchPath = false;
  if (tail[0] === 'watch') {
    watchPath = true;
    tail = tail.slice(1);
  }
  // Built field by field: conditional object spreads put the result in V8's slow dictionary mode
  // (about 20 µs per request).
  const namespaced =
    tail[0] === 'namespaces' &&
    tail.length >= 3 &&
    !(group === '' && tail.length === 3 && (tail[2] === 'status' || tail[2] === 'finalize'));
  const at = namespaced ? 2 : 0;
  if (tail.length - at > 3) return { kind: 'unknown' };
  const r: Extract<Route, { kind: 'object' }> = namespaced
    ? { kind: 'object', group, version, watchPath, namespace: tail[1] ?? '', resource: tail[2] ?? '' }
    : { kind: 'object', group, version, watchPath, resource: tail[0] ?? '' };
  const name = tail[at + 1];
  const subresource = tail[at + 2];
  if (name !== undefined) r.name = name;
  if (subresource !== undefined) r.subresource = subresource;
  return r;
}
