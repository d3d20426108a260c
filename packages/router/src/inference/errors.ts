/**
 * The answers the inference listener gives when it refuses or cannot serve a request
 * (kars-wire-contract.md §5.3), and the decision header triplet on policy blocks. Each is rendered
 * in the envelope of the API it answers ({@link Wire}), so that the official SDKs raise their typed
 * errors:
 * - OpenAI: `{"error":{"message","type"[,"code"]}}` (the SDK's `err.code` is the kars code);
 * - Anthropic: `{"type":"error","error":{"type","message","details":{"error_code"}}}`, `type` from
 *   the status (`rate_limit_error` for 429, `permission_error` for 403, …); the SDK keeps the kars
 *   code as `err.errorCode`.
 *
 * Every refusal is an {@link InferenceRefusal} value built by one factory per failure site, so the
 * status, `type` and `code` of each site are fixed in one place and tests can compare bodies
 * byte for byte.
 *
 * Guarantees: header values are sanitised (CR/LF and non-printable bytes replaced, length capped),
 * so an upstream-controlled string can never break HTTP framing.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { decisionHeaders, type DecisionByKind } from '../http/decision.js';
import type { Wire } from './apis.js';

export {
  DECISION_HEADER,
  DECISION_BY_KIND_HEADER,
  DECISION_REASON_HEADER,
  decisionHeaders,
  sanitizeHeaderValue,
} from '../http/decision.js';
export type { DecisionByKind } from '../http/decision.js';

/** `error.type` values this route emits. */
export type InferenceErrorType =
  | 'token_budget_exceeded'
  | 'content_policy_violation'
  | 'proxy_error'
  | 'invalid_request_error'
  | 'api_error'
  | 'policy_not_loaded'
  | 'policy_stale'
  | 'policy_rejected'
  | 'guardrail_misconfigured'
  | 'router_busy';

/** `error.code` values this route emits (stable; clients and tests switch on them). */
export type InferenceErrorCode =
  | 'budget_exceeded'
  | 'per_request_tokens_exceeded'
  | 'inference_policy_content_safety_exceeded'
  | 'inference_policy_prompt_shields_required'
  | 'provider_unimplemented'
  | 'invalid_json'
  | 'method_not_allowed'
  | 'invalid_token_limit'
  | 'duplicate_key'
  | 'sandbox_mismatch'
  | 'guardrail_misconfigured'
  | 'guardrail_unavailable'
  | 'inference_policy_guardrail_flagged'
  | 'inference_policy_guardrail_unjudgeable'
  | 'inference_policy_action_not_covered'
  | 'inference_policy_provider_mismatch'
  | 'inference_policy_content_safety_unenforceable'
  | 'inference_policy_provider_tool_refused'
  | 'unsupported_parameter'
  | 'unsupported_route'
  | 'invalid_deployment'
  | 'not_found'
  | 'policy_not_loaded'
  | 'policy_stale'
  | 'policy_rejected'
  | 'request_too_large'
  | 'router_busy';

/** The OpenAI error envelope. `code` is omitted where the contract has none (502 proxy_error). */
export interface OpenAIErrorBody {
  error: { message: string; type: InferenceErrorType; code?: InferenceErrorCode };
}

/** One refusal: what to answer and whether it is a policy decision (which carries the header triplet). */
export interface InferenceRefusal {
  status: number;
  body: OpenAIErrorBody;
  /** Set on policy blocks: the decision header triplet is attached. */
  decisionBy?: DecisionByKind;
}

function refusal(
  status: number,
  type: InferenceErrorType,
  code: InferenceErrorCode | undefined,
  message: string,
  decisionBy?: DecisionByKind,
): InferenceRefusal {
  const body: OpenAIErrorBody = { error: code === undefined ? { message, type } : { message, type, code } };
  return decisionBy === undefined ? { status, body } : { status, body, decisionBy };
}

/** 429: the sandbox's daily or monthly token budget is used up (message from the tracker). */
export function budgetExceeded(message: string): InferenceRefusal {
  return refusal(429, 'token_budget_exceeded', 'budget_exceeded', message, 'InferencePolicy');
}

/** 429: the request asks for more completion tokens (n × max) than `tokenBudget.perRequestTokens` (message from `limits.ts`). */
export function perRequestTokensExceeded(message: string): InferenceRefusal {
  return refusal(429, 'token_budget_exceeded', 'per_request_tokens_exceeded', message, 'InferencePolicy');
}

/** 400: `max_tokens`, `max_completion_tokens`, `n` or `stream_options` is malformed (message names the field). */
export function invalidTokenLimit(message: string): InferenceRefusal {
  return refusal(400, 'invalid_request_error', 'invalid_token_limit', `Invalid token limit: ${message}`);
}

/** 400: the body has the same key twice in one object (which value an upstream reads is undefined). */
export function duplicateKey(detail: string): InferenceRefusal {
  return refusal(400, 'invalid_request_error', 'duplicate_key', `Invalid JSON body: ${detail}`);
}

/** 503: the policy declares a guardrail stage whose backend this router does not have (fail closed). */
export function guardrailMisconfigured(provider: string): InferenceRefusal {
  return refusal(
    503,
    'api_error',
    'guardrail_misconfigured',
    `InferencePolicy declares a ${provider} guardrail stage, but this router has no backend for it (kars router --guardrail-url); refusing rather than skipping it`,
    'InferencePolicy',
  );
}

/** 503: the guardrail backend could not give an answer (fail closed). */
export function guardrailUnavailable(detail: string): InferenceRefusal {
  return refusal(
    503,
    'api_error',
    'guardrail_unavailable',
    `The guardrail backend could not judge this request (${detail}); refusing rather than skipping it`,
    'InferencePolicy',
  );
}

/** 403: a guardrail stage flagged the request or the answer. */
export function guardrailFlagged(where: 'input' | 'output', categories: readonly string[]): InferenceRefusal {
  return refusal(
    403,
    'content_policy_violation',
    'inference_policy_guardrail_flagged',
    `A guardrail stage (openai-moderation) flagged the ${where === 'input' ? 'request' : 'answer'}${categories.length > 0 ? ` (${categories.join(', ')})` : ''}`,
    'InferencePolicy',
  );
}

/**
 * 403: a guardrail stage applies, and the request (or the answer) holds something a text
 * moderator cannot judge: an image, audio or file part, a base64 data URL, an answer that is not
 * JSON (ADR 0026). `what` names where; the first three are listed.
 */
export function guardrailUnjudgeable(where: 'input' | 'output', what: readonly string[]): InferenceRefusal {
  const shown = what.slice(0, 3).join(', ') + (what.length > 3 ? ` and ${what.length - 3} more` : '');
  return refusal(
    403,
    'content_policy_violation',
    'inference_policy_guardrail_unjudgeable',
    `A guardrail stage (openai-moderation) cannot judge part of the ${where === 'input' ? 'request' : 'answer'}: ${shown}; refusing rather than passing it unjudged`,
    'InferencePolicy',
  );
}

/** 403: `x-kars-sandbox` names another sandbox than the one this router serves. */
export function sandboxMismatch(sandbox: string): InferenceRefusal {
  return refusal(
    403,
    'invalid_request_error',
    'sandbox_mismatch',
    `This router serves sandbox "${sandbox}" only; x-kars-sandbox may repeat that name but not change it (omit the header)`,
    'InferencePolicy',
  );
}

/** 403: the content-safety floor blocked the response (severity above a ceiling, or Prompt Shields missing). */
export function contentPolicyViolation(
  code: 'inference_policy_content_safety_exceeded' | 'inference_policy_prompt_shields_required',
  message: string,
): InferenceRefusal {
  return refusal(403, 'content_policy_violation', code, message, 'InferencePolicy');
}

/** 502: no upstream answered (connection refused, reset, timeout before response headers). */
export function proxyError(): InferenceRefusal {
  return refusal(502, 'proxy_error', undefined, 'Failed to reach inference backend');
}

/** 501: the policy routes to a provider this router does not implement (`bedrock`). */
export function providerUnimplemented(provider: string): InferenceRefusal {
  return refusal(
    501,
    'api_error',
    'provider_unimplemented',
    `InferencePolicy selects provider "${provider}", which this router does not implement; use azure-openai, anthropic or ollama`,
    'InferencePolicy',
  );
}

/** 400: the body is not a JSON object. */
export function invalidJson(detail: string): InferenceRefusal {
  return refusal(400, 'invalid_request_error', 'invalid_json', `Invalid JSON body: ${detail}`);
}

/** 413: the body is larger than the route accepts. */
export function requestTooLarge(limitBytes: number): InferenceRefusal {
  return refusal(413, 'invalid_request_error', 'request_too_large', `Request body exceeds ${limitBytes} bytes; send a smaller request`);
}

/** 405: inference paths take POST only. */
export function methodNotAllowed(method: string): InferenceRefusal {
  return refusal(405, 'invalid_request_error', 'method_not_allowed', `Method ${method} is not allowed on this path; use POST`);
}

/** 403: the sandbox's InferencePolicy governs another action than this route's: no policy is in force here (fail closed). */
export function actionNotCovered(policyAction: string, route: string, routeAction: string): InferenceRefusal {
  return refusal(
    403,
    'invalid_request_error',
    'inference_policy_action_not_covered',
    `The sandbox's InferencePolicy applies to action "${policyAction}" only, so no InferencePolicy is in force for ${route} (action "${routeAction}"); refusing rather than passing it ungoverned`,
    'InferencePolicy',
  );
}

/** 403: no provider the policy routes to speaks this route's API. */
export function providerMismatch(providers: readonly string[], api: string, speakers: readonly string[]): InferenceRefusal {
  return refusal(
    403,
    'invalid_request_error',
    'inference_policy_provider_mismatch',
    `The sandbox's InferencePolicy routes to ${providers.map((p) => `"${p}"`).join(', ')}, which does not speak the ${api} API; a policy for it names provider ${speakers.join(' or ')} (spec.provider or modelPreference)`,
    'InferencePolicy',
  );
}

/** 403: a content-safety floor is set, and this API's answers carry no content-filter annotations to judge it by. */
export function contentSafetyUnenforceable(api: string): InferenceRefusal {
  return refusal(
    403,
    'content_policy_violation',
    'inference_policy_content_safety_unenforceable',
    `The sandbox's InferencePolicy sets a contentSafety floor, and ${api} answers carry no Azure content-filter annotations to enforce it by; refusing rather than passing them unjudged`,
    'InferencePolicy',
  );
}

/** 403: the request asks the provider to reach the network itself (a provider-run tool), outside egress and ToolPolicy. */
export function providerToolRefused(what: readonly string[]): InferenceRefusal {
  const shown = what.slice(0, 3).join(', ') + (what.length > 3 ? ` and ${what.length - 3} more` : '');
  return refusal(
    403,
    'invalid_request_error',
    'inference_policy_provider_tool_refused',
    `The request asks the provider to reach the network itself (${shown}): that happens outside the sandbox's egress policy and ToolPolicy, so kars router refuses it; use function tools the agent runs, and send media as bytes (a data: URL or base64)`,
    'InferencePolicy',
  );
}

/** 400: a parameter this router does not serve (named in the message). */
export function unsupportedParameter(message: string): InferenceRefusal {
  return refusal(400, 'invalid_request_error', 'unsupported_parameter', message);
}

/** 404 / 400: a path the listener does not serve (the message lists the routes it does). */
export function routeRefused(
  status: 400 | 404,
  code: 'not_found' | 'unsupported_route' | 'invalid_deployment',
  message: string,
): InferenceRefusal {
  return refusal(status, 'invalid_request_error', code, message);
}

/** 503: the router has not loaded its policy yet (fail closed). */
export function policyNotLoaded(): InferenceRefusal {
  return refusal(503, 'policy_not_loaded', 'policy_not_loaded', 'the router has not loaded its policy yet; retry shortly');
}

/** 503: the router cannot confirm its policy is current (fail closed). */
export function policyStale(ageMs: number, maxStalenessMs: number): InferenceRefusal {
  return refusal(
    503,
    'policy_stale',
    'policy_stale',
    `the router cannot confirm its policy is current (view age ${Math.round(ageMs / 1000)} s exceeds --max-staleness ${Math.round(maxStalenessMs / 1000)} s)`,
  );
}

/** 503: the bound policy was refused by this router, and it has no earlier one to enforce. */
export function policyRejected(code: 'policy_rejected' | 'guardrail_misconfigured', message: string): InferenceRefusal {
  return refusal(503, code, code, message);
}

/** 500: the router failed to handle the request. */
export function internalError(): InferenceRefusal {
  return refusal(500, 'proxy_error', undefined, 'internal router error');
}

/** Anthropic's error `type` for a status (the router's refusals and the Anthropic stub's answers). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    case 504:
      return 'timeout_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** The body of a refusal as compact JSON, in `wire`'s envelope (OpenAI's by default). */
export function refusalJson(r: InferenceRefusal, wire: Wire = 'openai'): string {
  if (wire === 'openai') return JSON.stringify(r.body);
  const e = r.body.error;
  return JSON.stringify({
    type: 'error',
    error: { type: anthropicErrorType(r.status), message: e.message, details: { error_code: e.code ?? e.type } },
  });
}

/** The headers of a refusal answer (content type, length, and the decision triplet on policy blocks). */
export function refusalHeaders(r: InferenceRefusal, bodyBytes: number): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': bodyBytes };
  if (r.decisionBy !== undefined) Object.assign(h, decisionHeaders(r.decisionBy, r.body.error.message));
  return h;
}

/** Answer a request with a refusal in `wire`'s envelope. `extra` headers are added (e.g. `connection: close`). */
export function sendRefusal(res: ServerResponse, r: InferenceRefusal, extra?: OutgoingHttpHeaders, wire: Wire = 'openai'): void {
  const text = refusalJson(r, wire);
  const headers = refusalHeaders(r, Buffer.byteLength(text));
  if (extra !== undefined) Object.assign(headers, extra);
  res.writeHead(r.status, headers);
  res.end(text);
}

/**
 * The SSE frames that replace a blocked stream: the error event, then `[DONE]`
 * (`data: {"error":{…}}\n\ndata: [DONE]\n\n`).
 */
export function streamRefusalFrames(r: InferenceRefusal): string {
  return `data: ${refusalJson(r)}\n\ndata: [DONE]\n\n`;
}
