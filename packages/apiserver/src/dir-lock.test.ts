import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataDirLock, DataDirLockedError } from './storage/dir-lock.js';
import { ApiServer } from './server.js';
import { connect } from 'node:net';
import { startApiserverProcess, TestClient } from './testing/harness.js';

const KARS_BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../apps/cli/bin/kars.js');

/** Run `kars apiserver` on `dataDir` and wait for it to exit (it must refuse); or kill it once it starts. */
function runRefused(dataDir: string): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [KARS_BIN, 'apiserver', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      // It started: the test fails below on the exit code, but do not leave it running.
      if (/^listening: /m.test(stdout)) child.kill('SIGKILL');
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (code) => res({ code, stderr, stdout }));
  });
}

async function putConfigMap(c: TestClient, name: string): Promise<number> {
  const r = await c.post('/api/v1/namespaces/default/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name },
    data: { a: name },
  });
  return r.status;
}

describe('a data directory belongs to one process', () => {
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const tmp = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'kars-lock-'));
    dirs.push(d);
    return d;
  };

  it('a second kars apiserver on a live one’s directory refuses, naming the dir, the PID and --data-dir; the first keeps serving', async () => {
    const dir = tmp();
    const first = await startApiserverProcess(dir);
    procs.push(first.child);
    const c = new TestClient(first.url, first.ca, first.token);
    try {
      assert.equal(await putConfigMap(c, 'before'), 201);
      const kubeconfigBefore = readFileSync(join(dir, 'kubeconfig'), 'utf8');
      const second = await runRefused(dir);
      assert.notEqual(second.code, 0, `the second apiserver must refuse; stdout: ${second.stdout}`);
      assert.doesNotMatch(second.stdout, /listening:/);
      assert.match(second.stderr, new RegExp(`data directory ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use`));
      assert.match(second.stderr, new RegExp(`PID ${first.child.pid}\\b`));
      assert.match(second.stderr, /--data-dir DIR/);
      // The refused one wrote nothing: the kubeconfig still points at the first.
      assert.equal(readFileSync(join(dir, 'kubeconfig'), 'utf8'), kubeconfigBefore);
      // The first is unharmed: its writes still succeed (before the fix: UNIQUE constraint failed: events.rv).
      for (let i = 0; i < 20; i++) assert.equal(await putConfigMap(c, `after-${i}`), 201);
    } finally {
      c.close();
    }
  });

  it('a lock left by a process killed with SIGKILL does not block the next start', async () => {
    const dir = tmp();
    const first = await startApiserverProcess(dir);
    procs.push(first.child);
    assert.ok(statSync(join(dir, 'kars.lock')).isFile());
    first.child.kill('SIGKILL');
    await first.exited();
    const second = await startApiserverProcess(dir);
    procs.push(second.child);
    const c = new TestClient(second.url, second.ca, second.token);
    try {
      assert.equal(await putConfigMap(c, 'after-kill'), 201);
    } finally {
      c.close();
    }
  });

  it('in one process: a second lock on a held directory is refused; after release it can be taken', () => {
    const dir = tmp();
    const a = DataDirLock.acquire(dir, { what: 'test A', flag: '--dir' });
    assert.throws(
      () => DataDirLock.acquire(dir, { what: 'test B', flag: '--dir' }),
      (err: unknown) =>
        err instanceof DataDirLockedError &&
        err.holder?.pid === process.pid &&
        err.holder.what === 'test A' &&
        /pass --dir DIR/.test(err.message),
    );
    a.release();
    a.release();
    DataDirLock.acquire(dir, { what: 'test B', flag: '--dir' }).release();
  });

  it(
    'a server started with an AbortSignal stops when it is aborted: done resolves, the port closes, the directory is free',
    { timeout: 20_000 },
    async () => {
      const dir = tmp();
      const ac = new AbortController();
      const srv = await ApiServer.start({ listen: '127.0.0.1:0', dataDir: dir, signal: ac.signal });
      const c = new TestClient(srv.url, srv.caCert, srv.token);
      assert.equal(await putConfigMap(c, 'before'), 201);
      assert.throws(() => DataDirLock.acquire(dir, { what: 'test', flag: '--dir' }), DataDirLockedError, 'held while it serves');
      let stopped = false;
      void srv.done.then(() => (stopped = true));
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(stopped, false, 'done is pending while it serves');
      ac.abort();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<string>((res) => (timer = setTimeout(() => res('still serving 10 s after the abort'), 10_000)));
      const after = await Promise.race([srv.done.then(() => 'stopped'), late]);
      clearTimeout(timer);
      if (after !== 'stopped') await srv.stop(); // so a broken signal fails this test, not hangs the file
      assert.equal(after, 'stopped');
      // A plain TCP connect: refused once the listener is closed (an HTTPS request would fail on the certificate either way).
      const refused = await new Promise<string>((res) => {
        const sock = connect(Number(new URL(srv.url).port), '127.0.0.1');
        sock.once('connect', () => (sock.destroy(), res('connected')));
        sock.once('error', (e: NodeJS.ErrnoException) => res(e.code ?? e.message));
      });
      assert.equal(refused, 'ECONNREFUSED', 'the port is closed');
      DataDirLock.acquire(dir, { what: 'test', flag: '--dir' }).release();
    },
  );
});
