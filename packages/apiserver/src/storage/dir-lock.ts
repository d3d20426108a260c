/**
 * One process per data directory (ADR 0024). The lock is an SQLite write lock on a small database
 * `<dir>/kars.lock`: the holder opens it, records its PID, and then keeps a write transaction open
 * (`BEGIN IMMEDIATE`, a RESERVED lock, an fcntl lock on the file) for as long as it runs. Another
 * process's `BEGIN IMMEDIATE` fails at once with SQLITE_BUSY; it can still read the committed holder
 * row, so its refusal names the PID. The kernel drops fcntl locks when a process dies, kill -9
 * included, so a stale lock cannot exist and no PID heuristics are needed; the PID is only for the
 * message. The file is never deleted (deleting a lock file another process has open splits the lock).
 */
import Database from 'better-sqlite3';
import type { Database as Db } from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** File name of the lock database inside a data directory. */
export const DIR_LOCK_FILE = 'kars.lock';

/** Who holds a data directory, as the holder recorded it. */
export interface DirLockHolder {
  pid: number;
  /** What holds it (`kars apiserver`, `kars up`). */
  what: string;
  /** When it took the lock (ISO time). */
  since: string;
}

/** What a lock is for, so a refusal can say who holds the directory and how to pick another. */
export interface DirLockOptions {
  /** The program taking the lock, e.g. `kars apiserver`. */
  what: string;
  /** The flag that picks another directory, e.g. `--data-dir`. */
  flag: string;
}

/** Thrown when another live process holds the directory. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: DirLockHolder | undefined,
    readonly what: string,
    readonly flag: string,
  ) {
    const by = holder ? `${holder.what} (PID ${holder.pid}, since ${holder.since})` : 'another process (its PID was not recorded yet)';
    super(
      `data directory ${dir} is in use by ${by}; ${what} does not share a data directory: stop that process, or pass ${flag} DIR to use another directory`,
    );
    this.name = 'DataDirLockedError';
  }
}

const sleep = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function isBusy(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

/**
 * An exclusive hold on a data directory for the life of this process (or until {@link release}).
 * Acquire it before reading or writing anything else in the directory.
 */
export class DataDirLock {
  private constructor(
    /** The directory held (absolute). */
    readonly dir: string,
    private db: Db | undefined,
  ) {}

  /**
   * Take the directory, creating it if needed. Throws {@link DataDirLockedError} if another live
   * process (or another lock in this process) holds it.
   */
  static acquire(dir: string, opts: DirLockOptions): DataDirLock {
    const abs = resolve(dir);
    mkdirSync(abs, { recursive: true });
    const db = new Database(join(abs, DIR_LOCK_FILE), { timeout: 1000 });
    const refuse = (): never => {
      const holder = readHolder(db);
      db.close();
      throw new DataDirLockedError(abs, holder, opts.what, opts.flag);
    };
    try {
      db.pragma('journal_mode = DELETE');
      db.exec(
        'CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, what TEXT NOT NULL, since TEXT NOT NULL)',
      );
      db.pragma('busy_timeout = 0');
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      if (isBusy(err)) return refuse();
      db.close();
      throw err;
    }
    try {
      db.prepare('INSERT OR REPLACE INTO holder (id, pid, what, since) VALUES (1, ?, ?, ?)').run(
        process.pid,
        opts.what,
        new Date().toISOString(),
      );
      // COMMIT needs a moment without readers (a refused process reading the holder row).
      db.pragma('busy_timeout = 2000');
      db.exec('COMMIT');
      db.pragma('busy_timeout = 0');
      // Held from here on: never committed, rolled back by close() or by the process's death.
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      if (isBusy(err)) return refuse();
      db.close();
      throw err;
    }
    return new DataDirLock(abs, db);
  }

  /** Let the directory go (idempotent). The lock file stays. */
  release(): void {
    const db = this.db;
    this.db = undefined;
    db?.close();
  }
}

/** The recorded holder, read under a SHARED lock (compatible with the holder's RESERVED lock). */
function readHolder(db: Db): DirLockHolder | undefined {
  db.pragma('busy_timeout = 1000');
  // Between its COMMIT and its BEGIN another process may have taken the lock without having
  // recorded itself yet: give it a moment to commit its row before answering with ours.
  for (let i = 0; ; i++) {
    let row: { pid: number; what: string; since: string } | undefined;
    try {
      row = db.prepare('SELECT pid, what, since FROM holder WHERE id = 1').get() as typeof row;
    } catch {
      row = undefined;
    }
    if ((row && row.pid !== process.pid) || i >= 20) return row ? { pid: row.pid, what: row.what, since: row.since } : undefined;
    sleep(5);
  }
}
