import { expired, matchesFields, matchesLabels } from '@kars/kube-core';
import type { FieldRequirement, KubeObject, LabelSelector } from '@kars/kube-core';
import type { ChangeRecord } from '../storage/store.js';

/** What a watch selects: one resource, optionally one namespace, label and field selectors. */
export interface WatchFilter {
  gr: string;
  ns?: string;
  labels?: LabelSelector;
  fields?: FieldRequirement[];
}

/** A change as one watcher sees it: the type may differ from the stored change when selectors apply. */
export interface WatchDelivery {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  rv: number;
  body: string;
}

/** Receives deliveries in resourceVersion order. */
export type WatchSink = (d: WatchDelivery) => void;

function fieldValue(obj: KubeObject, field: string): string | undefined {
  if (field === 'metadata.name') return obj.metadata.name;
  if (field === 'metadata.namespace') return obj.metadata.namespace ?? '';
  let cur: unknown = obj;
  for (const part of field.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur === undefined || cur === null ? undefined : String(cur as string);
}

/** True when the object passes the filter's selectors (namespace and resource are checked by the caller). */
export function selects(filter: WatchFilter, obj: KubeObject): boolean {
  if (filter.labels && filter.labels.length > 0 && !matchesLabels(filter.labels, obj.metadata.labels)) return false;
  if (filter.fields && filter.fields.length > 0 && !matchesFields(filter.fields, (f) => fieldValue(obj, f))) return false;
  return true;
}

function hasSelectors(f: WatchFilter): boolean {
  return (f.labels?.length ?? 0) > 0 || (f.fields?.length ?? 0) > 0;
}

/** Translate one stored change into what a filtered watcher must see (or nothing). */
export function deliveryFor(filter: WatchFilter, c: ChangeRecord): WatchDelivery | undefined {
  if (c.gr !== filter.gr) return undefined;
  if (filter.ns !== undefined && c.ns !== filter.ns) return undefined;
  if (!hasSelectors(filter)) return { type: c.type, rv: c.rv, body: c.body };
  const now = selects(filter, JSON.parse(c.body) as KubeObject);
  const before = c.prev !== null && selects(filter, JSON.parse(c.prev) as KubeObject);
  if (c.type === 'ADDED') return now ? { type: 'ADDED', rv: c.rv, body: c.body } : undefined;
  if (c.type === 'DELETED') return before || now ? { type: 'DELETED', rv: c.rv, body: c.body } : undefined;
  if (now && before) return { type: 'MODIFIED', rv: c.rv, body: c.body };
  if (now) return { type: 'ADDED', rv: c.rv, body: c.body };
  if (before && c.prev !== null) return { type: 'DELETED', rv: c.rv, body: atRevision(c.prev, c.rv) };
  return undefined;
}

/**
 * `body` with its resourceVersion set to `rv`. An object that stops matching a watch's selectors is
 * gone from that watch: kube's cacher sends a DELETED event with the object as it was before the
 * change (the state the watcher saw last), at the change's resourceVersion.
 */
function atRevision(body: string, rv: number): string {
  const obj = JSON.parse(body) as KubeObject;
  obj.metadata.resourceVersion = String(rv);
  return JSON.stringify(obj);
}

interface Watcher {
  filter: WatchFilter;
  sink: WatchSink;
}

/**
 * The watch cache: a bounded in-memory copy of the recent change log, and the live watchers.
 * A watch that starts from resourceVersion R replays every change after R from here, then
 * follows live changes; because publishing is synchronous, nothing can fall between the two.
 *
 * Guarantees: each watcher sees changes in resourceVersion order, none twice, none skipped.
 * A start point older than the retained history is refused with 410 Expired.
 */
export class WatchCache {
  private ring: ChangeRecord[] = [];
  private floorRv: number;
  private readonly watchers = new Set<Watcher>();

  /** @param floorRv changes at or below this revision are not retained (compacted). */
  constructor(initial: ChangeRecord[], floorRv: number) {
    this.ring = initial.filter((c) => c.rv > floorRv);
    this.floorRv = floorRv;
  }

  /** Append committed changes (in order) and deliver them to live watchers. */
  publish(changes: ChangeRecord[]): void {
    for (const c of changes) {
      this.ring.push(c);
      for (const w of this.watchers) {
        const d = deliveryFor(w.filter, c);
        if (d) w.sink(d);
      }
    }
  }

  /** Drop history at or below `rv`, as the store did. */
  compact(rv: number): void {
    if (rv <= this.floorRv) return;
    this.floorRv = rv;
    let i = 0;
    while (i < this.ring.length && (this.ring[i]?.rv ?? 0) <= rv) i++;
    if (i > 0) this.ring = this.ring.slice(i);
  }

  /**
   * Start delivering changes after `fromRv` that pass `filter`. Throws 410 Expired when those
   * changes are no longer retained. Returns the function that stops the watch.
   */
  subscribe(filter: WatchFilter, fromRv: number, sink: WatchSink): () => void {
    if (fromRv < this.floorRv) throw expired(`too old resource version: ${fromRv} (${this.floorRv})`);
    for (const c of this.ring) {
      if (c.rv <= fromRv) continue;
      const d = deliveryFor(filter, c);
      if (d) sink(d);
    }
    const w: Watcher = { filter, sink };
    this.watchers.add(w);
    return () => {
      this.watchers.delete(w);
    };
  }

  /** Number of live watchers (for metrics and tests). */
  size(): number {
    return this.watchers.size;
  }
}
