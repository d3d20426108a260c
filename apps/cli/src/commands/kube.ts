import { Command } from 'commander';
import { join, resolve } from 'node:path';
import { findKubeBinaries, readPins, startControlPlane } from '@kars/kube-envtest';
import { CliError } from '../lib/output.js';

/** Where `kars kube up` writes; stdout/stderr unless a test passes its own. */
export interface KubeUpIo {
  out: { write(s: string): unknown };
  err: { write(s: string): unknown };
}

/**
 * `kars kube up`: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
 * built by `npm run kube:build`) on loopback ports until Ctrl-C, for pointing kars at
 * (docs/adr/0022-real-kubernetes-control-plane.md).
 */
export function kubeCommand(io: KubeUpIo = { out: process.stdout, err: process.stderr }): Command {
  const pins = readPins();
  const newest = pins.kubernetes[pins.kubernetes.length - 1]?.minor ?? '';
  const kube = new Command('kube').description('run a real Kubernetes control plane (built by npm run kube:build) to point kars at');
  kube
    .command('up')
    .description('start etcd, kube-apiserver and kube-controller-manager on loopback ports until Ctrl-C; prints the admin kubeconfig')
    .option('--kubernetes-version <minor>', `pinned Kubernetes version (${pins.kubernetes.map((p) => p.minor).join(', ')})`, newest)
    .option(
      '--dir <dir>',
      'where data, certificates, the kubeconfig, logs and the audit log go (kept across runs, one subdirectory per version)',
      '.kars/kube',
    )
    // Not `--version`: the root program's -V/--version takes that anywhere on the line (kubeadm's name).
    .action(async (o: { kubernetesVersion: string; dir: string }) => {
      const found = findKubeBinaries(o.kubernetesVersion);
      if (!found.binaries) throw new CliError(found.reason);
      const dir = resolve(join(o.dir, found.binaries.version));
      const cp = await startControlPlane({ binaries: found.binaries, dir, log: (l) => io.err.write(`${l}\n`) }).catch((e: unknown) => {
        throw new CliError((e as Error).message);
      });
      io.out.write(
        [
          `Kubernetes ${cp.version} is up at ${cp.url}`,
          `  kubeconfig (admin): ${cp.kubeconfig}`,
          `  logs:               ${join(dir, 'logs')}   audit log: ${cp.auditLog}`,
          '',
          'Point kars at it:',
          `  export KUBECONFIG=${cp.kubeconfig}`,
          '  kubectl apply --server-side -k deploy/base     # the CRDs, namespace, RBAC',
          `  kars controller --kubeconfig ${cp.kubeconfig}`,
          '',
          'Ctrl-C stops it (the data stays in the directory for the next run).',
          '',
        ].join('\n'),
      );
      await new Promise<void>((r) => {
        process.once('SIGINT', r);
        process.once('SIGTERM', r);
      });
      io.err.write('stopping the control plane …\n');
      await cp.stop();
    });
  return kube;
}
