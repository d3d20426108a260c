// The target servers: kars apiserver (a child of this checkout's CLI) or a real kube-apiserver
// (etcd + kube-apiserver + kube-controller-manager from @kars/kube-envtest); and a kubeconfig that
// points at the fault relay in front of one.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findKubeBinaries, startControlPlane } from '@kars/kube-envtest';
import { log, startKarsApiserver } from '../../lib/dist/index.js';
import type { Config, Target } from './config.js';
import { killMentioning, onShutdown } from './shutdown.js';
import type { ShutdownRun } from './shutdown.js';

/** A running target server. */
export interface Server {
  label: string;
  version: string;
  /** An admin kubeconfig (kars: the bearer token; kube: the client certificate in system:masters). */
  kubeconfig: string;
  port: number;
  storage: string;
  /** Why the server exited on its own, if it did. */
  died(): string | undefined;
  stop: ShutdownRun;
}

/**
 * Start the server of `target` under `dir`. Resolves with `{ label, version, kubeconfig, port,
 * storage, died(), stop() }`, or `{ skipped: reason }` when the kube binaries are absent (the reason
 * names `npm run kube:build`). The kubeconfig is an admin one (kars: the bearer token; kube: the
 * client certificate in system:masters).
 */
export async function startTarget(target: Target, dir: string, cfg: Config): Promise<Server | { skipped: string }> {
  mkdirSync(dir, { recursive: true });
  if (target.kind === 'kars') {
    const srv = await startKarsApiserver(join(dir, 'apiserver'), ['--bookmark-interval', '60'], {
      onDied: (h) => log(`${h.died}; stderr tail:\n${h.stderr.tail.slice(-10).join('\n')}`),
    });
    const stop = onShutdown('kars apiserver', async () => {
      await srv.stop();
      killMentioning(dir);
    });
    return {
      label: 'kars apiserver',
      version: 'this checkout',
      kubeconfig: srv.kubeconfig,
      port: Number(new URL(srv.url).port),
      storage: 'SQLite, group commit with fsync',
      died: () => srv.died,
      stop,
    };
  }
  const found = findKubeBinaries(target.pin.minor);
  if (!found.binaries) return { skipped: found.reason };
  // The control plane's dir is ours (under the run's temp dir), so an interrupted start can still be
  // found by the processes that name it.
  const cpDir = join(dir, 'control-plane');
  const halfStarted = onShutdown(`kube control plane ${target.pin.version} (starting)`, async () => killMentioning(cpDir));
  // kars apiserver fsyncs every commit (group commit); kube-envtest's etcd does not, unless told to.
  // The same durability on both sides is the default here (BENCH_ETCD_FSYNC=0: envtest's setting).
  const etcdArgs = cfg.etcdFsync ? ['--unsafe-no-fsync=false'] : [];
  const cp = await startControlPlane({ binaries: found.binaries, dir: cpDir, etcdArgs, log: (l) => log(`  ${l}`) });
  halfStarted.cancel();
  const stop = onShutdown(`kube control plane ${target.pin.version}`, async () => {
    await cp.stop();
    killMentioning(cpDir);
  });
  return {
    label: `kube-apiserver ${target.pin.version}`,
    version: target.pin.version,
    kubeconfig: cp.kubeconfig,
    port: Number(new URL(cp.url).port),
    storage: cfg.etcdFsync ? 'etcd with fsync' : 'etcd without fsync (--unsafe-no-fsync)',
    died: () => undefined,
    stop,
  };
}

/** A copy of `kubeconfig` whose server is `https://127.0.0.1:<port>` (the relay); TLS and credentials unchanged. */
export function relayKubeconfig(kubeconfig: string, port: number, file: string): string {
  const text = readFileSync(kubeconfig, 'utf8');
  // YAML (`server: https://…`) or JSON (`"server": "https://…"`, kube-envtest's).
  const out = text.replace(/(["']?server["']?\s*:\s*)["']?https:\/\/[^\s"',]+["']?/g, `$1"https://127.0.0.1:${port}"`);
  if (out === text) throw new Error(`no "server: https://…" line in ${kubeconfig}`);
  writeFileSync(file, out, { mode: 0o600 });
  return file;
}
