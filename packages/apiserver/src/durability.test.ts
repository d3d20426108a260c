import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TestClient } from './testing/harness.js';

const KARS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../apps/cli/bin/kars.js');

interface Proc {
  child: ChildProcess;
  url: string;
  kubeconfig: string;
}

/** Start `kars apiserver` as a real process and wait for its two ready lines. */
function startProcess(dataDir: string, listen = '127.0.0.1:0'): Promise<Proc> {
  return new Promise((resolveProc, reject) => {
    const child = spawn(process.execPath, [KARS, 'apiserver', '--listen', listen, '--data-dir', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`apiserver did not start: ${out}`)), 20_000);
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const kc = out.match(/^kubeconfig: (.+)$/m);
      const url = out.match(/^listening: (https:\/\/\S+)$/m);
      if (kc && url) {
        clearTimeout(timer);
        resolveProc({ child, url: url[1]!, kubeconfig: kc[1]! });
      }
    });
    child.once('exit', (code) => reject(new Error(`apiserver exited early with ${code}: ${out}`)));
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code))));
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
      const r = await c1.post('/api/v1/namespaces/default/configmaps', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `d${i}` }, data: { i: String(i) } });
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
    const next = await c2.post('/api/v1/namespaces/default/configmaps', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after' }, data: {} });
    assert.ok(Number(next.body.metadata.resourceVersion) > acked[acked.length - 1]!.rv, 'resourceVersion keeps growing after restart');

    const w = await c2.watch(`/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${acked[40]!.rv}`);
    const e = await w.next();
    assert.equal(e.object.metadata.name, 'd41', 'a watch resumes across the restart from the on-disk change log');
    w.stop();

    second.child.kill('SIGTERM');
    assert.equal(await exited(second.child), 0, 'SIGTERM stops it cleanly');
    c2.close();
  });
});
