import { createHash } from 'node:crypto';
import type { Registry } from '../registry/registry.js';
import type { ResourceInfo } from '../registry/resource.js';
import { storageVersion } from '../registry/resource.js';

/** Kubernetes version priority: v1 > v1beta1 > v1alpha1 > other, higher numbers first. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string): [number, number, number, string] => {
    const m = v.match(/^v(\d+)(?:(alpha|beta)(\d+))?$/);
    if (!m) return [0, 0, 0, v];
    const stage = m[2] === undefined ? 3 : m[2] === 'beta' ? 2 : 1;
    return [stage, Number(m[1]), Number(m[3] ?? 0), v];
  };
  const [sa, ma, na, ra] = parse(a);
  const [sb, mb, nb, rb] = parse(b);
  if (sa === 0 && sb === 0) return ra.localeCompare(rb);
  if (sa === 0) return 1;
  if (sb === 0) return -1;
  if (sa === 3 && sb === 3) return mb - ma;
  if (sa === 3) return -1;
  if (sb === 3) return 1;
  if (ma !== mb) return mb - ma;
  if (sa !== sb) return sb - sa;
  return nb - na;
}

const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
/** A custom resource's verbs, in the order apiextensions' discovery controller writes them. */
const CUSTOM_VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];

/** kube's storage version hash of group/version/kind: the first 8 bytes of its SHA-256, in base64. */
export function storageVersionHash(group: string, version: string, kind: string): string {
  return createHash('sha256').update(`${group}/${version}/${kind}`).digest().subarray(0, 8).toString('base64');
}

function resourceEntries(ri: ResourceInfo): Record<string, unknown>[] {
  const main: Record<string, unknown> = {
    name: ri.resource,
    singularName: ri.singular,
    namespaced: ri.namespaced,
    kind: ri.kind,
    verbs: ri.verbs ?? (ri.builtin ? ALL_VERBS : CUSTOM_VERBS),
  };
  if (!ri.builtin) main['storageVersionHash'] = storageVersionHash(ri.group, storageVersion(ri), ri.kind);
  if (ri.shortNames.length > 0) main['shortNames'] = ri.shortNames;
  if (ri.categories.length > 0) main['categories'] = ri.categories;
  const out = [main];
  if (ri.hasStatus)
    out.push({
      name: `${ri.resource}/status`,
      singularName: '',
      namespaced: ri.namespaced,
      kind: ri.kind,
      verbs: ['get', 'patch', 'update'],
    });
  for (const s of ri.subresources ?? [])
    out.push({
      name: `${ri.resource}/${s.name}`,
      singularName: '',
      namespaced: ri.namespaced,
      group: s.group,
      version: s.version,
      kind: s.kind,
      verbs: s.verbs,
    });
  return out;
}

export function apiVersions(serverAddress: string): Record<string, unknown> {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
}

function groupEntry(name: string, versions: string[]): Record<string, unknown> {
  const sorted = [...versions].sort(compareVersions);
  const vs = sorted.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: vs, preferredVersion: vs[0] };
}

export function groupList(reg: Registry): Record<string, unknown> {
  const groups = [...reg.groups().entries()]
    .filter(([g]) => g !== '')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([g, vs]) => groupEntry(g, vs));
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

export function group(reg: Registry, name: string): Record<string, unknown> | undefined {
  const vs = reg.groups().get(name);
  if (!vs || name === '') return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupEntry(name, vs) };
}

/**
 * The APIResourceList of group/version, undefined where nothing is served there. Built-in resources
 * come sorted by name; custom resources in the order their CRDs were first served (the order of the
 * registry), as kube's discovery controller lists its CRD informer's cache, which holds them in the
 * order it learnt of them.
 */
export function resourceList(reg: Registry, groupName: string, version: string): Record<string, unknown> | undefined {
  const rs = reg.all().filter((ri) => ri.group === groupName && ri.versions.some((v) => v.name === version && v.served));
  if (rs.length === 0) return undefined;
  const builtins = rs.filter((ri) => ri.builtin).sort((a, b) => a.resource.localeCompare(b.resource));
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: groupName === '' ? version : `${groupName}/${version}`,
    resources: [...builtins, ...rs.filter((ri) => !ri.builtin)].flatMap(resourceEntries),
  };
}
