/**
 * Issue 23 item 2 (ADR 0037): `kars router` loads only what a router runs. Every module a
 * `kars router` process loads (ES modules through a resolve hook, CommonJS through the require
 * cache at exit) is recorded, and none may be one of the heavy parts it once loaded without using
 * them: kube-schema with CEL, RE2 and protobuf (offline admission), client-node's generated API,
 * undici's package entry (fetch, WebSocket, the cache, the mocks), the API server, the controller.
 * Since ADR 0056 a router runs apps/cli/dist/router.bundle.js: what it loads is that one file (and Node's
 * built-ins), and what went into it is esbuild's list of inputs, written beside it; both are checked.
 * `kars compile`, which does use offline admission, is checked by the same recorder, so the check can fail.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const kars = fileURLToPath(new URL('../../bin/kars.js', import.meta.url));

/** What a router must not load, and why it once did. */
const NOT_IN_A_ROUTER: ReadonlyArray<[RegExp, string]> = [
  [/\/packages\/kube-schema\/|\/@kars\/kube-schema\//, 'kube-schema (offline admission: policy-compiler/runtime leaves it out)'],
  [/\/@bufbuild\//, '@bufbuild cel / re2 / protobuf (behind kube-schema)'],
  [/\/@kubernetes\/client-node\//, "client-node's package (the KubeConfig bundle replaces it)"],
  [/\/undici\/index\.js$/, "undici's package entry (http/undici-parts.ts loads three classes)"],
  [/\/packages\/apiserver\/|\/packages\/policy-controller\//, 'the API server or the controller'],
];

/** Run `kars ...args` (it exits: `--help`) and return every module file it loaded. */
function loadedModules(dir: string, args: string[]): Promise<string[]> {
  const out = join(dir, `modules-${args[0]}.txt`);
  writeFileSync(out, '');
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.KARS_MODULES_OUT, r.url + '\\n');
  return r;
}
`,
  );
  const preload = join(dir, 'preload.mjs');
  writeFileSync(
    preload,
    `import { createRequire, register } from 'node:module';
import { appendFileSync } from 'node:fs';
register(${JSON.stringify(pathToFileURL(hooks).href)});
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => appendFileSync(process.env.KARS_MODULES_OUT, Object.keys(cache).map((f) => 'file://' + f).join('\\n') + '\\n'));
`,
  );
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', pathToFileURL(preload).href, kars, ...args],
      { env: { ...process.env, KARS_MODULES_OUT: out } },
      (err, _stdout, stderr) => {
        if (err) return reject(new Error(`kars ${args.join(' ')} failed: ${stderr}`));
        resolve(
          readFileSync(out, 'utf8')
            .split('\n')
            .filter((l) => l.startsWith('file://'))
            .map((l) => fileURLToPath(l)),
        );
      },
    );
  });
}

describe('what `kars router` loads', () => {
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), 'kars-router-modules-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is the router bundle and what it runs, none of the heavy parts it does not use (issue 23, ADR 0037, 0056)', async () => {
    // --help loads the command's module and everything it imports, then exits.
    const files = await loadedModules(dir, ['router', '--help']);
    const bundle = fileURLToPath(new URL('../router.bundle.js', import.meta.url));
    assert.ok(files.includes(bundle), `kars router ran the router bundle (${files.length} files; npm run build makes it)`);
    // The bundle is the whole of kars a router runs: no module of a kars package or of the CLI
    // besides bin/kars.js and the bundle itself is loaded from disk.
    const kars = files.filter((f) => /\/(packages|apps)\/[^/]+\/(dist|bin)\//.test(f) && !f.includes('/node_modules/'));
    assert.deepEqual(
      kars.filter((f) => f !== bundle && !f.endsWith('/apps/cli/bin/kars.js')),
      [],
      'kars modules loaded outside the bundle',
    );
    // What went into the bundle (esbuild's metafile, written beside it) and what was loaded beside it.
    const inputs = JSON.parse(readFileSync(fileURLToPath(new URL('../router.bundle.inputs.json', import.meta.url)), 'utf8')) as string[];
    const all = [...files, ...inputs];
    assert.ok(
      all.some((f) => f.endsWith('/router/dist/server.js')),
      `the router itself was bundled (${inputs.length} inputs)`,
    );
    assert.ok(
      inputs.some((f) => f.endsWith('/kube-client/dist/vendor/kubeconfig.js')),
      'the KubeConfig bundle was bundled (not client-node through import.meta.url)',
    );
    assert.ok(
      inputs.some((f) => f.endsWith('/undici/lib/dispatcher/agent.js')),
      "undici's Agent was bundled (from its own module, http/undici-parts.ts)",
    );
    // Every module but Node's own comes from the bundle: nothing is loaded from node_modules either
    // (CommonJS is recorded too: the require cache).
    assert.deepEqual(
      files.filter((f) => f.includes('/node_modules/')).slice(0, 3),
      [],
      'modules loaded from node_modules beside the bundle',
    );
    for (const [pattern, what] of NOT_IN_A_ROUTER) {
      const hits = all.filter((f) => pattern.test(f));
      assert.deepEqual(hits.slice(0, 3), [], `kars router loaded ${what}`);
    }
  });

  it('is checked by a recorder that sees those parts where they are used (kars compile loads kube-schema and CEL)', async () => {
    const files = await loadedModules(dir, ['compile', '--help']);
    assert.ok(
      files.some((f) => NOT_IN_A_ROUTER[0]![0].test(f)),
      'kube-schema was recorded',
    );
    assert.ok(
      files.some((f) => NOT_IN_A_ROUTER[1]![0].test(f)),
      '@bufbuild was recorded',
    );
  });
});
