/** Phase 1: added latency at a fixed rate (open loop), once per API of BENCH_APIS. */
import { fmt1, fmt2, fmtInt, log } from '../../../lib/dist/index.js';
import { APIS, type ApiName } from '../apis.js';
import { PEER_LABEL, REALISTIC_CAP, TRAFFIC_MAX_TOKENS, type PeerName } from '../config.js';
import type { CpuOf, DataPlane } from '../dataplane.js';
import { chatRequest } from '../http.js';
import type { OpenResult } from '../jobs.js';
import { goalCell } from '../report.js';
import { need, type Run } from '../run.js';
import { fmt3, median, signed3 } from '../stats.js';

/** A peer's figures over the rounds. */
interface PeerLatency extends CpuOf {
  p50: number;
  p99: number;
  p999: number;
  max: number;
  i99: number;
  rate: number;
  errors: number;
  n: number;
  lagP99: number;
  conns: number;
  stallEpisodes: number;
  worstStallMs: number;
}

/** A peer's summary in the results file. */
interface PeerSummary {
  p50: number;
  p99: number;
  p999: number;
  max: number;
  intendedP99: number;
  rate: number;
  errors: number;
  n: number;
  otherPct: number;
  addedMs?: { p50: number; p99: number };
}

/**
 * Once per API of BENCH_APIS (chat first, with the rows' historical names; the others' rows
 * name their API). A peer that cannot carry an API is left out of its rows (apiSkipped).
 */
export async function latencyPhase(run: Run, dp: DataPlane): Promise<void> {
  const { cfg, raw, failures } = run;
  const loadgen = need(run.procs.loadgen, 'the load generator');
  for (const apiName of cfg.apis) {
    await latencyOf(apiName);
  }

  async function latencyOf(apiName: ApiName): Promise<void> {
    const API = APIS[apiName];
    const apiBody = apiName === 'chat' ? dp.body : API.body(TRAFFIC_MAX_TOKENS);
    const skippedHere = dp.apiSkipped[apiName];
    const peers = cfg.peers.filter((p) => !skippedHere[p]);
    const has = (p: PeerName): boolean => peers.includes(p);
    const cells = (f: (p: PeerName) => string): Partial<Record<PeerName, string>> =>
      Object.fromEntries(cfg.peers.map((p) => [p, skippedHere[p] ? `n/a (${skippedHere[p]})` : f(p)]));
    const list = (f: (p: PeerName) => string | number): string => peers.map((p) => f(p)).join(' / ');
    const tag = apiName === 'chat' ? '' : ` — ${API.label}`;
    const t0 = performance.now();
    const per = Object.fromEntries(peers.map((p) => [p, [] as OpenResult[]])) as Partial<Record<PeerName, OpenResult[]>>;
    const runsOf = (p: PeerName): OpenResult[] => need(per[p], `the runs of ${p}`);
    await dp.eachRun(async (round, peer, warm) => {
      if (skippedHere[peer]) return;
      const url = dp.urlOf(peer, API);
      const u = new URL(url);
      log(`latency${tag}: round ${round + 1}/${cfg.rounds}, ${peer}: ${cfg.rate} req/s open loop, ${warm} s warm-up + ${cfg.openSecs} s`);
      const cpu = dp.cpuMarks(API);
      const res = await loadgen.run(
        {
          kind: 'open',
          host: u.hostname,
          port: Number(u.port),
          req: chatRequest(url, apiBody, dp.headersOf(peer, API), API).toString('base64'),
          rate: cfg.rate,
          warmupMs: warm * 1000,
          durationMs: cfg.openSecs * 1000,
          maxConns: cfg.maxConns,
          expectStatus: 200,
        },
        cpu.onMark,
      );
      res.cpu = cpu.delta(res.completed);
      runsOf(peer).push(res);
      const nErr = dp.errCount(res) + (res.requests - res.completed);
      if (nErr > 0)
        failures.push(`latency${tag} ${peer} round ${round + 1}: ${nErr} failed requests (${res.errors.first.join('; ')}; ${res.why})`);
      log(
        `  p50 ${fmt3(res.latency.p50)} ms, p99 ${fmt3(res.latency.p99)} ms, ${fmtInt(res.achievedRate)} req/s, ${nErr} errors; other load on the VM ${fmt1(res.cpu?.otherPct ?? NaN)}% of a core`,
      );
    });
    raw[apiName === 'chat' ? 'latency' : `latency_${apiName}`] = per;
    // Over the rounds (equal-sized): the median of the per-round percentiles.
    const S: Partial<Record<PeerName, PeerLatency>> = {};
    for (const p of peers) {
      const rs = runsOf(p);
      const agg = (f: (r: OpenResult) => number): number => median(rs.map(f));
      S[p] = {
        p50: agg((r) => r.latency.p50),
        p99: agg((r) => r.latency.p99),
        p999: agg((r) => r.latency.p999),
        max: Math.max(...rs.map((r) => r.latency.max)),
        i99: agg((r) => r.latencyFromIntended.p99),
        rate: agg((r) => r.achievedRate),
        errors: rs.reduce((x, r) => x + dp.errCount(r) + (r.requests - r.completed), 0),
        n: rs.reduce((x, r) => x + r.completed, 0),
        lagP99: Math.max(...rs.map((r) => r.scheduleLag.p99)),
        conns: Math.max(...rs.map((r) => r.maxConnections)),
        stallEpisodes: rs.reduce((x, r) => x + r.stalls.episodes, 0),
        worstStallMs: Math.max(0, ...rs.flatMap((r) => r.stalls.worst.map((w) => w.maxMs))),
        ...dp.cpuOf(rs),
      };
    }
    const s = (p: PeerName): PeerLatency => need(S[p], `the figures of ${p}`);
    const added = (p: PeerName, q: 'p50' | 'p99'): number => (has('direct') && has(p) ? s(p)[q] - s('direct')[q] : NaN);
    const summary = Object.fromEntries(
      peers.map((p): [PeerName, PeerSummary] => [
        p,
        {
          p50: s(p).p50,
          p99: s(p).p99,
          p999: s(p).p999,
          max: s(p).max,
          intendedP99: s(p).i99,
          rate: s(p).rate,
          errors: s(p).errors,
          n: s(p).n,
          otherPct: s(p).other,
        },
      ]),
    ) as Partial<Record<PeerName, PeerSummary>>;
    for (const p of peers) {
      const sp = summary[p];
      if (p !== 'direct' && sp) sp.addedMs = { p50: added(p, 'p50'), p99: added(p, 'p99') };
    }
    raw[apiName === 'chat' ? 'latencySummary' : `latencySummary_${apiName}`] = summary;
    const addedCell = (q: 'p50' | 'p99'): string =>
      has('direct')
        ? peers
            .filter((p) => p !== 'direct')
            .map((p) => `${PEER_LABEL[p]} ${signed3(added(p, q))} ms`)
            .join('; ')
        : '';
    const roundsNote = `${cfg.rounds} round(s) of ${cfg.openSecs} s per peer (order reversed every other round; ${cfg.warmupSecs} s warm-up in round 1, ${cfg.rewarmSecs} s after); median of the per-round percentiles`;
    const nList = list((p) => fmtInt(s(p).n));
    run.dataRows.push({
      metric: `latency p50 @ ${fmtInt(cfg.rate)} req/s (open loop)${tag}`,
      ...cells((p) => `${fmt3(s(p).p50)} ms`),
      diff: addedCell('p50'),
      goal: goalCell(added('router', 'p50'), cfg.goals.addedP50Ms, 'ms added (router)'),
      notes: `${nList} measured requests; ${roundsNote}; latency = dispatch → last response byte`,
    });
    run.dataRows.push({
      metric: `latency p99 @ ${fmtInt(cfg.rate)} req/s (open loop)${tag}`,
      ...cells((p) => `${fmt3(s(p).p99)} ms`),
      diff: addedCell('p99'),
      goal: goalCell(added('router', 'p99'), cfg.goals.addedP99Ms, 'ms added (router)'),
      notes: `p99.9 ${list((p) => fmt3(s(p).p999))} ms; max ${list((p) => fmt1(s(p).max))} ms; p99 from the intended send time (incl. generator lag) ${list((p) => fmt3(s(p).i99))} ms; generator schedule lag p99 ≤ ${fmt2(Math.max(...peers.map((p) => s(p).lagP99)))} ms; ≤ ${Math.max(...peers.map((p) => s(p).conns))} connections; stall episodes (requests > 10 ms, merged within 50 ms) ${list((p) => s(p).stallEpisodes)}, worst ${list((p) => fmt1(s(p).worstStallMs))} ms`,
    });
    run.dataRows.push({
      metric: `achieved rate / errors${tag}`,
      ...cells((p) => `${fmtInt(s(p).rate)} req/s, ${s(p).errors} errors`),
      diff: '',
      goal: '–',
      notes: `non-streaming POST ${API.path}, ${Buffer.byteLength(apiBody)}-byte body, ${apiName === 'responses' ? 'max_output_tokens' : 'max_tokens'} ${TRAFFIC_MAX_TOKENS} (policy cap ${REALISTIC_CAP}); ${apiName === 'chat' ? `${run.sanity?.routerBytes}-byte answers with prompt_filter_results` : `${API.upstream === 'anthropic' ? 'the Anthropic stub' : 'the OpenAI stub'}'s ${API.label} answers; the router's policy is chat's without the content-safety floor (${API.label} answers cannot carry Azure's annotations, so a floor refuses it, ADR 0034)`}${cfg.upstreamDelayMs > 0 ? `; upstream delay ${cfg.upstreamDelayMs} ms (x-stub-delay-ms)` : ''}`,
    });
    run.dataRows.push({
      metric: `CPU per request @ ${fmtInt(cfg.rate)} req/s${tag}`,
      ...cells((p) => dp.cpuCell(p, S)),
      diff: has('router') ? `router ${fmt1(s('router').pct('router'))}% of a core` : '',
      goal: '–',
      notes: `/proc utime+stime (10 ms ticks), sys = kernel part; load generator ${list((p) => fmt1(s(p).us('loadgen')))} µs/req; other work on the VM during the windows ${list((p) => fmt1(s(p).other))}% of a core`,
    });
    run.phaseTimes[apiName === 'chat' ? 'latency' : `latency_${apiName}`] = (performance.now() - t0) / 1000;
  }
}
