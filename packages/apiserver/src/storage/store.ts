import { ApiError } from '@kars/kube-core';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** A stored object: its resourceVersion and its JSON body, exactly as written. */
export interface StoredObject {
  rv: number;
  body: string;
}

/** One committed change, as the watch cache and the event log see it. */
export interface ChangeRecord {
  rv: number;
  /** "group/resource", e.g. "/configmaps" or "kars.azure.com/inferencepolicies". */
  gr: string;
  ns: string;
  name: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  body: string;
  /** The body before this change (MODIFIED and DELETED), so filtered watches can see transitions. */
  prev: string | null;
}

/** A change about to be committed; `render` produces the body once the revision is known. */
export type StagedChange = Omit<ChangeRecord, 'rv' | 'body'> & {
  render: (rv: number) => string;
  /** uids from metadata.ownerReferences, indexed so garbage collection finds dependents quickly. */
  owners?: string[];
};

/** Row of a paginated list scan. */
export interface ListRow {
  ns: string;
  name: string;
  body: string;
}

/**
 * Largest object kars apiserver stores, in bytes of its JSON encoding: 1.5 MiB, etcd's default
 * `--max-request-bytes`, which bounds every object kube-apiserver stores.
 */
export const MAX_OBJECT_BYTES = 1.5 * 1024 * 1024;

/** 413, as kube-apiserver answers when etcd refuses a write for its size. */
export function objectTooLarge(bytes: number, what: string): ApiError {
  return new ApiError(
    413,
    'RequestEntityTooLarge',
    `Request entity too large: ${what} is ${bytes} bytes once encoded; objects are limited to ${MAX_OBJECT_BYTES} bytes`,
  );
}

/** Options of a {@link Store}. */
export interface StoreOptions {
  /** How many past changes are kept for watch resumption; older ones are compacted. */
  historyWindow: number;
  /**
   * Most writes sharing one transaction (group commit). 1 commits every write on its own, as
   * before group commit; the default is {@link DEFAULT_MAX_BATCH}.
   */
  maxBatch?: number;
  /** TEST ONLY: runs just before each COMMIT; throwing makes the commit fail (to test rollback). */
  beforeCommit?: () => void;
}

/** Default most writes per group commit. */
export const DEFAULT_MAX_BATCH = 256;

/** The store refused or lost a write because its commit failed; nothing of the batch was kept. */
export class CommitError extends Error {
  readonly code = 'CommitFailed';
  constructor(cause: unknown) {
    super(`storage commit failed; the write was not stored: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'CommitError';
  }
}

interface Statements {
  get: Statement<[string, string, string], StoredObject>;
  listAll: Statement<[string, string, string, number], ListRow>;
  listNs: Statement<[string, string, string, string, number], ListRow>;
  count: Statement<[string], { n: number }>;
  countAfter: Statement<[string, string, string], { n: number }>;
  countAfterNs: Statement<[string, string, string, string], { n: number }>;
  countNs: Statement<[string, string], { n: number }>;
  dependents: Statement<[string], { gr: string; ns: string; name: string }>;
}

function readStatements(db: Db): Statements {
  return {
    get: db.prepare('SELECT rv, body FROM objects WHERE gr = ? AND ns = ? AND name = ?'),
    listAll: db.prepare('SELECT ns, name, body FROM objects WHERE gr = ? AND (ns, name) > (?, ?) ORDER BY ns, name LIMIT ?'),
    listNs: db.prepare('SELECT ns, name, body FROM objects WHERE gr = ? AND ns = ? AND (ns, name) > (?, ?) ORDER BY ns, name LIMIT ?'),
    count: db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ?'),
    countAfter: db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND (ns, name) > (?, ?)'),
    countAfterNs: db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND ns = ? AND (ns, name) > (?, ?)'),
    countNs: db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND ns = ?'),
    dependents: db.prepare('SELECT gr, ns, name FROM owners WHERE owner = ? ORDER BY gr, ns, name'),
  };
}

/** One open group-commit transaction and the writes waiting for it. */
interface Batch {
  /** The last revision committed before this batch; restored if the batch fails. */
  startRv: number;
  changes: ChangeRecord[];
  settle: Array<(err: CommitError | undefined) => void>;
}

/**
 * Durable storage in SQLite (WAL, synchronous=FULL) with group commit: objects, one global
 * revision counter, and a bounded log of recent changes from which watches resume across restarts.
 *
 * Group commit (ADR 0002): {@link Store.write} runs a write's logic at once, synchronously, inside
 * the open batch transaction (each write in its own savepoint, so a failing write leaves the batch
 * intact), and the batch commits with one fsync at the next turn of the event loop (setImmediate)
 * or as soon as it holds `maxBatch` writes. Then `onCommit` sees the batch's changes in revision
 * order, and only then do the writes' promises settle.
 *
 * Guarantees:
 * - A write whose promise resolves is on disk (its batch's COMMIT, with synchronous=FULL, returned).
 * - Writes are serialised: each one's logic sees every earlier write, committed or in the open
 *   batch, so optimistic concurrency is exact (for a resourceVersion exactly one update wins).
 * - Revisions are one global sequence, committed in order; they only grow, across restarts too.
 * - Reads outside a write ({@link Store.get}, lists, counts, {@link Store.currentRv}) see only
 *   committed state: they go through a second, read-only connection. Nothing a client can observe
 *   depends on a write that might still fail.
 * - When a batch fails to commit, every write in it rejects with {@link CommitError}, nothing of it
 *   is stored, `onCommit` is not called, and its revisions are handed out again.
 *
 * Caveats: one process owns a data dir at a time (SQLite locking enforces it). A rejected write
 * also settles only when its batch commits, because its verdict (e.g. 409) may rest on an earlier
 * write of the same batch.
 */
export class Store {
  private readonly db: Db;
  private readonly reader: Db;
  /** The last revision handed out (committed or in the open batch). */
  private rv: number;
  /** The last committed revision. */
  private committedRv: number;
  private compactedRv: number;
  private readonly historyWindow: number;
  private readonly maxBatch: number;
  private readonly beforeCommit: (() => void) | undefined;
  private writesSincePrune = 0;
  private batch: Batch | undefined;
  private flushScheduled: NodeJS.Immediate | undefined;
  /** True while a write's logic runs: reads then see the open batch. */
  private inWrite = false;
  private readonly w: Statements;
  private readonly r: Statements;
  private readonly st: {
    put: Statement<[string, string, string, number, string]>;
    del: Statement<[string, string, string]>;
    event: Statement<[number, string, string, string, string, string, string | null]>;
    setMeta: Statement<[string, string]>;
    pruneEvents: Statement<[number]>;
    eventsAfter: Statement<[number], ChangeRecord>;
    addOwner: Statement<[string, string, string, string]>;
    clearOwners: Statement<[string, string, string]>;
    begin: Statement<[]>;
    commit: Statement<[]>;
    rollback: Statement<[]>;
  };
  /** Runs a function in a savepoint of the open batch (better-sqlite3 nests transactions as savepoints). */
  private readonly inSavepoint: <T>(fn: () => T) => T;
  /** Called once per committed batch, with its changes in revision order, before any write settles. */
  onCommit: (changes: ChangeRecord[]) => void = () => undefined;

  constructor(dataDir: string, opts: StoreOptions) {
    mkdirSync(dataDir, { recursive: true });
    this.historyWindow = opts.historyWindow;
    this.maxBatch = Math.max(1, opts.maxBatch ?? DEFAULT_MAX_BATCH);
    this.beforeCommit = opts.beforeCommit;
    const file = join(dataDir, 'state.db');
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS objects (
        gr TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
        rv INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (gr, ns, name)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS events (
        rv INTEGER PRIMARY KEY, gr TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
        type TEXT NOT NULL, body TEXT NOT NULL, prev TEXT);
      CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS owners (
        owner TEXT NOT NULL, gr TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
        PRIMARY KEY (owner, gr, ns, name)) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS owners_by_dependent ON owners (gr, ns, name);
    `);
    this.reader = new Database(file, { readonly: true });
    this.reader.pragma('busy_timeout = 5000');
    const meta = (k: string): string | undefined =>
      (this.db.prepare('SELECT v FROM meta WHERE k = ?').get(k) as { v: string } | undefined)?.v;
    this.rv = Number(meta('rv') ?? '0');
    this.committedRv = this.rv;
    this.compactedRv = Number(meta('compactedRv') ?? '0');
    this.w = readStatements(this.db);
    this.r = readStatements(this.reader);
    this.st = {
      put: this.db.prepare('INSERT OR REPLACE INTO objects (gr, ns, name, rv, body) VALUES (?, ?, ?, ?, ?)'),
      del: this.db.prepare('DELETE FROM objects WHERE gr = ? AND ns = ? AND name = ?'),
      event: this.db.prepare('INSERT INTO events (rv, gr, ns, name, type, body, prev) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      setMeta: this.db.prepare('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)'),
      pruneEvents: this.db.prepare('DELETE FROM events WHERE rv <= ?'),
      eventsAfter: this.db.prepare('SELECT rv, gr, ns, name, type, body, prev FROM events WHERE rv > ? ORDER BY rv'),
      addOwner: this.db.prepare('INSERT OR IGNORE INTO owners (owner, gr, ns, name) VALUES (?, ?, ?, ?)'),
      clearOwners: this.db.prepare('DELETE FROM owners WHERE gr = ? AND ns = ? AND name = ?'),
      begin: this.db.prepare('BEGIN IMMEDIATE'),
      commit: this.db.prepare('COMMIT'),
      rollback: this.db.prepare('ROLLBACK'),
    };
    const sp = this.db.transaction((fn: () => unknown) => fn());
    this.inSavepoint = <T>(fn: () => T): T => sp(fn) as T;
  }

  /** Reads inside a write see the open batch; all other reads see committed state only. */
  private get q(): Statements {
    return this.inWrite ? this.w : this.r;
  }

  /** The newest committed resourceVersion (etcd's revision). */
  currentRv(): number {
    return this.committedRv;
  }

  /** The oldest resourceVersion a watch may resume after; older ones are 410 Expired. */
  oldestResumableRv(): number {
    return this.compactedRv;
  }

  get(gr: string, ns: string, name: string): StoredObject | undefined {
    return this.q.get.get(gr, ns, name);
  }

  /** Objects of one resource ordered by (namespace, name), strictly after the given key. */
  list(gr: string, ns: string | undefined, after: { ns: string; name: string }, limit: number): ListRow[] {
    const q = this.q;
    return ns === undefined ? q.listAll.all(gr, after.ns, after.name, limit) : q.listNs.all(gr, ns, after.ns, after.name, limit);
  }

  /** How many objects of a resource sort after the given key (for remainingItemCount). */
  countAfter(gr: string, ns: string | undefined, after: { ns: string; name: string }): number {
    const q = this.q;
    return (ns === undefined ? q.countAfter.get(gr, after.ns, after.name) : q.countAfterNs.get(gr, ns, after.ns, after.name))?.n ?? 0;
  }

  count(gr: string, ns: string | undefined): number {
    const q = this.q;
    return (ns === undefined ? q.count.get(gr) : q.countNs.get(gr, ns))?.n ?? 0;
  }

  /** Objects whose ownerReferences name this uid. */
  dependentsOf(ownerUid: string): Array<{ gr: string; ns: string; name: string }> {
    return this.q.dependents.all(ownerUid);
  }

  /** The change log kept on disk, for warming the watch cache after a restart. */
  changesAfter(rv: number): ChangeRecord[] {
    return this.st.eventsAfter.all(Math.max(rv, this.compactedRv));
  }

  /**
   * Run one write. `fn` runs now, synchronously, inside the open batch and its own savepoint; it
   * calls `stage` for each change, and each change takes the next revision. If `fn` throws, none
   * of its changes are kept and the promise rejects with that error. The promise settles once the
   * batch has committed (resolves: the changes are durable) or failed ({@link CommitError}).
   */
  write<T>(fn: (stage: (c: StagedChange) => ChangeRecord) => T): Promise<T> {
    if (!this.db.open) return Promise.reject(new CommitError(new Error('the store is closed')));
    const batch = this.openBatch();
    const startRv = this.rv;
    const changes: ChangeRecord[] = [];
    let outcome: { ok: true; result: T } | { ok: false; err: unknown };
    this.inWrite = true;
    try {
      const result = this.inSavepoint(() => fn((c) => this.stage(c, changes)));
      outcome = { ok: true, result };
    } catch (err) {
      this.rv = startRv;
      outcome = { ok: false, err };
    } finally {
      this.inWrite = false;
    }
    if (outcome.ok) batch.changes.push(...changes);
    const settled = new Promise<T>((resolve, reject) => {
      batch.settle.push((commitErr) => {
        if (commitErr) reject(commitErr);
        else if (outcome.ok) resolve(outcome.result);
        else reject(outcome.err);
      });
    });
    if (batch.settle.length >= this.maxBatch) this.flush();
    else this.flushScheduled ??= setImmediate(() => this.flush());
    return settled;
  }

  private stage(c: StagedChange, changes: ChangeRecord[]): ChangeRecord {
    const rv = ++this.rv;
    const body = c.render(rv);
    const bytes = Buffer.byteLength(body);
    if (bytes > MAX_OBJECT_BYTES) throw objectTooLarge(bytes, `${c.gr.slice(c.gr.indexOf('/') + 1)} "${c.name}"`);
    this.st.clearOwners.run(c.gr, c.ns, c.name);
    if (c.type === 'DELETED') this.st.del.run(c.gr, c.ns, c.name);
    else {
      this.st.put.run(c.gr, c.ns, c.name, rv, body);
      for (const owner of c.owners ?? []) this.st.addOwner.run(owner, c.gr, c.ns, c.name);
    }
    this.st.event.run(rv, c.gr, c.ns, c.name, c.type, body, c.prev);
    const rec: ChangeRecord = { rv, gr: c.gr, ns: c.ns, name: c.name, type: c.type, body, prev: c.prev };
    changes.push(rec);
    return rec;
  }

  private openBatch(): Batch {
    if (this.batch) return this.batch;
    this.st.begin.run();
    this.batch = { startRv: this.rv, changes: [], settle: [] };
    return this.batch;
  }

  /**
   * Commit the open batch now (one fsync), publish it through `onCommit`, then settle its writes.
   * A no-op when no batch is open.
   */
  flush(): void {
    if (this.flushScheduled) clearImmediate(this.flushScheduled);
    this.flushScheduled = undefined;
    const b = this.batch;
    if (!b) return;
    this.batch = undefined;
    let floor = this.compactedRv;
    let failure: CommitError | undefined;
    try {
      if (this.rv !== b.startRv) this.st.setMeta.run('rv', String(this.rv));
      this.writesSincePrune += b.changes.length;
      if (this.writesSincePrune >= Math.max(100, Math.floor(this.historyWindow / 10))) {
        this.writesSincePrune = 0;
        const target = this.rv - this.historyWindow;
        if (target > floor) {
          this.st.pruneEvents.run(target);
          this.st.setMeta.run('compactedRv', String(target));
          floor = target;
        }
      }
      this.beforeCommit?.();
      this.st.commit.run();
    } catch (err) {
      failure = new CommitError(err);
      try {
        if (this.db.inTransaction) this.st.rollback.run();
      } catch {
        // The connection is unusable; the next write fails and says so.
      }
      this.rv = b.startRv;
    }
    try {
      if (!failure) {
        this.committedRv = this.rv;
        this.compactedRv = floor;
        this.onCommit(b.changes);
      }
    } finally {
      for (const s of b.settle) s(failure);
    }
  }

  /** Forget history up to and including `rv`: watches that resume from there get 410. */
  compact(rv: number): void {
    this.flush();
    const target = Math.min(rv, this.committedRv);
    if (target <= this.compactedRv) return;
    this.db.transaction(() => {
      this.st.pruneEvents.run(target);
      this.st.setMeta.run('compactedRv', String(target));
    })();
    this.compactedRv = target;
  }

  /** Commit what is pending, then close both connections. */
  close(): void {
    if (!this.db.open) return;
    this.flush();
    this.reader.close();
    this.db.close();
  }
}
