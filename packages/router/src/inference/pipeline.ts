/**
 * The inference route's decisions, as pure functions: request + policy snapshot → a decision
 * (refuse with a code, or forward this re-serialised body with this reservation), and upstream
 * answer → what to relay. No I/O, no clock, no state: `handler.ts` (the thin proxy) reads bytes,
 * asks these functions, and carries out what they say. The numbered steps are those of the
 * module comment in `handler.ts`.
 *
 * Guarantees: every function here is deterministic in its arguments and never throws on any input
 * (bad input is a refusal).
 */
import { isObject } from '@kars/kube-core';
import type { OutgoingHttpHeaders } from 'node:http';
import type { InferenceRules } from '../snapshot.js';
import { parseStrictJson } from '../json/strict.js';
import type { BudgetCaps } from './budget.js';
import {
  contentPolicyViolation,
  duplicateKey,
  guardrailMisconfigured,
  guardrailUnjudgeable,
  invalidJson,
  invalidTokenLimit,
  methodNotAllowed,
  perRequestTokensExceeded,
  providerUnimplemented,
  requestTooLarge,
  sandboxMismatch,
  actionNotCovered,
  contentSafetyUnenforceable,
  providerMismatch,
  providerToolRefused,
  unsupportedParameter,
  type InferenceRefusal,
} from './errors.js';
import { UNBOUNDED_COMPLETION_RESERVE, estimateUsage, reservationFor, type LimitsRefusal } from './limits.js';
import { foldedAlias, nativeProvider, type InferenceApi, type Provider } from './apis.js';
import { upstreamPath, type ApiRoute } from './routes.js';
import { NO_RETRY } from './ratelimit.js';
import { evaluateSafety, extractAnnotations, isFloorActive, type ContentSafetyRules } from './safety.js';
import { requestTexts } from './moderation-text.js';

/** Largest request body accepted (10 MiB). */
export const MAX_REQUEST_BODY_BYTES = 10 * 1024 * 1024;

/** Header that may repeat the router's sandbox identity (never change it). It is not forwarded upstream. */
export const SANDBOX_HEADER = 'x-kars-sandbox';

function isAlnum(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39);
}

/** Whether `s` is an RFC 1123 DNS label: 1–63 chars of `[a-z0-9-]`, starting and ending alphanumeric. */
export function isDnsLabel(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > 63) return false;
  if (!isAlnum(s.charCodeAt(0)) || !isAlnum(s.charCodeAt(n - 1))) return false;
  for (let i = 1; i < n - 1; i++) {
    const c = s.charCodeAt(i);
    if (!isAlnum(c) && c !== 0x2d) return false;
  }
  return true;
}

/**
 * Whether a request's identity header agrees with the router's sandbox (step 2): absent, or
 * exactly `sandbox`. A list of values, another name, or a spelling variant disagrees.
 */
export function headerAgrees(header: string | string[] | undefined, sandbox: string): boolean {
  return header === undefined || header === sandbox;
}

const KNOWN_PROVIDERS: ReadonlySet<string> = new Set<Provider>(['azure-openai', 'anthropic', 'ollama', 'bedrock']);

/** One upstream a request may be sent to: a provider (its upstream URL) and a deployment (undefined: the request's own). */
export interface Candidate {
  provider: Provider;
  deployment: string | undefined;
}

/**
 * The upstream candidates of a request on `api` under a policy, in order (step 6):
 * - no policy: the API's own provider, the request as it is;
 * - the provider is `modelPreference.primary.provider` when recognised, else `provider`, else the
 *   API's own; `bedrock` → 501;
 * - then the primary deployment and the fallbacks, each with its own provider (empty names,
 *   duplicates, unknown providers and bedrock skipped); none → the request's own deployment;
 * - only candidates whose provider speaks `api` are kept; none left → 403 `inference_policy_provider_mismatch`.
 */
export function routePlan(rules: InferenceRules | undefined, api: InferenceApi): { kind: 'plan'; candidates: Candidate[] } | Reject {
  const own = nativeProvider(api);
  const mp = rules?.modelPreference ?? null;
  const pp = mp?.primary.provider;
  const provider = (pp !== undefined && KNOWN_PROVIDERS.has(pp) ? pp : (rules?.provider ?? own)) as Provider;
  // The same refusal every time: a 5xx the SDKs would otherwise retry (ratelimit.ts).
  if (provider === 'bedrock') return reject(providerUnimplemented(provider), NO_RETRY);
  const all: Candidate[] = [];
  const add = (p: string, deployment: string): void => {
    if (deployment === '' || p === 'bedrock' || !KNOWN_PROVIDERS.has(p)) return;
    if (all.some((c) => c.provider === p && c.deployment === deployment)) return;
    all.push({ provider: p as Provider, deployment });
  };
  if (mp !== null) {
    add(provider, mp.primary.deployment);
    for (const f of mp.fallback) add(f.provider, f.deployment);
  }
  if (all.length === 0) all.push({ provider, deployment: undefined });
  const kept = all.filter((c) => api.providers.has(c.provider));
  if (kept.length === 0) return reject(providerMismatch([...new Set(all.map((c) => c.provider))], api.title, [...api.providers]));
  return { kind: 'plan', candidates: kept };
}

/** A refusal, with any extra response headers. */
export interface Reject {
  kind: 'reject';
  refusal: InferenceRefusal;
  headers?: OutgoingHttpHeaders;
}

function reject(refusal: InferenceRefusal, headers?: Readonly<OutgoingHttpHeaders>): Reject {
  return headers === undefined ? { kind: 'reject', refusal } : { kind: 'reject', refusal, headers: { ...headers } };
}

/** Steps 0 and 2, decided from the request head before any body byte is read. */
export function decideHead(method: string | undefined, sandboxHeader: string | string[] | undefined, sandbox: string): Reject | undefined {
  if (method !== 'POST') return reject(methodNotAllowed(method ?? ''), { allow: 'POST' });
  if (!headerAgrees(sandboxHeader, sandbox)) return reject(sandboxMismatch(sandbox));
  return undefined;
}

/** The refusal of a body over {@link MAX_REQUEST_BODY_BYTES} (step 3); the connection is closed after it. */
export function tooLarge(): Reject {
  return reject(requestTooLarge(MAX_REQUEST_BODY_BYTES), { connection: 'close' });
}

/** What the router's deployment contributes to a decision. */
export interface PipelineContext {
  /** Daily cap used when the policy sets none. */
  defaultDailyTokens: number | null;
  /** Whether a moderation backend is configured (`--guardrail-url`). */
  guardrailConfigured: boolean;
}

/** The decision to forward: everything the proxy needs, already decided. */
export interface Forward {
  kind: 'forward';
  route: ApiRoute;
  /** Whether the request asks for a stream (`stream: true`). */
  stream: boolean;
  /** The normalised request, as forwarded (step 4). */
  body: Record<string, unknown>;
  /** `JSON.stringify(body)`: the bytes sent to the first candidate. */
  text: string;
  /** Bytes of `text`: the prompt size for reservation and the usage estimate. */
  promptBytes: number;
  /** Upstream candidates in order (step 6); a candidate without a deployment sends the request as it is. */
  candidates: Candidate[];
  /** The active content-safety floor, if any (step 9). */
  floor: ContentSafetyRules | undefined;
  /** Texts an input guardrail stage must clear before forwarding (`moderation-text.ts`); undefined when none applies. */
  moderateInput: string[] | undefined;
  /** Whether an output guardrail stage judges the answer. */
  moderateOutput: boolean;
  /** What to reserve against the budget before forwarding (step 5); undefined for an uncharged API (token counting). */
  reserve: { caps: BudgetCaps; tokens: number } | undefined;
  /** Whether the router set the completion limit itself (a request without one under a daily or monthly cap): a `cap` decision. */
  capped: boolean;
}

/** The completion-limit fields of the APIs the router serves. */
const LIMIT_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;

/** The refusal of a limits check (`apis.ts` normalise). */
function limitsRefusal(r: LimitsRefusal): Reject {
  switch (r.kind) {
    case 'invalid':
      return reject(invalidTokenLimit(r.message));
    case 'unsupported':
      return reject(unsupportedParameter(r.message));
    case 'over_cap':
      // The same request is refused every time: the SDKs must not retry it (ratelimit.ts).
      return reject(perRequestTokensExceeded(r.message), NO_RETRY);
  }
}

/**
 * Steps 3–6 and the guardrail configuration check: the request body on `route` and the policy
 * snapshot → a refusal, or the forward decision. The budget itself (a ledger) is not consulted
 * here: the proxy reserves `reserve` and refuses with `budget_exceeded` when the ledger says no.
 */
export function decideRequest(raw: Buffer, route: ApiRoute, rules: InferenceRules | undefined, ctx: PipelineContext): Reject | Forward {
  const api = route.api;
  // appliesTo.action: a bound policy governs only the routes of its action; on another route no
  // policy is in force, and the request is refused (fail closed).
  const action = rules?.action ?? '*';
  if (rules !== undefined && action !== '*' && action !== api.action) return reject(actionNotCovered(action, api.title, api.action));
  const strict = parseStrictJson(raw.toString('utf8'));
  if (!strict.ok) return reject(strict.code === 'duplicate_key' ? duplicateKey(strict.message) : invalidJson(strict.message));
  if (!isObject(strict.value)) return reject(invalidJson('the body must be a JSON object'));
  // A key a case-insensitive upstream (Go's encoding/json) reads as a governed field, unseen by the rules.
  const alias = foldedAlias(strict.value);
  if (alias !== undefined)
    return reject(
      invalidJson(`the key ${JSON.stringify(alias.slice(0, 64))} differs from a field only in case; send each field once, spelled exactly`),
    );
  const tb = rules?.tokenBudget ?? null;

  // Step 4: token limits, normalised into the body that will be forwarded.
  const norm = api.normalize(strict.value, tb?.perRequestTokens ?? null);
  if (!norm.ok) return limitsRefusal(norm.refusal);
  // A request that sets no limit, under a daily or monthly cap, is limited to what it reserves:
  // forwarded unbounded, it could generate the model's maximum while holding only that reservation,
  // and parallel ones would overshoot the day by far more than they reserved.
  const caps: BudgetCaps = { dailyTokens: tb?.dailyTokens ?? ctx.defaultDailyTokens, monthlyTokens: tb?.monthlyTokens ?? null };
  let request = norm.request;
  if (
    api.charged &&
    api.limitField !== undefined &&
    request.maxCompletion === undefined &&
    (caps.dailyTokens !== null || caps.monthlyTokens !== null)
  ) {
    const per = Math.max(1, Math.floor(UNBOUNDED_COMPLETION_RESERVE / request.n));
    request = { ...request, body: { ...request.body, [api.limitField]: per }, perChoice: per, maxCompletion: per * request.n };
  }
  const body = request.body;
  // A `cap` decision: the router set a completion limit the request did not (per-request cap, or the budget's reserve).
  const capped = LIMIT_FIELDS.some((f) => body[f] !== undefined && !Object.hasOwn(strict.value as object, f));
  const text = JSON.stringify(body);
  const promptBytes = Buffer.byteLength(text);

  // Step 6 (before reserving, so a refusal holds nothing): provider and deployment candidates.
  const plan = routePlan(rules, api);
  if (plan.kind === 'reject') return plan;

  // The floor's evidence is Azure's annotations; an API whose answers cannot carry them cannot be held to it.
  const floor = isFloorActive(rules?.contentSafety) && api.answersText ? (rules?.contentSafety ?? undefined) : undefined;
  if (floor !== undefined && !api.annotated) return reject(contentSafetyUnenforceable(api.title));

  // Guardrail stages: without a backend every stage fails closed. Token counting generates nothing.
  const stages = api.charged ? (rules?.guardrails ?? []) : [];
  if (stages.length > 0 && !ctx.guardrailConfigured)
    return reject(guardrailMisconfigured(stages[0]?.provider ?? 'openai-moderation'), NO_RETRY);
  const input = stages.some((g) => g.applyTo !== 'output');
  const output = api.answersText && stages.some((g) => g.applyTo !== 'input');
  // An input stage judges every text of the forwarded body; what it cannot judge is refused (ADR 0026).
  if (input) {
    const unjudgeable = api.unjudgeable(body);
    if (unjudgeable.length > 0) return reject(guardrailUnjudgeable('input', unjudgeable));
  }
  const judged = input ? requestTexts(body) : undefined;
  if (judged !== undefined && judged.unjudgeable.length > 0) return reject(guardrailUnjudgeable('input', judged.unjudgeable));
  // What the provider would fetch or run itself (ADR 0034); under an input stage, media by URL is already refused above.
  const providerTools = api.providerTools(body);
  if (providerTools.length > 0) return reject(providerToolRefused(providerTools));
  // A model of the agent's naming (no policy deployment replaces it) that searches by itself.
  const searching = plan.candidates.some((c) => c.deployment === undefined) ? toolRunningModels(api, body, route) : [];
  if (searching.length > 0) return reject(providerToolRefused(searching));

  return {
    kind: 'forward',
    route,
    stream: body['stream'] === true,
    body,
    text,
    promptBytes,
    candidates: plan.candidates,
    floor,
    moderateInput: judged?.texts,
    moderateOutput: output,
    reserve: api.charged
      ? {
          caps,
          tokens: reservationFor(request, promptBytes),
        }
      : undefined,
    capped,
  };
}

/** The models the agent names (`model`, and the Azure deployment segment) that run a provider tool by themselves on `api`. */
function toolRunningModels(api: InferenceApi, body: Record<string, unknown>, route: ApiRoute): string[] {
  const named: string[] = [];
  if (typeof body['model'] === 'string') named.push(body['model']);
  if (route.deployment !== undefined) named.push(decodedSegment(route.deployment));
  return named.filter((m) => api.toolRunningModel(m)).map((m) => `model ${JSON.stringify(m.slice(0, 64))} (searches by itself)`);
}

function decodedSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Whether a written request answered `status` may have been generated, and billed, anyway: a 5xx
 * that a gateway in front of the provider answers when it gives up (500, 502, 504, …), while the
 * provider finishes. A 4xx (the provider refused it), a 429, 503 (unavailable) and Anthropic's 529
 * (overloaded) mean it did not run.
 */
function mayHaveRun(status: number): boolean {
  return status >= 500 && status !== 503 && status !== 529;
}

/** The upstream path and the (re-serialised) body of the attempt at candidate `c` (step 6), under the upstream's `basePath`. */
export function attemptFor(f: Forward, c: Candidate, basePath: string): { path: string; body: string } {
  const route = f.route;
  const path = upstreamPath(route, basePath, c.deployment);
  // The deployment form names the deployment in the path; every other form in the body's `model`.
  if (route.prefix === undefined || c.deployment === undefined || f.body['model'] === c.deployment) return { path, body: f.text };
  return { path, body: JSON.stringify({ ...f.body, model: c.deployment }) };
}

/** Whether an answer passed over for the next candidate may have been generated and billed (the settlement's floor). */
export function passedOverMayHaveRun(status: number): boolean {
  return mayHaveRun(status);
}

/** Whether an answer moves on to the next candidate (a 5xx or a 429, when one is left). */
export function tryNext(status: number, last: boolean): boolean {
  return !last && (status === 429 || status >= 500);
}

/** How the proxy relays an answer (steps 8 and 9). */
export type RelayMode = 'stream' | 'stream-moderated' | 'judged' | 'plain';

/** The relay for an answer with `status` and `contentType`, under `f`'s floor and output stage. */
export function relayMode(
  status: number,
  contentType: string | string[] | undefined,
  f: Pick<Forward, 'floor' | 'moderateOutput'>,
): RelayMode {
  const ok = status >= 200 && status < 300;
  if (typeof contentType === 'string' && contentType.toLowerCase().startsWith('text/event-stream'))
    return f.moderateOutput && ok ? 'stream-moderated' : 'stream';
  if (status === 400 || status === 403 || ((f.floor !== undefined || f.moderateOutput) && ok)) return 'judged';
  return 'plain';
}

/**
 * The content-safety verdict on a whole (parsed) answer (step 9): a refusal when the floor blocks
 * it. A 2xx is judged on its annotations (and Prompt Shields); a 400 only on the severities it
 * carries, since it holds no model output to protect.
 */
export function judgeAnswer(status: number, doc: unknown, floor: ContentSafetyRules | undefined): InferenceRefusal | undefined {
  const ok = status >= 200 && status < 300;
  if (floor === undefined || !(ok || status === 400)) return undefined;
  const annotations = extractAnnotations(doc, status);
  if (!ok && annotations.length === 0) return undefined;
  const v = evaluateSafety(floor, annotations);
  return v.blocked ? contentPolicyViolation(v.code, v.message) : undefined;
}

const UPSTREAM_FILTER_CODES = new Set(['content_filter', 'responsible_ai_policy_violation', 'ResponsibleAIPolicyViolation']);

/** When an upstream 400/403 is a content-filter refusal, its reason (for the decision headers). */
export function upstreamFilterReason(parsed: unknown): string | undefined {
  const err = isObject(parsed) ? parsed['error'] : undefined;
  if (!isObject(err)) return undefined;
  const code = typeof err['code'] === 'string' ? err['code'] : '';
  const message = typeof err['message'] === 'string' ? err['message'] : '';
  if (
    UPSTREAM_FILTER_CODES.has(code) ||
    code.startsWith('inference_policy_') ||
    message.includes('content management policy') ||
    message.includes('Responsible AI')
  ) {
    return message !== '' ? message : code;
  }
  return undefined;
}

/** What one upstream answer used, counted by the proxy. */
export interface Meter {
  /** Status of the answer relayed to the client (or drained after it left); undefined when none was. */
  status: number | undefined;
  /** `usage.total_tokens` when the answer carried it. */
  usage: number | undefined;
  /** Answer bytes relayed or judged. */
  bytes: number;
  /** Whether a request was handed to an upstream connection to be written (it may have run). */
  written: boolean;
  /** Whether the answer's body arrived to its end. */
  complete: boolean;
  /** The candidate of the latest attempt (for the decision record); undefined before any. */
  candidate?: Candidate;
  /**
   * How many earlier candidates' answers, passed over for the next one (step 6), were a 5xx that
   * may come after the provider generated and billed it (`mayHaveRun`): each is charged its
   * reservation on top of the last answer's charge.
   */
  ranBefore?: number;
}

/** A meter before anything was sent. */
export function newMeter(): Meter {
  return { status: undefined, usage: undefined, bytes: 0, written: false, complete: false };
}

/**
 * What a reservation of `reserved` tokens settles at (step 8, ADR 0027):
 * - nothing written upstream: 0 (no upstream can have run it);
 * - a 5xx that may come after generation (`mayHaveRun`): at least the reservation, since a gateway's
 *   timeout does not stop the provider billing it;
 * - any other non-2xx answer: 0 (the upstream refused it);
 * - a 2xx answer that reported usage: that usage, whether the agent stayed or not;
 * - a 2xx answer read to its end without usage: the estimate `estimateUsage(prompt, answer bytes)`;
 * - otherwise (written, and no answer, or a 2xx answer cut short without usage): the larger of
 *   the reservation and that estimate. A forwarded request is never free.
 * - plus the reservation once for each earlier candidate passed over after a 5xx that may have
 *   run (`Meter.ranBefore`): the fallback still gets the request (issue 20: fallback on a 5xx stays
 *   deterministic), so the provider may bill it twice, and both are charged.
 */
export function settleTokens(m: Meter, promptBytes: number, reserved: number): number {
  if (!m.written) return 0;
  // Each candidate passed over after a 5xx that may have run is charged its reservation, on top of the last.
  if (m.ranBefore !== undefined && m.ranBefore > 0) return reserved * m.ranBefore + settleLast(m, promptBytes, reserved);
  return settleLast(m, promptBytes, reserved);
}

/** {@link settleTokens} of the answer relayed (the last attempt). */
function settleLast(m: Meter, promptBytes: number, reserved: number): number {
  if (m.status !== undefined && (m.status < 200 || m.status >= 300)) return mayHaveRun(m.status) ? Math.max(reserved, m.usage ?? 0) : 0;
  if (m.status !== undefined && m.usage !== undefined) return m.usage;
  const estimate = m.status === undefined ? 0 : estimateUsage(promptBytes, m.bytes);
  return m.status !== undefined && m.complete ? estimate : Math.max(reserved, estimate);
}
