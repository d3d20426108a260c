export {
  createInferenceHandler,
  isDnsLabel,
  headerAgrees,
  routePlan,
  MAX_REQUEST_BODY_BYTES,
  MAX_BUFFERED_RESPONSE_BYTES,
  DEFAULT_FETCH_TIMEOUT_MS,
  SANDBOX_HEADER,
} from './handler.js';
export type { InferenceDecision, InferenceHandler, InferenceHandlerOptions } from './handler.js';
export { APIS, CHAT, COUNT_TOKENS, EMBEDDINGS, MESSAGES, RESPONSES, nativeProvider } from './apis.js';
export type { ApiName, InferenceApi, Provider, RouteAction, UsageShape, Wire } from './apis.js';
export { SUPPORTED_ROUTES, canonicalDeployment, matchRoute, upstreamPath, wireOf } from './routes.js';
export type { ApiRoute, ModelsRoute, RefusedRoute, RouteMatch } from './routes.js';
export { usageReader, anthropicUsageTotal, responsesUsageTotal } from './usage.js';
export type { UsageReader } from './usage.js';
export { attemptFor, decideHead, decideRequest, judgeAnswer, relayMode, settleTokens, tryNext, upstreamFilterReason } from './pipeline.js';
export type { Candidate, Forward, Meter, PipelineContext, Reject, RelayMode } from './pipeline.js';
export { TokenBudgetTracker, PRUNE_THRESHOLD } from './budget.js';
export type { BudgetCaps, BudgetUsage, BudgetVerdict, Reservation, ReserveResult, TokenBudgetTrackerOptions } from './budget.js';
export {
  normalizeRequest,
  reservationFor,
  estimateUsage,
  estimatePromptTokens,
  MAX_TOKEN_LIMIT,
  MAX_N,
  UNBOUNDED_COMPLETION_RESERVE,
} from './limits.js';
export type { NormalizedRequest, LimitsRefusal, LimitsResult } from './limits.js';
export { evaluateSafety, extractAnnotations, isFloorActive, severityRank } from './safety.js';
export type { ContentSafetyRules, FilterAnnotation, SafetyCategory, SafetyVerdict } from './safety.js';
export {
  SseEventSplitter,
  SseGate,
  eventData,
  usageFromJsonTail,
  usageFromSseText,
  usageTotal,
  USAGE_TAIL_BYTES,
  MAX_HELD_BYTES,
} from './sse.js';
export type { GateOutput } from './sse.js';
export {
  DECISION_HEADER,
  DECISION_BY_KIND_HEADER,
  DECISION_REASON_HEADER,
  budgetExceeded,
  contentPolicyViolation,
  decisionHeaders,
  duplicateKey,
  invalidJson,
  invalidTokenLimit,
  sandboxMismatch,
  methodNotAllowed,
  perRequestTokensExceeded,
  providerUnimplemented,
  proxyError,
  refusalHeaders,
  refusalJson,
  requestTooLarge,
  sanitizeHeaderValue,
  sendRefusal,
  streamRefusalFrames,
} from './errors.js';
export type { DecisionByKind, InferenceErrorCode, InferenceErrorType, InferenceRefusal, OpenAIErrorBody } from './errors.js';
