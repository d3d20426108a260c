#!/usr/bin/env node
// Builds the real control plane (kube-apiserver, kube-controller-manager, etcd, helm) at the versions
// pinned in kube/versions.json, from the Go wrapper modules under kube/, into a cache outside the tree:
//
//   ${KARS_KUBE_CACHE:-~/.cache/kars/kube}/kubernetes-v1.34.4/{kube-apiserver,kube-controller-manager}
//                                          etcd-v3.6.16/etcd
//                                          helm-v3.22.0/helm
//
// Each directory holds a stamp.json written last, naming the versions and a digest of the wrapper's
// go.mod + go.sum; a directory whose stamp matches is left alone (a warm run does nothing). Each
// binary is built under a temporary name in its directory and renamed into place, so an interrupted
// build never leaves a binary a later run (or packages/kube-envtest) would pick up.
//
// Usage: npm run kube:build [-- --version 1.34] [-- --force]
// See docs/adr/0022-real-kubernetes-control-plane.md.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, statfsSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const kubeDir = join(root, 'kube');
const pins = JSON.parse(readFileSync(join(kubeDir, 'versions.json'), 'utf8'));
const cacheRoot = process.env.KARS_KUBE_CACHE || join(homedir(), '.cache', 'kars', 'kube');
/** Free space a cold build needs: the module cache and the build cache of one Kubernetes version (KARS_KUBE_BUILD_NEED_GB overrides). */
const NEED_BYTES = Number(process.env.KARS_KUBE_BUILD_NEED_GB || 4) * 1024 ** 3;

const { values: opts } = parseArgs({
  options: { version: { type: 'string', multiple: true }, force: { type: 'boolean', default: false } },
});

function fail(what, todo) {
  console.error(`kube:build: ${what}\n  → ${todo}`);
  process.exit(1);
}
const secs = (ms) => (ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`);

// --- which targets -------------------------------------------------------------------------------
const wanted = opts.version ?? pins.kubernetes.map((k) => k.minor);
const kube = wanted.map((w) => {
  const k = pins.kubernetes.find((p) => p.minor === w.replace(/^v/, '') || p.version === w || p.version === `v${w}`);
  if (!k)
    fail(
      `Kubernetes ${w} is not pinned`,
      `pinned: ${pins.kubernetes.map((p) => p.minor).join(', ')} (kube/versions.json; README "Real Kubernetes" says how to add one)`,
    );
  return k;
});

/** A build target: one cache directory, its wrapper module, the binaries built from it. */
function kubeTarget(k) {
  const [, major, minor] = /^v(\d+)\.(\d+)\./.exec(k.version);
  const x = (pkg, name, value) => `-X ${pkg}.${name}=${value}`;
  // What hack/lib/version.sh stamps into an upstream build (the date stays the epoch: reproducible).
  const ldflags = ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'].flatMap((p) => [
    x(p, 'gitVersion', k.version),
    x(p, 'gitMajor', major),
    x(p, 'gitMinor', minor),
    x(p, 'gitTreeState', 'clean'),
  ]);
  return {
    name: `kubernetes-${k.version}`,
    module: 'k8s.io/kubernetes',
    version: k.version,
    dir: k.dir,
    toolchain: k.toolchain,
    ldflags,
    binaries: [
      { name: 'kube-apiserver', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver' },
      { name: 'kube-controller-manager', pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager' },
    ],
  };
}
const etcdTarget = {
  name: `etcd-${pins.etcd.version}`,
  module: 'go.etcd.io/etcd/server/v3',
  version: pins.etcd.version,
  dir: pins.etcd.dir,
  toolchain: pins.etcd.toolchain,
  ldflags: [],
  binaries: [{ name: 'etcd', pkg: 'go.etcd.io/etcd/server/v3' }],
};
function helmTarget() {
  const goMod = readFileSync(join(kubeDir, pins.helm.dir, 'go.mod'), 'utf8');
  const cg = /\bk8s\.io\/client-go v0\.(\d+)\./.exec(goMod);
  const v = 'helm.sh/helm/v3';
  return {
    name: `helm-${pins.helm.version}`,
    module: v,
    version: pins.helm.version,
    dir: pins.helm.dir,
    toolchain: pins.helm.toolchain,
    // As helm's Makefile does: its version, and the Kubernetes version `helm template` assumes.
    ldflags: [
      `-X ${v}/internal/version.version=${pins.helm.version}`,
      `-X ${v}/internal/version.metadata=`,
      `-X ${v}/internal/version.gitTreeState=clean`,
      ...(cg
        ? [
            `-X ${v}/pkg/lint/rules.k8sVersionMajor=1`,
            `-X ${v}/pkg/lint/rules.k8sVersionMinor=${cg[1]}`,
            `-X ${v}/pkg/chartutil.k8sVersionMajor=1`,
            `-X ${v}/pkg/chartutil.k8sVersionMinor=${cg[1]}`,
          ]
        : []),
    ],
    binaries: [{ name: 'helm', pkg: 'helm.sh/helm/v3/cmd/helm' }],
  };
}
const targets = [...kube.map(kubeTarget), etcdTarget, helmTarget()];

// --- preflight: go, the wrapper modules, disk ----------------------------------------------------
function envFor(t) {
  // -mod=readonly: build exactly what the committed go.mod/go.sum say. CGO off: static binaries,
  // as upstream builds these, and no C toolchain needed.
  const env = { ...process.env, GOWORK: 'off', GOFLAGS: '-mod=readonly', CGO_ENABLED: '0' };
  if (t.toolchain) env.GOTOOLCHAIN = t.toolchain;
  return env;
}
const goVersion = spawnSync('go', ['version'], { encoding: 'utf8' });
if (goVersion.error?.code === 'ENOENT')
  fail('no `go` on PATH', 'install Go ≥ 1.26 (https://go.dev/doc/install) and put it on PATH, then run `npm run kube:build` again');
if (goVersion.status !== 0)
  fail(`\`go version\` failed: ${goVersion.stderr.trim()}`, 'fix the Go installation (GOROOT, GOTOOLCHAIN) and retry');
console.log(`kube:build: ${goVersion.stdout.trim()}; cache ${cacheRoot}`);

/** sha256 of the wrapper's go.mod and go.sum: the stamp changes when the module does. */
function moduleDigest(t) {
  const h = createHash('sha256');
  for (const f of ['go.mod', 'go.sum']) h.update(readFileSync(join(kubeDir, t.dir, f)));
  return h.digest('hex');
}
function stampOk(t, digest) {
  const dir = join(cacheRoot, t.name);
  try {
    const s = JSON.parse(readFileSync(join(dir, 'stamp.json'), 'utf8'));
    return s.version === t.version && s.moduleDigest === digest && t.binaries.every((b) => statSync(join(dir, b.name)).isFile());
  } catch {
    return false;
  }
}

for (const t of targets) {
  const goMod = join(kubeDir, t.dir, 'go.mod');
  if (!existsSync(goMod) || !existsSync(join(kubeDir, t.dir, 'go.sum')))
    fail(
      `kube/${t.dir}/go.mod or go.sum is missing`,
      'run `node scripts/kube-gen.mjs` (it generates them from kube/versions.json) and commit them',
    );
  if (
    !new RegExp(`^\\s*(require\\s+)?${t.module.replace(/[.\/]/g, '\\$&')} ${t.version.replace(/\./g, '\\.')}\\b`, 'm').test(
      readFileSync(goMod, 'utf8'),
    )
  )
    fail(
      `kube/${t.dir}/go.mod does not require ${t.module} ${t.version} (kube/versions.json changed?)`,
      'run `node scripts/kube-gen.mjs` and commit the result',
    );
}

const todo = targets.map((t) => ({ t, digest: moduleDigest(t) })).filter(({ t, digest }) => opts.force || !stampOk(t, digest));
if (todo.length === 0) {
  console.log(`kube:build: up to date (${targets.map((t) => t.name).join(', ')}); nothing to do`);
  process.exit(0);
}

{
  const env = envFor(todo[0].t);
  const [goCache, modCache] = spawnSync('go', ['env', 'GOCACHE', 'GOMODCACHE'], { encoding: 'utf8', env }).stdout.trim().split('\n');
  mkdirSync(cacheRoot, { recursive: true });
  for (const [what, p] of [
    ['the binary cache', cacheRoot],
    ['GOCACHE', goCache],
    ['GOMODCACHE', modCache],
  ]) {
    let dir = p;
    while (dir && !existsSync(dir)) dir = dirname(dir);
    if (!dir) continue;
    const fs = statfsSync(dir);
    const free = fs.bavail * fs.bsize;
    if (free < NEED_BYTES)
      fail(
        `only ${(free / 1024 ** 3).toFixed(1)} GB free for ${what} (${p}); a cold Kubernetes build needs about ${NEED_BYTES / 1024 ** 3} GB`,
        'free some disk (`go clean -cache` empties the Go build cache) or point KARS_KUBE_CACHE / GOCACHE / GOMODCACHE at a larger disk',
      );
  }
}

// --- build -------------------------------------------------------------------------------------
let current; // { child, tmp } of the running `go`
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    interrupted = true;
    if (current) {
      const { child, tmp } = current;
      // Wait (bounded) for go to exit, so nothing writes the temp file after it is removed.
      const closed = new Promise((r) => child.once('close', r));
      child.kill('SIGTERM');
      await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
      rmSync(tmp, { force: true });
    }
    console.error(`\nkube:build: interrupted; nothing half-built was left in ${cacheRoot}`);
    process.exit(130);
  });
}

function run(args, t, cwd, tmp) {
  return new Promise((resolve) => {
    const child = spawn('go', args, { cwd, env: envFor(t), stdio: ['ignore', 'inherit', 'pipe'] });
    current = { child, tmp };
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
      process.stderr.write(d);
    });
    child.on('close', (code) => {
      // Interrupted: the signal handler cleans up and exits; the build loop must not go on.
      if (interrupted) return;
      current = undefined;
      resolve({ code, stderr });
    });
  });
}

function explain(t, stderr) {
  if (/(403 Forbidden|404 Not Found|410 Gone|not available|unknown revision|invalid version|not found: )/.test(stderr))
    return `the module proxy (${process.env.GOPROXY || 'go env GOPROXY'}) refused a module of ${t.module}@${t.version}; check the pin in kube/versions.json (\`go list -m -versions ${t.module}\` lists what it serves), run \`node scripts/kube-gen.mjs\`, retry`;
  if (/no space left on device/i.test(stderr)) return 'the disk is full: free some space (`go clean -cache`) and retry';
  if (/requires go >= |toolchain not available|go: downloading go1/.test(stderr))
    return `this module needs a newer Go: set "toolchain": "go1.27.3" for it in kube/versions.json (GOTOOLCHAIN is exported for that build only), retry`;
  if (/missing go.sum entry|updates to go.mod needed/.test(stderr))
    return 'the wrapper module is out of date: run `node scripts/kube-gen.mjs`, commit, retry';
  return 'read the Go error above; `npm run kube:build` resumes where it stopped';
}

const total0 = Date.now();
const built = [];
let n = 0;
const count = todo.reduce((a, { t }) => a + t.binaries.length, 0);
for (const { t, digest } of todo) {
  const dir = join(cacheRoot, t.name);
  mkdirSync(dir, { recursive: true });
  rmSync(join(dir, 'stamp.json'), { force: true });
  for (const f of readdirSync(dir)) if (f.startsWith('.tmp-')) rmSync(join(dir, f), { force: true });
  const cwd = join(kubeDir, t.dir);
  console.log(`kube:build: ${t.module}@${t.version}: downloading modules (kube/${t.dir}) …`);
  const dl = await run(['mod', 'download'], t, cwd, join(dir, '.tmp-none'));
  if (dl.code !== 0) fail(`downloading the modules of ${t.module}@${t.version} failed`, explain(t, dl.stderr));
  const times = {};
  for (const b of t.binaries) {
    n++;
    const tmp = join(dir, `.tmp-${b.name}-${process.pid}`);
    console.log(`kube:build: [${n}/${count}] ${b.name} ${t.version} …`);
    const t0 = Date.now();
    const beat = setInterval(() => console.log(`kube:build:   … still building ${b.name} (${secs(Date.now() - t0)})`), 60_000);
    const r = await run(['build', '-trimpath', `-ldflags=-s -w ${t.ldflags.join(' ')}`, '-o', tmp, b.pkg], t, cwd, tmp);
    clearInterval(beat);
    if (r.code !== 0) {
      rmSync(tmp, { force: true });
      fail(`building ${b.name} ${t.version} failed (go build exit ${r.code})`, explain(t, r.stderr));
    }
    renameSync(tmp, join(dir, b.name));
    times[b.name] = Date.now() - t0;
    const size = statSync(join(dir, b.name)).size;
    console.log(`kube:build: [${n}/${count}] ${b.name} ${t.version} built in ${secs(times[b.name])} (${(size / 1024 ** 2).toFixed(0)} MB)`);
    built.push(b.name);
  }
  const stamp = {
    module: t.module,
    version: t.version,
    moduleDigest: digest,
    go: goVersion.stdout.trim(),
    binaries: t.binaries.map((b) => b.name),
    buildSeconds: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, Math.round(v / 100) / 10])),
    builtAt: new Date().toISOString(),
  };
  const stampTmp = join(dir, `.tmp-stamp-${process.pid}`);
  writeFileSync(stampTmp, JSON.stringify(stamp, null, 2) + '\n');
  renameSync(stampTmp, join(dir, 'stamp.json'));
}
console.log(`kube:build: built ${built.length} binaries in ${secs(Date.now() - total0)} into ${cacheRoot}`);
