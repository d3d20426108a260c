// The kubectl matrix: one scenario against every kubectl binary on this machine (the one on PATH
// and each kubectl.1.* beside it, deduplicated by real path), all against one kars apiserver.
// Each version works in its own namespace, with its own CRD group and cluster-scoped names, so
// versions run side by side. Skipped, with the reason, when no kubectl is found.
//
// Run it alone:  npm run build --silent && node --test packages/apiserver/dist/compat/kubectl-matrix.test.js
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { eventually, startTestServer } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

/** Longest any single kubectl call may take (a loaded 2-core machine is slow to start a 60 MB binary). */
const CALL_TIMEOUT_MS = 30_000;

interface Kubectl {
  /** What the matrix calls it: "kubectl" (the one on PATH) or "kubectl.1.27". */
  name: string;
  path: string;
  version: string;
}

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Every kubectl binary: the one on PATH and kubectl.1.* beside its real path, one per real file. */
function findKubectls(): Kubectl[] {
  const candidates: { name: string; path: string }[] = [];
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir === '' || !executable(join(dir, 'kubectl'))) continue;
    const real = realpathSync(join(dir, 'kubectl'));
    candidates.push({ name: 'kubectl', path: real });
    for (const f of readdirSync(dirname(real)).sort())
      if (/^kubectl\.1\.\d+$/.test(f) && executable(join(dirname(real), f))) candidates.push({ name: f, path: join(dirname(real), f) });
    break;
  }
  const seen = new Set<string>();
  return candidates
    .filter((c) => {
      const real = realpathSync(c.path);
      if (seen.has(real)) return false;
      seen.add(real);
      return true;
    })
    .map((c) => ({ ...c, version: '' }));
}

function run(bin: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { env, cwd, timeout: CALL_TIMEOUT_MS, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number')
        return reject(new Error(`${basename(bin)} ${args.join(' ')} did not finish: ${err.message}\n${stderr}`));
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

const KUBECTLS = findKubectls();

/** A CRD for one version's run: its own group, so versions do not share it. */
function gadgetCrd(group: string, description: string): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `gadgets.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: 'A Gadget is a test kind of the kubectl matrix.',
              properties: {
                spec: {
                  type: 'object',
                  description: 'What the gadget should be.',
                  properties: {
                    size: { type: 'integer', minimum: 0, description },
                    color: { type: 'string' },
                    parts: { type: 'array', items: { type: 'string' } },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

void describe('kubectl matrix', { skip: KUBECTLS.length === 0 ? 'no kubectl found on PATH' : false, concurrency: 4 }, () => {
  let ts: TestServer;
  let root: string;

  before(async () => {
    ts = await startTestServer();
    root = mkdtempSync(join(tmpdir(), 'kars-kubectl-matrix-'));
  });

  after(async () => {
    await ts?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  for (const k of KUBECTLS) {
    // Steps of one binary run in order; binaries run side by side.
    void describe(k.name, { concurrency: 1 }, () => {
      const tag = k.name === 'kubectl' ? 'path' : k.name.replace('kubectl.', 'v').replace('.', '-');
      const ns = `matrix-${tag}`;
      const group = `${tag}.matrix.example.com`;
      let dir: string;
      let env: NodeJS.ProcessEnv;

      const kubectl = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => run(k.path, args, env, dir);
      const ok = async (...args: string[]): Promise<string> => {
        const r = await kubectl(...args);
        assert.equal(r.code, 0, `${k.name} ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
        return r.stdout;
      };
      const getJson = async (...args: string[]): Promise<any> => JSON.parse(await ok('get', '-n', ns, ...args, '-o', 'json'));
      /** Run a write with -o json and return the object the server answered with. */
      const okJson = async (...args: string[]): Promise<any> => JSON.parse(await ok(...args, '-o', 'json'));
      const file = (name: string, obj: unknown): string => {
        const p = join(dir, name);
        writeFileSync(p, stringify(obj));
        return p;
      };

      before(async () => {
        dir = join(root, tag);
        mkdirSync(dir);
        // A private discovery and OpenAPI cache per binary.
        env = { ...process.env, KUBECONFIG: ts.server.kubeconfigPath, KUBECACHEDIR: join(dir, 'cache') };
        const v = JSON.parse(await ok('version', '--client', '-o', 'json'));
        k.version = v.clientVersion.gitVersion;
      });

      void it('creates every built-in kind kubectl has a create subcommand for', async () => {
        assert.equal((await ok('create', 'namespace', ns)).trim(), `namespace/${ns} created`);
        assert.equal(
          (await ok('create', 'configmap', 'cm', '-n', ns, '--from-literal=a=b', '--from-literal=empty=')).trim(),
          'configmap/cm created',
        );
        assert.deepEqual((await getJson('configmap', 'cm')).data, { a: 'b', empty: '' });
        const sec = await okJson('create', 'secret', 'generic', 'sec', '-n', ns, '--from-literal=password=hunter2');
        assert.equal(Buffer.from(sec.data.password, 'base64').toString(), 'hunter2');
        assert.equal(sec.type, 'Opaque', 'the server defaults a Secret type, as kube-apiserver does');
        assert.equal((await ok('create', 'serviceaccount', 'sa', '-n', ns)).trim(), 'serviceaccount/sa created');
        const d = await okJson('create', 'deployment', 'web', '-n', ns, '--image=nginx:1.27', '--replicas=2', '--port=8080');
        assert.equal(d.spec.replicas, 2);
        assert.deepEqual(
          d.spec.template.spec.containers.map((c: any) => [c.name, c.image, c.ports[0].containerPort]),
          [['nginx', 'nginx:1.27', 8080]],
        );
        assert.deepEqual((await okJson('create', 'service', 'clusterip', 'svc', '-n', ns, '--tcp=80:8080')).spec.ports, [
          { name: '80-8080', port: 80, protocol: 'TCP', targetPort: 8080 },
        ]);
        assert.equal(
          (await ok('create', 'role', 'reader', '-n', ns, '--verb=get,list', '--resource=configmaps')).trim(),
          'role.rbac.authorization.k8s.io/reader created',
        );
        const rb = await okJson('create', 'rolebinding', 'reader', '-n', ns, '--role=reader', '--user=bob', `--serviceaccount=${ns}:sa`);
        assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' });
        assert.equal(rb.subjects.length, 2);
        assert.equal(
          (await ok('create', 'clusterrole', `reader-${tag}`, '--verb=get', '--resource=configmaps')).trim(),
          `clusterrole.rbac.authorization.k8s.io/reader-${tag} created`,
        );
        // Server-side field validation: kubectl asks for Strict, and the server refuses unknown fields.
        const bad = await kubectl(
          'apply',
          '-f',
          file('bad-cm.yaml', {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'bad', namespace: ns },
            data: { a: 'b' },
            dataa: { c: 'd' },
          }),
        );
        assert.notEqual(bad.code, 0);
        assert.match(bad.stderr, /strict decoding error: unknown field "dataa"/);
        assert.equal(
          (await ok('create', 'clusterrolebinding', `reader-${tag}`, `--clusterrole=reader-${tag}`, '--user=bob')).trim(),
          `clusterrolebinding.rbac.authorization.k8s.io/reader-${tag} created`,
        );
      });

      void it('applies a CRD client-side, then again server-side', async () => {
        assert.equal(
          (await ok('apply', '-f', file('crd.yaml', gadgetCrd(group, 'How big.')))).trim(),
          `customresourcedefinition.apiextensions.k8s.io/gadgets.${group} created`,
        );
        await ok('wait', '--for=condition=Established', `crd/gadgets.${group}`, '--timeout=20s');
        const out = await ok(
          'apply',
          '--server-side',
          '--force-conflicts',
          '-f',
          file('crd2.yaml', gadgetCrd(group, 'How big the gadget is, in parts.')),
        );
        assert.equal(out.trim(), `customresourcedefinition.apiextensions.k8s.io/gadgets.${group} serverside-applied`);
      });

      void it('applies a custom resource client-side and server-side, and diff shows a change', async () => {
        const gadget = (spec: Record<string, unknown>): Record<string, unknown> => ({
          apiVersion: `${group}/v1`,
          kind: 'Gadget',
          metadata: { name: 'g1', namespace: ns },
          spec,
        });
        assert.equal((await ok('apply', '-f', file('g1.yaml', gadget({ size: 1, color: 'red' })))).trim(), `gadget.${group}/g1 created`);
        assert.equal((await ok('apply', '-f', join(dir, 'g1.yaml'))).trim(), `gadget.${group}/g1 unchanged`);
        // kubectl first moves the client-side apply's field ownership to the new manager, so the
        // server-side manifest is the whole desired state.
        assert.equal(
          (
            await ok(
              'apply',
              '--server-side',
              '--field-manager=matrix',
              '-f',
              file('g1-ssa.yaml', gadget({ size: 1, color: 'red', parts: ['a'] })),
            )
          ).trim(),
          `gadget.${group}/g1 serverside-applied`,
        );
        const g = await getJson(`gadgets.${group}`, 'g1', '--show-managed-fields');
        assert.deepEqual(g.spec, { size: 1, color: 'red', parts: ['a'] });
        const matrix = g.metadata.managedFields.find((m: any) => m.manager === 'matrix');
        assert.equal(matrix?.operation, 'Apply');
        assert.deepEqual(Object.keys(matrix.fieldsV1['f:spec']).sort(), ['f:color', 'f:parts', 'f:size']);

        const same = await kubectl('diff', '-f', join(dir, 'g1.yaml'));
        assert.equal(same.code, 0, `diff of an unchanged object: ${same.stderr}${same.stdout}`);
        const changed = await kubectl('diff', '-f', file('g1-changed.yaml', gadget({ size: 5, color: 'red' })));
        assert.equal(changed.code, 1, `diff of a changed object exits 1: ${changed.stderr}`);
        assert.match(changed.stdout, /^-\s+size: 1$/m);
        assert.match(changed.stdout, /^\+\s+size: 5$/m);
      });

      void it('explains built-in kinds and the custom resource', async () => {
        assert.match(await ok('explain', 'configmap'), /ConfigMap holds configuration data/);
        const spec = await ok('explain', 'deployment.spec');
        assert.match(spec, /replicas\s+<integer>/);
        assert.match(spec, /Number of desired pods/);
        const size = await ok('explain', `gadgets.${group}.spec.size`);
        assert.match(size, /How big the gadget is, in parts\./);
      });

      void it('streams a change with get -w, then is stopped', async () => {
        const child = spawn(k.path, ['get', 'configmaps', '-n', ns, '-w'], { env, cwd: dir });
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
        const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
        try {
          await eventually(() => /^cm\s/m.test(out), 20_000);
          await ok('create', 'configmap', 'watched', '-n', ns, '--from-literal=x=y');
          await eventually(() => /^watched\s+1\s/m.test(out), 20_000);
          assert.equal(child.exitCode, null, 'get -w still runs');
        } finally {
          child.kill();
          await exited;
        }
      });

      void it('patches with every patch type', async () => {
        await ok('patch', 'configmap', 'cm', '-n', ns, '--type=merge', '-p', '{"data":{"m":"1"}}');
        await ok('patch', 'configmap', 'cm', '-n', ns, '--type=json', '-p', '[{"op":"add","path":"/data/j","value":"2"}]');
        const cm = await okJson('patch', 'configmap', 'cm', '-n', ns, '--type=strategic', '-p', '{"data":{"s":"3"}}');
        assert.deepEqual(cm.data, { a: 'b', empty: '', m: '1', j: '2', s: '3' });
        // Strategic merge on a list merged by key: the container named nginx changes, none is added.
        const d = await okJson(
          'patch',
          'deployment',
          'web',
          '-n',
          ns,
          '-p',
          '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}',
        );
        assert.deepEqual(
          d.spec.template.spec.containers.map((c: any) => [c.name, c.image]),
          [['nginx', 'nginx:1.28']],
        );
        assert.equal(
          (await okJson('patch', `gadgets.${group}`, 'g1', '-n', ns, '--type=merge', '-p', '{"spec":{"color":"blue"}}')).spec.color,
          'blue',
        );
        const smp = await kubectl('patch', `gadgets.${group}`, 'g1', '-n', ns, '--type=strategic', '-p', '{"spec":{"color":"green"}}');
        assert.notEqual(smp.code, 0, 'strategic merge patch is refused for custom resources, as kube-apiserver does');
        assert.match(smp.stderr, /UnsupportedMediaType|unsupported|not supported|415/i);
      });

      void it('refuses a replace with a stale resourceVersion', async () => {
        const cm = await getJson('configmap', 'cm');
        const stale = file('stale.yaml', { ...cm, data: { stale: 'yes' } });
        const newer = await okJson('patch', 'configmap', 'cm', '-n', ns, '--type=merge', '-p', '{"data":{"newer":"1"}}');
        const r = await kubectl('replace', '-f', stale);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /the object has been modified; please apply your changes to the latest version and try again/);
        assert.equal(
          (await getJson('configmap', 'cm')).metadata.resourceVersion,
          newer.metadata.resourceVersion,
          'the stale replace changed nothing',
        );
        cm.metadata.resourceVersion = newer.metadata.resourceVersion;
        cm.data = { fresh: 'yes' };
        assert.equal((await ok('replace', '-f', file('fresh.yaml', cm))).trim(), 'configmap/cm replaced');
      });

      void it('deletes an object with a finalizer only once the finalizer is removed', async () => {
        await ok(
          'apply',
          '-f',
          file('fin.yaml', {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'fin', namespace: ns, finalizers: ['example.com/hold'] },
            data: { a: 'b' },
          }),
        );
        await ok('delete', 'configmap', 'fin', '-n', ns, '--wait=false');
        const held = await getJson('configmap', 'fin');
        assert.ok(held.metadata.deletionTimestamp, 'deletionTimestamp is set');
        assert.deepEqual(held.metadata.finalizers, ['example.com/hold']);
        await ok('patch', 'configmap', 'fin', '-n', ns, '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]');
        const gone = await kubectl('get', 'configmap', 'fin', '-n', ns);
        assert.equal(gone.code, 1);
        assert.match(gone.stderr, /NotFound/);
      });

      void it('answers auth can-i', async () => {
        assert.equal((await ok('auth', 'can-i', 'create', 'configmaps', '-n', ns)).trim(), 'yes');
      });

      void it('deletes its namespace and CRD', async () => {
        await ok('delete', `crd/gadgets.${group}`);
        await ok('delete', 'namespace', ns, '--wait=false');
      });
    });
  }

  after(() => {
    // One line per binary, for the README's compatibility table.
    for (const k of KUBECTLS) console.log(`kubectl matrix: ${k.name} ${k.version} (${k.path})`);
  });
});
