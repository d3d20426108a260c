// What HTTP/2 PINGs cost an API server: C connections (one KubeClient each, as C routers would
// hold), first with periodic PINGs off, then at a given rate; the server's CPU and socket bytes
// per second are compared. C connections pinging every `intervalMs` are C / interval PINGs per
// second, the rate of C × k routers pinging every k × interval.

import { KubeClient, Resources } from '@kars/kube-client';
import { cpuSeconds, ioBytes } from './procs.js';
import type { Target } from './targets.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface PingWindow {
  /** PINGs per second the clients sent (0: periodic PINGs off). */
  pingsPerSec: number;
  cpuPct: number;
  bytesInPerSec: number;
  bytesOutPerSec: number;
}

async function window(target: Target, connections: number, intervalMs: number, seconds: number): Promise<PingWindow> {
  const clients = Array.from({ length: connections }, () =>
    KubeClient.fromKubeconfig({ kubeconfig: target.kubeconfig, pingIntervalMs: intervalMs, pingTimeoutMs: 5_000 }),
  );
  try {
    // One request each opens its connection; then nothing but PINGs (when on) crosses it.
    await Promise.all(clients.map((c) => c.list(Resources.namespaces, { limit: 1 })));
    await sleep(1000);
    const pid = target.pid();
    const cpu0 = cpuSeconds(pid);
    const io0 = ioBytes(pid);
    const t0 = performance.now();
    await sleep(seconds * 1000);
    const dt = (performance.now() - t0) / 1000;
    const io1 = ioBytes(pid);
    return {
      pingsPerSec: intervalMs > 0 ? (connections * 1000) / intervalMs : 0,
      cpuPct: (100 * (cpuSeconds(pid) - cpu0)) / dt,
      bytesInPerSec: (io1.read - io0.read) / dt,
      bytesOutPerSec: (io1.written - io0.written) / dt,
    };
  } finally {
    for (const c of clients) c.close();
  }
}

export interface PingCost {
  connections: number;
  off: PingWindow;
  on: PingWindow;
  /** Server CPU µs and bytes (in + out) per PING: (on − off) ÷ PINGs. */
  cpuUsPerPing: number;
  bytesPerPing: number;
}

/** Measure PING cost on `target` with `connections` connections pinging every `intervalMs`, `seconds` per window. */
export async function pingCost(target: Target, connections: number, intervalMs: number, seconds: number): Promise<PingCost> {
  const off = await window(target, connections, 0, seconds);
  const on = await window(target, connections, intervalMs, seconds);
  const pings = on.pingsPerSec;
  return {
    connections,
    off,
    on,
    cpuUsPerPing: ((on.cpuPct - off.cpuPct) * 1e4) / pings,
    bytesPerPing: (on.bytesInPerSec + on.bytesOutPerSec - off.bytesInPerSec - off.bytesOutPerSec) / pings,
  };
}
