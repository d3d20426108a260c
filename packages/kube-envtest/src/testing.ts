import { readdirSync, readFileSync } from 'node:fs';
import { runKubectl, type KubectlRun } from '@kars/kube-core/testing';

export type { KubectlRun };

/**
 * Run `bin` (a kubectl, see `findKubectlBinary`) with `args` against `kubeconfig`: kube-core's
 * `runKubectl` with a longer default time limit (a real apiserver on a loaded machine).
 */
export function kubectl(
  bin: string,
  kubeconfig: string,
  args: readonly string[],
  { input, timeoutMs = 120_000 }: { input?: string; timeoutMs?: number } = {},
): Promise<KubectlRun> {
  return runKubectl(bin, kubeconfig, args, input === undefined ? { timeoutMs } : { input, timeoutMs });
}

/**
 * The pids of running processes whose command line contains `needle` (a control plane's directory:
 * every process the harness starts names it in a flag). Linux /proc; zombies count as gone.
 */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${d}/stat`, 'utf8'))) continue;
      if (
        readFileSync(`/proc/${d}/cmdline`, 'utf8')
          .split('\0')
          .some((a) => a.includes(needle))
      )
        out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
