/**
 * The result type every compiler returns. Invalid input never throws: it comes back as a
 * {@link CompileFailure} naming the offending field, so callers (the controller, `kars compile`)
 * can set a Degraded condition or print an error without a try/catch.
 */

/** Why a compile failed: the contract's Degraded reasons (§3.1) a pure compiler can reach. */
export type CompileFailureReason = 'InvalidSpec' | 'InvalidRef';

export interface CompileFailure {
  ok: false;
  reason: CompileFailureReason;
  /** JSON path of the offending field, e.g. `spec.tokenBudget.dailyTokens`. */
  field: string;
  message: string;
}

/** Success carries the compiled artifacts; failure carries a {@link CompileFailure}. */
export type CompileResult<T> = ({ ok: true } & T) | CompileFailure;

export function fail(reason: CompileFailureReason, field: string, message: string): CompileFailure {
  return { ok: false, reason, field, message };
}
