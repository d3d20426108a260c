/**
 * Phase 3, watch fan-out: watches on the ConfigMaps of namespace `bench` in a worker thread
 * (watch-worker.ts), a canary update that proves they all stream, then timed updates that each
 * carry their send time.
 */
import { Worker } from 'node:worker_threads';
import { expectStatus, fmt1, fmt2, fmtInt, log, mb, nowUs, procStatus, sleep } from '../../lib/dist/index.js';
import { CONC } from './config.js';
import { runPartitioned, stats } from './measure.js';
import { NS } from './phase.js';
import type { KubeListBody, KubeObj, PhaseContext } from './phase.js';
import type { WatchWorkerData, WorkerCommand, WorkerEvent } from './watch-worker.js';

/** Where the phase keeps its worker, so the caller can terminate it when the phase fails. */
export interface WorkerHolder {
  worker: Worker | undefined;
}

/**
 * Phase 3. `workerScript` is the module whose worker thread runs `watchWorker()` (the entry
 * point, which runs it when it is not the main thread); `held.worker` is the worker while it
 * runs. `rvs` (the resourceVersions of phase 1's objects) is updated in place.
 */
export async function fanoutPhase(
  ctx: PhaseContext,
  rvs: Array<string | undefined>,
  workerScript: string,
  held: WorkerHolder,
): Promise<void> {
  const { cfg, srv, request, add, failures, raw } = ctx;
  // ---- 3. watch fan-out -------------------------------------------------------------------
  log(`3/4 fan-out: ${cfg.watchers} watches, ${cfg.fanoutUpdates} updates, concurrency ${CONC}`);
  const canaryName = 'fanout-canary';
  const canary = expectStatus<KubeObj>(
    await request('POST', `/api/v1/namespaces/${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: canaryName },
      data: { canary: 'true' },
    }),
    [201],
    'create canary',
  );
  const startRv = expectStatus<KubeListBody>(await request('GET', `/api/v1/namespaces/${NS}/configmaps?limit=1`), [200], 'list for rv')
    .metadata.resourceVersion;
  const workerData: WatchWorkerData = {
    url: srv.url,
    ca: srv.ca,
    token: srv.token,
    path: `/api/v1/namespaces/${NS}/configmaps?watch=true&resourceVersion=${startRv}&allowWatchBookmarks=true`,
    watchers: cfg.watchers,
    capacity: cfg.fanoutUpdates,
    canaryName,
  };
  const worker = new Worker(workerScript, { workerData });
  held.worker = worker;
  const workerMsgs: WorkerEvent[] = [];
  let workerWaiter: (() => void) | undefined;
  const workerError = new Promise<never>((_, rej) => {
    worker.on('error', rej);
    worker.on('exit', (code) => rej(new Error(`watch worker exited early (code ${code})`)));
  });
  workerError.catch(() => undefined);
  worker.on('message', (m: WorkerEvent) => {
    workerMsgs.push(m);
    workerWaiter?.();
  });
  const command = (m: WorkerCommand): void => worker.postMessage(m);
  const waitWorker = async <E extends WorkerEvent['ev']>(ev: E, timeoutMs: number): Promise<Extract<WorkerEvent, { ev: E }>> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = workerMsgs.find((x): x is Extract<WorkerEvent, { ev: E }> => x.ev === ev);
      if (m) return m;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for watch worker "${ev}"`);
      await Promise.race([new Promise<void>((r) => (workerWaiter = () => r())), sleep(200), workerError]);
    }
  };
  // One update of the canary (after startRv) proves every watch is subscribed and streaming.
  const tWatchOpen = performance.now();
  expectStatus(
    await request('PUT', `/api/v1/namespaces/${NS}/configmaps/${canaryName}`, { ...canary, data: { canary: 'ping' } }),
    [200],
    'update canary',
  );
  await waitWorker('canary', 30_000);
  const watchOpenMs = performance.now() - tWatchOpen;
  const rssWatches = procStatus(srv.pid);
  log(`  all ${cfg.watchers} watches streaming after ${watchOpenMs.toFixed(0)} ms; sending updates`);

  const m0 = ctx.cpuMark();
  let firstSendUs = Infinity;
  const fo = await runPartitioned(cfg.fanoutUpdates, CONC, cfg.creates, async (i, j) => {
    const sentUs = nowUs();
    if (sentUs < firstSendUs) firstSendUs = sentUs;
    const body = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `cm-${j}`, namespace: NS, labels: { bench: 'true' }, resourceVersion: rvs[j] },
      data: { index: String(j), seq: String(i), sentUs: String(sentUs) },
    };
    const o = expectStatus<KubeObj>(
      await request('PUT', `/api/v1/namespaces/${NS}/configmaps/cm-${j}`, body),
      [200],
      `fan-out update cm-${j}`,
    );
    rvs[j] = o.metadata.resourceVersion;
  });
  const sendsOk = cfg.fanoutUpdates - fo.errors.length;
  command({ cmd: 'expect', n: sendsOk, stallMs: 15_000 });
  const done = await waitWorker('done', 600_000);
  const cpu = ctx.cpuNote(m0, cfg.fanoutUpdates);
  const rssFanout = procStatus(srv.pid);
  await worker.terminate();
  held.worker = undefined;

  const sum = done.summary;
  const delivered = sum.reduce((a, s) => a + s.count, 0);
  const expectedTotal = cfg.watchers * sendsOk;
  const lastRecvUs = Math.max(...sum.map((s) => s.lastRecvUs));
  const complete = sum.filter((s) => s.count === sendsOk && s.outOfOrder === 0 && s.other === 0 && s.errors.length === 0).length;
  const outOfOrder = sum.reduce((a, s) => a + s.outOfOrder, 0);
  const fst = stats(Array.from(done.lat, (us) => us / 1000));
  const spanSec = (lastRecvUs - firstSendUs) / 1e6;
  const ust = stats(fo.lat);
  raw['fanout'] = {
    watchers: cfg.watchers,
    updates: cfg.fanoutUpdates,
    updateErrors: fo.errors.length,
    updateWallMs: fo.wallMs,
    updateLatency: ust,
    delivered,
    expected: expectedTotal,
    outOfOrder,
    completeWatchers: complete,
    workerFinish: done.why,
    spanSec,
    latency: fst,
    watchOpenMs,
    rssWithWatchesKb: rssWatches.rssKb,
    rssAfterFanoutKb: rssFanout.rssKb,
    perWatcher: sum.map((s) => ({
      count: s.count,
      outOfOrder: s.outOfOrder,
      other: s.other,
      bookmarks: s.bookmarks,
      status: s.status,
      errors: s.errors,
      ended: s.ended,
    })),
    ...cpu,
  };
  add(
    'Fan-out: updates sent',
    cfg.fanoutUpdates / (fo.wallMs / 1000),
    'ops/s',
    `${fmtInt(cfg.fanoutUpdates / (fo.wallMs / 1000))} ops/s`,
    `${fmtInt(cfg.fanoutUpdates)} PUTs (concurrency ${CONC}) while ${cfg.watchers} watches are open; PUT p50/p99 ${fmt2(ust.p50)} / ${fmt2(ust.p99)} ms`,
  );
  add(
    'Fan-out: events delivered',
    delivered,
    'events',
    `${fmtInt(delivered)} / ${fmtInt(expectedTotal)}`,
    delivered === expectedTotal
      ? 'all events delivered'
      : `**LOST ${fmtInt(expectedTotal - delivered)} EVENTS** (worker finished: ${done.why})`,
  );
  add(
    'Fan-out: delivered events/s',
    delivered / spanSec,
    'events/s',
    `${fmtInt(delivered / spanSec)} events/s`,
    `first send to last receive: ${fmt2(spanSec)} s; ${cpu.note}`,
  );
  add(
    'Fan-out: delivery latency p50 / p99',
    [fst.p50, fst.p99],
    'ms',
    `${fmt2(fst.p50)} / ${fmt2(fst.p99)} ms`,
    `receive time − client send time, per event per watcher; max ${fmt1(fst.max)} ms`,
  );
  add(
    'Fan-out: watchers complete & in order',
    complete,
    'watchers',
    `${complete} / ${cfg.watchers}`,
    complete === cfg.watchers
      ? `every watcher got all ${fmtInt(sendsOk)} events, strictly increasing resourceVersion`
      : `**${cfg.watchers - complete} watchers incomplete or out of order** (out-of-order events: ${outOfOrder})`,
  );
  add(
    'Server RSS with watches open',
    mb(rssFanout.rssKb),
    'MB',
    `${fmt1(mb(rssFanout.rssKb))} MB`,
    `after fan-out (${fmt1(mb(rssWatches.rssKb))} MB when the ${cfg.watchers} watches opened)`,
  );
  if (fo.errors.length) failures.push(`fan-out updates: ${fo.errors.length} failed (first: ${fo.errors[0]})`);
  if (delivered !== expectedTotal) failures.push(`fan-out: lost events: delivered ${delivered} of ${expectedTotal}`);
  if (complete !== cfg.watchers) {
    const bad = sum.find((s) => !(s.count === sendsOk && s.outOfOrder === 0 && s.other === 0 && s.errors.length === 0));
    failures.push(`fan-out: ${cfg.watchers - complete} watchers incomplete/out of order (e.g. ${JSON.stringify(bad)})`);
  }
}
