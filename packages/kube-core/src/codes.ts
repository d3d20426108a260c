/**
 * The one error-code convention of kars (ADR 0016):
 *
 * - every Error class kars throws on purpose has a stable `readonly code` of the form
 *   `KARS_<AREA>_<WHAT>` (upper snake case, {@link KARS_ERROR_CODE}), a message that says what
 *   failed, on what, and what to do, and the original failure as `cause`;
 * - the one exception is {@link ApiError}, whose numeric `code` is the HTTP status of the
 *   `metav1.Status` it mirrors (with the stable `reason` beside it), exactly as Kubernetes spells it;
 * - codes in HTTP answers that kars sends to agents (the router's OpenAI-style `error.code`) are
 *   wire contract, lower snake case like OpenAI's, and are not error-class codes.
 *
 * Match on `code` (with {@link hasErrorCode}), not on `instanceof`: two copies of a package in one
 * process (a bundled and a hoisted one) have different classes but the same codes.
 */

import type { ApiError } from './errors.js';

/** The shape of a kars error code. */
export const KARS_ERROR_CODE = /^KARS_[A-Z0-9]+(?:_[A-Z0-9]+)*$/;

/** A kars error code, e.g. `KARS_CONNECTION_LOST`. */
export type KarsErrorCode = `KARS_${string}`;

/** The string `code` of a thrown value, or undefined (ApiError's numeric code is not a string code). */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** Whether `err` carries the string code `code`. */
export function hasErrorCode(err: unknown, code: KarsErrorCode): boolean {
  return errorCode(err) === code;
}

/** The HTTP status of an {@link ApiError}-shaped value (numeric `code`), or undefined. */
export function httpStatusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as Partial<ApiError>).code;
  return typeof code === 'number' ? code : undefined;
}
