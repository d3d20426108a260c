/**
 * The real kubectl binaries for tests: finding one beside the `kubectl` on PATH (which may be a
 * dispatcher that silently picks a version) and running it against a kubeconfig. Shared by the
 * tests against kars apiserver and against a real kube-apiserver (kube-envtest).
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, readdirSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * A kubectl binary, or undefined (then skip). Among the versioned binaries (`kubectl.1.33`, …)
 * beside the first `kubectl` on PATH, the first of `prefer` that exists (`'newest'`: the highest
 * minor); else that `kubectl` itself.
 */
export function findKubectl(prefer: readonly string[] | 'newest', env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    let real: string;
    try {
      real = realpathSync(join(dir, 'kubectl'));
    } catch {
      continue;
    }
    if (!executable(real)) continue;
    const minors =
      prefer === 'newest'
        ? readdirSync(dirname(real))
            .map((f) => /^kubectl\.1\.(\d+)$/.exec(f))
            .filter((m): m is RegExpExecArray => m !== null)
            .map((m) => `1.${m[1]}`)
            .sort((a, b) => Number(b.slice(2)) - Number(a.slice(2)))
        : prefer;
    return minors.map((v) => join(dirname(real), `kubectl.${v}`)).find(executable) ?? real;
  }
  return undefined;
}

/** What a kubectl run printed, and its exit code. */
export interface KubectlRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run `bin` (a kubectl found by {@link findKubectl}, or any command) with `args` and `KUBECONFIG`
 * set to `kubeconfig`, writing `input` to its stdin when given. Resolves with the exit code and
 * output whatever the code; rejects only when it did not finish (not found, killed at `timeoutMs`).
 */
export function runKubectl(
  bin: string,
  kubeconfig: string,
  args: readonly string[],
  { input, timeoutMs = 60_000 }: { input?: string; timeoutMs?: number } = {},
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
