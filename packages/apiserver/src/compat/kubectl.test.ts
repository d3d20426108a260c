// Compatibility: the real kubectl binary against an in-process server. Skipped when kubectl is not on PATH.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { eventually, startTestServer, widgetCrd } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

/** Longest any single kubectl call may take. */
const CALL_TIMEOUT_MS = 20_000;

function onPath(bin: string): boolean {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, bin), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

const KUBECTL = onPath('kubectl');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The rows of kubectl's table output, each split into its columns. */
function rows(out: string): string[][] {
  return out
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.trim().split(/\s+/));
}

void describe('kubectl against kars apiserver', { skip: KUBECTL ? false : 'kubectl not found on PATH' }, () => {
  let ts: TestServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  /** Run kubectl; resolves with its exit code and output whatever the code. */
  function kubectl(...args: string[]): Promise<Run> {
    return new Promise((resolve, reject) => {
      execFile('kubectl', args, { env, cwd: dir, timeout: CALL_TIMEOUT_MS, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') {
          reject(new Error(`kubectl ${args.join(' ')} did not finish: ${err.message}\n${stderr}`));
          return;
        }
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      });
    });
  }

  /** Run kubectl, asserting it succeeds; returns stdout. */
  async function ok(...args: string[]): Promise<string> {
    const r = await kubectl(...args);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  /** `kubectl get -o json`, parsed. */
  async function getJson(...args: string[]): Promise<any> {
    return JSON.parse(await ok('get', ...args, '-o', 'json'));
  }

  /** Write a fixture (YAML) into the temp dir; returns its path. */
  function fixture(name: string, obj: unknown): string {
    const file = join(dir, name);
    writeFileSync(file, typeof obj === 'string' ? obj : stringify(obj));
    return file;
  }

  function configMap(name: string, data: Record<string, string>): Record<string, unknown> {
    return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data };
  }

  before(async () => {
    ts = await startTestServer();
    dir = mkdtempSync(join(tmpdir(), 'kars-kubectl-'));
    // A private discovery cache: a cache from another run of a server on the same port must not leak in.
    env = { ...process.env, KUBECONFIG: ts.server.kubeconfigPath, KUBECACHEDIR: join(dir, 'cache') };
  });

  after(async () => {
    await ts?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  void describe('custom resources', () => {
    void it('applies the widget CRD with kubectl apply -f and reports it Established', async () => {
      const out = await ok('apply', '-f', fixture('crd.yaml', widgetCrd()));
      assert.equal(out.trim(), 'customresourcedefinition.apiextensions.k8s.io/widgets.example.com created');
      const waited = await ok('wait', '--for=condition=Established', 'crd/widgets.example.com', '--timeout=15s');
      assert.equal(waited.trim(), 'customresourcedefinition.apiextensions.k8s.io/widgets.example.com condition met');
    });

    void it('applies a Widget with kubectl apply -f, and a second identical apply is unchanged', async () => {
      const file = fixture('w1.yaml', {
        apiVersion: 'example.com/v1',
        kind: 'Widget',
        metadata: { name: 'w1' },
        spec: { size: 3, color: 'red' },
      });
      assert.equal((await ok('apply', '-f', file)).trim(), 'widget.example.com/w1 created');
      assert.equal((await ok('apply', '-f', file)).trim(), 'widget.example.com/w1 unchanged');
    });

    void it('prints the CRD printer columns in kubectl get widgets', async () => {
      const table = rows(await ok('get', 'widgets'));
      assert.deepEqual(table[0], ['NAME', 'SIZE', 'PHASE']);
      // An absent status.phase is a null cell, as kube-apiserver answers it, which kubectl prints blank.
      assert.deepEqual(table.slice(1), [['w1', '3']]);
    });

    void it('resolves the short name wd to widgets', async () => {
      assert.deepEqual(rows(await ok('get', 'wd')), [
        ['NAME', 'SIZE', 'PHASE'],
        ['w1', '3'],
      ]);
      assert.equal((await ok('get', 'wd', '-o', 'name')).trim(), 'widget.example.com/w1');
    });

    void it('shows the schema default spec.max == 10 in kubectl get -o json', async () => {
      const w = await getJson('wd', 'w1');
      assert.equal(w.kind, 'Widget');
      assert.equal(w.apiVersion, 'example.com/v1');
      assert.deepEqual(w.spec, { size: 3, color: 'red', max: 10 });
      assert.equal(w.metadata.generation, 1);
    });

    void it('prints parseable YAML with kubectl get -o yaml', async () => {
      const w = parse(await ok('get', 'wd', 'w1', '-o', 'yaml'));
      assert.equal(w.metadata.name, 'w1');
      assert.equal(w.metadata.namespace, 'default');
      assert.equal(w.spec.max, 10);
      assert.match(w.metadata.resourceVersion, /^\d+$/);
    });

    void it('changes a value with kubectl patch --type=merge', async () => {
      assert.equal((await ok('patch', 'wd', 'w1', '--type=merge', '-p', '{"spec":{"size":4}}')).trim(), 'widget.example.com/w1 patched');
      const w = await getJson('wd', 'w1');
      assert.equal(w.spec.size, 4);
      assert.equal(w.metadata.generation, 2);
    });

    void it('changes a value with kubectl patch --type=json', async () => {
      assert.equal(
        (await ok('patch', 'wd', 'w1', '--type=json', '-p', '[{"op":"replace","path":"/spec/size","value":5}]')).trim(),
        'widget.example.com/w1 patched',
      );
      assert.equal((await getJson('wd', 'w1')).spec.size, 5);
    });

    void it('fails a CEL-violating kubectl patch with the rule message and leaves the object unchanged', async () => {
      const before = await getJson('wd', 'w1');
      const r = await kubectl('patch', 'wd', 'w1', '--type=merge', '-p', '{"spec":{"size":50}}');
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /size must not exceed max/);
      assert.match(r.stderr, /The Widget "w1" is invalid/);
      const afterPatch = await getJson('wd', 'w1');
      assert.equal(afterPatch.spec.size, 5);
      assert.equal(afterPatch.metadata.resourceVersion, before.metadata.resourceVersion);
    });

    void it('replaces a Widget with kubectl replace -f, and refuses a second replace from the now-stale file', async () => {
      const w = await getJson('wd', 'w1');
      w.spec.size = 7;
      w.spec.color = 'blue';
      const file = fixture('w1-edited.yaml', w);
      assert.equal((await ok('replace', '-f', file)).trim(), 'widget.example.com/w1 replaced');
      const got = await getJson('wd', 'w1');
      assert.deepEqual(got.spec, { size: 7, color: 'blue', max: 10 });
      assert.equal(got.metadata.generation, w.metadata.generation + 1);

      const stale = await kubectl('replace', '-f', file);
      assert.notEqual(stale.code, 0);
      assert.match(stale.stderr, /the object has been modified/);
    });

    void it('streams a line from kubectl get -w for a Widget created and then modified while it runs', async () => {
      const child = spawn('kubectl', ['get', 'wd', '-w', '--request-timeout=15s'], { env, cwd: dir, timeout: CALL_TIMEOUT_MS });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
      const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
      const lines = (): string[][] => rows(out);
      try {
        // The initial list is printed first.
        await eventually(() => lines().some((r) => r[0] === 'w1'), 10_000);
        assert.deepEqual(lines()[0], ['NAME', 'SIZE', 'PHASE']);

        await ok(
          'apply',
          '-f',
          fixture('w-watched.yaml', { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w-watched' }, spec: { size: 2 } }),
        );
        await eventually(() => lines().some((r) => r[0] === 'w-watched' && r[1] === '2'), 10_000);

        // status is a subresource, so the status part of this patch is dropped: PHASE stays blank (a null cell).
        await ok('patch', 'wd', 'w-watched', '--type=merge', '-p', '{"spec":{"size":8},"status":{"phase":"ignored"}}');
        await eventually(() => lines().some((r) => r[0] === 'w-watched' && r[1] === '8'), 10_000);

        const watched = lines().filter((r) => r[0] === 'w-watched');
        assert.deepEqual(watched, [
          ['w-watched', '2'],
          ['w-watched', '8'],
        ]);
        assert.equal(child.exitCode, null, `kubectl get -w still runs; stderr: ${err}`);
      } finally {
        child.kill();
        await exited;
      }
    });

    void it('deletes a Widget with kubectl delete, after which kubectl get reports NotFound', async () => {
      assert.equal((await ok('delete', 'wd', 'w1')).trim(), 'widget.example.com "w1" deleted');
      const r = await kubectl('get', 'wd', 'w1');
      assert.equal(r.code, 1);
      assert.match(r.stderr, /NotFound/);
      assert.deepEqual(rows(await ok('get', 'wd', '-o', 'name')), [['widget.example.com/w-watched']]);
    });
  });

  void describe('server-side apply', () => {
    void it('applies a ConfigMap with kubectl apply --server-side twice, the second without a write', async () => {
      const file = fixture('ssa.yaml', configMap('ssa', { a: '1' }));
      assert.equal((await ok('apply', '--server-side', '-f', file)).trim(), 'configmap/ssa serverside-applied');
      const first = await getJson('configmap', 'ssa');
      assert.deepEqual(first.data, { a: '1' });
      assert.equal((await ok('apply', '--server-side', '-f', file)).trim(), 'configmap/ssa serverside-applied');
      const second = await getJson('configmap', 'ssa');
      assert.equal(second.metadata.resourceVersion, first.metadata.resourceVersion);
    });

    void it('keeps both keys when two field managers apply different data keys of one ConfigMap', async () => {
      await ok('apply', '--server-side', '--field-manager=alice', '-f', fixture('alice.yaml', configMap('shared', { one: '1' })));
      await ok('apply', '--server-side', '--field-manager=bob', '-f', fixture('bob.yaml', configMap('shared', { two: '2' })));
      const cm = await getJson('configmap', 'shared', '--show-managed-fields');
      assert.deepEqual(cm.data, { one: '1', two: '2' });
      const owned = Object.fromEntries(
        cm.metadata.managedFields.map((m: any) => [m.manager, [m.operation, Object.keys(m.fieldsV1['f:data'])]]),
      );
      assert.deepEqual(owned, { alice: ['Apply', ['f:one']], bob: ['Apply', ['f:two']] });

      // Re-applying alice's manifest keeps bob's key.
      await ok('apply', '--server-side', '--field-manager=alice', '-f', join(dir, 'alice.yaml'));
      assert.deepEqual((await getJson('configmap', 'shared')).data, { one: '1', two: '2' });
    });

    void it('refuses a third manager changing an owned key unless --force-conflicts is given', async () => {
      const file = fixture('carol.yaml', configMap('shared', { one: 'changed' }));
      const r = await kubectl('apply', '--server-side', '--field-manager=carol', '-f', file);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /conflict with "alice": \.data\.one/);
      assert.deepEqual((await getJson('configmap', 'shared')).data, { one: '1', two: '2' });

      await ok('apply', '--server-side', '--field-manager=carol', '--force-conflicts', '-f', file);
      assert.deepEqual((await getJson('configmap', 'shared')).data, { one: 'changed', two: '2' });
    });
  });

  void describe('imperative commands', () => {
    void it('creates a ConfigMap with kubectl create configmap --from-literal', async () => {
      assert.equal((await ok('create', 'configmap', 'made', '--from-literal=x=y', '--from-literal=z=w')).trim(), 'configmap/made created');
      assert.deepEqual((await getJson('configmap', 'made')).data, { x: 'y', z: 'w' });
      const again = await kubectl('create', 'configmap', 'made', '--from-literal=x=y');
      assert.equal(again.code, 1);
      assert.match(again.stderr, /configmaps "made" already exists/);
    });

    void it('lists the default namespace, Active, in kubectl get ns', async () => {
      const table = rows(await ok('get', 'ns'));
      assert.deepEqual(table[0], ['NAME', 'STATUS', 'AGE']);
      const def = table.find((r) => r[0] === 'default');
      assert.ok(def, `default is listed: ${JSON.stringify(table)}`);
      assert.equal(def[1], 'Active');
    });
  });
});
