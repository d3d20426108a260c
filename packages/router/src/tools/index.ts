export { evaluateAgt, globMatch, parseAgtProfile } from './agt.js';
export type { AgtParseResult, AgtRules, AgtVerdict } from './agt.js';
export { decideToolCall, isToolListed, TOOL_ERROR_CODES } from './decide.js';
export type { ToolCallDecision, ToolRefusalCode } from './decide.js';
export { createMcpGateway, rewriteSse } from './gateway.js';
export type { McpGatewayHandler, McpGatewayOptions, ToolDecision } from './gateway.js';
export { effectiveLimit, ToolRateLimiter } from './ratelimit.js';
export type { RateLimitSpec, TakeResult } from './ratelimit.js';
export { selectToolPolicy, specificity } from './select.js';
