// The API servers the fleet runs against: kars apiserver (a child process of this checkout's CLI,
// restarted for real on the same port and data dir) and, when `npm run kube:build` has built it, a
// real kube-apiserver (etcd + kube-apiserver + kube-controller-manager from @kars/kube-envtest).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { findKubeBinaries, startControlPlane, startKars, stopKars } from '@kars/kube-envtest';
import type { ApiserverRestart, AuditEvent, ControlPlane, KarsChild } from '@kars/kube-envtest';

/** A running API server the fleet talks to. */
export interface Target {
  label: string;
  kubeconfig: string;
  port: number;
  /** The API server's process id (for CPU and RSS); changes after a restart. */
  pid(): number | undefined;
  /**
   * Stop the API server process and start it again on the same port with the same data; resolves
   * once it serves, with how long the stop (the old process's own shutdown) and the start took.
   */
  restart(): Promise<ApiserverRestart>;
  /** Requests the server has answered so far, by "verb resource" (kube-apiserver's audit log); undefined where there is none. */
  requests(): AuditEvent[] | undefined;
  stop(): Promise<void>;
}

/** Which targets to run: `kars`, `kube` (the newest pinned kube-apiserver) or `kube-1.34` (a pinned minor). */
export type TargetSpec = { id: string; kind: 'kars' } | { id: string; kind: 'kube'; version: string | undefined };

export function parseTargets(spec: string): TargetSpec[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((id): TargetSpec => {
      if (id === 'kars') return { id, kind: 'kars' };
      if (id === 'kube') return { id, kind: 'kube', version: undefined };
      const m = /^kube-(.+)$/.exec(id);
      if (m) return { id, kind: 'kube', version: m[1] };
      throw new Error(`unknown target "${id}" (use kars, kube or kube-<minor>)`);
    });
}

async function startKarsApiserver(dir: string, port: number): Promise<{ child: KarsChild; url: string; kubeconfig: string }> {
  const child = startKars('apiserver', ['apiserver', '--listen', `127.0.0.1:${port}`, '--data-dir', dir, '--bookmark-interval', '60'], {
    KARS_LOG_LEVEL: 'warn',
  });
  const url = await child.url;
  const kubeconfig = (await child.line(/^kubeconfig: \S+$/m)).replace(/^kubeconfig: /, '');
  return { child, url, kubeconfig };
}

/** Start `spec` under `dir`; `{ skipped }` (naming `npm run kube:build`) when the kube binaries are absent. */
export async function startTarget(spec: TargetSpec, dir: string, log: (l: string) => void): Promise<Target | { skipped: string }> {
  mkdirSync(dir, { recursive: true });
  if (spec.kind === 'kars') {
    const dataDir = join(dir, 'apiserver');
    let srv = await startKarsApiserver(dataDir, 0);
    const port = Number(new URL(srv.url).port);
    return {
      label: 'kars apiserver',
      kubeconfig: srv.kubeconfig,
      port,
      pid: () => srv.child.proc.pid,
      async restart() {
        const old = srv.child;
        const t0 = performance.now();
        await stopKars(old);
        const t1 = performance.now();
        srv = await startKarsApiserver(dataDir, port);
        return { stoppedMs: t1 - t0, killed: old.proc.signalCode === 'SIGKILL', startedMs: performance.now() - t1 };
      },
      requests: () => undefined,
      stop: () => stopKars(srv.child),
    };
  }
  const found = findKubeBinaries(spec.version);
  if (!found.binaries) return { skipped: found.reason };
  const cp: ControlPlane = await startControlPlane({ binaries: found.binaries, dir: join(dir, 'control-plane'), log });
  return {
    label: `kube-apiserver ${cp.version}`,
    kubeconfig: cp.kubeconfig,
    port: Number(new URL(cp.url).port),
    pid: () => cp.apiserver.pid,
    restart: () => cp.restartApiserver(),
    requests: () => cp.auditEvents(),
    stop: () => cp.stop(),
  };
}
