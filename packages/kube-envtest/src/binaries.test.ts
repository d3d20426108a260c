// The lookup of built binaries, the PKI, and the start-failure paths with stand-in binaries: these
// run everywhere, with or without `npm run kube:build`.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { BUILD_COMMAND, findKubeBinaries } from './binaries.js';
import type { KubeBinaries } from './binaries.js';
import { ControlPlaneStartError, startControlPlane } from './control-plane.js';
import { ensureControlPlanePki, SERVING_HOSTS } from './pki.js';
import { processesMentioning } from './testing.js';
import { pinFor, readPins } from './versions.js';

const pins = readPins();
const tmp: string[] = [];
const mk = (prefix: string): string => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  tmp.push(d);
  return d;
};
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

function script(path: string, body: string): string {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** A cache holding a complete (fake) build of `version`, as scripts/build-kube.mjs lays it out. */
function fakeCache(version: string, { stamps = true }: { stamps?: boolean } = {}): string {
  const cache = mk('kars-kube-cache-');
  const put = (dir: string, v: string, names: string[]): void => {
    mkdirSync(join(cache, dir), { recursive: true });
    for (const n of names) script(join(cache, dir, n), 'exit 0');
    if (stamps) writeFileSync(join(cache, dir, 'stamp.json'), JSON.stringify({ version: v }));
  };
  put(`kubernetes-${version}`, version, ['kube-apiserver', 'kube-controller-manager']);
  put(`etcd-${pins.etcd.version}`, pins.etcd.version, ['etcd']);
  put(`helm-${pins.helm.version}`, pins.helm.version, ['helm']);
  return cache;
}

describe('findKubeBinaries', () => {
  const v = pins.kubernetes[0]!.version;
  it('an empty cache: null, and the reason names the build command', () => {
    const r = findKubeBinaries(pins.kubernetes[0]!.minor, { cacheDir: mk('kars-kube-empty-') });
    assert.equal(r.binaries, null);
    assert.ok(r.reason.includes(BUILD_COMMAND), r.reason);
    assert.ok(r.reason.includes(v), r.reason);
  });
  it('a complete build: the four paths, each version spelling finds it', () => {
    const cache = fakeCache(v);
    for (const spelling of [pins.kubernetes[0]!.minor, `v${pins.kubernetes[0]!.minor}`, v, v.slice(1)]) {
      const r = findKubeBinaries(spelling, { cacheDir: cache });
      assert.ok(r.binaries, `${spelling}: ${r.reason}`);
      assert.equal(r.binaries.version, v);
      assert.equal(r.binaries.kubeApiserver, join(cache, `kubernetes-${v}`, 'kube-apiserver'));
      assert.equal(r.binaries.etcd, join(cache, `etcd-${pins.etcd.version}`, 'etcd'));
    }
  });
  it('binaries without their stamp (an unfinished build) are not used', () => {
    const r = findKubeBinaries(v, { cacheDir: fakeCache(v, { stamps: false }) });
    assert.equal(r.binaries, null);
    assert.match(r.reason, /no finished build/);
  });
  it('a stamp naming another version is not used', () => {
    const cache = fakeCache(v);
    writeFileSync(join(cache, `kubernetes-${v}`, 'stamp.json'), JSON.stringify({ version: 'v1.0.0' }));
    const r = findKubeBinaries(v, { cacheDir: cache });
    assert.equal(r.binaries, null);
    assert.match(r.reason, /holds v1\.0\.0/);
  });
  it('a missing binary is named', () => {
    const cache = fakeCache(v);
    rmSync(join(cache, `etcd-${pins.etcd.version}`, 'etcd'));
    const r = findKubeBinaries(v, { cacheDir: cache });
    assert.equal(r.binaries, null);
    assert.match(r.reason, /etcd is missing/);
  });
  it('an unpinned version: null, naming the pinned ones', () => {
    const r = findKubeBinaries('1.2', { cacheDir: fakeCache(v) });
    assert.equal(r.binaries, null);
    assert.match(r.reason, /1\.2 is not pinned/);
    for (const p of pins.kubernetes) assert.ok(r.reason.includes(p.minor));
  });
  it('pinFor: no version is the newest pinned; "1.3" is not "1.34"', () => {
    assert.equal(pinFor(undefined, pins), pins.kubernetes[pins.kubernetes.length - 1]);
    assert.equal(pinFor('1.3', pins), undefined);
    assert.equal(pinFor('1.34.', pins), undefined);
  });
});

describe('ensureControlPlanePki', () => {
  const dir = join(mk('kars-pki-'), 'pki');
  const pki = ensureControlPlanePki(dir);
  const ca = new X509Certificate(readFileSync(pki.caCert));
  const cert = (f: string): X509Certificate => new X509Certificate(readFileSync(f));
  it('every certificate is issued by the CA; the CA is a CA', () => {
    assert.equal(ca.ca, true);
    for (const f of [pki.servingCert, pki.adminCert, pki.controllerManagerCert]) {
      const c = cert(f);
      assert.equal(c.ca, false);
      assert.ok(c.verify(ca.publicKey), `${f} verifies against the CA`);
      assert.ok(c.checkIssued(ca));
    }
  });
  it('the serving certificate covers loopback and the kubernetes Service names', () => {
    const c = cert(pki.servingCert);
    for (const h of SERVING_HOSTS) assert.ok(/^\d/.test(h) ? c.checkIP(h) : c.checkHost(h), h);
    assert.equal(c.checkHost('example.com'), undefined);
  });
  it('the admin is in system:masters; the controller manager is system:kube-controller-manager', () => {
    assert.match(cert(pki.adminCert).subject, /O=system:masters/);
    assert.match(cert(pki.controllerManagerCert).subject, /CN=system:kube-controller-manager/);
    assert.doesNotMatch(cert(pki.controllerManagerCert).subject, /system:masters/);
  });
  it('a second call reuses the files (kubeconfigs keep working across restarts)', () => {
    const before = readFileSync(pki.adminCert, 'utf8');
    ensureControlPlanePki(dir);
    assert.equal(readFileSync(pki.adminCert, 'utf8'), before);
  });
});

describe('startControlPlane failures, with stand-in binaries', () => {
  function fakeBinaries(etcdBody: string): { binaries: KubeBinaries; dir: string } {
    const d = mk('kars-fake-bin-');
    return {
      dir: d,
      binaries: {
        version: 'v0.0.0-fake',
        etcd: script(join(d, 'etcd'), etcdBody),
        kubeApiserver: script(join(d, 'kube-apiserver'), 'exit 0'),
        kubeControllerManager: script(join(d, 'kube-controller-manager'), 'exit 0'),
        helm: script(join(d, 'helm'), 'exit 0'),
      },
    };
  }
  it('absent binaries: rejects naming the build command', async () => {
    const saved = process.env['KARS_KUBE_CACHE'];
    process.env['KARS_KUBE_CACHE'] = mk('kars-kube-empty-');
    try {
      await assert.rejects(
        startControlPlane(),
        (e: unknown) => e instanceof ControlPlaneStartError && e.process === 'binaries' && e.message.includes(BUILD_COMMAND),
      );
    } finally {
      if (saved === undefined) delete process.env['KARS_KUBE_CACHE'];
      else process.env['KARS_KUBE_CACHE'] = saved;
    }
  });
  it('a process that exits at once: rejects naming it, its exit code and its last output', async () => {
    const { binaries } = fakeBinaries('echo "listen tcp: bind: pretend failure" >&2; exit 3');
    const dir = join(mk('kars-envtest-fake-'), 'cp');
    const err = await startControlPlane({ binaries, dir }).then(
      () => assert.fail('started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlPlaneStartError);
    assert.equal(err.process, 'etcd');
    assert.match(err.message, /^etcd exited with code 3 before it was ready/);
    assert.match(err.tail, /pretend failure/);
    assert.ok(existsSync(join(dir, 'logs', 'etcd.log')), 'the given dir (and its log) is kept');
  });
  it('a process that never becomes ready: rejects after the bound and kills it', async () => {
    // Not `exec sleep`: the shell (whose command line names the dir) must be what is stopped.
    const { binaries } = fakeBinaries("trap 'exit 0' TERM; echo waiting; while :; do sleep 0.1; done");
    const dir = join(mk('kars-envtest-fake-'), 'cp');
    const err = await startControlPlane({ binaries, dir, readyTimeoutMs: 300, stopGraceMs: 2000 }).then(
      () => assert.fail('started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlPlaneStartError);
    assert.match(err.message, /^etcd was not ready within 0\.3 s/);
    assert.match(err.tail, /waiting/);
    assert.deepEqual(processesMentioning(dir), [], 'the stand-in etcd was stopped');
  });
  it('a process that ignores SIGTERM is killed after the grace', async () => {
    const { binaries } = fakeBinaries("trap '' TERM; echo stubborn; while :; do sleep 0.1; done");
    const dir = join(mk('kars-envtest-fake-'), 'cp');
    const err = await startControlPlane({ binaries, dir, readyTimeoutMs: 300, stopGraceMs: 300 }).then(
      () => assert.fail('started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlPlaneStartError);
    assert.deepEqual(processesMentioning(dir), [], 'SIGKILL after the grace');
    assert.match(readFileSync(join(dir, 'logs', 'etcd.log'), 'utf8'), /stubborn/);
  });
  it('a temp dir is removed when the start fails', async () => {
    const { binaries } = fakeBinaries('exit 1');
    const err = await startControlPlane({ binaries }).then(
      () => assert.fail('started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlPlaneStartError);
    const logPath = /\(log: (.*)\/logs\/etcd\.log\)/.exec(err.message)?.[1];
    assert.ok(logPath, err.message);
    assert.equal(existsSync(logPath), false, `${logPath} removed`);
  });
});
