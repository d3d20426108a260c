/**
 * The decision headers the router puts on the answers it makes itself instead of the upstream's
 * (kars-wire-contract.md §5.3, "decision header triplet"), shared by the inference route and the
 * egress proxy so both spell them the same way:
 *
 * - `x-kars-decision`: `blocked` when a policy refused the request; `error` when the policy allowed
 *   it but the router could not reach the target (egress: name does not resolve, connection
 *   refused, connect timeout);
 * - `x-kars-decision-by-kind`: on `blocked` only, the kind that decided (`InferencePolicy`,
 *   `UpstreamContentFilter`, `EgressAllowlist`);
 * - `x-kars-decision-reason`: the human-readable reason (the error message, sanitised);
 * - `x-kars-decision-code`: a stable code (egress only so far; the inference route carries its
 *   code in the body's `error.code`).
 *
 * Guarantees: header values are sanitised (CR/LF and non-printable bytes replaced, length capped),
 * so an upstream- or agent-controlled string can never break HTTP framing.
 */

/** `blocked` on a policy refusal, `error` on a failure to reach an allowed target. */
export const DECISION_HEADER = 'x-kars-decision';
/** Which kind of policy decided a block: `InferencePolicy`, `UpstreamContentFilter` or `EgressAllowlist`. */
export const DECISION_BY_KIND_HEADER = 'x-kars-decision-by-kind';
/** The human-readable reason (the error message, sanitised). */
export const DECISION_REASON_HEADER = 'x-kars-decision-reason';
/** A stable machine-readable code for the decision (see {@link EgressDecisionCode}). */
export const DECISION_CODE_HEADER = 'x-kars-decision-code';

/** The values of {@link DECISION_HEADER}. */
export type DecisionValue = 'blocked' | 'error';

/** The policy kinds that appear in {@link DECISION_BY_KIND_HEADER}. */
export type DecisionByKind = 'InferencePolicy' | 'UpstreamContentFilter' | 'EgressAllowlist';

const MAX_REASON_CHARS = 512;

/** Make a string safe as an HTTP header value: printable ASCII only, no CR/LF, at most 512 chars. */
export function sanitizeHeaderValue(s: string): string {
  const n = Math.min(s.length, MAX_REASON_CHARS);
  let out = '';
  let clean = true;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) {
      clean = false;
      break;
    }
  }
  if (clean) return n === s.length ? s : s.slice(0, n);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    out += c === 0x09 || (c >= 0x20 && c <= 0x7e) ? s[i] : c === 0x0d || c === 0x0a ? ' ' : '?';
  }
  return out;
}

/** The decision header triplet for a blocked response. */
export function decisionHeaders(byKind: DecisionByKind, reason: string): Record<string, string> {
  return { [DECISION_HEADER]: 'blocked', [DECISION_BY_KIND_HEADER]: byKind, [DECISION_REASON_HEADER]: sanitizeHeaderValue(reason) };
}
