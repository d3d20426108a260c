/**
 * metadata.managedFields: decoding, encoding, and attributing non-apply writes (operation Update).
 * Managers are identified as kube does: manager + operation + subresource, plus apiVersion for Update.
 */
import type { KubeObject, ManagedFieldsEntry } from '@kars/kube-core';
import { compareObjects, type FieldOptions } from './fieldset.js';
import { FieldSet } from './paths.js';
import { clone, isObject, setOwn } from './util.js';

export interface Entry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time?: string;
  subresource?: string;
  set: FieldSet;
  /**
   * The wire form this entry was decoded from, with the set it decoded to: while `set` is still
   * that set, encoding reuses the wire form (a copy) instead of rebuilding it from the paths.
   */
  decoded?: { set: FieldSet; fieldsV1: unknown };
}

/** Update managers kept before the oldest are folded into "ancient-changes" (kube's DefaultMaxUpdateManagers). */
const MAX_UPDATE_MANAGERS = 10;

export function identity(manager: string, operation: 'Apply' | 'Update', apiVersion: string, subresource: string | undefined): string {
  return JSON.stringify([manager, operation, operation === 'Update' ? apiVersion : '', subresource ?? '']);
}

export function entryId(e: Entry): string {
  return identity(e.manager, e.operation, e.apiVersion, e.subresource);
}

/**
 * Decode wire entries; undefined when any entry is malformed (kube then falls back to the live object's).
 * `stored`: they come from a stored object, so this module encoded them (canonical form) and
 * encoding may reuse them unchanged; never for managedFields a client sent.
 */
export function decodeEntries(raw: unknown, stored = false): Entry[] | undefined {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) return undefined;
  const out: Entry[] = [];
  for (const e of raw) {
    if (!isObject(e)) return undefined;
    const { manager, operation, apiVersion, time, subresource, fieldsType, fieldsV1 } = e;
    if (operation !== 'Apply' && operation !== 'Update') return undefined;
    if (typeof apiVersion !== 'string' || apiVersion === '' || fieldsType !== 'FieldsV1') return undefined;
    let set: FieldSet;
    try {
      set = FieldSet.fromFieldsV1(fieldsV1);
    } catch {
      return undefined;
    }
    const entry: Entry = { manager: typeof manager === 'string' ? manager : '', operation, apiVersion, set };
    if (stored) entry.decoded = { set, fieldsV1 };
    if (typeof time === 'string') entry.time = time;
    if (typeof subresource === 'string' && subresource !== '') entry.subresource = subresource;
    out.push(entry);
  }
  return out;
}

function timeOf(e: Entry): number {
  const t = e.time === undefined ? NaN : Date.parse(e.time);
  return Number.isNaN(t) ? 0 : t;
}

/** Fold the oldest Update managers into "ancient-changes" until at most MAX_UPDATE_MANAGERS remain. */
function capUpdateManagers(entries: Entry[]): Entry[] {
  const updates = entries.filter((e) => e.operation === 'Update');
  if (updates.length <= MAX_UPDATE_MANAGERS) return entries;
  updates.sort((a, b) => timeOf(a) - timeOf(b) || (a.manager < b.manager ? -1 : 1));
  const fold = new Set(updates.slice(0, updates.length - MAX_UPDATE_MANAGERS + 1));
  let bucket: Entry | undefined;
  for (const e of fold) {
    bucket =
      bucket === undefined
        ? { ...e, manager: 'ancient-changes' }
        : { ...bucket, set: bucket.set.union(e.set), ...(e.time === undefined ? {} : { time: e.time }) };
    delete bucket.subresource;
  }
  return [...entries.filter((e) => !fold.has(e)), ...(bucket ? [bucket] : [])];
}

/** Encode entries for the wire: empty sets dropped, Apply first, then oldest first (kube's order). */
export function encodeEntries(entries: Entry[]): ManagedFieldsEntry[] {
  const kept = capUpdateManagers(entries.filter((e) => e.set.size > 0));
  kept.sort((p, q) => {
    if (p.operation !== q.operation) return p.operation === 'Apply' ? -1 : 1;
    const dt = timeOf(p) - timeOf(q);
    if (dt !== 0) return dt;
    if (p.manager !== q.manager) return p.manager < q.manager ? -1 : 1;
    return (p.subresource ?? '') < (q.subresource ?? '') ? -1 : (p.subresource ?? '') > (q.subresource ?? '') ? 1 : 0;
  });
  return kept.map((e) => {
    const out: ManagedFieldsEntry = {
      manager: e.manager,
      operation: e.operation,
      apiVersion: e.apiVersion,
      fieldsType: 'FieldsV1',
      fieldsV1: (e.decoded !== undefined && e.decoded.set === e.set
        ? clone(e.decoded.fieldsV1)
        : e.set.toFieldsV1()) as ManagedFieldsEntry['fieldsV1'],
    };
    if (e.time !== undefined) out.time = e.time;
    if (e.subresource !== undefined) out.subresource = e.subresource;
    return out;
  });
}

/** Put encoded entries on obj.metadata (removing the field when there are none). */
export function setManagedFields(obj: KubeObject, entries: Entry[]): void {
  const encoded = encodeEntries(entries);
  if (!isObject(obj.metadata)) obj.metadata = {};
  if (encoded.length > 0) obj.metadata.managedFields = encoded;
  else delete obj.metadata.managedFields;
}

/** A copy of obj without metadata.managedFields (which is not copied at all). */
export function withoutManagedFields<T extends Record<string, unknown>>(obj: T): T {
  const meta = obj['metadata'];
  if (!isObject(meta) || !Object.hasOwn(meta, 'managedFields')) return clone(obj);
  const c: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) setOwn(c, k, k === 'metadata' ? metaWithout(meta, true) : clone(obj[k]));
  return c as T;
}

/** metadata without managedFields: deep-copied, or (copy false) a shallow view for reading only. */
function metaWithout(meta: Record<string, unknown>, copy: boolean): Record<string, unknown> {
  const m: Record<string, unknown> = {};
  for (const k of Object.keys(meta)) if (k !== 'managedFields') setOwn(m, k, copy ? clone(meta[k]) : meta[k]);
  return m;
}

/** obj without metadata.managedFields, sharing everything else with obj: only for reading. */
function viewWithoutManagedFields(obj: KubeObject): Record<string, unknown> {
  const meta = obj.metadata as unknown;
  if (!isObject(meta) || !Object.hasOwn(meta, 'managedFields')) return obj;
  return { ...obj, metadata: metaWithout(meta, false) };
}

/** kube treats managedFields: [] and managedFields: [{}] as a request to clear them. */
function isReset(raw: unknown): boolean {
  if (!Array.isArray(raw)) return false;
  if (raw.length === 0) return true;
  const only: unknown = raw[0];
  return raw.length === 1 && isObject(only) && Object.values(only).every((v) => v === '' || v === null || v === undefined);
}

/**
 * Attribute a non-apply write (create, update, patch) to `manager` with operation Update: every field
 * that changed (all fields on create) moves to this manager; removed fields leave every manager.
 * Returns a new object; the inputs are not mutated.
 */
export function trackUpdate(
  oldObj: KubeObject | undefined,
  newObj: KubeObject,
  manager: string,
  apiVersion: string,
  now: string,
  subresource?: string,
  options: FieldOptions = {},
): KubeObject {
  const provided = isObject(newObj.metadata) ? newObj.metadata.managedFields : undefined;
  const liveEntries = (): Entry[] => decodeEntries(oldObj?.metadata.managedFields, true) ?? [];
  let entries: Entry[];
  if (subresource !== undefined && subresource !== '') entries = liveEntries();
  else if (isReset(provided)) entries = [];
  else {
    const fromNew = decodeEntries(provided);
    entries = fromNew !== undefined && fromNew.length > 0 ? fromNew : liveEntries();
  }
  const result = withoutManagedFields(newObj);
  // Like kube's skipNonApplied manager: an existing object without managed fields stays untracked until an apply.
  if (oldObj !== undefined && entries.length === 0) return result;
  // The old object is only compared, never changed or returned: no copy.
  const before = oldObj === undefined ? {} : viewWithoutManagedFields(oldObj);
  const opts: FieldOptions = subresource === 'status' ? { ...options, ignoreStatus: false } : options;
  const cmp = compareObjects(before, result, opts);
  const changed = cmp.modified.union(cmp.added);
  const sub = subresource || undefined;
  let mine: Entry | undefined;
  for (const e of entries) {
    if (cmp.removed.size > 0) e.set = e.set.difference(cmp.removed);
    // identity(manager, 'Update', apiVersion, sub), compared field by field
    if (e.manager === manager && e.operation === 'Update' && e.apiVersion === apiVersion && (e.subresource ?? '') === (sub ?? '')) mine = e;
    else if (changed.size > 0) e.set = e.set.difference(changed);
  }
  if (changed.size > 0) {
    if (mine === undefined) {
      mine = { manager, operation: 'Update', apiVersion, set: new FieldSet() };
      if (subresource) mine.subresource = subresource;
      entries.push(mine);
    }
    mine.set = mine.set.union(changed);
    mine.time = now;
  }
  setManagedFields(result, entries);
  return result;
}
