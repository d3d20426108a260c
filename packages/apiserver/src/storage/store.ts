import { ApiError } from '@kars/kube-core';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import { closeSync, fdatasync, fdatasyncSync, fstatSync, mkdirSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

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
  /**
   * TEST ONLY: replaces the asynchronous fdatasync of the write-ahead log (group commit), e.g. to
   * hold a batch in its sync or make the sync fail. Called with the WAL's file descriptor.
   */
  syncWal?: (fd: number, done: (err: Error | null) => void) => void;
  /** TEST ONLY: the WAL size above which a sync's end truncates the WAL (default 32 MiB). */
  walResetBytes?: number;
  /** TEST ONLY: called each time a background checkpoint is asked for. */
  onCheckpoint?: () => void;
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

/** One group-commit transaction (open, or committed and syncing) and the writes waiting for it. */
interface Batch {
  /** The last revision committed before this batch; restored if the batch fails. */
  startRv: number;
  changes: ChangeRecord[];
  settle: Array<(err: CommitError | undefined) => void>;
  /** Set at COMMIT: the batch's last revision and the compaction floor it wrote. */
  endRv?: number;
  floor?: number;
}

/**
 * With group commit, the reader is pinned on the previous commit while a batch syncs, so SQLite's
 * automatic checkpoints always stay one batch behind and never let the WAL start over. Once the
 * WAL is larger than this, the next sync's end commits the waiting batch in place and truncates
 * the WAL with a full checkpoint.
 */
const WAL_RESET_BYTES = 32 * 1024 * 1024;

/**
 * With group commit, a background checkpoint starts when a sync ends with a WAL that grew by this
 * much since the last one started. (While the reader is pinned the WAL never starts over, so it
 * only grows until it is truncated; a threshold on its size alone would checkpoint after every
 * batch once it passed 4 MiB.)
 */
const CHECKPOINT_BYTES = 4 * 1024 * 1024;

/**
 * The checkpointer thread: its own connection runs `wal_checkpoint(PASSIVE)` on request, copying
 * WAL pages into the database (and syncing both) off the event loop. PASSIVE never blocks the
 * writer or readers. CommonJS, because `eval` workers are.
 */
const CHECKPOINTER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.sqlite);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = FULL');
parentPort.on('message', () => {
  let ok = true;
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { ok = false; }
  parentPort.postMessage(ok);
});
`;

/**
 * Durable storage in SQLite (WAL) with group commit: objects, one global
 * revision counter, and a bounded log of recent changes from which watches resume across restarts.
 *
 * Group commit (ADR 0002): {@link Store.write} runs a write's logic at once, synchronously, inside
 * the open batch transaction (each write in its own savepoint, so a failing write leaves the batch
 * intact), and the batch commits with one fsync at the next turn of the event loop (setImmediate)
 * or as soon as it holds `maxBatch` writes, and its WAL is synced on the thread pool while the next
 * batch gathers (one sync in flight at a time). Then `onCommit` sees the batch's changes in
 * revision order, and only then do the writes' promises settle.
 *
 * Guarantees:
 * - A write whose promise resolves is on disk: its batch's COMMIT with synchronous=FULL returned
 *   (maxBatch 1), or, with group commit, the fdatasync of the WAL after its COMMIT returned.
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
  /** The batch committed to the WAL whose fdatasync is in flight (group commit); at most one. */
  private syncing: Batch | undefined;
  /** Group commit: COMMIT writes the WAL without fsync and the WAL is synced off the event loop. */
  private readonly pipelined: boolean;
  private readonly walPath: string;
  private walFd: number | undefined;
  /** True while the reader holds a read transaction on the last durable commit (during a sync). */
  private readerPinned = false;
  /** Set once a WAL sync failed: nothing more is written, every write rejects. */
  private broken: CommitError | undefined;
  private readonly syncWal: (fd: number, done: (err: Error | null) => void) => void;
  private readonly walResetBytes: number;
  private checkpointer: Worker | undefined;
  private checkpointing = false;
  /** WAL size when the last background checkpoint was asked for (0 after a truncation). */
  private checkpointMark = 0;
  private readonly onCheckpoint: (() => void) | undefined;
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
    pin: Statement<[], unknown>;
    readerBegin: Statement<[]>;
    readerEnd: Statement<[]>;
  };
  /** Runs a function in a savepoint of the open batch (better-sqlite3 nests transactions as savepoints). */
  private readonly inSavepoint: <T>(fn: () => T) => T;
  /** Called once per committed batch, with its changes in revision order, before any write settles. */
  onCommit: (changes: ChangeRecord[]) => void = () => undefined;
  /**
   * Called once if syncing the write-ahead log fails. The store then refuses every write: whether
   * the batch reached the disk is unknown, so the process should exit and recover from the log on
   * restart (as PostgreSQL does on an fsync failure). The writes of that batch reject with
   * {@link CommitError}, i.e. 500: an unknown outcome.
   */
  onFatal: (err: CommitError) => void = () => undefined;

  constructor(dataDir: string, opts: StoreOptions) {
    mkdirSync(dataDir, { recursive: true });
    this.historyWindow = opts.historyWindow;
    this.maxBatch = Math.max(1, opts.maxBatch ?? DEFAULT_MAX_BATCH);
    this.beforeCommit = opts.beforeCommit;
    const file = join(dataDir, 'state.db');
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    // maxBatch 1 keeps the behaviour before group commit: SQLite syncs the WAL inside every COMMIT.
    // Group commit syncs the WAL itself, off the event loop, before anything of a batch is visible.
    this.pipelined = this.maxBatch > 1;
    this.db.pragma(this.pipelined ? 'synchronous = NORMAL' : 'synchronous = FULL');
    // Group commit checkpoints on a worker thread (below), not inside COMMIT on the event loop.
    if (this.pipelined) this.db.pragma('wal_autocheckpoint = 0');
    this.walPath = `${file}-wal`;
    this.syncWal = opts.syncWal ?? ((fd, done) => fdatasync(fd, done));
    this.walResetBytes = opts.walResetBytes ?? WAL_RESET_BYTES;
    this.onCheckpoint = opts.onCheckpoint;
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
      pin: this.reader.prepare('SELECT k FROM meta LIMIT 1'),
      readerBegin: this.reader.prepare('BEGIN'),
      readerEnd: this.reader.prepare('COMMIT'),
    };
    if (this.pipelined) {
      this.walFd = openSync(this.walPath, 'r');
      this.startCheckpointer(file);
    }
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
    if (this.broken) return Promise.reject(this.broken);
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
    if (batch.settle.length >= this.maxBatch) {
      // A full batch commits now; if the previous one is still syncing, wait for that sync in place.
      this.drainSync();
      this.flush();
    } else if (!this.syncing) this.flushScheduled ??= setImmediate(() => this.flush());
    // (While a batch syncs, the open batch waits: that sync's end commits it.)
    return settled;
  }

  private stage(c: StagedChange, changes: ChangeRecord[]): ChangeRecord {
    const rv = ++this.rv;
    const body = c.render(rv);
    const bytes = Buffer.byteLength(body);
    if (bytes > MAX_OBJECT_BYTES) throw objectTooLarge(bytes, `${c.gr.slice(c.gr.indexOf('/') + 1)} "${c.name}"`);
    // Owner rows exist for a key only while its stored object has ownerReferences (its `prev`).
    if (c.prev !== null && c.prev.includes('"ownerReferences"')) this.st.clearOwners.run(c.gr, c.ns, c.name);
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
   * Commit the open batch. With maxBatch 1 (`synchronous=FULL`) COMMIT itself syncs, and the batch
   * is published and settled at once. With group commit, COMMIT writes the WAL without syncing; the
   * WAL is then synced off the event loop (fdatasync on the thread pool) while new writes gather in
   * the next batch, and the batch is published and settled only when the sync has returned. Until
   * then the reader stays pinned on the previous commit, so no read shows a write that is not yet
   * durable. A no-op when no batch is open or a sync is already in flight.
   */
  flush(): void {
    this.commitBatch(false);
  }

  /** Commit the open batch; `inline` syncs on the event loop and settles at once (no pinning). */
  private commitBatch(inline: boolean): void {
    if (this.flushScheduled) clearImmediate(this.flushScheduled);
    this.flushScheduled = undefined;
    if (this.syncing) return;
    const b = this.batch;
    if (!b) return;
    this.batch = undefined;
    let floor = this.compactedRv;
    let failure: CommitError | undefined;
    const async = this.pipelined && !inline;
    if (async) this.pinReader();
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
    b.endRv = this.rv;
    b.floor = floor;
    if (failure || !this.pipelined) {
      this.unpinReader();
      this.complete(b, failure);
      return;
    }
    if (inline) {
      try {
        fdatasyncSync(this.currentWalFd());
      } catch (err) {
        this.fail(b, new CommitError(err));
        return;
      }
      this.complete(b, undefined);
      return;
    }
    this.syncing = b;
    this.syncWal(this.currentWalFd(), (err) => {
      if (this.syncing !== b) return; // drainSync() finished it already
      this.syncing = undefined;
      if (err) {
        // The reader stays on the last durable commit: the failed batch is never shown.
        this.fail(b, new CommitError(err));
        return;
      }
      this.unpinReader();
      this.complete(b, undefined);
      const wal = this.walBytes();
      if (wal < this.checkpointMark) this.checkpointMark = 0; // the WAL was truncated
      if (wal > this.walResetBytes) {
        this.commitBatch(true);
        this.truncateWal();
      } else if (wal > this.checkpointMark + CHECKPOINT_BYTES && this.checkpointInBackground()) this.checkpointMark = wal;
      // The writes that arrived during the sync form the next batch: commit it at the end of this
      // turn of the event loop, so requests read in this same turn (other connections) join it
      // rather than waiting for the next sync. Batches grow, and with them the writes per COMMIT.
      if (this.batch) this.flushScheduled ??= setImmediate(() => this.flush());
    });
  }

  private walBytes(): number {
    try {
      return fstatSync(this.currentWalFd()).size;
    } catch {
      return 0;
    }
  }

  private startCheckpointer(file: string): void {
    try {
      const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
      const w = new Worker(CHECKPOINTER_SOURCE, { eval: true, workerData: { file, sqlite } });
      w.on('message', () => {
        this.checkpointing = false;
      });
      // Without the thread, checkpoints happen only in truncateWal(), on the event loop.
      w.on('error', () => {
        this.checkpointing = false;
        this.checkpointer = undefined;
      });
      w.unref(); // after the listeners, which would ref it again
      this.checkpointer = w;
    } catch {
      this.checkpointer = undefined;
    }
  }

  /** Ask the checkpointer thread for a checkpoint; false when there is none or one is running. */
  private checkpointInBackground(): boolean {
    if (!this.checkpointer || this.checkpointing) return false;
    this.checkpointing = true;
    this.checkpointer.postMessage('checkpoint');
    this.onCheckpoint?.();
    return true;
  }

  /** Checkpoint everything and truncate the WAL (nothing is open or pinned when this runs). */
  private truncateWal(): void {
    if (this.broken || !this.db.open) return;
    try {
      this.db.pragma('wal_checkpoint(TRUNCATE)');
      this.checkpointMark = 0;
    } catch {
      // A busy checkpoint is retried at the next sync's end.
    }
  }

  /** Publish a durable batch (or reject all of it) and settle its writes. */
  private complete(b: Batch, failure: CommitError | undefined): void {
    try {
      if (!failure) {
        this.committedRv = b.endRv ?? this.rv;
        this.compactedRv = Math.max(this.compactedRv, b.floor ?? 0);
        this.onCommit(b.changes);
      }
    } finally {
      for (const s of b.settle) s(failure);
    }
  }

  /**
   * The WAL sync failed: the batch may or may not be on disk. Reject it and everything after it,
   * refuse all further writes, and tell the owner (who should exit and recover from the log).
   */
  private fail(b: Batch, err: CommitError): void {
    this.broken = err;
    for (const s of b.settle) s(err);
    const open = this.batch;
    this.batch = undefined;
    if (open) {
      try {
        if (this.db.inTransaction) this.st.rollback.run();
      } catch {
        // already failing
      }
      for (const s of open.settle) s(err);
    }
    this.onFatal(err);
  }

  /** Hold the reader on the last durable commit while the next one syncs. */
  private pinReader(): void {
    if (this.readerPinned) return;
    this.st.readerBegin.run();
    this.st.pin.get(); // a read starts the snapshot now, not at the next query
    this.readerPinned = true;
  }

  private unpinReader(): void {
    if (!this.readerPinned) return;
    this.readerPinned = false;
    this.st.readerEnd.run();
  }

  /**
   * The descriptor of the current WAL file. SQLite keeps the WAL while a connection is open, but
   * if the file were ever unlinked or replaced, syncing the old descriptor would sync the wrong
   * file: its link count is then 0, and the path is opened again. (One fstat per batch; comparing
   * inodes with a stat of the path cost a path lookup per batch.)
   */
  private currentWalFd(): number {
    if (this.walFd !== undefined) {
      try {
        if (fstatSync(this.walFd).nlink > 0) return this.walFd;
      } catch {
        // fall through and reopen
      }
      closeSync(this.walFd);
    }
    this.walFd = openSync(this.walPath, 'r');
    return this.walFd;
  }

  /** Finish an in-flight WAL sync synchronously (for compaction and close). */
  private drainSync(): void {
    const b = this.syncing;
    if (!b) return;
    this.syncing = undefined;
    let err: CommitError | undefined;
    try {
      fdatasyncSync(this.currentWalFd());
    } catch (e) {
      err = new CommitError(e);
    }
    if (err) {
      this.fail(b, err);
      return;
    }
    this.unpinReader();
    this.complete(b, undefined);
  }

  /** Forget history up to and including `rv`: watches that resume from there get 410. */
  compact(rv: number): void {
    this.drainSync();
    this.commitBatch(true);
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
    this.drainSync();
    this.commitBatch(true);
    this.unpinReader();
    this.reader.close();
    this.db.close();
    void this.checkpointer?.terminate();
    this.checkpointer = undefined;
    if (this.walFd !== undefined) closeSync(this.walFd);
    this.walFd = undefined;
  }
}
