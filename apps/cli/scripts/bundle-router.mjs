#!/usr/bin/env node
// Builds apps/cli/dist/router.bundle.js: `kars router` as one ES module (ADR 0056). bin/kars.js
// runs it instead of dist/main.js when the command is `router`, so a router compiles one module
// instead of the ~120 ES modules of kars and the CommonJS behind them, and holds less source text.
//
// The entry is the CLI's own dist/main.js (the same main(), commander program, error handling and
// help), with every command module but the router's left out: main.js imports them lazily, so they
// stay imports of ./commands/<name>.js, next to the bundle, and a router never reaches them.
// kube-client's kubeconfig.js finds its KubeConfig bundle from import.meta.url, which in this
// bundle would be apps/cli/dist/ (and fall back to client-node's package entry): here it is
// replaced by a static import of that bundle, which must have been built first (npm run build).
// router/dist/http/undici-parts.js require()s undici's three classes through createRequire(import.meta.url),
// which esbuild leaves to run time (from node_modules, as ~45 CommonJS modules): here its require is
// the module's plain one, so those modules are bundled too (idle RSS 2.7 MB lower in the same run).
// Identifiers are not minified, so stack traces and logged errors keep their function names.
//
//   node apps/cli/scripts/bundle-router.mjs   (part of `npm run build` and of scripts/run-tests.mjs;
//                                              skips when no input changed since the last build)
import { existsSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const cliDir = join(here, '..');
const dist = join(cliDir, 'dist');
const entry = join(dist, 'main.js');
const outFile = join(dist, 'router.bundle.js');
// The inputs of the last build, for the up-to-date check (esbuild's metafile, paths only).
const inputsFile = join(dist, 'router.bundle.inputs.json');
const kubeconfigBundle = join(cliDir, '..', '..', 'packages', 'kube-client', 'dist', 'vendor', 'kubeconfig.js');

const mtime = (f) => (existsSync(f) ? statSync(f).mtimeMs : Infinity);
function upToDate() {
  if (!existsSync(outFile) || !existsSync(inputsFile)) return false;
  const built = statSync(outFile).mtimeMs;
  const inputs = JSON.parse(readFileSync(inputsFile, 'utf8'));
  return [fileURLToPath(import.meta.url), ...inputs].every((f) => mtime(f) <= built);
}

/** The line of undici-parts.js that gives it a run-time require; without it esbuild bundles its require() calls. */
const UNDICI_REQUIRE = 'const require = createRequire(import.meta.url);';

/**
 * esbuild plugin: main.js's command modules other than the router's stay external; undici-parts.js's
 * undici modules are bundled; kubeconfig.js imports its bundle statically.
 */
const routerOnly = {
  name: 'kars-router-only',
  setup(build) {
    build.onResolve({ filter: /^\.\/commands\/[a-z-]+\.js$/ }, (args) =>
      args.importer === realpathSync(entry) && args.path !== './commands/router.js' ? { path: args.path, external: true } : undefined,
    );
    build.onLoad({ filter: /[/\\]router[/\\]dist[/\\]http[/\\]undici-parts\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes(UNDICI_REQUIRE)) throw new Error(`${args.path} no longer has "${UNDICI_REQUIRE}": update bundle-router.mjs`);
      return { contents: source.replace(UNDICI_REQUIRE, ''), loader: 'js' };
    });
    build.onLoad({ filter: /[/\\]kube-client[/\\]dist[/\\]kubeconfig\.js$/ }, () => ({
      contents: `export { KubeConfig } from ${JSON.stringify(kubeconfigBundle)};\nexport const kubeConfigSource = 'bundle';\n`,
      loader: 'js',
    }));
  },
};

/** No bundle (bin/kars.js then runs the router from dist/main.js): say why, and remove a stale one. */
function skip(why) {
  console.warn(`apps/cli: ${why}; kars router will run from dist/main.js (no router bundle)`);
  rmSync(outFile, { force: true });
  rmSync(inputsFile, { force: true });
  process.exit(0);
}

// A partial build (run-tests.mjs runs this before the tests of any workspace) may not have the CLI.
if (!existsSync(entry)) skip('dist/main.js is missing (tsc -b makes it)');
if (!upToDate()) {
  const esbuild = await import('esbuild').catch(() => undefined);
  // Not fatal: bin/kars.js runs dist/main.js when there is no bundle (same behaviour, slower start, more memory).
  if (!esbuild) skip('esbuild is not installed');
  if (!existsSync(kubeconfigBundle)) skip(`${kubeconfigBundle} is missing (packages/kube-client/scripts/bundle-kubeconfig.mjs makes it)`);
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    outfile: outFile,
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    metafile: true,
    plugins: [routerOnly],
    logLevel: 'warning',
    // CommonJS dependencies (pino, prom-client, commander's CJS) require() Node built-ins.
    banner: {
      js: `// kars router, bundled by apps/cli/scripts/bundle-router.mjs from dist/main.js (ADR 0056)\nimport { createRequire as __karsRouterCreateRequire } from 'node:module';\nconst require = __karsRouterCreateRequire(import.meta.url);`,
    },
  });
  writeFileSync(inputsFile, JSON.stringify(Object.keys(result.metafile.inputs).map((f) => join(process.cwd(), f))));
}
