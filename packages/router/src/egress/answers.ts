/**
 * The egress proxy's answers when it does not tunnel or forward: one factory per failure site, so
 * each site's status, decision and code are fixed in one place (the egress part of the router's
 * refusal catalogue; the inference part is `inference/errors.ts`). Bodies are the flat
 * `{"error":"<msg>"}` of the wire contract's egress endpoints.
 *
 * | code | status | `x-kars-decision` | when |
 * |---|---|---|---|
 * | `egress_not_allowed` | 403 | `blocked` | host:port not in baseline ∪ active approvals |
 * | `egress_special_address` | 403 | `blocked` | an approved name resolves only to special addresses |
 * | `upstream_unresolvable` | 502 | `error` | allowed, but the name does not resolve |
 * | `upstream_unreachable` | 502 | `error` | allowed, but the connection failed (refused, reset, no route) |
 * | `upstream_timeout` | 504 | `error` | allowed, but no connection (or no answer head) within the connect timeout |
 *
 * Guarantees: a policy refusal is decided before the target is resolved or contacted, so a
 * `blocked` answer never depends on DNS or on the target (an agent learns nothing about hosts it
 * may not reach); `error` answers exist only for targets the policy allowed.
 */
import { formatHostPort } from '@kars/kube-core';
import {
  DECISION_BY_KIND_HEADER,
  DECISION_CODE_HEADER,
  DECISION_HEADER,
  DECISION_REASON_HEADER,
  sanitizeHeaderValue,
  type DecisionValue,
} from '../http/decision.js';

/** Stable codes of the egress proxy's answers (the `x-kars-decision-code` header). */
export type EgressDecisionCode =
  'egress_not_allowed' | 'egress_special_address' | 'upstream_unresolvable' | 'upstream_unreachable' | 'upstream_timeout';

/** One answer of the egress proxy instead of a tunnel or a forwarded response. */
export interface EgressAnswer {
  status: 403 | 502 | 504;
  /** The HTTP reason phrase for the raw CONNECT answer. */
  statusText: 'Forbidden' | 'Bad Gateway' | 'Gateway Timeout';
  decision: DecisionValue;
  code: EgressDecisionCode;
  message: string;
}

/** The 403 message, naming the target and how to ask for it. */
export function deniedMessage(sandbox: string, host: string, port: number): string {
  const hp = formatHostPort(host, port);
  return `egress to ${hp} is not allowed for sandbox ${sandbox}; request a temporary approval with: kars egress allow-extra ${sandbox} --host ${hp} --ttl PT1H --reason "..."`;
}

/** 403: the target is in neither the baseline nor an active approval. */
export function notAllowed(sandbox: string, host: string, port: number): EgressAnswer {
  return {
    status: 403,
    statusText: 'Forbidden',
    decision: 'blocked',
    code: 'egress_not_allowed',
    message: deniedMessage(sandbox, host, port),
  };
}

/** 403: an approval admitted the name, but it resolves only to special addresses (ADR 0014). */
export function specialAddress(host: string, port: number, why: readonly string[]): EgressAnswer {
  return {
    status: 403,
    statusText: 'Forbidden',
    decision: 'blocked',
    code: 'egress_special_address',
    message: `egress to ${formatHostPort(host, port)} refused: ${host} resolves only to special addresses (${why.join('; ')}); an approval cannot open them unless the sandbox baseline lists the name or the address`,
  };
}

/** 502: the policy allows the target, but its name does not resolve (`errCode` e.g. ENOTFOUND, EAI_AGAIN). */
export function unresolvable(host: string, port: number, errCode: string): EgressAnswer {
  return {
    status: 502,
    statusText: 'Bad Gateway',
    decision: 'error',
    code: 'upstream_unresolvable',
    message: `egress to ${formatHostPort(host, port)} is allowed, but ${host} does not resolve (${errCode})`,
  };
}

/** 502: the policy allows the target, but connecting failed (`errCode` e.g. ECONNREFUSED, ECONNRESET). */
export function unreachable(host: string, port: number, errCode: string): EgressAnswer {
  return {
    status: 502,
    statusText: 'Bad Gateway',
    decision: 'error',
    code: 'upstream_unreachable',
    message: `egress to ${formatHostPort(host, port)} is allowed, but the target cannot be reached (${errCode})`,
  };
}

/** 504: the policy allows the target, but it did not connect (or answer) within `ms`. */
export function connectTimeout(host: string, port: number, ms: number): EgressAnswer {
  return {
    status: 504,
    statusText: 'Gateway Timeout',
    decision: 'error',
    code: 'upstream_timeout',
    message: `egress to ${formatHostPort(host, port)} is allowed, but the target did not answer within ${ms} ms`,
  };
}

/** The answer to a connection error before anything was relayed: a timeout is 504, anything else 502. */
export function connectFailure(host: string, port: number, err: NodeJS.ErrnoException, timeoutMs: number): EgressAnswer {
  const code = err.code ?? err.message;
  return code === 'ETIMEDOUT' ? connectTimeout(host, port, timeoutMs) : unreachable(host, port, code);
}

/** The headers of an answer: content type and length, and the decision headers. */
export function answerHeaders(a: EgressAnswer, bodyBytes: number): Record<string, string | number> {
  const h: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': bodyBytes,
    [DECISION_HEADER]: a.decision,
  };
  if (a.decision === 'blocked') h[DECISION_BY_KIND_HEADER] = 'EgressAllowlist';
  h[DECISION_CODE_HEADER] = a.code;
  h[DECISION_REASON_HEADER] = sanitizeHeaderValue(a.message);
  return h;
}

/** The body of an answer: `{"error":"<message>"}`. */
export function answerJson(a: EgressAnswer): string {
  return JSON.stringify({ error: a.message });
}
