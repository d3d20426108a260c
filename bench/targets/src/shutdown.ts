// Processes: everything this run starts is registered here and stopped in reverse order, at the
// end, on a failure, and on SIGINT / SIGTERM.

import { processesMentioning, startKars, stopKars } from '@kars/kube-envtest';
import type { KarsChild } from '@kars/kube-envtest';
import { errMsg, log, sleep } from '../../lib/dist/index.js';
import { remove } from './util.js';

interface Cleanup {
  what: string;
  fn: () => Promise<void>;
}

const cleanups: Cleanup[] = [];
let signalled = false;
const late: Array<Promise<void>> = [];
/** Every `kars` child's pid (the stub's command line does not name the run's directory). */
const childPids = new Set<number>();
let shuttingDown: Promise<void> | undefined;

/** Whether a SIGINT / SIGTERM has arrived. */
export const isSignalled = (): boolean => signalled;

/** Mark the run as interrupted: a start registered from now on is stopped at once. */
export function setSignalled(): void {
  signalled = true;
}

/** Settles once every stop begun after the signal (see {@link onShutdown}) has ended. */
export const lateStops = (): Promise<unknown> => Promise.allSettled(late);

/** Run a registered cleanup now (and unregister it); `cancel()` only unregisters it. */
export interface ShutdownRun {
  (): Promise<void>;
  cancel(): void;
}

/**
 * Register `fn` (async) to run at shutdown; returns a function that runs it now and unregisters it,
 * whose `cancel()` only unregisters it.
 */
export function onShutdown(what: string, fn: () => Promise<void>): ShutdownRun {
  if (signalled) {
    // Registered after a SIGINT / SIGTERM (a start that was under way): stop it at once.
    late.push(fn().catch(() => undefined));
    throw new Error(`interrupted (${what} stopped)`);
  }
  const entry: Cleanup = { what, fn };
  cleanups.push(entry);
  const run = async (): Promise<void> => {
    if (!cleanups.includes(entry)) return;
    remove(cleanups, entry);
    await fn();
  };
  return Object.assign(run, { cancel: () => remove(cleanups, entry) });
}

/** Run every registered cleanup, newest first (each given 30 s); one shutdown at a time. */
export function shutdown(): Promise<void> {
  shuttingDown ??= (async () => {
    for (let entry = cleanups.pop(); entry; entry = cleanups.pop()) {
      const { what, fn } = entry;
      try {
        await Promise.race([fn(), sleep(30_000).then(() => Promise.reject(new Error('still running after 30 s')))]);
      } catch (err) {
        log(`stopping ${what}: ${errMsg(err)}`);
      }
    }
  })();
  return shuttingDown;
}

/** Let the next {@link shutdown} run again (after a target's processes are gone). */
export function resetShutdown(): void {
  shuttingDown = undefined;
}

/** SIGKILL every process whose command line names `dir`, and every `kars` child still running (the last resort). */
export function killMentioning(dir: string, { children = false }: { children?: boolean } = {}): void {
  for (const pid of [...processesMentioning(dir), ...(children ? childPids : [])]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/** A `kars` child that is stopped at shutdown, or now by `stop()`. */
export interface StoppableKarsChild extends KarsChild {
  stop: ShutdownRun;
}

/** A `kars` child (startKars from kube-envtest), stopped at shutdown. */
export function karsChild(name: string, args: readonly string[], env?: Record<string, string>): StoppableKarsChild {
  const c = startKars(name, args, env);
  const pid = c.proc.pid;
  if (pid !== undefined) {
    childPids.add(pid);
    void c.exited.then(() => childPids.delete(pid));
  }
  return Object.assign(c, { stop: onShutdown(`kars ${name}`, () => stopKars(c)) });
}
