/**
 * kube-client reads kubeconfigs with client-node's own KubeConfig, loaded from the build-time
 * bundle (ADR 0020). These tests pin that the bundle is what runs, that it never pulls in
 * client-node's generated API (nor node-fetch: ADR 0037), and that it reads kubeconfigs exactly as
 * the package does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { KubeConfig as PackageKubeConfig } from '@kubernetes/client-node';
import { Credentials } from './credentials.js';
import { KubeConfig, kubeConfigSource } from './kubeconfig.js';

const DIST = dirname(fileURLToPath(import.meta.url));

function node(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('KubeConfig from the build-time bundle', () => {
  let dir: string;
  const files: Record<string, string> = {};

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kars-kubeconfig-'));
    const plugin = join(dir, 'exec-plugin.sh');
    writeFileSync(
      plugin,
      `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec-'"$KARS_TEST_ARG"'"}}'\n`,
    );
    chmodSync(plugin, 0o755);
    const tokenFile = join(dir, 'token.txt');
    writeFileSync(tokenFile, 'from-file\n');
    const ca = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
    const doc = (user: string, extra = '') => `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: ${ca}
    tls-server-name: kars.local
${extra}users:
- name: u
  user:
${user}
contexts:
- name: x
  context: { cluster: c, user: u, namespace: team-a }
current-context: x
`;
    files['token'] = doc('    token: abc');
    files['basic'] = doc('    username: ada\n    password: s3cret');
    files['tokenFile'] = doc(`    token-file: ${tokenFile}`);
    files['exec'] = doc(
      `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${plugin}\n      interactiveMode: Never\n      env: [{ name: KARS_TEST_ARG, value: one }]`,
    );
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is what this build loads (run `npm run build`, which writes dist/vendor/kubeconfig.js)', () => {
    assert.equal(kubeConfigSource, 'bundle');
  });

  it('reads every kind of kubeconfig user exactly as client-node’s package entry does', async () => {
    for (const name of Object.keys(files)) {
      const file = join(dir, name);
      const ours = Credentials.load(file);
      const kc = new PackageKubeConfig();
      kc.loadFromFile(file);
      const theirs = Credentials.fromKubeConfig(kc);
      assert.equal(ours.server.href, theirs.server.href, name);
      assert.equal(ours.namespace, 'team-a', name);
      assert.deepEqual(await ours.tls(), await theirs.tls(), name);
      const headers = await ours.headers();
      assert.deepEqual(headers, await theirs.headers(), name);
      assert.ok(headers['authorization'], `${name}: an authorization header`);
    }
    assert.equal((await Credentials.load(join(dir, 'exec')).headers())['authorization'], 'Bearer from-exec-one');
    assert.equal((await Credentials.load(join(dir, 'tokenFile')).headers())['authorization'], 'Bearer from-file');
  });

  it('leaves out what kube-client never calls, and says so when it is called (ADR 0037)', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(join(dir, 'token'));
    // makeApiClient needs client-node's generated API; applyToFetchOptions needs node-fetch.
    assert.throws(
      () => kc.makeApiClient(class {} as never),
      /leaves out client-node's generated API \(ADR 0037\): KubeConfig\.makeApiClient/,
    );
    await assert.rejects(kc.applyToFetchOptions({}), /leaves out node-fetch \(ADR 0037\): KubeConfig\.applyToFetchOptions/);
    // The package has both.
    const pkg = new PackageKubeConfig();
    pkg.loadFromFile(join(dir, 'token'));
    assert.equal(typeof (await pkg.applyToFetchOptions({})).headers, 'object');
  });

  it('loads a kubeconfig without loading client-node’s generated API; importing the package does load it', async () => {
    // A resolve hook that fails any import of client-node's generated API (dist/gen/…).
    const hooks = join(dir, 'hooks.mjs');
    writeFileSync(
      hooks,
      `export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.includes('/@kubernetes/client-node/dist/gen/')) throw new Error('client-node generated API loaded: ' + r.url);
  return r;
}
`,
    );
    const register = join(dir, 'register.mjs');
    writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
    const index = pathToFileURL(join(DIST, 'index.js')).href;
    const ours = await node(
      [
        '--import',
        register,
        '--input-type=module',
        '-e',
        `const { Credentials } = await import(${JSON.stringify(index)}); const c = Credentials.load(${JSON.stringify(join(dir, 'token'))}); console.log((await c.headers()).authorization);`,
      ],
      DIST,
    );
    assert.equal(ours.code, 0, ours.stderr);
    assert.equal(ours.stdout, 'Bearer abc\n');
    // The same hook catches the package entry, so the check above can fail.
    const pkg = await node(['--import', register, '--input-type=module', '-e', `await import('@kubernetes/client-node');`], DIST);
    assert.notEqual(pkg.code, 0);
    assert.match(pkg.stderr, /client-node generated API loaded/);
  });
});
