import type { KubeObject } from '@kars/kube-core';

/** The cache key of an object: "namespace/name", or "name" for cluster-scoped objects. */
export function keyOf(obj: { metadata: { namespace?: string; name?: string } }): string {
  const ns = obj.metadata.namespace;
  return ns ? `${ns}/${obj.metadata.name ?? ''}` : (obj.metadata.name ?? '');
}

/** Split a cache key back into namespace and name. */
export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/** Computes the values an object is indexed under (e.g. the sandbox a policy references). */
export type IndexFn<T> = (obj: T) => string[];

/**
 * Read side of a reflector's cache. Caveat: the cache may be stale by up to the watch freshness
 * bound; reconcilers read current state from here and never act on event payloads.
 */
export interface StoreReader<T extends KubeObject = KubeObject> {
  get(key: string): T | undefined;
  list(): T[];
  /** Objects whose index function returned `value`. */
  byIndex(index: string, value: string): T[];
  size(): number;
  /** True once the first complete list has been applied. */
  isReady(): boolean;
  /** Resolves once the first complete list has been applied (or rejects when `signal` aborts). */
  ready(signal?: AbortSignal): Promise<void>;
}

/** A change the reflector applied to its store. `old` is the previous cached copy, if any. */
export type Change<T extends KubeObject = KubeObject> = { type: 'apply'; object: T; old: T | undefined } | { type: 'delete'; object: T };

/** Something a controller can subscribe to: a store plus the changes applied to it, in order. */
export interface ChangeSource<T extends KubeObject = KubeObject> {
  readonly store: StoreReader<T>;
  /** Call `fn` for every change applied from now on; returns the unsubscribe function. */
  subscribe(fn: (c: Change<T>) => void): () => void;
}

/**
 * The write side of the cache, owned by one reflector. A relist is buffered and swapped in at
 * once ({@link Store.replace}), so readers never see a half-listed cache.
 *
 * Guarantees: indexes always agree with the contents; `replace` reports exactly the objects that
 * vanished or changed, and invents none.
 */
export class Store<T extends KubeObject = KubeObject> implements StoreReader<T> {
  private items = new Map<string, T>();
  private readonly indexFns: Map<string, IndexFn<T>>;
  private indexes = new Map<string, Map<string, Set<string>>>();
  private readyFlag = false;
  private readonly readyWaiters: Array<() => void> = [];

  constructor(indexers: Record<string, IndexFn<T>> = {}) {
    this.indexFns = new Map(Object.entries(indexers));
    for (const name of this.indexFns.keys()) this.indexes.set(name, new Map());
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  list(): T[] {
    return [...this.items.values()];
  }

  size(): number {
    return this.items.size;
  }

  byIndex(index: string, value: string): T[] {
    const idx = this.indexes.get(index);
    if (!idx) throw new Error(`no index named "${index}"`);
    const keys = idx.get(value);
    if (!keys) return [];
    const out: T[] = [];
    for (const k of keys) {
      const o = this.items.get(k);
      if (o) out.push(o);
    }
    return out;
  }

  isReady(): boolean {
    return this.readyFlag;
  }

  ready(signal?: AbortSignal): Promise<void> {
    if (this.readyFlag) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.readyWaiters.push(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** Insert or replace one object; returns the previous copy. */
  apply(obj: T): T | undefined {
    const key = keyOf(obj);
    return this.applyAt(key, obj, this.items.get(key));
  }

  /**
   * {@link apply} for a caller that has just looked the object up: `key` must be `keyOf(obj)` and
   * `old` what `get(key)` returned (the reflector's hot path, which reads the cached copy anyway).
   */
  applyAt(key: string, obj: T, old: T | undefined): T | undefined {
    if (old && this.indexFns.size > 0) this.unindex(key, old);
    this.items.set(key, obj);
    if (this.indexFns.size > 0) this.index(key, obj);
    return old;
  }

  /** Remove one object; returns the removed copy. */
  delete(obj: T): T | undefined {
    const key = keyOf(obj);
    const old = this.items.get(key);
    if (old) {
      if (this.indexFns.size > 0) this.unindex(key, old);
      this.items.delete(key);
    }
    return old;
  }

  /**
   * Swap in a complete listing at once and mark the store ready. Returns the changes relative to
   * the previous contents: applies for new or changed objects (by resourceVersion), deletes for
   * objects that are no longer listed.
   */
  replace(objects: T[]): Change<T>[] {
    const next = new Map<string, T>();
    for (const o of objects) next.set(keyOf(o), o);
    const changes: Change<T>[] = [];
    for (const [k, o] of next) {
      const old = this.items.get(k);
      if (!old || old.metadata.resourceVersion !== o.metadata.resourceVersion) changes.push({ type: 'apply', object: o, old });
    }
    for (const [k, old] of this.items) if (!next.has(k)) changes.push({ type: 'delete', object: old });
    this.items = next;
    this.indexes = new Map([...this.indexFns.keys()].map((n) => [n, new Map()]));
    for (const [k, o] of next) this.index(k, o);
    if (!this.readyFlag) {
      this.readyFlag = true;
      for (const w of this.readyWaiters.splice(0)) w();
    }
    return changes;
  }

  private index(key: string, obj: T): void {
    for (const [idx, v] of this.indexValues(obj)) {
      let set = idx.get(v);
      if (!set) idx.set(v, (set = new Set()));
      set.add(key);
    }
  }

  private unindex(key: string, obj: T): void {
    for (const [idx, v] of this.indexValues(obj)) {
      const set = idx.get(v);
      set?.delete(key);
      if (set && set.size === 0) idx.delete(v);
    }
  }

  /** Each index paired with each value its function files `obj` under (none when the function throws). */
  private *indexValues(obj: T): Generator<[Map<string, Set<string>>, string]> {
    for (const [name, fn] of this.indexFns) {
      const idx = this.indexes.get(name);
      if (!idx) continue;
      for (const v of safeIndex(fn, obj)) yield [idx, v];
    }
  }
}

function safeIndex<T>(fn: IndexFn<T>, obj: T): string[] {
  try {
    return fn(obj);
  } catch {
    return [];
  }
}
