/**
 * Phase 3: the cost of the policy decision per request, in process (first, while the machine is
 * otherwise idle).
 */
import { NO_CAPABILITIES, parseInferenceBody } from '@kars/policy-compiler';
import { PolicyState } from '@kars/router';
import {
  TokenBudgetTracker,
  decideHead,
  decideRequest,
  judgeAnswer,
  matchRoute,
  settleTokens,
  usageTotal,
  type Meter,
} from '@kars/router/inference';

import { fmtInt, log } from '../../../lib/dist/index.js';
import { chatBody } from '../apis.js';
import { REALISTIC_CAP, TRAFFIC_MAX_TOKENS, type Config } from '../config.js';
import { goalCell } from '../report.js';
import type { Run } from '../run.js';
import { fmt3, stats } from '../stats.js';

/** A byte-for-byte copy of what the stub answers to the benchmark's body (for the in-process phase). */
const STUB_RESPONSE =
  '{"id":"chatcmpl-stub-1","object":"chat.completion","created":1796008007,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the kars OpenAI stub."},"finish_reason":"stop","content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}],"usage":{"prompt_tokens":15,"completion_tokens":15,"total_tokens":30},"system_fingerprint":null,"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}]}';

/** One variant of the decision path, timed over `cfg.decisionRuns` runs of `iters` iterations. */
export interface DecisionRunSet {
  iters: number;
  runsUs: number[];
  medianUs: number;
  minUs: number;
  maxUs: number;
}

/** What the decision phase measured. */
export interface DecisionResult {
  pure: DecisionRunSet;
  withParse: DecisionRunSet;
  reqBytes: number;
  respBytes: number;
}

/**
 * Time the router's decision path in process, with the compiled modules the router runs and the
 * policy parsed as the router parses it. Two variants: the decisions alone (request and response
 * already parsed), and the decisions plus the JSON parsing the handler does for them.
 */
export function measureDecisions(cfg: Config, policyBody: string): DecisionResult {
  const parsed = parseInferenceBody(policyBody, NO_CAPABILITIES);
  if (!parsed.ok) throw new Error(`parseInferenceBody: ${parsed.error}`);
  const state = new PolicyState(() => Date.now());
  state.setInference({ kind: 'loaded', value: parsed.rules, digest: 'sha256:bench', source: 'bench' });
  const budget = new TokenBudgetTracker();
  const reqRaw = Buffer.from(chatBody(TRAFFIC_MAX_TOKENS));
  const respRaw = Buffer.from(STUB_RESPONSE);
  const respDoc0: unknown = JSON.parse(respRaw.toString('utf8'));
  const ctx = { defaultDailyTokens: null, guardrailConfigured: false };
  // The route the handler matches for this request (once: the pipeline takes it as given).
  const route = matchRoute('POST', '/v1/chat/completions');
  if (route.kind !== 'api') throw new Error(`decision phase: POST /v1/chat/completions matched a ${route.kind} route`);

  /**
   * One request through the inference pipeline (inference/pipeline.ts), as the proxy runs it:
   * snapshot, head checks, strict parse + limits + re-serialisation + route plan, budget reserve,
   * the floor's verdict on the answer, settle. 0 = allowed.
   */
  const decide = (respDoc: unknown): number => {
    const rules = state.current().inference;
    if (decideHead('POST', undefined, 'sb') !== undefined) return 1;
    const d = decideRequest(reqRaw, route, rules, ctx);
    if (d.kind !== 'forward') return 2;
    if (d.reserve === undefined) return 3;
    const r = budget.reserve('sb', d.reserve.caps, d.reserve.tokens);
    if (!r.ok) return 3;
    const blocked = judgeAnswer(200, respDoc, d.floor);
    const meter: Meter = { status: 200, usage: usageTotal(respDoc), bytes: respRaw.length, written: true, complete: true };
    r.reservation.settle(settleTokens(meter, d.promptBytes, r.reservation.amount));
    if (blocked !== undefined) return 4;
    return d.candidates.length === 2 ? 0 : 5;
  };
  const pure = (): number => decide(respDoc0);
  const withParse = (): number => decide(JSON.parse(Buffer.concat([respRaw], respRaw.length).toString('utf8')));
  if (pure() !== 0 || withParse() !== 0) throw new Error('decision phase: the typical request was not allowed');

  const time = (fn: () => number, iters: number): number => {
    let acc = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) acc += fn();
    const ns = Number(process.hrtime.bigint() - t0);
    if (acc !== 0) throw new Error('decision phase: a decision changed during the run');
    return ns / iters / 1000;
  };
  const runSet = (fn: () => number, iters: number): DecisionRunSet => {
    time(fn, Math.max(1000, Math.round(iters / 10)));
    const us: number[] = [];
    for (let r = 0; r < cfg.decisionRuns; r++) us.push(time(fn, iters));
    const s = stats(us);
    return { iters, runsUs: us, medianUs: s.p50, minUs: s.min, maxUs: s.max };
  };
  const parseIters = Math.max(1000, Math.round(cfg.decisionIters / 5));
  return {
    pure: runSet(pure, cfg.decisionIters),
    withParse: runSet(withParse, parseIters),
    reqBytes: reqRaw.length,
    respBytes: respRaw.length,
  };
}

/** The decision phase: measure, then the two control-plane rows. */
export function decisionPhase(run: Run): void {
  const { cfg } = run;
  const t0 = performance.now();
  log(`decision: ${fmtInt(cfg.decisionIters)} iterations × ${cfg.decisionRuns} runs, in process`);
  const d = measureDecisions(cfg, run.compiled(REALISTIC_CAP).body);
  run.raw.decision = d;
  run.ctlRows.push({
    metric: 'inference pipeline per request (pure)',
    display: `${fmt3(d.pure.medianUs)} µs`,
    goal: goalCell(d.pure.medianUs, cfg.goals.decisionUs, 'µs'),
    notes: `median of ${cfg.decisionRuns} runs × ${fmtInt(cfg.decisionIters)} (runs ${fmt3(d.pure.minUs)}–${fmt3(d.pure.maxUs)} µs; ${fmtInt(1 / (d.pure.medianUs / 1e6))} decisions/s on one core). Per request, as the proxy runs inference/pipeline.ts: snapshot, decideHead, decideRequest (strict parse of the ${d.reqBytes}-byte request, token limits, re-serialisation, route plan, floor), budget reserve, judgeAnswer on the parsed stub answer (1 prompt block, 4 categories + jailbreak), settle`,
  });
  run.ctlRows.push({
    metric: 'pipeline + parsing the answer',
    display: `${fmt3(d.withParse.medianUs)} µs`,
    goal: '–',
    notes: `the same plus Buffer.concat + JSON.parse of the ${d.respBytes}-byte answer (the floor makes the proxy buffer and parse every 2xx body); median of ${cfg.decisionRuns} runs × ${fmtInt(d.withParse.iters)} (${fmt3(d.withParse.minUs)}–${fmt3(d.withParse.maxUs)} µs)`,
  });
  run.phaseTimes.decision = (performance.now() - t0) / 1000;
}
