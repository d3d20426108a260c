import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommitError, Store } from './store.js';
import type { ChangeRecord, StoreOptions } from './store.js';

const GR = '/configmaps';
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function open(
  opts: Partial<StoreOptions> = {},
  dir = mkdtempSync(join(tmpdir(), 'kars-store-')),
): { store: Store; dir: string; commits: number[]; published: ChangeRecord[][] } {
  dirs.push(dir);
  const commits: number[] = [];
  const store = new Store(dir, {
    historyWindow: 10_000,
    ...opts,
    beforeCommit: () => {
      commits.push(Date.now());
      opts.beforeCommit?.();
    },
  });
  const published: ChangeRecord[][] = [];
  store.onCommit = (c) => published.push(c);
  return { store, dir, commits, published };
}

/** Create `name` if absent; fails (like a 409) when it exists. */
function create(store: Store, name: string, value = name): Promise<number> {
  return store.write((stage) => {
    if (store.get(GR, 'ns', name)) throw new Error(`${name} exists`);
    return stage({ gr: GR, ns: 'ns', name, type: 'ADDED', prev: null, render: (rv) => JSON.stringify({ name, value, rv }) }).rv;
  });
}

/** Compare-and-swap update: fails unless the stored rv is `expectRv`. */
function update(store: Store, name: string, expectRv: number, value: string): Promise<number> {
  return store.write((stage) => {
    const cur = store.get(GR, 'ns', name);
    if (!cur || cur.rv !== expectRv) throw new Error('conflict');
    return stage({ gr: GR, ns: 'ns', name, type: 'MODIFIED', prev: cur.body, render: (rv) => JSON.stringify({ name, value, rv }) }).rv;
  });
}

describe('Store group commit', () => {
  it('commits writes issued in the same tick in one transaction, and settles none before the commit', async () => {
    const { store, commits, published } = open();
    let settled = 0;
    const writes = Array.from({ length: 50 }, (_, i) => create(store, `o${i}`).then((rv) => (settled++, rv)));
    assert.equal(settled, 0, 'nothing is acknowledged before the commit');
    assert.equal(store.get(GR, 'ns', 'o0'), undefined, 'readers do not see the open batch');
    assert.equal(store.currentRv(), 0, 'the committed revision has not moved');
    const rvs = await Promise.all(writes);
    assert.equal(commits.length, 1, 'one COMMIT (one fsync) for 50 writes');
    assert.deepEqual(
      rvs,
      Array.from({ length: 50 }, (_, i) => i + 1),
      'revisions follow issue order with no gaps',
    );
    assert.equal(published.length, 1);
    assert.deepEqual(
      published[0]?.map((c) => c.rv),
      rvs,
      'onCommit sees the batch in revision order',
    );
    assert.equal(store.currentRv(), 50);
    assert.equal(store.get(GR, 'ns', 'o49')?.rv, 50);
    store.close();
  });

  it('lets exactly one of many same-batch updates with the same revision win', async () => {
    const { store, commits } = open();
    const rv = await create(store, 'x');
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => update(store, 'x', rv, `v${i}`)));
    const won = results.filter((r) => r.status === 'fulfilled');
    assert.equal(won.length, 1, 'exactly one compare-and-swap wins inside the batch');
    assert.equal(commits.length, 2);
    assert.equal(JSON.parse(store.get(GR, 'ns', 'x')?.body ?? '{}').value, 'v0', 'the first one issued wins');
    store.close();
  });

  it('rolls back a failing write alone and keeps the rest of its batch', async () => {
    const { store, published } = open();
    const a = create(store, 'a');
    const bad = store.write((stage) => {
      stage({ gr: GR, ns: 'ns', name: 'half', type: 'ADDED', prev: null, render: () => '{}' });
      throw new Error('admission said no after staging');
    });
    const c = create(store, 'c');
    await assert.rejects(bad, /admission said no/);
    assert.deepEqual([await a, await c], [1, 2], 'the failed write gave its revision back');
    assert.equal(store.get(GR, 'ns', 'half'), undefined, 'nothing of the failed write is stored');
    assert.deepEqual(
      published.flat().map((x) => x.name),
      ['a', 'c'],
    );
    store.close();
  });

  it('fails every write of a batch whose commit fails, publishes nothing, and keeps nothing on disk', async () => {
    let failNext = false;
    const { store, dir, published } = open({
      beforeCommit: () => {
        if (failNext) {
          failNext = false;
          throw new Error('disk full');
        }
      },
    });
    await create(store, 'before');
    failNext = true;
    const doomed = await Promise.allSettled([create(store, 'd1'), create(store, 'd2'), create(store, 'before')]);
    for (const r of doomed) {
      assert.equal(r.status, 'rejected');
      assert.ok(
        r.status === 'rejected' && r.reason instanceof CommitError,
        'every write of the batch, the would-be 409 too, gets the commit error',
      );
    }
    assert.equal(published.length, 1, 'onCommit never saw the failed batch');
    assert.equal(store.get(GR, 'ns', 'd1'), undefined);
    assert.equal(store.currentRv(), 1);
    assert.equal(await create(store, 'after'), 2, 'the next write continues the revision sequence without a gap');
    store.close();
    const { store: again } = open({}, dir);
    assert.equal(again.get(GR, 'ns', 'd1'), undefined, 'the failed batch is not on disk');
    assert.equal(again.get(GR, 'ns', 'after')?.rv, 2);
    assert.equal(again.currentRv(), 2);
    assert.deepEqual(
      again.changesAfter(0).map((c) => c.name),
      ['before', 'after'],
      'the change log holds committed changes only',
    );
    again.close();
  });

  it('commits as soon as a batch holds maxBatch writes', async () => {
    const { store, commits } = open({ maxBatch: 4 });
    const writes = Array.from({ length: 10 }, (_, i) => create(store, `m${i}`));
    assert.equal(commits.length, 2, 'two full batches committed synchronously');
    await Promise.all(writes);
    assert.equal(commits.length, 3, 'the remaining two in a third');
    store.close();
  });

  it('with maxBatch 1 commits every write on its own (the behaviour before group commit)', async () => {
    const { store, commits } = open({ maxBatch: 1 });
    await Promise.all(Array.from({ length: 5 }, (_, i) => create(store, `s${i}`)));
    assert.equal(commits.length, 5);
    store.close();
  });

  it('commits the open batch on close', async () => {
    const { store, dir } = open();
    const w = create(store, 'late');
    store.close();
    assert.equal(await w, 1);
    const { store: again } = open({}, dir);
    assert.equal(again.get(GR, 'ns', 'late')?.rv, 1);
    again.close();
  });

  it('publishes a batch, and shows it to readers, only once its WAL sync has returned; writes meanwhile wait for the next batch', async () => {
    const held: Array<(err: Error | null) => void> = [];
    const { store, commits, published } = open({ syncWal: (_fd, done) => held.push(done) });
    let settled = 0;
    const first = create(store, 'p1').then((rv) => (settled++, rv));
    await new Promise((r) => setImmediate(r));
    assert.equal(commits.length, 1, 'the batch was committed to the WAL');
    assert.equal(held.length, 1, 'its sync is in flight');
    assert.equal(store.get(GR, 'ns', 'p1'), undefined, 'a reader does not see a batch whose sync has not returned');
    assert.equal(store.currentRv(), 0);
    assert.equal(published.length, 0, 'nothing published before the sync');
    const second = create(store, 'p2').then((rv) => (settled++, rv));
    await new Promise((r) => setImmediate(r));
    assert.equal(commits.length, 1, 'a write during the sync waits for it');
    assert.equal(settled, 0, 'nothing acknowledged before its sync');
    held.shift()?.(null);
    assert.equal(await first, 1);
    assert.equal(store.get(GR, 'ns', 'p1')?.rv, 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(store.get(GR, 'ns', 'p2'), undefined, 'the next batch is committed but not yet synced');
    assert.equal(commits.length, 2, 'the end of the sync committed the waiting batch (at the end of that turn)');
    held.shift()?.(null);
    assert.equal(await second, 2);
    assert.equal(store.currentRv(), 2);
    store.close();
  });

  it('rejects the syncing and the waiting batch when the WAL sync fails, refuses later writes, and reports it once', async () => {
    const held: Array<(err: Error | null) => void> = [];
    const { store } = open({ syncWal: (_fd, done) => held.push(done) });
    const fatal: Error[] = [];
    store.onFatal = (e) => fatal.push(e);
    const a = create(store, 'f1');
    await new Promise((r) => setImmediate(r));
    const b = create(store, 'f2');
    held.shift()?.(new Error('EIO'));
    const res = await Promise.allSettled([a, b]);
    for (const r of res) assert.ok(r.status === 'rejected' && r.reason instanceof CommitError, 'both batches fail with CommitError');
    assert.equal(fatal.length, 1);
    await assert.rejects(create(store, 'f3'), CommitError, 'a broken store refuses every later write');
    assert.equal(store.get(GR, 'ns', 'f1'), undefined, 'a reader never saw the unsynced batch');
  });

  it('keeps the owner index equal to the stored ownerReferences through creates, updates and deletes', async () => {
    const { store } = open();
    const put = (type: 'ADDED' | 'MODIFIED' | 'DELETED', owners: string[], data = ''): Promise<unknown> =>
      store.write((stage) => {
        const prev = store.get(GR, 'ns', 'dep')?.body ?? null;
        const meta = owners.length > 0 ? { name: 'dep', ownerReferences: owners.map((uid) => ({ uid })) } : { name: 'dep' };
        return stage({ gr: GR, ns: 'ns', name: 'dep', type, prev, owners, render: () => JSON.stringify({ metadata: meta, data }) });
      });
    const deps = (uid: string): string[] => store.dependentsOf(uid).map((d) => d.name);
    await put('ADDED', ['a']);
    assert.deepEqual(deps('a'), ['dep']);
    await put('MODIFIED', ['b'], 'mentions "ownerReferences" in its data only');
    assert.deepEqual([deps('a'), deps('b')], [[], ['dep']], 'the old owner is dropped, the new one indexed');
    await put('MODIFIED', []);
    assert.deepEqual(deps('b'), [], 'removing every owner reference empties the index');
    await put('MODIFIED', [], 'text "ownerReferences" without any reference');
    await put('MODIFIED', ['c']);
    await put('DELETED', []);
    assert.deepEqual(deps('c'), [], 'a deleted object owns nothing');
    store.close();
  });

  it('keeps the WAL bounded under writes that never pause', async () => {
    const { store, dir } = open({ walResetBytes: 256 * 1024 });
    const payload = 'x'.repeat(8192);
    let maxWal = 0;
    for (let round = 0; round < 150; round++) {
      await Promise.all(Array.from({ length: 4 }, (_, i) => create(store, `w${round}-${i}`, payload)));
      maxWal = Math.max(maxWal, statSync(join(dir, 'state.db-wal')).size);
    }
    assert.equal(store.count(GR, undefined), 600);
    assert.ok(maxWal < 2 * 1024 * 1024, `the WAL peaked at ${maxWal} bytes (600 writes of 8 KiB would be ~10 MiB without resets)`);
    store.close();
  });

  it('checkpoints on a worker thread: the database file fills while the WAL is never truncated in place', async () => {
    let asked = 0;
    const { store, dir } = open({ walResetBytes: 1 << 30, onCheckpoint: () => asked++ });
    const payload = 'y'.repeat(8192);
    for (let round = 0; round < 200; round++)
      await Promise.all(Array.from({ length: 8 }, (_, i) => create(store, `c${round}-${i}`, payload)));
    const db = join(dir, 'state.db');
    const t0 = Date.now();
    while (statSync(db).size < 8 * 1024 * 1024 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
    assert.ok(
      statSync(db).size >= 8 * 1024 * 1024,
      `the database file holds ${statSync(db).size} bytes: the 13 MiB written were not checkpointed (automatic checkpoints are off)`,
    );
    // One checkpoint per 4 MiB of WAL growth, not one per batch once the WAL passed 4 MiB.
    const wal = statSync(join(dir, 'state.db-wal')).size;
    assert.ok(asked >= 1 && asked <= Math.ceil(wal / (4 * 1024 * 1024)), `${asked} checkpoints asked for a WAL of ${wal} bytes`);
    store.close();
  });
});
