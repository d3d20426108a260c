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
 * Durable storage in SQLite (WAL, synchronous=FULL): objects, one global revision counter,
 * and a bounded log of recent changes from which watches resume across restarts.
 *
 * Guarantees: a write returned by {@link Store.commit} is on disk; resourceVersions only grow,
 * across restarts too. Caveats: one process owns a data dir at a time (SQLite locking enforces it).
 */
export class Store {
  private readonly db: Db;
  private rv: number;
  private compactedRv: number;
  private readonly historyWindow: number;
  private writesSincePrune = 0;
  private readonly st: {
    get: Statement<[string, string, string], StoredObject>;
    put: Statement<[string, string, string, number, string]>;
    del: Statement<[string, string, string]>;
    event: Statement<[number, string, string, string, string, string, string | null]>;
    setMeta: Statement<[string, string]>;
    pruneEvents: Statement<[number]>;
    listAll: Statement<[string, string, string, number], ListRow>;
    listNs: Statement<[string, string, string, string, number], ListRow>;
    count: Statement<[string], { n: number }>;
    countAfter: Statement<[string, string, string], { n: number }>;
    countAfterNs: Statement<[string, string, string, string], { n: number }>;
    countNs: Statement<[string, string], { n: number }>;
    eventsAfter: Statement<[number], ChangeRecord>;
    addOwner: Statement<[string, string, string, string]>;
    clearOwners: Statement<[string, string, string]>;
    dependents: Statement<[string], { gr: string; ns: string; name: string }>;
  };

  constructor(dataDir: string, historyWindow: number) {
    mkdirSync(dataDir, { recursive: true });
    this.historyWindow = historyWindow;
    this.db = new Database(join(dataDir, 'state.db'));
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
    const meta = (k: string): string | undefined => (this.db.prepare('SELECT v FROM meta WHERE k = ?').get(k) as { v: string } | undefined)?.v;
    this.rv = Number(meta('rv') ?? '0');
    this.compactedRv = Number(meta('compactedRv') ?? '0');
    this.st = {
      get: this.db.prepare('SELECT rv, body FROM objects WHERE gr = ? AND ns = ? AND name = ?'),
      put: this.db.prepare('INSERT OR REPLACE INTO objects (gr, ns, name, rv, body) VALUES (?, ?, ?, ?, ?)'),
      del: this.db.prepare('DELETE FROM objects WHERE gr = ? AND ns = ? AND name = ?'),
      event: this.db.prepare('INSERT INTO events (rv, gr, ns, name, type, body, prev) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      setMeta: this.db.prepare('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)'),
      pruneEvents: this.db.prepare('DELETE FROM events WHERE rv <= ?'),
      listAll: this.db.prepare('SELECT ns, name, body FROM objects WHERE gr = ? AND (ns, name) > (?, ?) ORDER BY ns, name LIMIT ?'),
      listNs: this.db.prepare('SELECT ns, name, body FROM objects WHERE gr = ? AND ns = ? AND (ns, name) > (?, ?) ORDER BY ns, name LIMIT ?'),
      count: this.db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ?'),
      countAfter: this.db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND (ns, name) > (?, ?)'),
      countAfterNs: this.db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND ns = ? AND (ns, name) > (?, ?)'),
      countNs: this.db.prepare('SELECT count(*) AS n FROM objects WHERE gr = ? AND ns = ?'),
      eventsAfter: this.db.prepare('SELECT rv, gr, ns, name, type, body, prev FROM events WHERE rv > ? ORDER BY rv'),
      addOwner: this.db.prepare('INSERT OR IGNORE INTO owners (owner, gr, ns, name) VALUES (?, ?, ?, ?)'),
      clearOwners: this.db.prepare('DELETE FROM owners WHERE gr = ? AND ns = ? AND name = ?'),
      dependents: this.db.prepare('SELECT gr, ns, name FROM owners WHERE owner = ? ORDER BY gr, ns, name'),
    };
  }

  /** The newest committed resourceVersion (etcd's revision). */
  currentRv(): number {
    return this.rv;
  }

  /** The oldest resourceVersion a watch may resume after; older ones are 410 Expired. */
  oldestResumableRv(): number {
    return this.compactedRv;
  }

  get(gr: string, ns: string, name: string): StoredObject | undefined {
    return this.st.get.get(gr, ns, name);
  }

  /** Objects of one resource ordered by (namespace, name), strictly after the given key. */
  list(gr: string, ns: string | undefined, after: { ns: string; name: string }, limit: number): ListRow[] {
    return ns === undefined ? this.st.listAll.all(gr, after.ns, after.name, limit) : this.st.listNs.all(gr, ns, after.ns, after.name, limit);
  }

  /** How many objects of a resource sort after the given key (for remainingItemCount). */
  countAfter(gr: string, ns: string | undefined, after: { ns: string; name: string }): number {
    return (ns === undefined ? this.st.countAfter.get(gr, after.ns, after.name) : this.st.countAfterNs.get(gr, ns, after.ns, after.name))?.n ?? 0;
  }

  count(gr: string, ns: string | undefined): number {
    return (ns === undefined ? this.st.count.get(gr) : this.st.countNs.get(gr, ns))?.n ?? 0;
  }

  /** Objects whose ownerReferences name this uid. */
  dependentsOf(ownerUid: string): Array<{ gr: string; ns: string; name: string }> {
    return this.st.dependents.all(ownerUid);
  }

  /** The change log kept on disk, for warming the watch cache after a restart. */
  changesAfter(rv: number): ChangeRecord[] {
    return this.st.eventsAfter.all(Math.max(rv, this.compactedRv));
  }

  /**
   * Run `fn` in one transaction. `fn` calls `stage` for each change; each change takes the next
   * revision. The returned records are durable when this returns. If `fn` throws, nothing is written.
   */
  commit<T>(fn: (stage: (c: StagedChange) => ChangeRecord) => T): { result: T; changes: ChangeRecord[] } {
    const changes: ChangeRecord[] = [];
    const startRv = this.rv;
    const txn = this.db.transaction(() => {
      const result = fn((c) => {
        const rv = ++this.rv;
        const body = c.render(rv);
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
      });
      if (this.rv !== startRv) this.st.setMeta.run('rv', String(this.rv));
      return result;
    });
    try {
      const result = txn();
      this.maybePrune(changes.length);
      return { result, changes };
    } catch (err) {
      this.rv = startRv;
      throw err;
    }
  }

  private maybePrune(n: number): void {
    this.writesSincePrune += n;
    if (this.writesSincePrune < Math.max(100, Math.floor(this.historyWindow / 10))) return;
    this.writesSincePrune = 0;
    const floor = this.rv - this.historyWindow;
    if (floor > this.compactedRv) this.compact(floor);
  }

  /** Forget history up to and including `rv`: watches that resume from there get 410. */
  compact(rv: number): void {
    const target = Math.min(rv, this.rv);
    if (target <= this.compactedRv) return;
    this.db.transaction(() => {
      this.st.pruneEvents.run(target);
      this.st.setMeta.run('compactedRv', String(target));
    })();
    this.compactedRv = target;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
