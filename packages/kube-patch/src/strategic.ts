/**
 * Strategic merge patch for built-in kinds. Lists whose path has a merge key merge item by item;
 * a merge key of "" marks a list of scalars merged as a set (metadata.finalizers); other lists are replaced.
 * Directives: $patch (replace|delete|merge) on maps and list items, $retainKeys,
 * $deleteFromPrimitiveList/<field>; $setElementOrder/<field> is accepted and ignored.
 */
import { PatchError } from './errors.js';
import { clone, deepEqual, isObject, setOwn } from './util.js';

/** Per JSON path of a list field ("spec.template.spec.containers", "[]" optional), its merge key. */
export interface StrategicInfo {
  mergeKeys: Record<string, string>;
}

type Keys = Map<string, string>;

/** Apply a strategic merge patch. Returns a new value; the inputs are never mutated. */
export function applyStrategicMergePatch(target: unknown, patch: unknown, info: StrategicInfo): unknown {
  if (!isObject(patch)) throw new PatchError('strategic merge patch must be a JSON object', 'KARS_PATCH_INVALID', { httpStatus: 400 });
  const keys: Keys = new Map(Object.entries(info.mergeKeys).map(([p, k]) => [normalize(p), k]));
  const base = isObject(target) ? clone(target) : undefined;
  return mergeMap(base, patch, '', keys) ?? {};
}

function normalize(path: string): string {
  return path.replaceAll('[]', '');
}

function bad(msg: string): PatchError {
  return new PatchError(msg, 'KARS_PATCH_INVALID', { httpStatus: 400 });
}

function child(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** Merge patch into orig (owned, may be mutated). Returns undefined when the map is deleted. */
function mergeMap(
  orig: Record<string, unknown> | undefined,
  patch: Record<string, unknown>,
  path: string,
  keys: Keys,
): Record<string, unknown> | undefined {
  const directive = patch['$patch'];
  if (directive !== undefined) {
    if (directive === 'delete') return undefined;
    if (directive === 'replace') {
      const rest = Object.fromEntries(Object.entries(patch).filter(([k]) => k !== '$patch'));
      return mergeMap(undefined, rest, path, keys);
    }
    if (directive !== 'merge') throw bad(`unknown patch type ${JSON.stringify(directive)} in map at "${path}"`);
  }
  const result: Record<string, unknown> = orig ?? {};
  const retain = patch['$retainKeys'];
  if (retain !== undefined && !(Array.isArray(retain) && retain.every((k) => typeof k === 'string'))) {
    throw bad(`$retainKeys at "${path}" must be a list of strings`);
  }
  const deletes: [string, unknown[]][] = [];
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k === '$retainKeys') continue;
    if (k.startsWith('$setElementOrder/')) {
      if (!Array.isArray(v)) throw bad(`${k} must be a list`);
      continue;
    }
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      if (!Array.isArray(v)) throw bad(`${k} must be a list`);
      deletes.push([k.slice('$deleteFromPrimitiveList/'.length), v]);
      continue;
    }
    if (v === null) {
      delete result[k];
      continue;
    }
    const cur = Object.hasOwn(result, k) ? result[k] : undefined;
    const p = child(path, k);
    let next: unknown;
    if (isObject(v)) next = mergeMap(isObject(cur) ? cur : undefined, v, p, keys);
    else if (Array.isArray(v)) next = mergeList(Array.isArray(cur) ? cur : undefined, v, p, keys);
    else next = v;
    if (next === undefined) delete result[k];
    else setOwn(result, k, next);
  }
  for (const [field, values] of deletes) {
    const cur = result[field];
    if (Array.isArray(cur))
      setOwn(
        result,
        field,
        cur.filter((x) => !values.some((d) => deepEqual(d, x))),
      );
  }
  if (Array.isArray(retain)) {
    for (const k of Object.keys(result)) if (!retain.includes(k)) delete result[k];
  }
  return result;
}

function isDirectiveItem(item: unknown): boolean {
  return isObject(item) && item['$patch'] !== undefined;
}

function mergeList(orig: unknown[] | undefined, patch: unknown[], path: string, keys: Keys): unknown[] {
  const key = keys.get(normalize(path));
  if (patch.some((item) => isObject(item) && item['$patch'] === 'replace')) {
    return patch.filter((item) => !isDirectiveItem(item)).map((item) => cleanItem(item, path, keys));
  }
  if (key === undefined) return patch.map((item) => cleanItem(item, path, keys));
  if (key === '') {
    const result = orig ? [...orig] : [];
    for (const item of patch) if (!result.some((x) => deepEqual(x, item))) result.push(clone(item));
    return result;
  }
  const result = orig ? [...orig] : [];
  for (const item of patch) {
    if (!isObject(item)) throw bad(`list at "${path}" has merge key "${key}" but an item is not an object`);
    const kv = item[key];
    if (kv === undefined) throw bad(`map in list at "${path}" does not contain declared merge key "${key}"`);
    const directive = item['$patch'];
    const matches = (o: unknown): boolean => isObject(o) && deepEqual(o[key], kv);
    if (directive === 'delete') {
      for (let i = result.length - 1; i >= 0; i--) if (matches(result[i])) result.splice(i, 1);
      continue;
    }
    const idx = result.findIndex(matches);
    const cur = idx >= 0 ? result[idx] : undefined;
    const merged = mergeMap(isObject(cur) ? cur : undefined, item, `${path}[]`, keys);
    if (merged === undefined) {
      if (idx >= 0) result.splice(idx, 1);
    } else if (idx >= 0) {
      result[idx] = merged;
    } else {
      result.push(merged);
    }
  }
  return result;
}

/** A list item copied from a replacing patch: maps lose directives and null fields. */
function cleanItem(item: unknown, path: string, keys: Keys): unknown {
  return isObject(item) ? (mergeMap(undefined, item, `${path}[]`, keys) ?? {}) : clone(item);
}
