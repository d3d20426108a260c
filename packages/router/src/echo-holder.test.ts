/**
 * One echo Lease, one live router (ADR 0024): two live routers that claim the same instance name in
 * one sandbox must not merge into one echo, and a router restarted after a crash still takes over its
 * own lease at once. Real routers (one a real `kars router` process) against a real kars apiserver.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Resources } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';
import { HOLDER_PROCESS_ANNOTATION, LOADED_DIGESTS_ANNOTATION, routerLeaseName, TOOK_OVER_ANNOTATION } from '@kars/policy-api';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { startOpenAIStub } from './stubs/openai.js';
import type { OpenAIStub } from './stubs/openai.js';
import { startApiRouter, startApiStack } from './testing/api-stack.js';
import type { ApiStack } from './testing/api-stack.js';

const NS = 'agents';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const SB = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
const cfg = fastWatchConfig();
const KARS_BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../apps/cli/bin/kars.js');

type Lease = KubeObject & { spec?: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number } };

interface RouterProcess {
  child: ChildProcess;
  url: string;
  stderr(): string;
  exited: Promise<number | null>;
}

/** Start `kars router` as its own process against the stack's apiserver; resolves once it listens. */
function startRouterProcess(kubeconfig: string, upstream: string, instance: string): Promise<RouterProcess> {
  return new Promise((res, rej) => {
    const child = spawn(
      process.execPath,
      [
        KARS_BIN,
        'router',
        '--sandbox',
        'sb1',
        '--namespace',
        NS,
        '--kubeconfig',
        kubeconfig,
        '--instance',
        instance,
        '--listen',
        '127.0.0.1:0',
        '--upstream',
        upstream,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_UID: '' } },
    );
    let out = '';
    let err = '';
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.stderr?.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = /^listening: (\S+)$/m.exec(out);
      if (m?.[1]) res({ child, url: m[1], stderr: () => err, exited });
    });
    void exited.then((code) => rej(new Error(`kars router exited (${code}) before listening:\n${out}\n${err}`)));
  });
}

describe('one echo Lease, one live router', () => {
  let stack: ApiStack;
  let stub: OpenAIStub;
  const procs: ChildProcess[] = [];

  before(async () => {
    stub = await startOpenAIStub();
    stack = await startApiStack({
      namespace: NS,
      config: cfg,
      objects: [
        [
          SB,
          {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'KarsSandbox',
            metadata: { name: 'sb1' },
            spec: { inferenceRef: { name: 'budget' } },
          },
        ],
        [
          IP,
          {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'InferencePolicy',
            metadata: { name: 'budget' },
            spec: { appliesTo: { sandboxName: 'sb1' }, tokenBudget: { perRequestTokens: 200 } },
          },
        ],
      ],
      router: { sandbox: 'sb1', upstream: stub.url, instance: 'vm' },
    });
  });

  after(async () => {
    for (const p of procs) p.kill('SIGKILL');
    await stack.close();
    await stub.close();
  });

  const lease = (instance: string): Promise<Lease | undefined> =>
    stack.client.getOrUndefined<Lease>(Resources.leases, NS, routerLeaseName('sb1', instance));

  it('a second live router with the same instance name does not write the lease and is not ready, saying why; the first keeps it', async () => {
    const first = stack.router;
    const mine = first.echoHolder;
    assert.ok(mine?.startsWith('vm/'), `a per-process holder identity: ${mine}`);
    await until(
      'first router ready and holding its lease',
      async () => first.isReady() && (await lease('vm'))?.spec?.holderIdentity === mine,
    );

    // Every write of the lease from here on, seen through a watch.
    const from = (await lease('vm'))?.metadata.resourceVersion ?? '';
    const holders: string[] = [];
    const ac = new AbortController();
    const seen = (async () => {
      try {
        for await (const ev of stack.client.watch<Lease>(Resources.leases, {
          namespace: NS,
          fieldSelector: `metadata.name=${routerLeaseName('sb1', 'vm')}`,
          resourceVersion: from,
          timeoutSeconds: 600,
          allowWatchBookmarks: false,
          idleTimeoutMs: 600_000,
          signal: ac.signal,
        }))
          if (ev.type !== 'BOOKMARK') holders.push(`${ev.type} ${(ev.object as Lease).spec?.holderIdentity ?? ''}`);
      } catch {
        // aborted
      }
    })();

    assert.ok(mine);
    const second = await startRouterProcess(stack.ts.server.kubeconfigPath, stub.url.toString(), 'vm');
    procs.push(second.child);
    const reason = new RegExp(
      `another live router holds echo lease ${NS}/kars-router-sb1-vm: holder ${mine.replace('/', '\\/')} \\(PID ${process.pid} on this host\\)`,
    );
    const readyz = await until('second router reports why it is not ready', async () => {
      const r = await fetch(`${second.url}/readyz`);
      const text = await r.text();
      return r.status === 503 && reason.test(text) ? text : undefined;
    });
    assert.match(readyz, /give it another --instance \(or POD_NAME\), or stop the other/);
    await until('the refusal is logged', () => reason.test(second.stderr()));

    // An edit reaches both routers; only the first echoes it, into its own lease.
    const patched = await stack.ts.client.patch(`${IP}/budget`, { spec: { tokenBudget: { perRequestTokens: 150 } } }, 'merge');
    assert.equal(patched.status, 200, patched.text);
    const ready = await until('edit Ready', async () => {
      const r = await stack.ts.client.get(`${IP}/budget`);
      return r.body.status?.phase === 'Ready' && r.body.metadata.generation === r.body.status.observedGeneration ? r.body : undefined;
    });
    const l = await lease('vm');
    assert.equal(l?.spec?.holderIdentity, mine);
    assert.equal(JSON.parse(l?.metadata.annotations?.[LOADED_DIGESTS_ANNOTATION] ?? '{}').InferencePolicy, ready.status.compiledDigest);

    // The second stops gracefully: it must not withdraw the first's lease.
    second.child.kill('SIGTERM');
    await second.exited;
    assert.equal((await lease('vm'))?.spec?.holderIdentity, mine, 'the lease survives the second router stopping');
    ac.abort();
    await seen;
    assert.deepEqual(
      holders.filter((h) => !h.endsWith(` ${mine}`)),
      [],
      `only the first router wrote the lease: ${holders.join(', ')}`,
    );
  });

  it('a router restarted after kill -9 takes over its own lease at once, before the old lease expires', async () => {
    const crashed = await startRouterProcess(stack.ts.server.kubeconfigPath, stub.url.toString(), 'vm2');
    procs.push(crashed.child);
    const old = await until('the crashed-to-be router holds its lease', async () => {
      const l = await lease('vm2');
      const proc = JSON.parse(l?.metadata.annotations?.[HOLDER_PROCESS_ANNOTATION] ?? '{}') as { pid?: number };
      return proc.pid === crashed.child.pid ? l : undefined;
    });
    crashed.child.kill('SIGKILL');
    await crashed.exited;
    const oldExpiry = Date.parse(old.spec?.renewTime ?? '') + (old.spec?.leaseDurationSeconds ?? 0) * 1000;

    const restarted = await startApiRouter(stack.routerClient, cfg, { sandbox: 'sb1', namespace: NS, upstream: stub.url, instance: 'vm2' });
    try {
      const taken = await until('the restarted router holds the lease', async () => {
        const l = await lease('vm2');
        return l?.spec?.holderIdentity === restarted.router.echoHolder ? l : undefined;
      });
      assert.equal(taken.metadata.annotations?.[TOOK_OVER_ANNOTATION], old.spec?.holderIdentity);
      assert.ok(Date.parse(taken.spec?.renewTime ?? '') < oldExpiry, 'taken over while the dead process’s lease was still valid');
      await until('restarted router ready', () => restarted.router.isReady());
      assert.equal(restarted.router.echoBlocked(), undefined);
    } finally {
      await restarted.stop();
    }
    assert.equal(await lease('vm2'), undefined, 'a graceful stop withdraws its own lease');
  });
});
