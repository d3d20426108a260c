import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject } from '@kars/kube-core';

/**
 * Whether a resourceVersion orders as a number: 1–15 decimal digits (within the safe-integer
 * range), what /^\d{1,15}$/ matches, by hand (the reflector asks for every watch event).
 */
function isOrderedRv(rv: string): boolean {
  const n = rv.length;
  if (n === 0 || n > 15) return false;
  for (let i = 0; i < n; i++) {
    const c = rv.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * Order two resourceVersions: -1 when `a` is older, 0 when equal, 1 when newer; `undefined` when
 * either is missing or not a plain decimal integer (kube documents them as opaque, so an order is
 * only assumed for the decimal integers kube's etcd and kars's apiserver both hand out).
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  if (a === undefined || b === undefined) return undefined;
  if (a === b) return 0;
  if (!isOrderedRv(a) || !isOrderedRv(b)) return undefined;
  const d = Number(a) - Number(b);
  return d < 0 ? -1 : d > 0 ? 1 : 0;
}

/** Options of {@link OwnWrites}. */
export interface OwnWritesOptions {
  /**
   * How long a record may hold a key back (default 30 s): after that the cache is acted on as it
   * is, so an event that never comes (say, an apiserver restored to older data) cannot stall a
   * key forever. The default sits far above a watch's usual lag and below kube-controller-manager's
   * 5-minute expectations timeout.
   */
  ttlMs?: number;
  /** Time source; default {@link systemClock}. */
  clock?: Clock;
}

interface Record_ {
  /** resourceVersions a write of ours (or a 409 on one) proved outdated. */
  outdated: string[];
  /** The newest resourceVersion one of our writes produced. */
  newest: string | undefined;
  /** When the record stops holding the key back (clock ms). */
  until: number;
}

/**
 * Read-your-writes for a controller's informer cache, in the manner of kube-controller-manager's
 * "expectations": per key, what the controller's own writes of an object have told it about the
 * server's copy, so a reconcile can tell that its cached copy predates one of those writes.
 *
 * Why: every watch is ordered only within itself. A trigger from another watch (the ConfigMap a
 * reconcile wrote) can arrive seconds before the primary's own watch delivers the finalizer or
 * status that the same reconcile wrote, and a reconcile run then reads the older copy: it repeats
 * writes, and an optimistic-concurrency write made from that copy (a finalizer patch carrying its
 * resourceVersion) fails with a 409 on every retry until the watch catches up.
 *
 * Use: after each write of the primary, {@link wrote} with the resourceVersion the write was made
 * from and the object the server answered; on a 409, {@link conflicted}. At the top of a reconcile,
 * when {@link waitMs} returns a number, the cache is behind: do nothing now and requeue after
 * that long as a backstop. The watch event that brings the write also enqueues the key, so the
 * usual wake-up is the event itself.
 *
 * Guarantees: a key is held back only while its cached copy is (a) one of the resourceVersions a
 * write of ours or a 409 proved outdated, or (b) older, as integers, than the newest version one
 * of our writes produced; never past `ttlMs` after the last record. Any copy newer than that (an
 * edit by someone else included) releases the key at once and clears the record.
 *
 * Memory: one small record per key with a write whose echo has not yet been seen, dropped once
 * seen, expired, or {@link forget}-ed.
 */
export class OwnWrites {
  private readonly records = new Map<string, Record_>();
  private readonly ttlMs: number;
  private readonly clock: Clock;

  constructor(opts: OwnWritesOptions = {}) {
    const ttlMs = opts.ttlMs ?? 30_000;
    if (!(ttlMs >= 0) || !Number.isFinite(ttlMs)) throw new RangeError(`OwnWrites needs a finite ttlMs >= 0, got ${ttlMs}`);
    this.ttlMs = ttlMs;
    this.clock = opts.clock ?? systemClock;
  }

  /**
   * A write of `key` made from the copy at `from` succeeded and the server answered `written`, the
   * object it now holds. Unless the answer is that same version (the write changed nothing), `from`
   * is outdated now and `written` is the newest version known. An answer without a
   * resourceVersion teaches nothing and is ignored.
   */
  wrote(key: string, from: string | undefined, written: KubeObject | undefined): void {
    const rv = written?.metadata?.resourceVersion;
    if (rv === undefined || rv === from) return;
    const r = this.record(key, from);
    if (r.newest === undefined || (compareResourceVersions(rv, r.newest) ?? 1) > 0) r.newest = rv;
  }

  /** A write of `key` made from the copy at `from` failed with a 409: the server holds a newer copy. */
  conflicted(key: string, from: string | undefined): void {
    this.record(key, from);
  }

  /**
   * Whether the cached copy of `key` predates what our writes told us: milliseconds left to wait
   * (at least 1) when it does, `undefined` when the cache may be acted on. Releasing a key clears
   * its record.
   */
  waitMs(key: string, cached: KubeObject): number | undefined {
    const r = this.records.get(key);
    if (!r) return undefined;
    const left = r.until - this.clock.now();
    const rv = cached.metadata.resourceVersion;
    const behind =
      rv !== undefined && (r.outdated.includes(rv) || (r.newest !== undefined && (compareResourceVersions(rv, r.newest) ?? 0) < 0));
    if (behind && left > 0) return Math.max(1, Math.ceil(left));
    this.records.delete(key);
    return undefined;
  }

  /** Drop what is known about `key` (call when the object is gone). */
  forget(key: string): void {
    this.records.delete(key);
  }

  /** Keys with a record (for tests and metrics). */
  get size(): number {
    return this.records.size;
  }

  private record(key: string, from: string | undefined): Record_ {
    let r = this.records.get(key);
    if (!r) {
      r = { outdated: [], newest: undefined, until: 0 };
      this.records.set(key, r);
    }
    if (from !== undefined && !r.outdated.includes(from)) {
      // A reconcile writes an object a few times at most; keep the list short whatever happens.
      if (r.outdated.length >= 8) r.outdated.shift();
      r.outdated.push(from);
    }
    r.until = this.clock.now() + this.ttlMs;
    return r;
  }
}
