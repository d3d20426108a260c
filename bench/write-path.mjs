#!/usr/bin/env node
// The apiserver's write path in process, without HTTP or TLS: how much CPU a create and an update
// of a small ConfigMap cost in the object service (admission, defaulting, managedFields, SQLite,
// the commit, the watch cache and the lifecycle hook), and each stage alone in a tight loop.
// This separates the object service's cost from what bench/apiserver.mjs measures end to end.
//
//   npx tsc -b && node bench/write-path.mjs            # BENCH_WP_OPS (default 4000), BENCH_WP_ROUNDS (3)
//
// Prints µs of CPU per write (process.cpuUsage, the whole process: the WAL sync and checkpoint
// threads included) for group commit at 64 writes in flight, and µs per call for each stage.
// Medians over rounds. Not a test: nothing is asserted.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const dist = new URL('../packages/apiserver/dist/', import.meta.url);
const load = (p) => import(new URL(p, dist).href);
const [{ Store }, { ObjectService }, { Registry }, { builtinResources }, { WatchCache }, { Lifecycle }, strategy, { admitObject }, meta] =
  await Promise.all([
    load('storage/store.js'),
    load('service.js'),
    load('registry/registry.js'),
    load('registry/builtins.js'),
    load('watch/cache.js'),
    load('lifecycle.js'),
    load('strategy.js'),
    load('admission.js'),
    load('meta.js'),
  ]);
const { trackUpdate } = await import(new URL('../packages/kube-patch/dist/index.js', import.meta.url).href);

const OPS = Number(process.env.BENCH_WP_OPS ?? 4000);
const ROUNDS = Number(process.env.BENCH_WP_ROUNDS ?? 3);
const CONC = 64;
const opts = { dryRun: false, manager: 'bench', fieldValidation: 'Warn' };

const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** A fresh service on a fresh data dir, as server.ts wires it (group commit, lifecycle on). */
async function fresh() {
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
  const ri = registry.get('', 'configmaps');
  const nsRi = registry.get('', 'namespaces');
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

const cmBody = (i) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `cm-${i}` },
  data: { index: String(i), payload: 'x'.repeat(64) },
});

/** `count` operations, `CONC` in flight; returns CPU µs and wall ms. */
async function pool(count, op) {
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

async function serviceRound() {
  const { service, ri, close } = await fresh();
  try {
    const t = (name) => ({ ri, version: 'v1', ns: 'gc', name });
    await pool(200, (i) => service.create(t(`warm-${i}`), cmBody(`warm-${i}`), opts));
    const rvs = [];
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

/** µs per call of `fn`, after a warm-up, median of 5 runs of `n` calls. */
function perCall(n, fn) {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(i);
  const runs = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn(i);
    runs.push(((performance.now() - t0) * 1000) / n);
  }
  return med(runs);
}

function stages(ri) {
  const tc = { ri, version: 'v1', ns: 'gc', name: 'cm-1' };
  const raw = Buffer.from(JSON.stringify(cmBody(1)));
  const created = (() => {
    const o = strategy.coerceBody(tc, cmBody(1), true);
    const a = admitObject(ri, 'v1', 'cm-1', o, undefined, 'Warn');
    const f = strategy.finalizeForCreate(tc, a.obj);
    const tr = trackUpdate(undefined, f, 'bench', 'v1', meta.nowRfc3339(), undefined, strategy.fieldOptions(tc));
    tr.metadata.resourceVersion = '42';
    return tr;
  })();
  const storedText = JSON.stringify(created);
  const upd = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { ...created.metadata },
    data: { index: '1', update: '1', payload: 'y'.repeat(64) },
  };
  const N = 20000;
  const rows = [
    ['JSON.parse of the request body (Buffer → object)', perCall(N, () => JSON.parse(raw.toString('utf8')))],
    ['coerceBody (create)', perCall(N, () => strategy.coerceBody(tc, cmBody(1), true))],
    ['admitObject (create)', perCall(N, () => admitObject(ri, 'v1', 'cm-1', strategy.coerceBody(tc, cmBody(1), true), undefined, 'Warn'))],
    ['finalizeForCreate', perCall(N, () => strategy.finalizeForCreate(tc, strategy.coerceBody(tc, cmBody(1), true)))],
    [
      'trackUpdate (create)',
      perCall(N, () => trackUpdate(undefined, strategy.coerceBody(tc, cmBody(1), true), 'bench', 'v1', meta.nowRfc3339(), undefined, {})),
    ],
    ['JSON.parse of the stored object', perCall(N, () => JSON.parse(storedText))],
    ['JSON.stringify of the stored object', perCall(N, () => JSON.stringify(created))],
    [
      'trackUpdate (update, same manager; includes a JSON.parse of the stored object)',
      perCall(N, () => {
        const old = JSON.parse(storedText);
        return trackUpdate(old, strategy.coerceBody(tc, upd, false), 'bench', 'v1', meta.nowRfc3339(), undefined, {});
      }),
    ],
    [
      'bumpGeneration + sameIgnoringManagedTimes (update; includes the same JSON.parse)',
      perCall(N, () => {
        const old = JSON.parse(storedText);
        const o = strategy.coerceBody(tc, upd, false);
        strategy.bumpGeneration(ri, old, o);
        return strategy.sameIgnoringManagedTimes(old, o);
      }),
    ],
  ];
  return rows;
}

const results = [];
for (let r = 0; r < ROUNDS; r++) results.push(await serviceRound());
const { ri, close } = await fresh();
const st = stages(ri);
close();
const out = [
  `### Object service write path in process (no HTTP/TLS), ${OPS} creates + ${OPS} updates, ${CONC} in flight, group commit; median of ${ROUNDS} rounds`,
  '',
  '| op | µs CPU per write (whole process) | writes/s (one thread) | every round (µs CPU) |',
  '|---|---|---|---|',
];
for (const op of ['create', 'update']) {
  const cpu = med(results.map((x) => x[op].cpu / OPS));
  const rate = med(results.map((x) => OPS / (x[op].wall / 1000)));
  out.push(`| ${op} | ${cpu.toFixed(0)} | ${rate.toFixed(0)} | ${results.map((x) => (x[op].cpu / OPS).toFixed(0)).join(', ')} |`);
}
out.push('', '| stage alone (tight loop) | µs per call |', '|---|---|');
for (const [name, us] of st) out.push(`| ${name} | ${us.toFixed(2)} |`);
process.stdout.write(`${out.join('\n')}\n`);
