// The image without a container engine: build the production tree exactly as the Dockerfile does
// (scripts/image-tree.mjs), then run `kars controller --help` and `kars router --help` from it, with dev
// dependencies absent and the repository's node_modules out of reach (the tree lives in the temp dir).
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
// Kept between runs: the script reuses node_modules while the lockfile and package.json files are unchanged.
const TREE = join(tmpdir(), `kars-image-tree-${process.getuid?.() ?? 0}`);

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const env = { ...process.env };
    delete env['NODE_PATH'];
    execFile(
      process.execPath,
      [join(TREE, 'apps/cli/bin/kars.js'), ...args],
      { cwd: TREE, env, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return rej(err);
        res({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

function files(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules') continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) files(p, out);
    else out.push(p);
  }
  return out;
}

void describe('the production image tree', () => {
  before(() => {
    execFileSync(process.execPath, [join(ROOT, 'scripts/image-tree.mjs'), '--out', TREE, '--reuse-native'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      timeout: 600_000,
    });
  });

  it('has no dev dependencies, no tests, and the Dockerfile builds it with the same script', () => {
    const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    // Dev-only per the lockfile (a dev dependency that a runtime package also needs, e.g. @types/node for client-node, stays).
    const devOnly = Object.keys(root.devDependencies).filter((d) => lock.packages[`node_modules/${d}`]?.dev === true);
    assert.ok(devOnly.includes('typescript') && devOnly.includes('eslint') && devOnly.includes('fast-check'), devOnly.join(','));
    for (const d of devOnly)
      assert.equal(existsSync(join(TREE, 'node_modules', d)), false, `dev dependency ${d} is in the production tree`);
    const installed = readdirSync(join(TREE, 'node_modules'))
      .flatMap((n) => (n.startsWith('@') ? readdirSync(join(TREE, 'node_modules', n)).map((m) => `${n}/${m}`) : [n]))
      .filter((n) => !n.startsWith('.'));
    assert.deepEqual(
      installed.filter((n) => lock.packages[`node_modules/${n}`]?.dev === true),
      [],
      'packages the lockfile marks dev-only',
    );
    assert.ok(existsSync(join(TREE, 'node_modules/better-sqlite3')), 'runtime dependency better-sqlite3 present');
    const all = files(TREE);
    assert.deepEqual(
      all.filter((f) => /\.test\.js$|\.ts$|\.map$/.test(f)),
      [],
    );
    assert.ok(all.some((f) => f.endsWith('packages/apiserver/dist/server.js')));
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^FROM node:20-[a-z]+-slim AS build$/m);
    assert.match(dockerfile, /RUN npm ci[^\n]*\n[^\n]*npm run build[^\n]*\n[^\n]*node scripts\/image-tree\.mjs --out \/app$/m);
    assert.match(dockerfile, /^COPY --from=build \/app \/app$/m);
    assert.match(dockerfile, /^USER 1000:1000$/m, 'runs as non-root');
    assert.match(dockerfile, /^ENTRYPOINT \["kars"\]$/m);
    assert.doesNotMatch(dockerfile, /--reuse-native/);
  });

  for (const cmd of ['controller', 'router']) {
    it(`runs \`kars ${cmd} --help\` from the tree`, async () => {
      const r = await run([cmd, '--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^Usage: kars ${cmd} \\[options\\]`));
      assert.match(r.stdout, cmd === 'controller' ? /--metrics-addr <host:port\|disabled>/ : /--sandbox <name>/);
      // The image's routers run the router bundle (ADR 0056), which the build made and the tree keeps.
      if (cmd === 'router') assert.ok(existsSync(join(TREE, 'apps/cli/dist/router.bundle.js')), 'the tree has the router bundle');
    });
  }

  it('loads the native SQLite addon from the tree (kars apiserver storage)', () => {
    const out = execFileSync(
      process.execPath,
      ['-e', "const D=require('better-sqlite3');console.log(new D(':memory:').prepare('select 41+1 as x').get().x)"],
      { cwd: TREE, encoding: 'utf8' },
    );
    assert.equal(out.trim(), '42');
  });
});
