/**
 * Field paths and field sets in structured-merge-diff terms. A path element is kept in its
 * FieldsV1 spelling: "f:<name>", "k:<json key object>", "v:<json value>" or "i:<index>".
 */
import { PatchError } from './errors.js';
import { isObject } from './util.js';

/** Field sets in the FieldsV1 wire format, e.g. {"f:data":{"f:key":{}}}. */
export type FieldsV1 = Record<string, unknown>;
export type FieldPath = readonly string[];

const SEP = '\u0000';

/** A set of field paths. A path is a member on its own; prefixes are not implied. */
export class FieldSet {
  private readonly members = new Map<string, FieldPath>();

  static of(paths: Iterable<FieldPath>): FieldSet {
    const s = new FieldSet();
    for (const p of paths) s.insert(p);
    return s;
  }

  insert(p: FieldPath): void {
    if (p.length > 0) this.members.set(p.join(SEP), p);
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
    const s = FieldSet.of(this.paths());
    for (const p of o.paths()) s.insert(p);
    return s;
  }

  difference(o: FieldSet): FieldSet {
    return FieldSet.of(this.paths().filter((p) => !o.has(p)));
  }

  intersection(o: FieldSet): FieldSet {
    return FieldSet.of(this.paths().filter((p) => o.has(p)));
  }

  equals(o: FieldSet): boolean {
    return this.size === o.size && this.paths().every((p) => o.has(p));
  }

  /** Every strict prefix of every member, as joined keys (to ask "is anything owned below p?"). */
  prefixes(): Set<string> {
    const out = new Set<string>();
    for (const p of this.members.values()) for (let i = 1; i < p.length; i++) out.add(p.slice(0, i).join(SEP));
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
    const walk = (node: unknown, path: string[]): void => {
      if (!isObject(node)) throw new PatchError('invalid fieldsV1: every node must be an object', 'KARS_PATCH_INVALID');
      const keys = Object.keys(node);
      if (path.length > 0 && (keys.length === 0 || keys.includes('.'))) s.insert(path);
      for (const k of keys) {
        if (k === '.') continue;
        if (!/^[fkvi]:/.test(k)) throw new PatchError(`invalid fieldsV1 key ${JSON.stringify(k)}`, 'KARS_PATCH_INVALID');
        walk(node[k], [...path, k]);
      }
    };
    walk(f ?? {}, []);
    return s;
  }
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
