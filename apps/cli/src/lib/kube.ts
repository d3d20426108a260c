/**
 * How every `kars` command that talks to a cluster finds it: `--kubeconfig`, else `KUBECONFIG`, else ~/.kube/config,
 * else in-cluster (client-node's order, through kube-client's Credentials); the namespace from `-n`, else the
 * kubeconfig context's namespace, else `default` (as kubectl does). One place, so `kars ip`, `kars policy status`,
 * `kars freshness probe` … agree.
 */
import type { Command } from 'commander';
import { Credentials, Http2Transport, KubeClient } from '@kars/kube-client';

/** The flags {@link addKubeOptions} adds. */
export interface KubeFlags {
  kubeconfig?: string;
  namespace?: string;
}

/** A connected client and the namespace to act in. Call {@link KubeContext.close} when done (or the process lingers). */
export interface KubeContext {
  client: KubeClient;
  namespace: string;
  close(): void;
}

/** Add `--kubeconfig FILE` and `-n, --namespace NS` to a command. */
export function addKubeOptions(cmd: Command): Command {
  return cmd
    .option('--kubeconfig <file>', 'kubeconfig to use (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('-n, --namespace <ns>', 'namespace (default: the kubeconfig context namespace, else "default")');
}

/** The namespace: the flag, else the kubeconfig context's, else `default`. */
export function namespaceOf(credentials: Credentials, flag: string | undefined): string {
  if (flag !== undefined && flag !== '') return flag;
  return credentials.namespace ?? 'default';
}

/**
 * Connect for a short-lived command: no periodic HTTP/2 PINGs by default (a command lives seconds; watches it opens
 * carry their own idle deadline). Long-running commands pass the shared watch knobs.
 */
export function connect(flags: KubeFlags, opts: { pingIntervalMs?: number; pingTimeoutMs?: number } = {}): KubeContext {
  const credentials = Credentials.load(flags.kubeconfig);
  const client = new KubeClient(
    new Http2Transport({ credentials, pingIntervalMs: opts.pingIntervalMs ?? 0, pingTimeoutMs: opts.pingTimeoutMs ?? 5_000 }),
  );
  return { client, namespace: namespaceOf(credentials, flags.namespace), close: () => client.close() };
}

/** Run `fn` with a connected context and always close it. */
export async function withKube<T>(flags: KubeFlags, fn: (ctx: KubeContext) => Promise<T>): Promise<T> {
  const ctx = connect(flags);
  try {
    return await fn(ctx);
  } finally {
    ctx.close();
  }
}
