/**
 * The benchmark process's side of a peer child: fork `dist/main.js --child <spec>` and talk to it
 * over IPC.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sleep, splitArgs } from '../../lib/dist/index.js';
import type { Exit } from '../../lib/dist/index.js';
import type { ChildEvent, ChildEventName, ChildSpec, EventOf, ParentCommand } from './ipc.js';
import type { BenchApi } from './cluster.js';

/** The entry point the child runs (this benchmark's own `main.js`, with `--child`). */
const SELF = fileURLToPath(new URL('./main.js', import.meta.url));

/** A forked peer child. */
export interface PeerChild {
  child: ChildProcess;
  msgs: ChildEvent[];
  /** The first unread event `ev` (removed from `msgs`); throws on an `error` event, exit or timeout. */
  wait<E extends ChildEventName>(ev: E, timeoutMs: number): Promise<EventOf<E>>;
  send(m: ParentCommand): boolean;
  /** The newest event `ev` received, left in `msgs`. */
  latest<E extends ChildEventName>(ev: E): EventOf<E> | undefined;
  /** Ask the child to exit (SIGKILL after 5 s); resolves once it has. */
  close(): Promise<void>;
}

/** Fork one peer child; returns helpers to talk to it. */
export function startChild(spec: ChildSpec, env: NodeJS.ProcessEnv): PeerChild {
  const extra = splitArgs(process.env['BENCH_CHILD_NODE_ARGS']);
  const child = fork(SELF, ['--child', JSON.stringify(spec)], {
    execArgv: ['--expose-gc', ...extra],
    env,
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const msgs: ChildEvent[] = [];
  let wake: (() => void) | undefined;
  const stderrTail: string[] = [];
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => {
    for (const l of c.split('\n')) {
      if (!l.trim()) continue;
      stderrTail.push(l);
      if (stderrTail.length > 30) stderrTail.shift();
    }
  });
  let exited: Exit | undefined;
  child.on('message', (m) => {
    msgs.push(m as ChildEvent);
    wake?.();
  });
  child.on('exit', (code, signal) => {
    exited = { code, signal };
    wake?.();
  });
  const wait = async <E extends ChildEventName>(ev: E, timeoutMs: number): Promise<EventOf<E>> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const err = msgs.find((m): m is EventOf<'error'> => m.ev === 'error');
      if (err) throw new Error(`${spec.peer} child: ${err.error}`);
      const i = msgs.findIndex((m) => m.ev === ev);
      if (i >= 0) return msgs.splice(i, 1)[0] as EventOf<E>;
      if (exited)
        throw new Error(`${spec.peer} child exited (${JSON.stringify(exited)}) while waiting for "${ev}"\n${stderrTail.join('\n')}`);
      if (Date.now() > deadline)
        throw new Error(`${spec.peer} child: timed out after ${timeoutMs} ms waiting for "${ev}"\n${stderrTail.join('\n')}`);
      await Promise.race([new Promise<void>((r) => (wake = r)), sleep(100)]);
    }
  };
  return {
    child,
    msgs,
    wait,
    send: (m) => child.connected && child.send(m),
    latest: <E extends ChildEventName>(ev: E) => [...msgs].reverse().find((m): m is EventOf<E> => m.ev === ev),
    async close() {
      if (exited) return;
      if (child.connected) child.send({ cmd: 'exit' } satisfies ParentCommand);
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      while (!exited) await new Promise((r) => child.once('exit', r));
      clearTimeout(t);
    },
  };
}

/**
 * Start child `c`'s peer, wait until it has listed, then write a probe value into `ns/name` (via
 * `api`) and wait until the peer has seen it; resolves with the child's `synced` message.
 */
export async function startAndSync(
  c: PeerChild,
  api: BenchApi,
  ns: string,
  name: string,
  { readyMs, listedMs }: { readyMs: number; listedMs: number },
): Promise<EventOf<'synced'>> {
  await c.wait('ready', readyMs);
  c.send({ cmd: 'start' });
  await c.wait('listed', listedMs);
  const probe = `p-${Math.random().toString(36).slice(2, 8)}`;
  c.send({ cmd: 'probe', value: probe });
  await c.wait('probe-armed', 10_000);
  await api.patchData(ns, name, { probe }, false);
  return c.wait('synced', 60_000);
}
