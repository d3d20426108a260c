import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** What a kubectl run printed, and its exit code. */
export interface KubectlRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run `bin` (a kubectl, see `findKubectlBinary`) with `args` against `kubeconfig`. Resolves with
 * the exit code and output whatever the code; rejects only when kubectl did not finish.
 */
export function kubectl(
  bin: string,
  kubeconfig: string,
  args: readonly string[],
  { input, timeoutMs = 120_000 }: { input?: string; timeoutMs?: number } = {},
): Promise<KubectlRun> {
  return new Promise((resolve, reject) => {
    const p = execFile(
      bin,
      args,
      { env: { ...process.env, KUBECONFIG: kubeconfig }, timeout: timeoutMs, maxBuffer: 32 << 20 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(err);
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
    if (input !== undefined) p.stdin?.end(input);
  });
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
