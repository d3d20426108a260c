import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { routerChildEnv } from '@kars/router/process-options';

/** The `kars` CLI of this checkout. */
export const KARS_BIN = fileURLToPath(new URL('../../../apps/cli/bin/kars.js', import.meta.url));

/** A `kars` child process (controller, router, stub …) started by {@link startKars}. */
export interface KarsChild {
  name: string;
  proc: ChildProcess;
  /** The address of its `listening: URL` line (rejects if it exits first). */
  url: Promise<string>;
  exited: Promise<void>;
  /** The last ~200 chunks of its stdout and stderr. */
  output: string[];
  /** Resolves at the first output line matching `re` (rejects if it exits first). */
  line(re: RegExp): Promise<string>;
}

/**
 * Start `kars ARGS…` (this checkout's CLI) as a child process with `env` over the current
 * environment (KARS_LOG_LEVEL defaults to info); keeps its recent output for failure messages.
 */
export function startKars(name: string, args: readonly string[], env: Record<string, string> = {}): KarsChild {
  const proc = spawn(process.execPath, [KARS_BIN, ...args], {
    // A router runs with the node options of its container (ADR 0059).
    env: {
      ...process.env,
      KARS_LOG_LEVEL: 'info',
      ...routerChildEnv(args, process.env['NODE_OPTIONS']),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  let text = '';
  // Only whole lines are matched: a `$` must not match the end of a line still being written.
  const complete = (): string => text.slice(0, text.lastIndexOf('\n') + 1);
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void }> = [];
  const keep = (c: Buffer): void => {
    const s = c.toString('utf8');
    output.push(s);
    if (output.length > 200) output.shift();
    text = (text + s).slice(-65_536);
    const lines = complete();
    for (const w of [...waiters]) {
      const m = lines.match(w.re);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m[0]);
      }
    }
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const died = (): Error => new Error(`kars ${name} exited (${proc.exitCode ?? proc.signalCode}): ${output.join('').slice(-2000)}`);
  const line = (re: RegExp): Promise<string> => {
    const m = complete().match(re);
    if (m) return Promise.resolve(m[0]);
    const p = new Promise<string>((resolve, reject) => {
      waiters.push({ re, resolve });
      void exited.then(() => reject(died()));
    });
    p.catch(() => undefined);
    return p;
  };
  const url = line(/^listening: (\S+)$/m).then((l) => l.replace(/^listening: /, ''));
  url.catch(() => undefined);
  return { name, proc, url, exited, output, line };
}

/** SIGTERM `child` (SIGKILL after `graceMs`); resolves once it has exited. */
export async function stopKars(child: KarsChild, graceMs = 10_000): Promise<void> {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill('SIGTERM');
  const t = setTimeout(() => child.proc.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(t);
}
