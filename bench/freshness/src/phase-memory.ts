/**
 * Phase 3: heap per cached object. Each peer lists a large namespace in a fresh child
 * (--expose-gc, after a warm-up on a small one); heapUsed after − before is its cache.
 */
import { errMsg, fmt1, fmtInt, log, nowUs } from '../../lib/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';
import { startAndSync, startChild } from './child-handle.js';
import type { Bench } from './results.js';

const nowMs = (): number => nowUs() / 1000;

/** Measure the heap of each of `benchPeers`' caches; results go to `b.raw.memory` and `b.raw.memoryDataset`. */
export async function memoryPhase(b: Bench, benchPeers: PeerKind[]): Promise<void> {
  const { cfg, srv, http, api, childEnv, failures, raw } = b;
  const NS = 'mem';
  log(`3/3 memory: ${cfg.memObjects} ConfigMaps in "${NS}"; each peer alone in a fresh child (--expose-gc): ${benchPeers.join(', ')}`);
  const tc = nowMs();
  await api.createMany(NS, 'm-', cfg.memObjects);
  await api.createMany(`${NS}-warm`, 'w-', cfg.warmObjects);
  const listText = (await http.request('GET', `/api/v1/namespaces/${NS}/configmaps`)).text;
  const dataset = {
    objects: cfg.memObjects,
    createSec: (nowMs() - tc) / 1000,
    listJsonBytesPerObject: Buffer.byteLength(listText) / cfg.memObjects,
  };
  raw.memoryDataset = dataset;
  log(`  created in ${fmt1(dataset.createSec)} s; ${fmtInt(dataset.listJsonBytesPerObject)} bytes of JSON per object in a list`);
  for (const p of benchPeers) {
    const c = startChild(
      {
        role: 'memory',
        peer: p,
        kubeconfig: srv.kubeconfig,
        namespace: NS,
        warmNamespace: `${NS}-warm`,
        warmCount: cfg.warmObjects,
        expect: cfg.memObjects,
        probeName: 'm-0',
      },
      childEnv,
    );
    try {
      const synced = await startAndSync(c, api, NS, 'm-0', { readyMs: 120_000, listedMs: 300_000 });
      c.send({ cmd: 'measure' });
      const m = await c.wait('memory', 60_000);
      const heapMb = (m.after.heapUsed - m.base.heapUsed) / 2 ** 20;
      const r = {
        objects: m.size,
        heapUsedDeltaMb: heapMb,
        heapMbPer10k: (heapMb * 10_000) / m.size,
        rssDeltaMb: (m.after.rss - m.base.rss) / 2 ** 20,
        externalDeltaMb: (m.after.external - m.base.external) / 2 ** 20,
        listedMs: m.listedMs,
        syncedMs: synced.ms,
        base: m.base,
        after: m.after,
      };
      raw.memory[p] = r;
      log(
        `  ${p}: heap +${fmt1(r.heapUsedDeltaMb)} MB for ${fmtInt(r.objects)} objects (${fmt1(r.heapMbPer10k)} MB per 10k), RSS +${fmt1(r.rssDeltaMb)} MB; listed in ${fmt1(r.listedMs / 1000)} s`,
      );
    } catch (err) {
      failures.push(`memory ${p}: ${errMsg(err)}`);
    } finally {
      await c.close();
    }
  }
}
