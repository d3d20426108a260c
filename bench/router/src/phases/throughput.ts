/** Phase 2: the throughput ratio (closed loop, chat), with wrk when it is on PATH, else the Node generator. */
import { fmt1, fmt2, fmtInt, log } from '../../../lib/dist/index.js';
import { PEER_LABEL, type PeerName } from '../config.js';
import type { CpuOf, DataPlane } from '../dataplane.js';
import { chatRequest } from '../http.js';
import type { ClosedResult } from '../jobs.js';
import { goalCell } from '../report.js';
import { need, type Run } from '../run.js';
import { median } from '../stats.js';
import { runWrk } from '../wrk.js';

/** A peer's figures over the rounds. */
interface PeerThroughput extends CpuOf {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Every peer's closed-loop throughput over the rounds; five data-plane rows (ratios, latency, CPU). */
export async function throughputPhase(run: Run, dp: DataPlane): Promise<void> {
  const { cfg, raw, failures, wrk, tmp } = run;
  const peers = cfg.peers;
  const has = (p: PeerName): boolean => peers.includes(p);
  const cells = (f: (p: PeerName) => string): Partial<Record<PeerName, string>> => Object.fromEntries(peers.map((p) => [p, f(p)]));
  const list = (f: (p: PeerName) => string | number): string => peers.map((p) => f(p)).join(' / ');
  const t0 = performance.now();
  const per = Object.fromEntries(peers.map((p) => [p, [] as ClosedResult[]])) as Partial<Record<PeerName, ClosedResult[]>>;
  const runsOf = (p: PeerName): ClosedResult[] => need(per[p], `the runs of ${p}`);
  await dp.eachRun(async (round, peer, warm) => {
    const url = dp.url0(peer);
    const u = new URL(url);
    log(
      `throughput: round ${round + 1}/${cfg.rounds}, ${peer}: closed loop, ${cfg.concurrency} connections, ${warm} s warm-up + ${cfg.closedSecs} s (${wrk ? 'wrk' : 'node'})`,
    );
    let res: ClosedResult;
    const cpu = dp.cpuMarks();
    if (wrk) {
      await runWrk(tmp, url, dp.body, cfg.concurrency, warm, undefined, dp.headersOf(peer));
      res = await runWrk(tmp, url, dp.body, cfg.concurrency, cfg.closedSecs, cpu.onMark, dp.headersOf(peer));
      res.cpu = cpu.delta(res.requests, { loadgen: res.loadgenCpuSec });
    } else {
      res = await need(run.procs.loadgen, 'the load generator').run(
        {
          kind: 'closed',
          host: u.hostname,
          port: Number(u.port),
          req: chatRequest(url, dp.body, dp.headersOf(peer)).toString('base64'),
          concurrency: cfg.concurrency,
          warmupMs: warm * 1000,
          durationMs: cfg.closedSecs * 1000,
          expectStatus: 200,
        },
        cpu.onMark,
      );
      res.cpu = cpu.delta(res.requests);
    }
    runsOf(peer).push(res);
    const nErr = dp.errCount(res);
    if (nErr > 0) failures.push(`throughput ${peer} round ${round + 1}: ${nErr} failed requests (${res.errors.first.join('; ')})`);
    log(
      `  ${fmtInt(res.throughput)} req/s, p50 ${fmt2(res.latency.p50)} ms, p99 ${fmt2(res.latency.p99)} ms, ${nErr} errors; other load on the VM ${fmt1(res.cpu?.otherPct ?? NaN)}% of a core`,
    );
  });
  raw.throughput = per;
  const S: Partial<Record<PeerName, PeerThroughput>> = {};
  for (const p of peers) {
    const rs = runsOf(p);
    const agg = (f: (r: ClosedResult) => number): number => median(rs.map(f));
    S[p] = {
      rps: agg((r) => r.throughput),
      p50: agg((r) => r.latency.p50),
      p99: agg((r) => r.latency.p99),
      errors: rs.reduce((x, r) => x + dp.errCount(r), 0),
      ...dp.cpuOf(rs),
    };
  }
  const s = (p: PeerName): PeerThroughput => need(S[p], `the figures of ${p}`);
  const ratio = (p: PeerName): number => (has('direct') && has(p) ? s(p).rps / s('direct').rps : NaN);
  const summary: Record<string, unknown> = {
    ...Object.fromEntries(
      peers.map((p) => [p, { rps: s(p).rps, p50: s(p).p50, p99: s(p).p99, errors: s(p).errors, otherPct: s(p).other }]),
    ),
    ratios: Object.fromEntries(peers.filter((p) => p !== 'direct').map((p) => [p, ratio(p)])),
  };
  raw.throughputSummary = summary;
  run.dataRows.push({
    metric: `max throughput (closed loop, ${cfg.concurrency} connections)`,
    ...cells((p) => `${fmtInt(s(p).rps)} req/s`),
    diff: has('direct')
      ? peers
          .filter((p) => p !== 'direct')
          .map((p) => `${PEER_LABEL[p]} ${fmt2(ratio(p))}×`)
          .join('; ')
      : '',
    goal: goalCell(ratio('router'), cfg.goals.throughputRatio, '(router/direct)', 'ge'),
    notes: `${run.closedGen}; ${cfg.rounds} round(s) × ${cfg.closedSecs} s per peer (order reversed every other round), median; errors ${list((p) => s(p).errors)}${cfg.upstreamDelayMs > 0 ? `; upstream delay ${cfg.upstreamDelayMs} ms (x-stub-delay-ms)` : '; upstream answers at once (BENCH_UPSTREAM_DELAY_MS=0)'}`,
  });
  const vs = (peer: PeerName): number => (has(peer) && has('router') ? s('router').rps / s(peer).rps : NaN);
  summary.routerOverNginx = vs('nginx');
  summary.routerOverPortkey = vs('portkey');
  run.dataRows.push({
    metric: 'router throughput ÷ nginx',
    ...cells((p) => (p === 'router' && has('nginx') ? `${fmt2(vs('nginx'))}×` : '')),
    diff: '',
    goal: goalCell(vs('nginx'), cfg.goals.nginxRatio, '× nginx', 'ge'),
    notes: has('nginx')
      ? `nginx: plain reverse proxy, one process, upstream keep-alive`
      : `nginx skipped: ${cfg.skipped.find((m) => m.startsWith('nginx')) ?? 'not in BENCH_PEERS'}`,
  });
  run.dataRows.push({
    metric: 'router throughput ÷ Portkey',
    ...cells((p) => (p === 'router' && has('portkey') ? `${fmt2(vs('portkey'))}×` : '')),
    diff: '',
    goal: goalCell(vs('portkey'), cfg.goals.portkeyRatio, '× Portkey', 'ge'),
    notes: has('portkey')
      ? `Portkey AI gateway ${need(run.portkeyPkg, 'the Portkey gateway').version} (node build/start-server.js --headless, NODE_ENV=production), provider openai with the stub as x-portkey-custom-host; no policy`
      : `Portkey skipped: ${cfg.skipped.find((m) => m.startsWith('portkey')) ?? 'not in BENCH_PEERS'}`,
  });
  run.dataRows.push({
    metric: 'closed-loop latency p50 / p99',
    ...cells((p) => `${fmt2(s(p).p50)} / ${fmt2(s(p).p99)} ms`),
    diff: '',
    goal: '–',
    notes: 'Little’s law: p50 ≈ connections ÷ throughput',
  });
  run.dataRows.push({
    metric: 'CPU per request at max throughput',
    ...cells((p) => dp.cpuCell(p, S)),
    diff: has('router') ? `router alone ≈ ${fmtInt(1e6 / s('router').us('router'))} req/s per core` : '',
    goal: '–',
    notes: `% of one core used (200% = both): ${peers
      .map(
        (p) =>
          `${p}: ${[dp.hopOf(p), 'stub', 'loadgen']
            .filter((k): k is string => Boolean(k))
            .map((k) => `${k} ${fmt1(s(p).pct(k))}%`)
            .join(', ')}`,
      )
      .join('; ')}; other work on the VM ${list((p) => fmt1(s(p).other))}%`,
  });
  run.phaseTimes.throughput = (performance.now() - t0) / 1000;
}
