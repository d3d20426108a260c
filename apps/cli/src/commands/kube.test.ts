// `kars kube up` as a person runs it: a process that starts the real control plane, prints a
// kubeconfig that kubectl can use, and on Ctrl-C stops everything it started. Without the binaries
// it fails with the command that builds them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findKubeBinaries, findKubectlBinary, kubectl, processesMentioning, readPins } from '@kars/kube-envtest';
import { until } from '@kars/kube-core/testing';
import { KARS_BIN, runKars } from '../testing/stack.js';

const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
const mk = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'kars-kube-up-'));
  tmp.push(d);
  return d;
};

describe('kars kube up', () => {
  it('without the binaries: exit 1, naming npm run kube:build', async () => {
    const r = await runKars(['kube', 'up', '--dir', mk()], { env: { KARS_KUBE_CACHE: mk() } });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^error: Kubernetes v\d+\.\d+\.\d+ binaries absent .*`npm run kube:build`/m);
  });

  const pin = readPins().kubernetes[0]!;
  const found = findKubeBinaries(pin.minor);
  const bin = findKubectlBinary();
  it(
    `starts ${pin.version}, prints a working kubeconfig, and Ctrl-C leaves no process`,
    { skip: !found.binaries ? found.reason : !bin ? 'no kubectl' : false },
    async () => {
      const dir = mk();
      const child = spawn(process.execPath, [KARS_BIN, 'kube', 'up', '--kubernetes-version', pin.minor, '--dir', dir], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const closed = new Promise<number | null>((r) => child.once('close', r));
      try {
        await until('kars kube up prints its kubeconfig', () => /Ctrl-C stops it/.test(out), { timeoutMs: 180_000, everyMs: 100 });
        const kubeconfig = /kubeconfig \(admin\): (\S+)/.exec(out)?.[1];
        assert.ok(kubeconfig, out);
        assert.ok(kubeconfig.startsWith(join(dir, pin.version)), kubeconfig);
        assert.match(out, new RegExp(`export KUBECONFIG=${kubeconfig.replace(/[.]/g, '\\.')}`));
        const r = await kubectl(bin!, kubeconfig, ['get', 'namespace', 'kube-system', '-o', 'name']);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout.trim(), 'namespace/kube-system');
      } finally {
        child.kill('SIGINT');
      }
      assert.equal(await closed, 0, err);
      assert.match(err, /stopping the control plane/);
      assert.deepEqual(processesMentioning(dir), []);
    },
  );
});
