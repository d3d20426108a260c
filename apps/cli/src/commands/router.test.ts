import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCrds, eventually, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { parseMcpUpstream, routerInstance, routerUsesApi, SERVICE_ACCOUNT_TOKEN } from './router.js';
import { CAPABILITIES_ANNOTATION } from '@kars/policy-api';

const kars = fileURLToPath(new URL('../../bin/kars.js', import.meta.url));
const LEASES = '/apis/coordination.k8s.io/v1/namespaces/default/leases';

function startRouter(
  ts: TestServer,
  extraArgs: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(
    process.execPath,
    [
      kars,
      'router',
      '--sandbox',
      'sb',
      '--namespace',
      'default',
      '--upstream',
      'http://127.0.0.1:9',
      '--listen',
      '127.0.0.1:0',
      '--kubeconfig',
      ts.server.kubeconfigPath,
      ...extraArgs,
    ],
    {
      env: { ...process.env, POD_NAME: '', KARS_HTTP2_PING_INTERVAL_SECS: '1', KARS_HTTP2_PING_TIMEOUT_SECS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.resume();
  child.stderr?.resume();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited };
}

async function routerLeases(
  ts: TestServer,
): Promise<Array<{ metadata: { name: string }; spec: { renewTime: string; holderIdentity: string } }>> {
  return (await ts.client.get(`${LEASES}?labelSelector=kars.azure.com%2Fsandbox%3Dsb`)).body.items;
}

describe('router instance name', () => {
  it('prefers --instance, then POD_NAME, then the hostname, spelled as a Lease name allows', () => {
    assert.equal(routerInstance('Flag_1', { POD_NAME: 'pod' }, 'host'), 'flag-1');
    assert.equal(routerInstance(undefined, { POD_NAME: 'router-7d9f-x2' }, 'host'), 'router-7d9f-x2');
    assert.equal(routerInstance(undefined, { POD_NAME: ' ' }, 'Host.Example'), 'host.example');
    assert.equal(routerInstance(undefined, {}, 'h'), 'h', 'stable: no random part, so a restart reuses the lease');
  });
});

describe('API access of a --policy-dir router', () => {
  it('uses the API when watching it, with an explicit --kubeconfig, or in a pod with a service account; never a stray kubeconfig', () => {
    const mounted = (p: string): boolean => p === SERVICE_ACCOUNT_TOKEN;
    const none = (): boolean => false;
    assert.equal(routerUsesApi({}, {}, none), true, 'watching the API needs it');
    assert.equal(routerUsesApi({ policyDir: '/p', kubeconfig: '/k' }, {}, none), true);
    assert.equal(routerUsesApi({ policyDir: '/p' }, { KUBECONFIG: '/home/me/.kube/config' }, none), false);
    assert.equal(routerUsesApi({ policyDir: '/p' }, { KUBERNETES_SERVICE_HOST: '10.0.0.1' }, mounted), true);
    assert.equal(routerUsesApi({ policyDir: '/p' }, { KUBERNETES_SERVICE_HOST: '10.0.0.1' }, none), false, 'no token: not a pod');
    assert.equal(routerUsesApi({ policyDir: '/p' }, { KUBERNETES_SERVICE_HOST: '' }, mounted), false);
  });
});

describe('--mcp-upstream', () => {
  it('reads NAME=URL as a named server and a bare URL (even with = in its query) as the unnamed one', () => {
    assert.deepEqual(parseMcpUpstream('github=http://127.0.0.1:7000/mcp'), { name: 'github', url: new URL('http://127.0.0.1:7000/mcp') });
    assert.deepEqual(parseMcpUpstream('http://127.0.0.1:7000/mcp?a=b'), { name: undefined, url: new URL('http://127.0.0.1:7000/mcp?a=b') });
    assert.deepEqual(parseMcpUpstream('my.server-1=https://x.example/mcp'), { name: 'my.server-1', url: new URL('https://x.example/mcp') });
  });

  it('refuses a bad name, a bad URL, and text that is neither', () => {
    assert.throws(() => parseMcpUpstream('GitHub=http://x/mcp'), /NAME must be a lower-case DNS label/);
    assert.throws(() => parseMcpUpstream('git hub=http://x/mcp'), /NAME must be a lower-case DNS label/);
    assert.throws(() => parseMcpUpstream('github=not a url'), /is not a URL/);
    assert.throws(() => parseMcpUpstream('nonsense'), /must be a URL or NAME=URL/);
  });
});

describe('kars router echo lease lifecycle (process)', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
  });
  after(async () => ts.close());

  it('with --mcp-upstream NAME=URL (repeatable) beside the unnamed form, advertises exactly the named servers it fronts', async () => {
    const r = startRouter(ts, [
      '--instance',
      'caps',
      '--mcp-upstream',
      'github=http://127.0.0.1:9/mcp',
      '--mcp-upstream',
      'http://127.0.0.1:9/mcp',
      '--mcp-upstream',
      'docs=http://127.0.0.1:9/mcp',
    ]);
    try {
      const lease = await eventually(
        async () =>
          (await routerLeases(ts)).find((l) => l.metadata.name === 'kars-router-sb-caps') as
            { metadata: { annotations: Record<string, string> } } | undefined,
        15_000,
      );
      assert.deepEqual(JSON.parse(lease.metadata.annotations[CAPABILITIES_ANNOTATION] ?? ''), ['mcp-server:docs', 'mcp-server:github']);
    } finally {
      r.child.kill('SIGTERM');
      await r.exited;
    }
  });

  it('refuses two servers of the same name with a clear message and exit code 1', async () => {
    const r = startRouter(ts, ['--mcp-upstream', 'github=http://127.0.0.1:9/a', '--mcp-upstream', 'github=http://127.0.0.1:9/b']);
    let err = '';
    r.child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    assert.notEqual(await r.exited, 0);
    assert.match(err, /--mcp-upstream github= is given twice/);
  });

  it('with --policy-dir, publishes an echo lease only through an explicit --kubeconfig, not the KUBECONFIG it happens to find', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kars-policy-dir-'));
    const run = (extra: string[], instance: string): { child: ChildProcess; exited: Promise<number | null>; stderr: () => string } => {
      const child = spawn(
        process.execPath,
        [kars, 'router', '--sandbox', 'sb', '--namespace', 'default', '--upstream', 'http://127.0.0.1:9', '--listen', '127.0.0.1:0'].concat(
          ['--policy-dir', dir, '--instance', instance],
          extra,
        ),
        { env: { ...process.env, KUBECONFIG: ts.server.kubeconfigPath, KUBERNETES_SERVICE_HOST: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let err = '';
      child.stdout?.resume();
      child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      return { child, exited, stderr: () => err };
    };
    const stray = run([], 'stray');
    const explicit = run(['--kubeconfig', ts.server.kubeconfigPath], 'explicit');
    try {
      // The explicit one proves a lease would have appeared by now; the stray one must have written none.
      await eventually(async () => (await routerLeases(ts)).some((l) => l.metadata.name === 'kars-router-sb-explicit'), 30_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.deepEqual(
        (await routerLeases(ts)).map((l) => l.metadata.name).filter((n) => n !== 'kars-router-sb-explicit'),
        [],
        'the router without --kubeconfig echoed through the KUBECONFIG it found',
      );
      assert.match(stray.stderr(), /without an echo lease/);
      assert.doesNotMatch(stray.stderr(), /"level":(50|60)/, 'no error logs from a lease it should not try to write');
    } finally {
      stray.child.kill('SIGTERM');
      explicit.child.kill('SIGTERM');
      await Promise.all([stray.exited, explicit.exited]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('withdraws its echo lease at once on SIGTERM', async () => {
    const r = startRouter(ts, ['--instance', 'Pod-A']);
    try {
      await eventually(async () => (await routerLeases(ts)).some((l) => l.metadata.name === 'kars-router-sb-pod-a'), 15_000);
      r.child.kill('SIGTERM');
      assert.equal(await r.exited, 0, 'a graceful stop exits 0');
      assert.deepEqual(
        (await routerLeases(ts)).map((l) => l.metadata.name),
        [],
        'no echo lingers after a graceful stop',
      );
    } finally {
      r.child.kill('SIGKILL');
    }
  });

  it('keeps its identity from POD_NAME across a crash, so the restart takes over its own lease', async () => {
    const first = startRouter(ts, [], { POD_NAME: 'router-0' });
    let second: ReturnType<typeof startRouter> | undefined;
    try {
      await eventually(async () => (await routerLeases(ts)).find((l) => l.metadata.name === 'kars-router-sb-router-0'), 15_000);
      first.child.kill('SIGKILL');
      await first.exited;
      const left = await routerLeases(ts);
      assert.equal(left.length, 1, 'a crash leaves the lease (it cannot withdraw)');
      const crashed = left[0]!.spec.holderIdentity;
      second = startRouter(ts, [], { POD_NAME: 'router-0' });
      // The second router's write is told apart by its holder identity (`<instance>/<random>`, one per
      // process), not by a new renewTime: a renewal the first router sent just before SIGKILL can
      // still land after the kill, and would pass for the second router's while it is still starting.
      const renewed = await eventually(
        async () =>
          (await routerLeases(ts)).find(
            (l) =>
              l.metadata.name === 'kars-router-sb-router-0' &&
              l.spec.holderIdentity.startsWith('router-0/') &&
              l.spec.holderIdentity !== crashed,
          ),
        15_000,
      );
      assert.ok(renewed, 'the restarted router took over the same lease');
      assert.deepEqual(
        (await routerLeases(ts)).map((l) => l.metadata.name),
        ['kars-router-sb-router-0'],
        'one lease per pod, no orphan echo',
      );
      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0);
      assert.equal((await routerLeases(ts)).length, 0);
    } finally {
      first.child.kill('SIGKILL');
      second?.child.kill('SIGKILL');
    }
  });
});
