// A start that fails halfway: it rejects naming the process and quoting its output, and leaves no
// process (nor, for a temp dir, the dir) behind. Needs the binaries of one pinned version.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findKubeBinaries } from './binaries.js';
import { ControlPlaneStartError, startControlPlane } from './control-plane.js';
import { processesMentioning } from './testing.js';
import { readPins } from './versions.js';

// Any one pinned version that is built will do (the newest first).
const found =
  readPins()
    .kubernetes.map((p) => findKubeBinaries(p.minor))
    .reverse()
    .find((f) => f.binaries) ?? findKubeBinaries();

describe('a control-plane start that fails', { skip: found.binaries ? false : found.reason }, () => {
  const dirs: string[] = [];
  const dir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'kars-envtest-fail-'));
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('an unknown kube-apiserver flag: rejects naming kube-apiserver and the flag; etcd (already up) is stopped', async () => {
    const d = dir();
    const err = await startControlPlane({
      binaries: found.binaries!,
      dir: d,
      apiserverArgs: ['--no-such-flag=1'],
      controllers: false,
    }).then(
      () => assert.fail('started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlPlaneStartError, String(err));
    assert.equal(err.process, 'kube-apiserver');
    assert.match(err.message, /^kube-apiserver exited with code \d+ before it was ready/);
    assert.match(err.message, /unknown flag: --no-such-flag/);
    assert.deepEqual(processesMentioning(d), [], 'no etcd or apiserver left running');
  });

  it('the apiserver port is taken: rejects with "address already in use" and leaves no process', async () => {
    const squatter: Server = createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as { port: number }).port;
    const d = dir();
    try {
      const err = await startControlPlane({ binaries: found.binaries!, dir: d, ports: { apiserver: port }, controllers: false }).then(
        () => assert.fail('started'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ControlPlaneStartError, String(err));
      assert.equal(err.process, 'kube-apiserver');
      assert.match(err.message, /address already in use/);
      assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.deepEqual(processesMentioning(d), []);
    } finally {
      squatter.close();
    }
  });

  it('the etcd port is taken: rejects naming etcd before any apiserver starts', async () => {
    const squatter: Server = createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as { port: number }).port;
    const d = dir();
    try {
      const err = await startControlPlane({ binaries: found.binaries!, dir: d, ports: { etcd: port }, controllers: false }).then(
        () => assert.fail('started'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ControlPlaneStartError, String(err));
      assert.equal(err.process, 'etcd');
      assert.match(err.message, /address already in use/);
      assert.deepEqual(processesMentioning(d), []);
    } finally {
      squatter.close();
    }
  });
});
