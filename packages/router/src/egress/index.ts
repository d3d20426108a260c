export { isAllowed, normalizeHost } from './allow.js';
export type { EgressVerdict } from './allow.js';
export { deniedMessage, parseAuthority, startEgressProxy } from './proxy.js';
export type { EgressDecision, EgressProxy, EgressProxyOptions } from './proxy.js';
export type { EgressAnswer, EgressDecisionCode } from './answers.js';
