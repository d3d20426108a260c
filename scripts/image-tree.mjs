#!/usr/bin/env node
// The production file tree of the kars image: exactly what the Dockerfile's runtime stage contains
// (the Dockerfile runs this script, so the two cannot drift). Usage, after `npm run build`:
//
//   node scripts/image-tree.mjs --out DIR
//
// DIR gets the root and workspace package.json files, package-lock.json, each workspace's compiled
// dist/ (tests, source maps and declaration files left out) and apps/cli/bin, then
// `npm ci --omit=dev` installs production dependencies only. node_modules is kept when the lockfile
// , every package.json, this script and its flags are unchanged since the last run (a hash in DIR/.deps-hash), so the second
// run takes a second instead of a native rebuild of better-sqlite3.
//
// --reuse-native (tests only): `npm ci --omit=dev --ignore-scripts`, then copy the compiled addons of
// the packages that have install scripts (better-sqlite3) from this repository's node_modules instead
// of compiling them again (minutes on a small machine). Same Node, same platform, same bytes; the
// Dockerfile never passes it.
//
// DIR must be outside the repository: Node resolves modules by walking up parent directories, and
// the repository's node_modules (with dev dependencies) would mask anything missing from the tree.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    'prefer-offline': { type: 'boolean', default: true },
    'reuse-native': { type: 'boolean', default: false },
  },
});
if (!values.out) {
  process.stderr.write('usage: node scripts/image-tree.mjs --out DIR\n');
  process.exit(2);
}
const OUT = resolve(values.out);
if (!relative(ROOT, OUT).startsWith('..') && OUT !== ROOT) {
  process.stderr.write(`--out must be outside the repository (${ROOT}): Node would find the repository's node_modules from inside it\n`);
  process.exit(2);
}

/** Workspace directories (relative), from the root package.json's "workspaces" globs (`dir/*`). */
function workspaces() {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const out = [];
  for (const glob of pkg.workspaces ?? []) {
    const base = glob.replace(/\/\*$/, '');
    for (const d of readdirSync(join(ROOT, base))) if (existsSync(join(ROOT, base, d, 'package.json'))) out.push(join(base, d));
  }
  return out.sort();
}

/** Runtime files only: no tests, no source maps, no declarations, no test fixtures. */
function keep(src) {
  if (statSync(src).isDirectory()) return !src.endsWith(`${sep}fixtures`);
  return src.endsWith('.js') && !/\.test\.js$/.test(src);
}

const ws = workspaces();
const manifests = ['package.json', 'package-lock.json', ...ws.map((w) => join(w, 'package.json'))];
const hash = createHash('sha256');
for (const f of manifests) hash.update(f).update(readFileSync(join(ROOT, f)));
hash.update(readFileSync(fileURLToPath(import.meta.url))).update(JSON.stringify(values)); // this script and its flags
const depsHash = hash.digest('hex');

mkdirSync(OUT, { recursive: true });
const reuse =
  existsSync(join(OUT, '.deps-hash')) &&
  readFileSync(join(OUT, '.deps-hash'), 'utf8') === depsHash &&
  existsSync(join(OUT, 'node_modules'));
for (const entry of readdirSync(OUT)) if (entry !== 'node_modules' || !reuse) rmSync(join(OUT, entry), { recursive: true, force: true });

for (const f of manifests) {
  mkdirSync(dirname(join(OUT, f)), { recursive: true });
  cpSync(join(ROOT, f), join(OUT, f));
}
for (const w of ws) {
  const dist = join(ROOT, w, 'dist');
  if (!existsSync(dist)) {
    process.stderr.write(`${w}/dist is missing: run \`npm run build\` first\n`);
    process.exit(1);
  }
  cpSync(dist, join(OUT, w, 'dist'), { recursive: true, filter: keep });
  const bin = join(ROOT, w, 'bin');
  if (existsSync(bin)) cpSync(bin, join(OUT, w, 'bin'), { recursive: true });
}

if (!reuse) {
  const native = values['reuse-native'];
  const args = [
    'ci',
    '--omit=dev',
    '--no-audit',
    '--no-fund',
    ...(values['prefer-offline'] ? ['--prefer-offline'] : []),
    ...(native ? ['--ignore-scripts'] : []),
  ];
  execFileSync('npm', args, { cwd: OUT, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, NODE_ENV: 'production' } });
  if (native) {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
    for (const [path, meta] of Object.entries(lock.packages ?? {})) {
      if (!meta.hasInstallScript || meta.dev || !existsSync(join(OUT, path))) continue;
      const build = join(ROOT, path, 'build');
      if (!existsSync(build)) throw new Error(`--reuse-native: ${path}/build is missing in the repository; run without --reuse-native`);
      cpSync(build, join(OUT, path, 'build'), { recursive: true });
    }
  }
  writeFileSync(join(OUT, '.deps-hash'), depsHash);
}
process.stdout.write(`${OUT}\n`);
