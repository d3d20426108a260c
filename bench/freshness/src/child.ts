/**
 * Child process: one peer alone, for events/s and heap per cached object (fork + IPC). The
 * benchmark process drives it with {@link ParentCommand}s; it answers with {@link ChildEvent}s.
 */
import { createPeer } from '../../watch-peers/dist/index.js';
import { nowUs, sleep } from '../../lib/dist/index.js';
import type { ChildEvent, ChildSpec, ParentCommand } from './ipc.js';

const nowMs = (): number => nowUs() / 1000;

/** Run the peer child of `spec` until told to exit (or the benchmark process goes away). */
export async function childMain(spec: ChildSpec): Promise<void> {
  const send = (m: ChildEvent): void => void process.send?.(m);
  const inbox: ParentCommand[] = [];
  let wake: (() => void) | undefined;
  process.on('message', (m: ParentCommand) => {
    inbox.push(m);
    wake?.();
  });
  process.on('disconnect', () => process.exit(0)); // the benchmark process went away
  const next = async <C extends ParentCommand['cmd']>(cmd: C): Promise<Extract<ParentCommand, { cmd: C }>> => {
    for (;;) {
      const i = inbox.findIndex((m) => m.cmd === cmd || m.cmd === 'exit');
      if (i >= 0) {
        const m = inbox.splice(i, 1)[0] as ParentCommand;
        if (m.cmd === 'exit') process.exit(0);
        return m as Extract<ParentCommand, { cmd: C }>;
      }
      await new Promise<void>((r) => (wake = r));
    }
  };
  const waitUntil = async (pred: () => boolean, timeoutMs: number, what: string): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`${spec.peer}: timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(20);
    }
  };
  const gcSettle = async (): Promise<void> => {
    for (let i = 0; i < 6; i++) {
      globalThis.gc?.();
      await sleep(30);
    }
  };
  const plog = (): undefined => undefined;
  try {
    if (spec.role === 'memory' && typeof globalThis.gc !== 'function') throw new Error('memory child needs --expose-gc');
    if (spec.role === 'memory' && spec.warmNamespace) {
      // Warm-up peer on a small namespace: loads and compiles the library's list/watch/parse paths
      // and TLS, so the measured delta is the cache, not one-time code.
      const warm = await createPeer(spec.peer, { kubeconfig: spec.kubeconfig, namespace: spec.warmNamespace, log: plog, track: [] });
      warm.start();
      await waitUntil(() => warm.size() >= spec.warmCount, 60_000, `warm-up list of ${spec.warmCount}`);
      await sleep(300);
      await warm.stop();
      await sleep(300);
    }
    const peer = await createPeer(spec.peer, {
      kubeconfig: spec.kubeconfig,
      namespace: spec.namespace,
      log: plog,
      track: [spec.probeName],
    });
    let probeValue: string | undefined = undefined; // set by the probe command; the change handler reads it first
    let probeSeen = false;
    let counting = false;
    let count = 0;
    let firstUs = 0;
    let lastUs = 0;
    peer.onChange((name, data) => {
      if (name === spec.probeName && probeValue !== undefined && data?.['probe'] === probeValue) probeSeen = true;
      if (counting && data?.['seq'] !== undefined) {
        const t = nowUs();
        if (count === 0) firstUs = t;
        lastUs = t;
        count++;
      }
    });
    await gcSettle();
    const base = process.memoryUsage();
    send({ ev: 'ready' });
    await next('start');
    const t0 = nowMs();
    peer.start();
    await waitUntil(() => peer.size() >= spec.expect, 300_000, `list of ${spec.expect} objects`);
    const listedMs = nowMs() - t0;
    send({ ev: 'listed', ms: listedMs });
    const pm = await next('probe');
    probeValue = pm.value;
    send({ ev: 'probe-armed' });
    await waitUntil(() => probeSeen || peer.get(spec.probeName)?.['probe'] === probeValue, 60_000, 'the probe edit (watch open)');
    send({ ev: 'synced', ms: nowMs() - t0 });

    if (spec.role === 'memory') {
      await next('measure');
      await sleep(1000);
      await gcSettle();
      const after = process.memoryUsage();
      send({ ev: 'memory', base, after, size: peer.size(), listedMs });
    } else {
      await next('go');
      counting = true;
      const cpu0 = process.cpuUsage();
      send({ ev: 'armed' });
      const progress = setInterval(() => send({ ev: 'progress', count, lastUs }), 200);
      await next('report');
      clearInterval(progress);
      const cpu = process.cpuUsage(cpu0);
      send({
        ev: 'report',
        count,
        firstUs,
        lastUs,
        cpuUserUs: cpu.user,
        cpuSystemUs: cpu.system,
        heapUsed: process.memoryUsage().heapUsed,
      });
    }
    await next('exit');
  } catch (err) {
    send({ ev: 'error', error: err instanceof Error ? err.stack : String(err) });
    process.exit(1);
  }
}
