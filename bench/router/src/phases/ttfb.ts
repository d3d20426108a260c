/** Phase 1b: added time to the first streamed byte, once per API of BENCH_APIS (as the latency phase). */
import net from 'node:net';

import { errMsg, log, sleep } from '../../../lib/dist/index.js';
import { APIS, type ApiName, type ApiSpec } from '../apis.js';
import { PEER_LABEL, TRAFFIC_MAX_TOKENS, type PeerName } from '../config.js';
import type { DataPlane } from '../dataplane.js';
import { chatRequest } from '../http.js';
import { goalCell } from '../report.js';
import type { Run } from '../run.js';
import { fmt3, median, signed3, stats, type Stats } from '../stats.js';

/**
 * Time to the first streamed byte: `n` streamed chat completions, one at a time on one keep-alive
 * connection, `gapMs` apart; each sample is from writing the request to receiving the first `data:`
 * byte of the body. Resolves with the samples (ms); rejects on a non-200 answer or an error frame.
 */
export async function ttfbRun(
  url: string,
  body: string,
  headers: Record<string, string>,
  n: number,
  gapMs: number,
  api: ApiSpec = APIS.chat,
): Promise<number[]> {
  const u = new URL(url);
  const sock = net.connect(Number(u.port), u.hostname);
  await new Promise((res, rej) => {
    sock.once('connect', res);
    sock.once('error', rej);
  });
  sock.setNoDelay(true);
  const req = chatRequest(url, body, headers, api);
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      let first = -1;
      let buf = '';
      await new Promise<void>((res, rej) => {
        const onData = (c: Buffer): void => {
          buf += c.toString('latin1');
          if (first < 0 && buf.indexOf('data:') >= 0) first = performance.now();
          const he = buf.indexOf('\r\n\r\n');
          if (he < 0) return;
          const cl = /\r\ncontent-length:\s*(\d+)/i.exec(buf.slice(0, he));
          const done = cl ? buf.length - he - 4 >= Number(cl[1]) : buf.endsWith('\r\n0\r\n\r\n');
          if (!done) return;
          sock.off('data', onData);
          sock.off('error', rej);
          if (!buf.startsWith('HTTP/1.1 200')) rej(new Error(`ttfb ${url}: ${buf.slice(0, 200)}`));
          else if (api.streamError(buf.slice(he)))
            rej(new Error(`ttfb ${url}: the stream carried an error frame: ${buf.slice(he, he + 300)}`));
          else res();
        };
        sock.on('data', onData);
        sock.once('error', rej);
        sock.write(req);
      });
      out.push(first - t0);
      if (gapMs > 0) await sleep(gapMs);
    }
  } finally {
    sock.destroy();
  }
  return out;
}

/** Each API of BENCH_APIS: every peer's ttfb over the rounds; one data-plane row per API. */
export async function ttfbPhase(run: Run, dp: DataPlane): Promise<void> {
  for (const apiName of run.cfg.apis) await ttfbOf(run, dp, apiName);
}

async function ttfbOf(run: Run, dp: DataPlane, apiName: ApiName): Promise<void> {
  const { cfg, failures } = run;
  const API = APIS[apiName];
  const skippedHere = dp.apiSkipped[apiName];
  const peers = cfg.peers;
  const has = (p: PeerName): boolean => peers.includes(p);
  const tag = apiName === 'chat' ? '' : ` — ${API.label}`;
  const t0 = performance.now();
  const streamBody = JSON.stringify({
    ...(JSON.parse(apiName === 'chat' ? dp.body : API.body(TRAFFIC_MAX_TOKENS)) as Record<string, unknown>),
    stream: true,
  });
  const per = Object.fromEntries(peers.map((p) => [p, [] as Stats[]])) as Partial<Record<PeerName, Stats[]>>;
  const ttfbFailed = Object.fromEntries(Object.entries(skippedHere).map(([p, why]) => [p, `left out: ${why}`])) as Partial<
    Record<PeerName, string>
  >;
  const gapMs = 2;
  await dp.eachRun(async (round, peer) => {
    if (ttfbFailed[peer]) return;
    log(`ttfb${tag}: round ${round + 1}/${cfg.rounds}, ${peer}: ${cfg.ttfbRequests} streamed requests one at a time, ${gapMs} ms apart`);
    let samples: number[];
    try {
      // Unmeasured warm-up on the same path (JIT, pooled upstream connection).
      await ttfbRun(dp.urlOf(peer, API), streamBody, dp.headersOf(peer, API), Math.min(200, cfg.ttfbRequests), 0, API);
      samples = await ttfbRun(dp.urlOf(peer, API), streamBody, dp.headersOf(peer, API), cfg.ttfbRequests, gapMs, API);
    } catch (err) {
      // A peer that cannot stream the stub's answer is a result, not a benchmark failure
      // (the kars router and direct must stream: their failure is reported below).
      const why = errMsg(err).split('\n')[0] ?? '';
      if (peer === 'router' || peer === 'direct') failures.push(`ttfb${tag} ${peer}: ${why}`);
      ttfbFailed[peer] = why;
      log(`  failed: ${why}`);
      return;
    }
    per[peer]?.push(stats(samples));
    log(`  first data byte p50 ${fmt3(stats(samples).p50)} ms, p99 ${fmt3(stats(samples).p99)} ms`);
  });
  const S = Object.fromEntries(
    peers.map((p) => [p, { p50: median((per[p] ?? []).map((r) => r.p50)), p99: median((per[p] ?? []).map((r) => r.p99)) }]),
  ) as Partial<Record<PeerName, { p50: number; p99: number }>>;
  const q = (p: PeerName, k: 'p50' | 'p99'): number => S[p]?.[k] ?? NaN;
  const added = (p: PeerName, k: 'p50' | 'p99'): number => (has('direct') && has(p) ? q(p, k) - q('direct', k) : NaN);
  run.raw[apiName === 'chat' ? 'ttfb' : `ttfb_${apiName}`] = { per, summary: S, failed: ttfbFailed };
  run.dataRows.push({
    metric: `time to first streamed byte p50 / p99${tag}`,
    ...Object.fromEntries(
      peers.map((p) => [p, ttfbFailed[p] ? `failed: ${ttfbFailed[p]}` : `${fmt3(q(p, 'p50'))} / ${fmt3(q(p, 'p99'))} ms`]),
    ),
    diff: has('direct')
      ? peers
          .filter((p) => p !== 'direct')
          .map((p) => `${PEER_LABEL[p]} ${signed3(added(p, 'p50'))} / ${signed3(added(p, 'p99'))} ms`)
          .join('; ')
      : '',
    goal: goalCell(added('router', 'p99'), cfg.goals.ttfbAddedP99Ms, 'ms added p99 (router)'),
    notes: `${apiName === 'chat' ? "stream: true (the stub's Azure-shaped stream: prompt_filter_results first, so the router's content-safety gate judges the first event before anything is sent)" : `stream: true on POST ${API.path} (the stub's ${API.label} events, \`event:\` + \`data:\` frames)`}; from writing the request to the first \`data:\` byte; ${cfg.ttfbRequests} requests per peer per round, one at a time on one keep-alive connection, ${gapMs} ms apart, after an unmeasured warm-up; median over ${cfg.rounds} round(s) of each round's percentile`,
  });
  run.phaseTimes[apiName === 'chat' ? 'ttfb' : `ttfb_${apiName}`] = (performance.now() - t0) / 1000;
}
