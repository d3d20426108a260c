/**
 * Which fields an object sets (Apply) and which fields changed between two objects (Update).
 * Without schemas, maps are walked key by key; lists are atomic unless FieldOptions says otherwise.
 */
import { FieldSet, SEP, type FieldPath, type FieldsV1 } from './paths.js';
import { deepEqual, isObject } from './util.js';

export interface FieldOptions {
  /** Leave out `status` (a main-resource write to a resource with a status subresource). */
  ignoreStatus?: boolean;
  /** Associative lists: dotted path ("spec.template.spec.containers", "[]" optional) → key fields. */
  listKeys?: Record<string, string[]>;
  /**
   * Defaults of key fields, by the same dotted paths: an item that leaves a key field out is keyed
   * by its default, as structured-merge-diff keys it by the schema's default (a Service port without
   * a protocol is `k:{"port":80,"protocol":"TCP"}`).
   */
  listKeyDefaults?: Record<string, Record<string, unknown>>;
  /** Lists of scalars tracked as sets (v:<value>), by dotted path. metadata.finalizers always is. */
  setLists?: string[];
  /**
   * Typed objects (built-in kinds): dotted paths of the values present in the type's zero value:
   * structs reached from the root through value (non-pointer) struct fields only (`spec`,
   * `spec.template`), and lists such a struct declares without omitempty (`containers`). Such a
   * value is never added as a whole, so an Update owns what is inside but not the value itself (no
   * `"."` entry), as structured-merge-diff compares against the zero object. Without it every object
   * below the root but `metadata` is a map (unstructured custom resources).
   */
  zeroPresent?: ReadonlySet<string>;
  /** Typed objects: dotted paths of atomic values (`+structType=atomic`, `+mapType=atomic`): owned whole, as a leaf. */
  atomic?: ReadonlySet<string>;
}

type ListKind = { kind: 'atomic' } | { kind: 'map'; keys: string[]; defaults?: Record<string, unknown> } | { kind: 'set' };

const TRACKED_META = new Set(['generateName', 'labels', 'annotations', 'finalizers', 'ownerReferences']);

/** kube's ObjectMeta atomic fields: an ownerReference is owned whole (`k:{"uid":…}: {}`). */
const ATOMIC_META = new Set(['metadata.ownerReferences[]']);

function norm(p: string): string {
  return p.replaceAll('[]', '');
}

/** Go's zero values as JSON: null, "", 0, false, and an empty object. */
function isZeroValue(v: unknown): boolean {
  return v === null || v === '' || v === 0 || v === false || (isObject(v) && Object.keys(v).length === 0);
}

/** Whether the value at `dotted` is atomic: owned as one leaf, never walked into. */
export function isAtomic(dotted: string, opts: FieldOptions): boolean {
  return ATOMIC_META.has(dotted) || (opts.atomic?.has(dotted) ?? false);
}

export function listKindOf(dotted: string, opts: FieldOptions): ListKind {
  const p = norm(dotted);
  if (p === 'metadata.ownerReferences') return { kind: 'map', keys: ['uid'] };
  if (p === 'metadata.finalizers') return { kind: 'set' };
  for (const [k, keys] of Object.entries(opts.listKeys ?? {})) {
    if (norm(k) !== p || keys.length === 0) continue;
    const defaults = Object.entries(opts.listKeyDefaults ?? {}).find(([d]) => norm(d) === p)?.[1];
    return defaults ? { kind: 'map', keys, defaults } : { kind: 'map', keys };
  }
  if ((opts.setLists ?? []).some((s) => norm(s) === p)) return { kind: 'set' };
  return { kind: 'atomic' };
}

export function childDotted(dotted: string, key: string): string {
  return dotted === '' ? key : `${dotted}.${key}`;
}

/** The path element naming one list item, or undefined when the item cannot be keyed. */
export function elementOf(item: unknown, kind: ListKind): string | undefined {
  if (kind.kind === 'set') return item !== null && typeof item === 'object' ? undefined : `v:${JSON.stringify(item)}`;
  if (kind.kind !== 'map' || !isObject(item)) return undefined;
  const key: Record<string, unknown> = {};
  for (const k of [...kind.keys].sort()) {
    const v = item[k] ?? kind.defaults?.[k];
    if (v !== undefined && v !== null) key[k] = v;
  }
  return Object.keys(key).length === 0 ? undefined : `k:${JSON.stringify(key)}`;
}

/** Items of a keyed list as [element, item]; undefined when the list must be treated as atomic. */
export function listElements(list: unknown[], kind: ListKind): [string, unknown][] | undefined {
  if (kind.kind === 'atomic') return undefined;
  const out: [string, unknown][] = [];
  const seen = new Set<string>();
  for (const item of list) {
    const el = elementOf(item, kind);
    if (el === undefined || seen.has(el)) return undefined;
    seen.add(el);
    out.push([el, item]);
  }
  return out;
}

/**
 * Two values at one path as keyed lists: each list's items by element, in list order (elements are
 * unique). Undefined unless both are lists and the path's list kind keys both (neither is atomic).
 */
export function keyedLists(
  a: unknown,
  b: unknown,
  dotted: string,
  opts: FieldOptions,
): [Map<string, unknown>, Map<string, unknown>] | undefined {
  if (!Array.isArray(a) || !Array.isArray(b)) return undefined;
  const kind = listKindOf(dotted, opts);
  const ea = listElements(a, kind);
  const eb = listElements(b, kind);
  return ea === undefined || eb === undefined ? undefined : [new Map(ea), new Map(eb)];
}

/** Keys of an object node that field tracking looks at. */
export function trackedKeys(obj: Record<string, unknown>, dotted: string, opts: FieldOptions, root: boolean): string[] {
  const keys = Object.keys(obj);
  if (root) return keys.filter((k) => k !== 'apiVersion' && k !== 'kind' && !(opts.ignoreStatus === true && k === 'status'));
  if (dotted === 'metadata') return keys.filter((k) => TRACKED_META.has(k));
  return keys;
}

function ext(p: FieldPath, el: string): FieldPath {
  return [...p, el];
}

/** The joined key of `ext(p, el)`, given the key of `p` (paths and keys grow together). */
function extKey(key: string, el: string): string {
  return key === '' ? el : key + SEP + el;
}

/** The fields an applied configuration sets (structured-merge-diff ToFieldSet, for typed structs). */
export function appliedFields(obj: Record<string, unknown>, opts: FieldOptions = {}): FieldSet {
  const set = new FieldSet();
  const walk = (v: unknown, path: FieldPath, key: string, dotted: string, root: boolean): void => {
    if (!root && isAtomic(dotted, opts)) return set.insertKeyed(key, path);
    if (Array.isArray(v)) {
      const kind = listKindOf(dotted, opts);
      const els = listElements(v, kind);
      if (els === undefined) return set.insertKeyed(key, path);
      for (const [el, item] of els) {
        const p = ext(path, el);
        const k = extKey(key, el);
        set.insertKeyed(k, p);
        if (isObject(item) && !isAtomic(`${dotted}[]`, opts)) walkMap(item, p, k, `${dotted}[]`, false);
      }
    } else if (isObject(v)) {
      if (Object.keys(v).length === 0) set.insertKeyed(key, path);
      else walkMap(v, path, key, dotted, root);
    } else {
      set.insertKeyed(key, path);
    }
  };
  const walkMap = (v: Record<string, unknown>, path: FieldPath, key: string, dotted: string, root: boolean): void => {
    for (const k of trackedKeys(v, dotted, opts, root)) {
      const el = `f:${k}`;
      walk(v[k], ext(path, el), extKey(key, el), root ? k : childDotted(dotted, k), false);
    }
  };
  walkMap(obj, [], '', '', true);
  return set;
}

/** Compute the field set an object sets, in FieldsV1 form. */
export function fieldSetOf(obj: Record<string, unknown>, opts: FieldOptions = {}): FieldsV1 {
  return appliedFields(obj, opts).toFieldsV1();
}

export interface Comparison {
  added: FieldSet;
  modified: FieldSet;
  removed: FieldSet;
}

/** A value and everything under it (maps, list items and leaves), as when it appears or disappears. */
function addSubtree(v: unknown, path: FieldPath, key: string, dotted: string, opts: FieldOptions, set: FieldSet): void {
  if (isAtomic(dotted, opts)) return set.insertKeyed(key, path);
  const zeroStruct =
    (path.length === 1 && path[0] === 'f:metadata') || ((isObject(v) || Array.isArray(v)) && (opts.zeroPresent?.has(dotted) ?? false));
  if (!zeroStruct) set.insertKeyed(key, path);
  if (Array.isArray(v)) {
    const els = listElements(v, listKindOf(dotted, opts));
    for (const [el, item] of els ?? []) addSubtree(item, ext(path, el), extKey(key, el), `${dotted}[]`, opts, set);
  } else if (isObject(v)) {
    for (const k of trackedKeys(v, dotted, opts, false)) {
      const el = `f:${k}`;
      addSubtree(v[k], ext(path, el), extKey(key, el), childDotted(dotted, k), opts, set);
    }
  }
}

/** What changed between two objects (structured-merge-diff Compare). */
export function compareObjects(a: Record<string, unknown>, b: Record<string, unknown>, opts: FieldOptions = {}): Comparison {
  const cmp: Comparison = { added: new FieldSet(), modified: new FieldSet(), removed: new FieldSet() };
  const values = (x: unknown, y: unknown, path: FieldPath, key: string, dotted: string): void => {
    // One value on both sides (a merge shares the subtrees it did not touch): nothing changed below.
    if (x === y) return;
    if (isAtomic(dotted, opts) && x !== undefined && y !== undefined) {
      if (!deepEqual(x, y)) cmp.modified.insertKeyed(key, path);
      return;
    }
    // A value the zero object holds (a field without omitempty) that is still zero did not change.
    if (x === undefined && isZeroValue(y) && (opts.zeroPresent?.has(dotted) ?? false)) return;
    if (x === undefined) return addSubtree(y, path, key, dotted, opts, cmp.added);
    if (y === undefined) return addSubtree(x, path, key, dotted, opts, cmp.removed);
    if (isObject(x) && isObject(y)) return maps(x, y, path, key, dotted, false);
    const lists = keyedLists(x, y, dotted, opts);
    if (lists !== undefined) {
      const [mx, my] = lists;
      for (const el of new Set([...mx.keys(), ...my.keys()])) values(mx.get(el), my.get(el), ext(path, el), extKey(key, el), `${dotted}[]`);
      return;
    }
    if (deepEqual(x, y)) return;
    const sameShape = Array.isArray(x) === Array.isArray(y) && isObject(x) === isObject(y);
    if (!sameShape) addSubtree(x, path, key, dotted, opts, cmp.removed);
    cmp.modified.insertKeyed(key, path);
  };
  const maps = (
    x: Record<string, unknown>,
    y: Record<string, unknown>,
    path: FieldPath,
    key: string,
    dotted: string,
    root: boolean,
  ): void => {
    const visit = (k: string): void => {
      const el = `f:${k}`;
      values(
        Object.hasOwn(x, k) ? x[k] : undefined,
        Object.hasOwn(y, k) ? y[k] : undefined,
        ext(path, el),
        extKey(key, el),
        root ? k : childDotted(dotted, k),
      );
    };
    // Keys of x, then those only y has (which keys are tracked depends on the key alone).
    for (const k of trackedKeys(x, dotted, opts, root)) visit(k);
    for (const k of trackedKeys(y, dotted, opts, root)) if (!Object.hasOwn(x, k)) visit(k);
  };
  maps(a, b, [], '', '', true);
  return cmp;
}

/** Every field of an object, as an Update that created it would own. */
export function allFields(obj: Record<string, unknown>, opts: FieldOptions = {}): FieldSet {
  const cmp = compareObjects({}, obj, opts);
  return cmp.added.union(cmp.modified);
}
