import { grKey } from './resource.js';
import type { ResourceInfo } from './resource.js';

/**
 * The set of resources served right now: built-ins plus established CRDs.
 * Lookups are by group+version+resource (URLs) or by group+kind (bodies, owner references).
 */
export class Registry {
  private readonly byGr = new Map<string, ResourceInfo>();

  constructor(builtins: ResourceInfo[]) {
    for (const r of builtins) this.byGr.set(grKey(r.group, r.resource), r);
  }

  /** Add or replace a resource (a CRD was created or updated). */
  set(ri: ResourceInfo): void {
    this.byGr.set(grKey(ri.group, ri.resource), ri);
  }

  /** Stop serving a resource (its CRD is gone). */
  remove(group: string, resource: string): void {
    const ri = this.byGr.get(grKey(group, resource));
    if (ri && !ri.builtin) this.byGr.delete(grKey(group, resource));
  }

  get(group: string, resource: string): ResourceInfo | undefined {
    return this.byGr.get(grKey(group, resource));
  }

  /** The resource served at group/version/resource, if that version is served. */
  lookup(group: string, version: string, resource: string): ResourceInfo | undefined {
    const ri = this.byGr.get(grKey(group, resource));
    return ri?.versions.some((v) => v.name === version && v.served) ? ri : undefined;
  }

  byKind(group: string, kind: string): ResourceInfo | undefined {
    for (const ri of this.byGr.values()) if (ri.group === group && ri.kind === kind) return ri;
    return undefined;
  }

  all(): ResourceInfo[] {
    return [...this.byGr.values()];
  }

  /** Groups and the versions they serve, for discovery. Core ("") is included. */
  groups(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const ri of this.byGr.values()) {
      const vs = out.get(ri.group) ?? [];
      for (const v of ri.versions) if (v.served && !vs.includes(v.name)) vs.push(v.name);
      out.set(ri.group, vs);
    }
    return out;
  }
}
