/**
 * Field paths and field sets in structured-merge-diff terms. A path element is kept in its
 * FieldsV1 spelling: "f:<name>", "k:<json key object>", "v:<json value>" or "i:<index>".
 */
import { PatchError } from './errors.js';
import { isObject } from './util.js';

/** Field sets in the FieldsV1 wire format, e.g. {"f:data":{"f:key":{}}}. */
export type FieldsV1 = Record<string, unknown>;
export type FieldPath = readonly string[];

/** Joins a path's elements into the key a {@link FieldSet} stores it under. */
export const SEP = '\u0000';

/**
 * A set of field paths. A path is a member on its own; prefixes are not implied.
 * Members are kept by their joined key, so set operations compare and copy keys without joining
 * paths again (field tracking runs on every write of the apiserver).
 */
export class FieldSet {
  private members = new Map<string, FieldPath>();

  private static wrap(members: Map<string, FieldPath>): FieldSet {
    const s = new FieldSet();
    s.members = members;
    return s;
  }

  static of(paths: Iterable<FieldPath>): FieldSet {
    const s = new FieldSet();
    for (const p of paths) s.insert(p);
    return s;
  }

  insert(p: FieldPath): void {
    if (p.length > 0) this.members.set(p.join(SEP), p);
  }

  /** Insert `p` whose joined key (`p.join(SEP)`) the caller already has. */
  insertKeyed(key: string, p: FieldPath): void {
    if (p.length > 0) this.members.set(key, p);
  }

  has(p: FieldPath): boolean {
    return this.members.has(p.join(SEP));
  }

  get size(): number {
    return this.members.size;
  }

  paths(): FieldPath[] {
    return [...this.members.values()];
  }

  union(o: FieldSet): FieldSet {
    const m = new Map(this.members);
    for (const [k, p] of o.members) m.set(k, p);
    return FieldSet.wrap(m);
  }

  /** This set without o's members; `this` itself when they share none (sets are not changed after they are built). */
  difference(o: FieldSet): FieldSet {
    let shared = false;
    if (o.members.size > 0)
      for (const k of this.members.keys())
        if (o.members.has(k)) {
          shared = true;
          break;
        }
    if (!shared) return this;
    const m = new Map<string, FieldPath>();
    for (const [k, p] of this.members) if (!o.members.has(k)) m.set(k, p);
    return FieldSet.wrap(m);
  }

  intersection(o: FieldSet): FieldSet {
    const m = new Map<string, FieldPath>();
    for (const [k, p] of this.members) if (o.members.has(k)) m.set(k, p);
    return FieldSet.wrap(m);
  }

  equals(o: FieldSet): boolean {
    if (this.size !== o.size) return false;
    for (const k of this.members.keys()) if (!o.members.has(k)) return false;
    return true;
  }

  /** Every strict prefix of every member, as joined keys (to ask "is anything owned below p?"). */
  prefixes(): Set<string> {
    const out = new Set<string>();
    for (const p of this.members.values()) {
      let key = p[0] ?? '';
      for (let i = 1; i < p.length; i++) {
        out.add(key);
        key += SEP + (p[i] ?? '');
      }
    }
    return out;
  }

  toFieldsV1(): FieldsV1 {
    const root: Record<string, Record<string, unknown>> = {};
    for (const p of this.members.values()) {
      let node: Record<string, unknown> = root;
      for (const el of p) {
        const existing = node[el];
        const next: Record<string, unknown> = isObject(existing) ? existing : {};
        node[el] = next;
        node = next;
      }
      node['.'] = {};
    }
    return finish(root);
  }

  /** Parse the FieldsV1 wire form; throws PatchError when it is not a FieldsV1 tree. */
  static fromFieldsV1(f: unknown): FieldSet {
    const s = new FieldSet();
    const walk = (node: unknown, path: string[], key: string): void => {
      if (!isObject(node)) throw new PatchError('invalid fieldsV1: every node must be an object', 'KARS_PATCH_INVALID');
      const keys = Object.keys(node);
      if (path.length > 0 && (keys.length === 0 || Object.hasOwn(node, '.'))) s.members.set(key, path);
      for (const k of keys) {
        if (k === '.') continue;
        if (!isElement(k)) throw new PatchError(`invalid fieldsV1 key ${JSON.stringify(k)}`, 'KARS_PATCH_INVALID');
        walk(node[k], [...path, k], path.length === 0 ? k : key + SEP + k);
      }
    };
    walk(f ?? {}, [], '');
    return s;
  }
}

/** A FieldsV1 path element: `f:`, `k:`, `v:` or `i:` and its body. */
function isElement(k: string): boolean {
  if (k.length < 2 || k.charCodeAt(1) !== 58 /* : */) return false;
  const c = k.charCodeAt(0);
  return c === 102 /* f */ || c === 107 /* k */ || c === 118 /* v */ || c === 105; /* i */
}

const ORDER = 'fkvi';

function compareElements(a: string, b: string): number {
  if (a === '.') return b === '.' ? 0 : -1;
  if (b === '.') return 1;
  const d = ORDER.indexOf(a[0] ?? '') - ORDER.indexOf(b[0] ?? '');
  if (d !== 0) return d;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sort keys the way kube serializes them and drop "." on nodes that have no children. */
function finish(node: Record<string, unknown>): FieldsV1 {
  const out: FieldsV1 = {};
  for (const k of Object.keys(node).sort(compareElements)) {
    const v = node[k];
    if (k === '.') {
      if (Object.keys(node).length > 1) out[k] = {};
      continue;
    }
    out[k] = isObject(v) ? finish(v) : {};
  }
  return out;
}

/** The kube text form of a path, as in conflict messages: .spec.containers[name="x"].image, .metadata.finalizers[="f"]. */
export function pathString(p: FieldPath): string {
  return p
    .map((el) => {
      const body = el.slice(2);
      switch (el[0]) {
        case 'f':
          return `.${body}`;
        case 'k': {
          const key: unknown = JSON.parse(body);
          const parts = isObject(key) ? Object.entries(key).map(([k, v]) => `${k}=${JSON.stringify(v)}`) : [];
          return `[${parts.join(',')}]`;
        }
        case 'v':
          return `[=${body}]`;
        default:
          return `[${body}]`;
      }
    })
    .join('');
}
