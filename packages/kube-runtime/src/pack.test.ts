/**
 * kube-runtime as a stranger gets it: `npm pack` of it and of the two packages it depends on,
 * installed in an empty folder from those tarballs and the npm cache alone (no registry), then the
 * README's example, copied verbatim, run against a real `kars apiserver` until it prints an edit.
 *
 * The third-party dependencies come from the npm cache: the folder gets a package-lock.json made
 * from the workspace's own (the same resolved versions and integrities), so `npm ci --offline`
 * needs no registry metadata. Skipped only when npm is not installed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';

const PACKAGES = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ROOT = join(PACKAGES, '..');
const PACKED = ['kube-core', 'kube-client', 'kube-runtime'] as const;
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function npmAvailable(): boolean {
  try {
    execFileSync(NPM, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

/** The example controller in the README: the js block that starts with its file name. */
function readmeExample(readme: string): string {
  const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
  const example = blocks.filter((b) => b.startsWith('// configmap-controller.mjs'));
  if (example.length !== 1) throw new Error(`the README must hold exactly one configmap-controller.mjs example, found ${example.length}`);
  return example[0] as string;
}

type LockEntry = Record<string, unknown> & { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };

/** Where Node would find `dep` from the package installed at lock path `from` ('' is the root). */
function resolveIn(packages: Record<string, LockEntry>, from: string, dep: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base === '' ? '' : `${base}/`}node_modules/${dep}`;
    if (packages[candidate]) return candidate;
    if (base === '') return undefined;
    const i = base.lastIndexOf('/node_modules/');
    base = i < 0 ? '' : base.slice(0, i);
  }
}

/**
 * A lockfile for a project that depends on the packed tarballs: their third-party dependency
 * closure as the workspace lock resolved it, and the tarballs themselves.
 */
function lockFor(dir: string, tarballs: Record<string, string>): { pkg: unknown; lock: unknown } {
  const ws = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const out: Record<string, LockEntry> = {};
  const rootDeps: Record<string, string> = {};
  const queue: Array<{ from: string; dep: string; optional: boolean }> = [];
  for (const p of PACKED) {
    const manifest = JSON.parse(readFileSync(join(PACKAGES, p, 'package.json'), 'utf8')) as LockEntry & {
      name: string;
      version: string;
      license?: string;
    };
    const file = tarballs[p] as string;
    rootDeps[manifest.name] = `file:${file}`;
    const integrity = `sha512-${createHash('sha512')
      .update(readFileSync(join(dir, file)))
      .digest('base64')}`;
    out[`node_modules/${manifest.name}`] = {
      version: manifest.version,
      resolved: `file:${file}`,
      integrity,
      ...(manifest.license ? { license: manifest.license } : {}),
      ...(manifest.dependencies ? { dependencies: manifest.dependencies } : {}),
    };
    for (const dep of Object.keys(manifest.dependencies ?? {}))
      if (!dep.startsWith('@kars/')) queue.push({ from: `packages/${p}`, dep, optional: false });
  }
  while (queue.length > 0) {
    const { from, dep, optional } = queue.shift() as { from: string; dep: string; optional: boolean };
    const at = resolveIn(ws.packages, from, dep) ?? resolveIn(ws.packages, '', dep);
    if (at === undefined) {
      if (optional) continue;
      throw new Error(`the workspace lock has no ${dep} (needed by ${from})`);
    }
    if (!at.startsWith('node_modules/')) throw new Error(`${dep} resolves to ${at}, outside node_modules/`);
    if (out[at]) continue;
    const entry: LockEntry = { ...(ws.packages[at] as LockEntry) };
    delete entry['dev'];
    delete entry['devOptional'];
    out[at] = entry;
    for (const d of Object.keys(entry.dependencies ?? {})) queue.push({ from: at, dep: d, optional: false });
    for (const d of Object.keys(entry.optionalDependencies ?? {})) queue.push({ from: at, dep: d, optional: true });
  }
  const pkg = { name: 'kube-runtime-pack-check', version: '0.0.0', private: true, type: 'module', dependencies: rootDeps };
  const lock = {
    name: pkg.name,
    version: pkg.version,
    lockfileVersion: 3,
    requires: true,
    packages: { '': { name: pkg.name, version: pkg.version, dependencies: rootDeps }, ...out },
  };
  return { pkg, lock };
}

/** Resolves with the first line of `child`'s stdout that `pred` accepts; rejects after `ms`. */
function lineFrom(child: ChildProcess, out: string[], pred: (line: string) => boolean, ms: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      const hit = out.find(pred);
      if (hit === undefined) return false;
      cleanup();
      resolve(hit);
      return true;
    };
    const onData = (): void => void check();
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${what}: not within ${ms} ms; output so far:\n${out.join('\n')}`));
    }, ms);
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
    };
    if (!check()) child.stdout?.on('data', onData);
  });
}

describe('the packed kube-runtime', { skip: npmAvailable() ? false : 'npm is not installed' }, () => {
  let dir: string;
  let ts: TestServer;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kars-kube-runtime-pack-'));
  });
  after(async () => {
    await ts?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs from its tarballs and the npm cache alone, and the README example sees a ConfigMap edit against kars apiserver', async (t) => {
    const t0 = Date.now();
    // npm prints the tarball names, one a line, in the order given.
    const packed = (await run(NPM, ['pack', '--silent', '--pack-destination', dir, ...PACKED.map((p) => join(PACKAGES, p))], ROOT))
      .trim()
      .split('\n')
      .map((l) => l.trim());
    assert.equal(packed.length, PACKED.length, `npm pack printed ${JSON.stringify(packed)}`);
    const tarballs = Object.fromEntries(PACKED.map((p, i) => [p, packed[i] as string]));
    const listing = await run('tar', ['tzf', join(dir, tarballs['kube-runtime'] as string)], dir);
    assert.match(listing, /package\/dist\/index\.d\.ts/, 'types are in the tarball');
    assert.match(listing, /package\/README\.md/);
    assert.doesNotMatch(listing, /\.test\.js|\/src\//, 'no tests or sources in the tarball');

    const { pkg, lock } = lockFor(dir, tarballs);
    writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
    writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock, null, 2));
    await run(NPM, ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], dir);
    const installed = JSON.parse(readFileSync(join(dir, 'node_modules/@kars/kube-runtime/package.json'), 'utf8')) as { version: string };
    assert.equal(installed.version, '0.1.0');
    const probe = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const t = await import('@kars/kube-runtime/testing'); console.log(typeof t.until, t.fastWatchConfig({ pingMs: 0 }).pingIntervalMs)",
      ],
      dir,
    );
    assert.equal(probe.trim(), 'function 0', 'the ./testing subpath resolves and runs from the installed tarballs');
    t.diagnostic(`packed and installed in ${Date.now() - t0} ms`);

    const example = readmeExample(readFileSync(join(PACKAGES, 'kube-runtime', 'README.md'), 'utf8'));
    writeFileSync(join(dir, 'configmap-controller.mjs'), example);

    ts = await startTestServer();
    const CM = '/api/v1/namespaces/default/configmaps';
    assert.equal(
      (await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'demo' }, data: { v: '1' } })).status,
      201,
    );
    const child = spawn(process.execPath, ['configmap-controller.mjs'], {
      cwd: dir,
      env: { PATH: process.env['PATH'] ?? '', KUBECONFIG: ts.server.kubeconfigPath, NAMESPACE: 'default' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: string[] = [];
    const err: string[] = [];
    let buf = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      buf += c;
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      out.push(...lines);
    });
    child.stderr.on('data', (c: Buffer) => err.push(c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const health = await lineFrom(child, out, (l) => l.startsWith('health on http://'), 15_000, 'health server');
      await lineFrom(child, out, (l) => l === 'default/demo {"v":"1"}', 15_000, 'the existing ConfigMap');
      const readyz = await fetch(`${health.slice('health on '.length)}/readyz`);
      assert.equal(readyz.status, 200, 'ready once the watch is listed and fresh');
      const edit = await ts.client.patch(`${CM}/demo`, { data: { v: '2' } }, 'merge');
      assert.equal(edit.status, 200);
      await lineFrom(child, out, (l) => l === 'default/demo {"v":"2"}', 15_000, 'the edit');
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `the example exits cleanly on SIGTERM; stderr: ${err.join('')}`);
      t.diagnostic(`whole check in ${Date.now() - t0} ms`);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
