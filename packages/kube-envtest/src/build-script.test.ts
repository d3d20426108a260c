// scripts/build-kube.mjs (`npm run kube:build`) with a stand-in `go` on PATH: it builds into the
// cache under temporary names and stamps each directory last (so findKubeBinaries finds exactly
// what it finished), a second run does nothing, an interrupted build leaves no binary, and each
// failure says what failed and what to do. The real Go build is measured, not tested, here.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { findKubeBinaries } from './binaries.js';
import { readPins } from './versions.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/build-kube.mjs', import.meta.url));
const pins = readPins();
const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
const mk = (p: string): string => {
  const d = mkdtempSync(join(tmpdir(), p));
  tmp.push(d);
  return d;
};

// A `go` that answers what the script asks. `go build -o OUT` writes OUT at once (a half-written
// binary, as a real link does) and then: FAKE_GO_BUILD=hang waits forever, FAKE_GO_BUILD=fail:MSG
// fails with MSG on stderr, else finishes OUT. FAKE_GO_MOD=fail:MSG fails `go mod download`.
const FAKE_GO = `#!/bin/sh
case "$1" in
  version) echo "go version go1.26.8 linux/amd64 (stand-in)" ;;
  env) echo "$FAKE_GO_HOME/gocache"; echo "$FAKE_GO_HOME/modcache" ;;
  mod) case "$FAKE_GO_MOD" in fail:*) echo "\${FAKE_GO_MOD#fail:}" >&2; exit 1 ;; esac ;;
  build)
    out=""; prev=""
    for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
    printf 'half' > "$out"
    case "$FAKE_GO_BUILD" in
      hang) echo "building $out"; while :; do sleep 0.1; done ;;
      fail:*) echo "\${FAKE_GO_BUILD#fail:}" >&2; exit 1 ;;
    esac
    printf '#!/bin/sh\\necho built\\n' > "$out"; chmod +x "$out" ;;
  *) echo "stand-in go: $*" >&2; exit 2 ;;
esac
`;

function fakeGoDir(): string {
  const d = mk('kars-fake-go-');
  writeFileSync(join(d, 'go'), FAKE_GO);
  chmodSync(join(d, 'go'), 0o755);
  return d;
}

interface Run {
  code: number | null;
  out: string;
}
function runScript(env: Record<string, string>, args: string[] = [], onOutput?: (s: string, kill: () => void) => void): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const on = (d: Buffer): void => {
      out += d.toString();
      onOutput?.(out, () => child.kill('SIGINT'));
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    child.on('close', (code) => resolve({ code, out }));
  });
}

function setup(): { env: Record<string, string>; cache: string } {
  const goDir = fakeGoDir();
  const cache = join(mk('kars-kube-build-'), 'cache');
  return { cache, env: { PATH: `${goDir}:${process.env['PATH'] ?? ''}`, FAKE_GO_HOME: goDir, KARS_KUBE_CACHE: cache } };
}

describe('npm run kube:build (scripts/build-kube.mjs) with a stand-in go', () => {
  it('builds every pinned target, stamps them, and findKubeBinaries finds them; a second run does nothing', async () => {
    const { env, cache } = setup();
    const first = await runScript(env);
    assert.equal(first.code, 0, first.out);
    const count = pins.kubernetes.length * 2 + 2;
    assert.match(first.out, new RegExp(`built ${count} binaries in `));
    for (const p of pins.kubernetes) {
      const f = findKubeBinaries(p.minor, { cacheDir: cache });
      assert.ok(f.binaries, f.reason);
      assert.equal(readFileSync(f.binaries.kubeApiserver, 'utf8'), '#!/bin/sh\necho built\n');
    }
    const second = await runScript(env);
    assert.equal(second.code, 0, second.out);
    assert.match(second.out, /up to date .*; nothing to do/);
    assert.doesNotMatch(second.out, /\[1\//);
  });

  it('--version builds one Kubernetes version (and etcd, helm) only', async () => {
    const { env, cache } = setup();
    const p = pins.kubernetes[0]!;
    const r = await runScript(env, ['--version', p.minor]);
    assert.equal(r.code, 0, r.out);
    assert.ok(findKubeBinaries(p.minor, { cacheDir: cache }).binaries);
    for (const other of pins.kubernetes.slice(1)) assert.equal(findKubeBinaries(other.minor, { cacheDir: cache }).binaries, null);
  });

  it('an interrupted build leaves no binary, no temp file and no stamp', async () => {
    const { env, cache } = setup();
    const p = pins.kubernetes[0]!;
    let sent = false;
    const r = await runScript({ ...env, FAKE_GO_BUILD: 'hang' }, ['--version', p.minor], (out, kill) => {
      if (!sent && out.includes('building ')) {
        sent = true;
        kill();
      }
    });
    assert.equal(r.code, 130, r.out);
    assert.match(r.out, /interrupted; nothing half-built was left/);
    const dir = join(cache, `kubernetes-${p.version}`);
    assert.deepEqual(readdirSync(dir), [], 'no kube-apiserver, no .tmp-*, no stamp.json');
    assert.equal(findKubeBinaries(p.minor, { cacheDir: cache }).binaries, null);
  });

  it('a failed build: names the binary, removes its temp file; the next run resumes', async () => {
    const { env, cache } = setup();
    const p = pins.kubernetes[0]!;
    const r = await runScript({ ...env, FAKE_GO_BUILD: 'fail:write /x: no space left on device' }, ['--version', p.minor]);
    assert.equal(r.code, 1);
    assert.match(r.out, new RegExp(`building kube-apiserver ${p.version.replace(/\./g, '\\.')} failed`));
    assert.match(r.out, /the disk is full/);
    assert.deepEqual(readdirSync(join(cache, `kubernetes-${p.version}`)), []);
    const again = await runScript(env, ['--version', p.minor]);
    assert.equal(again.code, 0, again.out);
  });

  // What this machine's proxy answers for a version it does not serve (seen with kube-gen and v1.34.99).
  it('a version the proxy refuses: says so and what to do', async () => {
    const { env } = setup();
    const r = await runScript({
      ...env,
      FAKE_GO_MOD:
        'fail:go: k8s.io/kubernetes@v1.34.99: reading https://proxy.golang.org/k8s.io/kubernetes/@v/v1.34.99.info: 403 Forbidden\n\tserver response: This module version is not available.',
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /downloading the modules of k8s\.io\/kubernetes@v1\.\d+\.\d+ failed/);
    assert.match(r.out, /module proxy .* refused/);
    assert.match(r.out, /go list -m -versions k8s\.io\/kubernetes/);
  });

  it('no go on PATH: says so and how to get it', async () => {
    const empty = mk('kars-no-go-');
    const r = await runScript({ PATH: empty, KARS_KUBE_CACHE: join(empty, 'cache') });
    assert.equal(r.code, 1);
    assert.match(r.out, /no `go` on PATH/);
    assert.match(r.out, /install Go/);
  });

  it('too little disk: refuses before building', async () => {
    const { env, cache } = setup();
    const r = await runScript({ ...env, KARS_KUBE_BUILD_NEED_GB: '1000000' });
    assert.equal(r.code, 1);
    assert.match(r.out, /GB free for .*a cold Kubernetes build needs about 1000000 GB/);
    assert.match(r.out, /go clean -cache/);
    assert.equal(existsSync(join(cache, `kubernetes-${pins.kubernetes[0]!.version}`)), false);
  });

  it('an unpinned version: names the pinned ones', async () => {
    const { env } = setup();
    const r = await runScript(env, ['--version', '1.2']);
    assert.equal(r.code, 1);
    assert.match(r.out, /Kubernetes 1\.2 is not pinned/);
  });
});
