/**
 * Phase 4, RSS with many stored objects: a bulk create over NS_COUNT namespaces, the server's RSS
 * after 1 s idle, and one full paginated list of every ConfigMap.
 */
import { expectStatus, fmt1, fmt2, fmtInt, log, mb, procStatus, runPool, sleep } from '../../lib/dist/index.js';
import { NS_COUNT, RSS_CONC } from './config.js';
import { stats } from './measure.js';
import type { KubeListBody, PhaseContext } from './phase.js';

/**
 * Phase 4. `baseRssKb` is the server's RSS at start (the ratio's baseline); `warm` is how many
 * ConfigMaps the warm-up stored (the list must return every ConfigMap stored so far).
 */
export async function rssPhase(ctx: PhaseContext, baseRssKb: number, warm: number): Promise<void> {
  const { cfg, srv, request, add, failures, raw } = ctx;
  // ---- 4. RSS with many stored objects ----------------------------------------------------
  log(`4/4 rss: creating ${cfg.rssObjects} ConfigMaps over ${NS_COUNT} namespaces, concurrency ${RSS_CONC}`);
  for (let n = 0; n < NS_COUNT; n++) {
    expectStatus(
      await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `rss-${n}` } }),
      [201, 409],
      `create namespace rss-${n}`,
    );
  }
  const perNs = Math.ceil(cfg.rssObjects / NS_COUNT);
  let nextPct = 10;
  const tRss = performance.now();
  let m0 = ctx.cpuMark();
  const rc = await runPool(
    cfg.rssObjects,
    RSS_CONC,
    async (i) => {
      const ns = `rss-${i % NS_COUNT}`;
      const name = `obj-${Math.floor(i / NS_COUNT)}`;
      const body = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, labels: { app: 'bench', shard: String(i % NS_COUNT) } },
        data: { key: `value-${i}` },
      };
      expectStatus(await request('POST', `/api/v1/namespaces/${ns}/configmaps`, body), [201], `create ${ns}/${name}`);
    },
    (doneCount) => {
      if ((doneCount * 100) / cfg.rssObjects >= nextPct) {
        const secs = (performance.now() - tRss) / 1000;
        log(
          `  ${nextPct}% (${fmtInt(doneCount)}) in ${secs.toFixed(1)} s, ${fmtInt(doneCount / secs)} ops/s, server RSS ${fmt1(mb(procStatus(srv.pid).rssKb))} MB`,
        );
        nextPct += 10;
      }
    },
  );
  let cpu = ctx.cpuNote(m0, cfg.rssObjects);
  const st = stats(rc.lat);
  raw['rssCreate'] = { ...st, wallMs: rc.wallMs, errors: rc.errors.length, perNs, ...cpu };
  add(
    `Bulk create ${fmtInt(cfg.rssObjects)} objects`,
    cfg.rssObjects / (rc.wallMs / 1000),
    'ops/s',
    `${fmtInt(cfg.rssObjects / (rc.wallMs / 1000))} ops/s`,
    `${fmt1(rc.wallMs / 1000)} s total, ${NS_COUNT} namespaces, concurrency ${RSS_CONC}; p50/p99 ${fmt2(st.p50)} / ${fmt2(st.p99)} ms; ${cpu.note}`,
  );
  if (rc.errors.length) failures.push(`bulk create: ${rc.errors.length} failed (first: ${rc.errors[0]})`);

  await sleep(1000);
  const full = procStatus(srv.pid);
  const totalStored = warm + cfg.creates + 1 + cfg.rssObjects;
  raw['rss'] = { baselineKb: baseRssKb, fullKb: full.rssKb, peakKb: full.hwmKb, storedConfigMaps: totalStored };
  add(
    `Server RSS with ${fmtInt(cfg.rssObjects)} objects stored`,
    mb(full.rssKb),
    'MB',
    `${fmt1(mb(full.rssKb))} MB`,
    `after 1 s idle; ${fmt2(full.rssKb / baseRssKb)}× baseline; peak (VmHWM) ${fmt1(mb(full.hwmKb))} MB; ${fmtInt(totalStored)} ConfigMaps in total`,
  );

  log(`  paginated list of all configmaps (limit=${cfg.listLimit})`);
  const pageMs: number[] = [];
  let items = 0;
  let cont = '';
  const tList = performance.now();
  m0 = ctx.cpuMark();
  for (;;) {
    const ps = performance.now();
    const path = `/api/v1/configmaps?limit=${cfg.listLimit}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
    const l = expectStatus<KubeListBody>(await request('GET', path), [200], 'paginated list');
    pageMs.push(performance.now() - ps);
    items += l.items.length;
    cont = l.metadata.continue ?? '';
    if (!cont) break;
    if (pageMs.length > 10 * Math.ceil(totalStored / cfg.listLimit) + 10) throw new Error('paginated list does not terminate');
  }
  const listMs = performance.now() - tList;
  cpu = ctx.cpuNote(m0, pageMs.length);
  const afterList = procStatus(srv.pid);
  const third = Math.max(1, Math.floor(pageMs.length / 10));
  const avg = (a: number[]): number => a.reduce((x, y) => x + y, 0) / a.length;
  const firstPages = avg(pageMs.slice(0, third));
  const lastPages = avg(pageMs.slice(-third));
  raw['list'] = {
    items,
    pages: pageMs.length,
    totalMs: listMs,
    pageMs,
    firstTenthAvgMs: firstPages,
    lastTenthAvgMs: lastPages,
    rssAfterKb: afterList.rssKb,
    ...cpu,
  };
  add(
    `Full paginated list (limit=${cfg.listLimit})`,
    listMs,
    'ms',
    `${fmtInt(listMs)} ms`,
    `${fmtInt(items)} items in ${pageMs.length} pages (all namespaces); avg page: first tenth ${fmt1(firstPages)} ms, last tenth ${fmt1(lastPages)} ms; RSS after ${fmt1(mb(afterList.rssKb))} MB`,
  );
  if (items !== totalStored) failures.push(`paginated list returned ${items} items, expected ${totalStored}`);
}
