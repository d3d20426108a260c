#!/usr/bin/env node
// Builds dist/vendor/kubeconfig.js: @kubernetes/client-node's KubeConfig class and what it needs,
// in one self-contained ES module (ADR 0020). client-node's package entry loads its whole generated
// API (about 960 modules) before a kubeconfig can be read, which costs every `kars` process that
// talks to a cluster 1–2 s of start-up; this bundle of the installed version loads in a fraction of
// that. The code is client-node's own, taken from node_modules at build time: nothing is rewritten.
// Two imports of config.js that kube-client never reaches are left out (ADR 0037): the generated
// API (`./gen/index.js`, used by makeApiClient only) and node-fetch (its Headers, used by
// applyToFetchOptions only). Each is replaced by a stub that throws, naming the method, if it is
// ever called. The bundle is minified: it stays in every router's heap as source text.
//
//   node packages/kube-client/scripts/bundle-kubeconfig.mjs   (part of `npm run build`; skips when up to date)
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, '..');
const outDir = join(pkgDir, 'dist', 'vendor');
const outFile = join(outDir, 'kubeconfig.js');
const typesFile = join(outDir, 'kubeconfig.d.ts');
const require = createRequire(join(pkgDir, 'package.json'));
const clientNodePkg = require.resolve('@kubernetes/client-node/package.json');
const clientNode = JSON.parse(readFileSync(clientNodePkg, 'utf8'));
const configModule = join(dirname(clientNodePkg), 'dist', 'config.js');
const stamp = `// @kubernetes/client-node ${clientNode.version} KubeConfig, bundled by kube-client/scripts/bundle-kubeconfig.mjs (ADR 0020, 0037)`;

/** What the stubs say when a left-out part is reached (kubeconfig.test.ts checks both). */
const LEFT_OUT = (what, method) =>
  `kube-client's KubeConfig bundle leaves out ${what} (ADR 0037): KubeConfig.${method} is not available through it; import @kubernetes/client-node for that`;

/**
 * The imports of client-node's dist/config.js replaced by stubs, by specifier as written there, with
 * the stub's source.
 */
const STUBS = {
  './gen/index.js': `const e = () => { throw new Error(${JSON.stringify(LEFT_OUT("client-node's generated API", 'makeApiClient'))}); };
export function createConfiguration() { e(); }
export class ServerConfiguration { constructor() { e(); } }`,
  'node-fetch': `export class Headers { constructor() { throw new Error(${JSON.stringify(LEFT_OUT('node-fetch', 'applyToFetchOptions'))}); } }`,
};

/** esbuild plugin: config.js's imports named in STUBS resolve to their stubs (no other module's). */
const leaveOut = {
  name: 'kars-leave-out',
  setup(build) {
    build.onResolve({ filter: /^(\.\/gen\/index\.js|node-fetch)$/ }, (args) =>
      args.importer === configModule ? { path: args.path, namespace: 'kars-stub' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'kars-stub' }, (args) => ({ contents: STUBS[args.path], loader: 'js' }));
  },
};

const mtime = (f) => (existsSync(f) ? statSync(f).mtimeMs : 0);
const upToDate =
  existsSync(outFile) &&
  existsSync(typesFile) &&
  readFileSync(outFile, 'utf8').startsWith(stamp) &&
  mtime(outFile) >= Math.max(mtime(fileURLToPath(import.meta.url)), mtime(clientNodePkg));
if (!upToDate) {
  const esbuild = await import('esbuild').catch(() => undefined);
  if (!esbuild) {
    // Not fatal: credentials.ts falls back to the package entry (slower start, same behaviour).
    console.warn('kube-client: esbuild is not installed; KubeConfig will load from @kubernetes/client-node itself (slower start)');
    process.exit(0);
  }
  mkdirSync(outDir, { recursive: true });
  await esbuild.build({
    stdin: { contents: `export { KubeConfig } from ${JSON.stringify(configModule)};`, resolveDir: pkgDir, loader: 'js' },
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    outfile: outFile,
    legalComments: 'inline',
    minify: true,
    plugins: [leaveOut],
    logLevel: 'warning',
    // Some of client-node's dependencies are CommonJS that require() Node built-ins.
    banner: {
      js: `${stamp}\nimport { createRequire as __karsCreateRequire } from 'node:module';\nconst require = __karsCreateRequire(import.meta.url);`,
    },
  });
  writeFileSync(typesFile, `${stamp}\nexport { KubeConfig } from '@kubernetes/client-node';\n`);
}
