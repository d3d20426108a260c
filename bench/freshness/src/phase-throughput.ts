/**
 * Phase 2: events/s one watcher sustains. Each peer runs alone in a child process while this
 * process PUTs updates at a fixed concurrency; the child counts the events it receives. The phase
 * runs in rounds, the peers' order rotated by one each round: the first peer of a round meets a
 * colder writer and server (fewer events per read, so more CPU per event), and rotating gives each
 * peer every place equally often over a multiple of the peer count (reversing the order every other
 * round, as before, left the middle one of three never first). One unmeasured pass of the updates
 * warms the writer and the server before the first round, which would otherwise be the coldest.
 */
import { errMsg, expectStatus, fmt1, fmt2, fmtInt, log, nowUs, sleep } from '../../lib/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';
import { startAndSync, startChild } from './child-handle.js';
import type { ConfigMap } from './cluster.js';
import type { Bench, ThroughputResult } from './results.js';

const nowMs = (): number => nowUs() / 1000;

/** Measure events/s of each of `benchPeers`; results go to `b.raw.throughput`. */
export async function throughputPhase(b: Bench, benchPeers: PeerKind[]): Promise<void> {
  const { cfg, api, raw, failures } = b;
  const NS = 'tput';
  log(
    `2/3 events/s: ${cfg.updates} updates (concurrency ${cfg.concurrency}) from this process; each peer alone in a child process: ${benchPeers.join(', ')}`,
  );
  await api.createMany(NS, 't-', cfg.tputObjects);
  const warm = await writeUpdates(b, NS, await currentObjects(b, NS));
  if (warm.length) failures.push(`events/s warm-up: ${warm.length} updates failed (first: ${warm[0]})`);
  const rounds: Array<Partial<Record<PeerKind, ThroughputResult>>> = [];
  for (let round = 0; round < cfg.tputRounds; round++) {
    const k = round % benchPeers.length;
    const order = [...benchPeers.slice(k), ...benchPeers.slice(0, k)];
    if (cfg.tputRounds > 1) log(`  round ${round + 1}/${cfg.tputRounds}: ${order.join(', ')}`);
    const results: Partial<Record<PeerKind, ThroughputResult>> = {};
    rounds.push(results);
    for (const p of order) await measurePeer(b, NS, p, results);
  }
  for (const p of benchPeers) {
    const got = rounds.map((r) => r[p]).filter((t): t is ThroughputResult => t !== undefined);
    const first = got[0];
    if (!first) continue;
    const perRound = got.map((t) => t.cpuUsPerEvent);
    raw.throughput[p] = { ...first, cpuUsPerEvent: median(perRound), cpuUsPerEventRounds: perRound };
  }
}

/** The median of `xs` (the mean of the middle two for an even count). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

/** The ConfigMaps of `NS` as the server has them now (with their resourceVersions), by name. */
async function currentObjects(b: Bench, NS: string): Promise<Map<string, ConfigMap>> {
  const list = expectStatus<{ items: ConfigMap[] }>(await b.http.request('GET', `/api/v1/namespaces/${NS}/configmaps`), [200], 'list tput');
  return new Map(list.items.map((o) => [o.metadata.name, o]));
}

/**
 * PUT `cfg.updates` updates to the ConfigMaps of `objs` at `cfg.concurrency` (worker w owns the
 * objects j ≡ w mod concurrency, so no two updates of one object race); `objs` follows the
 * answers. Resolves with the errors (empty when every update was accepted).
 */
async function writeUpdates(b: Bench, NS: string, objs: Map<string, ConfigMap>): Promise<string[]> {
  const { cfg, http } = b;
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: cfg.concurrency }, async (_, w) => {
      const owned: string[] = [];
      for (let j = w; j < cfg.tputObjects; j += cfg.concurrency) owned.push(`t-${j}`);
      let k = 0;
      for (let i = w; i < cfg.updates; i += cfg.concurrency) {
        const name = owned[k++ % owned.length] ?? '';
        try {
          const o = objs.get(name);
          if (o === undefined) throw new Error(`update ${name}: not in the list`);
          const r = expectStatus<ConfigMap>(
            await http.request('PUT', `/api/v1/namespaces/${NS}/configmaps/${name}`, { ...o, data: { ...o.data, seq: String(i) } }),
            [200],
            `update ${name}`,
          );
          objs.set(name, r);
        } catch (err) {
          errors.push(errMsg(err));
        }
      }
    }),
  );
  return errors;
}

/** One peer's run of the phase, into `results[p]` (failures into `b.failures`). */
async function measurePeer(b: Bench, NS: string, p: PeerKind, results: Partial<Record<PeerKind, ThroughputResult>>): Promise<void> {
  const { cfg, srv, api, childEnv, failures } = b;
  const c = startChild(
    { role: 'throughput', peer: p, kubeconfig: srv.kubeconfig, namespace: NS, expect: cfg.tputObjects, probeName: 't-0' },
    childEnv,
  );
  try {
    await startAndSync(c, api, NS, 't-0', { readyMs: 60_000, listedMs: 120_000 });
    const objs = await currentObjects(b, NS);
    c.send({ cmd: 'go' });
    await c.wait('armed', 10_000);
    const tw0 = nowUs();
    const errors = await writeUpdates(b, NS, objs);
    const tw1 = nowUs();
    const sent = cfg.updates - errors.length;
    if (errors.length) failures.push(`events/s ${p}: ${errors.length} updates failed (first: ${errors[0]})`);
    // Wait until the peer has them all, or nothing new arrived for 10 s.
    let lastCount = -1;
    let lastChange = nowMs();
    for (;;) {
      const pr = c.latest('progress');
      const n = pr?.count ?? 0;
      if (n !== lastCount) {
        lastCount = n;
        lastChange = nowMs();
      }
      if (n >= sent || nowMs() - lastChange > 10_000) break;
      await sleep(100);
    }
    c.send({ cmd: 'report' });
    const rep = await c.wait('report', 10_000);
    const spanSec = (rep.lastUs - tw0) / 1e6;
    const writeSec = (tw1 - tw0) / 1e6;
    const cpuUs = rep.cpuUserUs + rep.cpuSystemUs;
    const t = {
      updatesSent: sent,
      received: rep.count,
      writerSec: writeSec,
      writerOpsPerSec: sent / writeSec,
      spanSec,
      eventsPerSec: rep.count / spanSec,
      lagAfterWriterMs: (rep.lastUs - tw1) / 1000,
      cpuSec: cpuUs / 1e6,
      cpuUsPerEvent: rep.count ? cpuUs / rep.count : NaN,
    };
    results[p] = t;
    log(
      `  ${p}: ${fmtInt(t.received)}/${fmtInt(sent)} events, ${fmtInt(t.eventsPerSec)} events/s (writer ${fmtInt(t.writerOpsPerSec)} ops/s), lag ${fmt2(t.lagAfterWriterMs / 1000)} s, ${fmt1(t.cpuUsPerEvent)} µs CPU/event (user ${fmt1(rep.count ? rep.cpuUserUs / rep.count : NaN)} + system ${fmt1(rep.count ? rep.cpuSystemUs / rep.count : NaN)})`,
    );
    if (rep.count < sent) failures.push(`events/s ${p}: received ${rep.count} of ${sent} events (stalled)`);
  } catch (err) {
    failures.push(`events/s ${p}: ${errMsg(err)}`);
  } finally {
    await c.close();
  }
}
