/** The object service measured whole: creates and updates at CONC in flight on a fresh service. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Lifecycle, ObjectService, Registry, Store, WatchCache, builtinResources } from '@kars/apiserver/internals';
import type { Target } from '@kars/apiserver/internals';
import { CONC, OPS, cmBody, cpuUs, opts } from './common.js';

/** A running service over its own data dir. */
export interface Fresh {
  service: ObjectService;
  /** The ConfigMap resource. */
  ri: Target['ri'];
  /** Stop the lifecycle controllers, close the store and delete the data dir. */
  close: () => void;
}

/** CPU (µs) and wall time (ms) of a run of operations. */
export interface PoolCost {
  cpu: number;
  wall: number;
}

/** One round: the creates and the updates. */
export interface RoundCost {
  create: PoolCost;
  update: PoolCost;
}

/** The resource `group`/`resource` of `registry`; throws when it is not registered. */
function resource(registry: Registry, group: string, name: string): Target['ri'] {
  const ri = registry.get(group, name);
  if (!ri) throw new Error(`no resource ${name} in the registry`);
  return ri;
}

/** A fresh service on a fresh data dir, as server.ts wires it (group commit, lifecycle on). */
export async function fresh(): Promise<Fresh> {
  const dir = mkdtempSync(join(tmpdir(), 'kars-wp-'));
  const store = new Store(join(dir, 'db'), { historyWindow: 20000 });
  const cache = new WatchCache([], 0);
  const registry = new Registry(builtinResources());
  const service = new ObjectService(store, registry, cache, (err) => {
    throw err;
  });
  await service.bootstrap();
  const lifecycle = new Lifecycle(service, store, registry, () => undefined);
  lifecycle.start();
  const ri = resource(registry, '', 'configmaps');
  const nsRi = resource(registry, '', 'namespaces');
  await service.create(
    { ri: nsRi, version: 'v1', ns: '', name: 'gc' },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'gc' } },
    opts,
  );
  return {
    service,
    ri,
    close: () => {
      lifecycle.close();
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `count` operations, `CONC` in flight; returns CPU µs and wall ms. */
async function pool(count: number, op: (i: number) => Promise<unknown>): Promise<PoolCost> {
  let next = 0;
  const c0 = cpuUs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONC }, async () => {
      for (let i = next++; i < count; i = next++) await op(i);
    }),
  );
  return { cpu: cpuUs() - c0, wall: performance.now() - t0 };
}

/** One round on a fresh service: 200 unmeasured creates, then OPS creates and OPS updates of them. */
export async function serviceRound(): Promise<RoundCost> {
  const { service, ri, close } = await fresh();
  try {
    const t = (name: string): Target => ({ ri, version: 'v1', ns: 'gc', name });
    await pool(200, (i) => service.create(t(`warm-${i}`), cmBody(`warm-${i}`), opts));
    const rvs: Array<string | undefined> = [];
    const c = await pool(OPS, async (i) => {
      rvs[i] = (await service.create(t(`cm-${i}`), cmBody(i), opts)).object.metadata.resourceVersion;
    });
    const u = await pool(OPS, async (i) => {
      const body = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${i}`, namespace: 'gc', resourceVersion: rvs[i] },
        data: { index: String(i), update: '1', payload: 'y'.repeat(64) },
      };
      rvs[i] = (await service.update(t(`cm-${i}`), body, opts)).object.metadata.resourceVersion;
    });
    return { create: c, update: u };
  } finally {
    close();
  }
}
