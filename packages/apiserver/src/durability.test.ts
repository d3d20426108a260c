import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApiserverProcess, TestClient } from './testing/harness.js';
import type { ApiserverProcess } from './testing/harness.js';

/** Start `kars apiserver` as a real process and wait for its two ready lines. */
function startProcess(dataDir: string, listen = '127.0.0.1:0'): Promise<ApiserverProcess> {
  return startApiserverProcess(dataDir, listen);
}

/** An object that rounds of same-resourceVersion updates race on, and what the client learnt. */
interface Seed {
  name: string;
  /** resourceVersion and value of the last acknowledged update. */
  rv: string;
  value: string;
  /** Values whose update got 409. */
  rejected: Set<string>;
  rounds: number;
  badRounds: string[];
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((r) =>
    child.exitCode !== null || child.signalCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code)),
  );
}

describe('kars apiserver as a process', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'kars-durable-'));
  const procs: ChildProcess[] = [];
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints its kubeconfig and URL, keeps acknowledged writes across kill -9, and keeps resourceVersions growing', async () => {
    const first = await startProcess(dataDir);
    procs.push(first.child);
    assert.ok(first.kubeconfig.startsWith('/'), 'kubeconfig path is absolute');
    const token = readFileSync(join(dataDir, 'token'), 'utf8').trim();
    const ca = readFileSync(join(dataDir, 'pki', 'ca.crt'), 'utf8');
    const c1 = new TestClient(first.url, ca, token);
    const acked: Array<{ name: string; rv: number }> = [];
    for (let i = 0; i < 50; i++) {
      const r = await c1.post('/api/v1/namespaces/default/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `d${i}` },
        data: { i: String(i) },
      });
      assert.equal(r.status, 201);
      acked.push({ name: `d${i}`, rv: Number(r.body.metadata.resourceVersion) });
    }
    c1.close();
    first.child.kill('SIGKILL');
    await exited(first.child);

    const port = new URL(first.url).port;
    const second = await startProcess(dataDir, `127.0.0.1:${port}`);
    procs.push(second.child);
    const c2 = new TestClient(second.url, ca, token);
    const list = await c2.get('/api/v1/namespaces/default/configmaps');
    const names = new Set(list.body.items.map((o: any) => o.metadata.name));
    for (const a of acked) assert.ok(names.has(a.name), `${a.name} survived kill -9`);
    const next = await c2.post('/api/v1/namespaces/default/configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'after' },
      data: {},
    });
    assert.ok(Number(next.body.metadata.resourceVersion) > acked[acked.length - 1]!.rv, 'resourceVersion keeps growing after restart');

    const w = await c2.watch(`/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${acked[40]!.rv}`);
    const e = await w.next();
    assert.equal(e.object.metadata.name, 'd41', 'a watch resumes across the restart from the on-disk change log');
    w.stop();

    second.child.kill('SIGTERM');
    assert.equal(await exited(second.child), 0, 'SIGTERM stops it cleanly');
    c2.close();
  });

  it('loses no acknowledged write and resurrects no rejected one when killed -9 during a burst of 64 concurrent writes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kars-burst-'));
    try {
      const first = await startProcess(dir);
      procs.push(first.child);
      const token = readFileSync(join(dir, 'token'), 'utf8').trim();
      const ca = readFileSync(join(dir, 'pki', 'ca.crt'), 'utf8');
      const c1 = new TestClient(first.url, ca, token);
      const base = '/api/v1/namespaces/default/configmaps';
      const cm = (name: string, v: string, rv?: string): unknown => ({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, ...(rv ? { resourceVersion: rv } : {}) },
        data: { v },
      });

      // Objects that conflicting updates race on: one loop per seed, 4 PUTs with the same resourceVersion per round.
      const SEEDS = 8;
      const PER_ROUND = 4;
      const CREATORS = 64 - SEEDS * PER_ROUND;
      const seeds: Seed[] = [];
      for (let s = 0; s < SEEDS; s++) {
        const r = await c1.post(base, cm(`seed-${s}`, 'initial'));
        assert.equal(r.status, 201);
        seeds.push({
          name: `seed-${s}`,
          rv: String(r.body.metadata.resourceVersion),
          value: 'initial',
          rejected: new Set<string>(),
          rounds: 0,
          badRounds: [] as string[],
        });
      }
      const acked = new Map<string, { rv: string; v: string }>();
      const rejectedDuplicates: Array<{ name: string; v: string }> = [];
      let killed = false;
      const unexpected: string[] = [];

      const creator = async (w: number): Promise<void> => {
        for (let i = 0; !killed; i++) {
          const dup = i % 5 === 4 ? [...acked.keys()].find((n) => n.startsWith(`c${w}-`)) : undefined;
          const name = dup ?? `c${w}-${i}`;
          const v = `w${w}i${i}`;
          let r;
          try {
            r = await c1.post(base, cm(name, v));
          } catch {
            return; // outcome unknown: the server died with this request in flight
          }
          if (r.status === 201) acked.set(name, { rv: String(r.body.metadata.resourceVersion), v });
          else if (r.status === 409 && dup) rejectedDuplicates.push({ name, v });
          else unexpected.push(`create ${name}: ${r.status} ${r.text.slice(0, 200)}`);
        }
      };
      const racer = async (seed: Seed): Promise<void> => {
        for (let round = 0; !killed; round++) {
          const values = Array.from({ length: PER_ROUND }, (_, k) => `${seed.name}-r${round}-${k}`);
          const results = await Promise.all(
            values.map((v) =>
              c1.put(`${base}/${seed.name}`, cm(seed.name, v, seed.rv)).then(
                (r) => ({ v, r }),
                () => ({ v, r: undefined }),
              ),
            ),
          );
          let wins = 0;
          for (const { v, r } of results) {
            if (r?.status === 200) {
              wins++;
              seed.rv = String(r.body.metadata.resourceVersion);
              seed.value = v;
            } else if (r?.status === 409) seed.rejected.add(v);
            else if (r !== undefined) unexpected.push(`update ${seed.name}: ${r.status} ${r.text.slice(0, 200)}`);
          }
          if (results.some((x) => x.r === undefined)) return;
          seed.rounds++;
          if (wins !== 1) seed.badRounds.push(`round ${round}: ${wins} winners`);
        }
      };
      const load = [...Array.from({ length: CREATORS }, (_, w) => creator(w)), ...seeds.map((s) => racer(s))];
      // Kill in the middle of the burst, once plenty of writes have been acknowledged.
      const deadline = Date.now() + 60_000;
      while ((acked.size < 300 || seeds.some((s) => s.rounds < 5)) && Date.now() < deadline && unexpected.length === 0)
        await new Promise((r) => setTimeout(r, 10));
      first.child.kill('SIGKILL');
      killed = true;
      await exited(first.child);
      await Promise.all(load);
      c1.close();
      assert.deepEqual(unexpected, [], 'only 201, 200 and 409 answers during the burst');
      assert.ok(acked.size >= 300, `enough writes were acknowledged before the kill (${acked.size})`);
      assert.ok(rejectedDuplicates.length > 0 && seeds.every((s) => s.rejected.size > 0), 'the burst had rejected writes');
      for (const s of seeds) assert.deepEqual(s.badRounds, [], `${s.name}: exactly one of each round of same-resourceVersion updates won`);

      const second = await startProcess(dir, `127.0.0.1:${new URL(first.url).port}`);
      procs.push(second.child);
      const c2 = new TestClient(second.url, ca, token);
      const list = await c2.get(base);
      assert.equal(list.status, 200);
      const stored = new Map<string, { rv: string; v: string }>(
        list.body.items.map((o: any) => [o.metadata.name, { rv: o.metadata.resourceVersion, v: o.data?.v }]),
      );
      for (const [name, a] of acked)
        assert.deepEqual(stored.get(name), a, `acknowledged create ${name} survived kill -9 with its resourceVersion`);
      for (const d of rejectedDuplicates)
        assert.notEqual(stored.get(d.name)?.v, d.v, `rejected duplicate create of ${d.name} was not resurrected`);
      for (const s of seeds) {
        const got = stored.get(s.name);
        assert.ok(got, `${s.name} exists`);
        assert.ok(!s.rejected.has(got.v), `${s.name}: a rejected update (${got.v}) was not resurrected`);
        assert.ok(Number(got.rv) >= Number(s.rv), `${s.name}: the last acknowledged update (rv ${s.rv}) survived; stored rv ${got.rv}`);
        if (got.rv === s.rv) assert.equal(got.v, s.value, `${s.name}: the stored value is the acknowledged one`);
      }
      second.child.kill('SIGTERM');
      await exited(second.child);
      c2.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
