/**
 * Server-side apply, after structured-merge-diff's Updater.Apply: merge the applied configuration
 * into the live object, prune what this manager applied before and no longer applies (unless someone
 * else owns it), refuse changes to fields other managers own unless forced, and record ownership.
 */
import type { KubeObject } from '@kars/kube-core';
import { PatchError } from './errors.js';
import {
  allFields,
  appliedFields,
  childDotted,
  compareObjects,
  isAtomic,
  keyedLists,
  listElements,
  listKindOf,
  type FieldOptions,
} from './fieldset.js';
import { entryId, identity, decodeEntries, setManagedFields, withoutManagedFields, type Entry } from './managed.js';
import { FieldSet, pathString, type FieldPath } from './paths.js';
import { clone, deepEqual, isObject, setOwn } from './util.js';

export interface ApplyRequest {
  live: KubeObject | undefined;
  applied: Record<string, unknown>;
  manager: string;
  force: boolean;
  apiVersion: string;
  now: string;
  subresource?: string;
  options?: FieldOptions;
}
export interface ApplyConflict {
  manager: string;
  field: string;
  /** The conflicting manager's operation and (for an Update) API version: kube names an updater `"m" using v`. */
  operation?: 'Apply' | 'Update';
  apiVersion?: string;
}
export type ApplyResult = { ok: true; object: KubeObject } | { ok: false; conflicts: ApplyConflict[] };

const bad = (msg: string): PatchError => new PatchError(msg, 'KARS_PATCH_INVALID', { httpStatus: 400 });

function validate(applied: unknown): asserts applied is Record<string, unknown> {
  if (!isObject(applied)) throw bad('apply configuration must be an object');
  if (typeof applied['apiVersion'] !== 'string' || applied['apiVersion'] === '')
    throw bad("apply configuration: Object 'apiVersion' is missing");
  if (typeof applied['kind'] !== 'string' || applied['kind'] === '') throw bad("apply configuration: Object 'Kind' is missing");
  const meta = applied['metadata'];
  if (meta !== undefined && meta !== null && !isObject(meta)) throw bad('apply configuration: metadata must be an object');
  if (isObject(meta) && meta['managedFields'] !== undefined && meta['managedFields'] !== null)
    throw bad('metadata.managedFields must be nil');
}

/** Merge an applied value into a live one; undefined means "remove the field". */
function mergeValue(live: unknown, cfg: unknown, dotted: string, opts: FieldOptions): unknown {
  if (cfg === null) return undefined;
  // An atomic value (a typed `+structType=atomic`, an ownerReference) is replaced whole, never merged.
  if (isAtomic(dotted, opts)) return clone(cfg);
  if (isObject(cfg)) {
    const out: Record<string, unknown> = isObject(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(cfg)) {
      const merged = mergeValue(Object.hasOwn(out, k) ? out[k] : undefined, v, childDotted(dotted, k), opts);
      if (merged === undefined) delete out[k];
      else setOwn(out, k, merged);
    }
    return out;
  }
  const lists = keyedLists(live, cfg, dotted, opts);
  if (lists !== undefined) {
    const [liveBy, cfgBy] = lists;
    const item = (k: string): unknown => {
      const m = mergeValue(liveBy.get(k), cfgBy.get(k), `${dotted}[]`, opts);
      return m === undefined ? liveBy.get(k) : m;
    };
    // The applied order wins when it covers every live item; otherwise live order, new items appended.
    const liveKeys = [...liveBy.keys()];
    const cfgKeys = [...cfgBy.keys()];
    const order = liveKeys.every((k) => cfgBy.has(k)) ? cfgKeys : [...liveKeys, ...cfgKeys.filter((k) => !liveBy.has(k))];
    return order.map((k) => (cfgBy.has(k) ? item(k) : liveBy.get(k)));
  }
  return Array.isArray(cfg) ? cfg.map((x) => (isObject(x) ? mergeValue(undefined, x, `${dotted}[]`, opts) : clone(x))) : cfg;
}

/** Remove one field path (map key, keyed list item or set value) from obj, in place. */
function removePath(obj: Record<string, unknown>, path: FieldPath, opts: FieldOptions): void {
  let cur: unknown = obj;
  let dotted = '';
  for (let i = 0; i < path.length; i++) {
    const el = path[i] ?? '';
    const last = i === path.length - 1;
    if (el.startsWith('f:')) {
      if (!isObject(cur)) return;
      const k = el.slice(2);
      if (last) {
        delete cur[k];
        return;
      }
      cur = Object.hasOwn(cur, k) ? cur[k] : undefined;
      dotted = childDotted(dotted, k);
    } else {
      if (!Array.isArray(cur)) return;
      const els = listElements(cur, listKindOf(dotted, opts)) ?? [];
      const idx = els.findIndex(([e]) => e === el);
      if (idx < 0) return;
      if (last) {
        cur.splice(idx, 1);
        return;
      }
      cur = cur[idx];
      dotted = `${dotted}[]`;
    }
  }
}

/** Server-side apply. Throws PatchError for an invalid apply configuration. Never modifies `req.live` or `req.applied`. */
export function serverSideApply(req: ApplyRequest): ApplyResult {
  validate(req.applied);
  const statusOnly = req.subresource === 'status';
  const opts: FieldOptions = { ...req.options, ...(statusOnly ? { ignoreStatus: false } : {}) };
  let cfg = withoutManagedFields(req.applied);
  if (statusOnly) {
    cfg = { apiVersion: cfg['apiVersion'], kind: cfg['kind'], ...(cfg['status'] === undefined ? {} : { status: cfg['status'] }) };
  } else if (opts.ignoreStatus === true) {
    delete cfg['status'];
  }
  const appliedSet = appliedFields(cfg, opts);
  const sub = req.subresource === '' ? undefined : req.subresource;
  const id = identity(req.manager, 'Apply', req.apiVersion, sub);
  const mine: Entry = { manager: req.manager, operation: 'Apply', apiVersion: req.apiVersion, time: req.now, set: appliedSet };
  if (sub !== undefined) mine.subresource = sub;

  if (req.live === undefined) {
    const created = mergeValue(undefined, cfg, '', opts) as KubeObject;
    if (!isObject(created.metadata)) created.metadata = {};
    setManagedFields(created, [mine]);
    return { ok: true, object: created };
  }

  const live = withoutManagedFields(req.live);
  let entries = decodeEntries(req.live.metadata.managedFields, true) ?? [];
  if (entries.length === 0) {
    // kube: fields of an object nobody tracks yet belong to "before-first-apply" (operation Update).
    entries = [{ manager: 'before-first-apply', operation: 'Update', apiVersion: req.apiVersion, set: allFields(live, opts) }];
  }
  const previous = entries.find((e) => entryId(e) === id);
  const others = entries.filter((e) => entryId(e) !== id);

  // Merge, then prune what this manager applied last time, applies no more, and nobody else owns.
  const merged = mergeValue(live, cfg, '', opts) as KubeObject;
  if (previous !== undefined) {
    const owned = others.reduce((s, e) => s.union(e.set), appliedSet);
    const ownedBelow = owned.prefixes();
    for (const p of previous.set.difference(owned).paths()) {
      if (!ownedBelow.has(p.join('\u0000'))) removePath(merged, p, opts);
    }
  }

  const cmp = compareObjects(live, merged, opts);
  // A field the applier sets to null and thereby removes counts as changed, as in structured-merge-diff.
  const changed = cmp.modified.union(cmp.added).union(appliedSet.intersection(cmp.removed));
  const conflicts: ApplyConflict[] = [];
  const taken = new Map<Entry, FieldSet>();
  for (const e of others) {
    const c = e.set.intersection(changed);
    if (c.size === 0) continue;
    taken.set(e, c);
    for (const p of c.paths())
      conflicts.push({ manager: e.manager, field: pathString(p), operation: e.operation, apiVersion: e.apiVersion });
  }
  if (conflicts.length > 0 && !req.force) return { ok: false, conflicts };

  for (const e of others) e.set = e.set.difference(cmp.removed).difference(taken.get(e) ?? new FieldSet());
  // kube stamps the applier's entry only when the object changed (managedFieldsUpdater.Apply): an apply
  // that changes nothing keeps the entry's previous time, and a new entry then has none.
  if (deepEqual(live, merged)) {
    if (previous?.time === undefined) delete mine.time;
    else mine.time = previous.time;
  }
  setManagedFields(merged, [...others, mine]);
  return { ok: true, object: merged };
}
