/**
 * The one check of an `Authorization: Bearer <token>` header (router admin listener, API server).
 *
 * Accepted form, exactly: the scheme `Bearer` (case-insensitive, as RFC 7235 §2.1 makes auth
 * schemes), ONE space, then a token of one or more visible ASCII characters (0x21–0x7E), nothing
 * after it. The header must occur once: a repeated `Authorization` is refused, whatever its copies
 * hold (Node keeps only the first copy in `req.headers`; the check reads `rawHeaders`).
 * Leading and trailing spaces and tabs around the whole value are not part of an HTTP field value
 * (RFC 9110 §5.5) and are already removed by Node's parser; inner ones are refused.
 *
 * Tokens are compared by {@link secretEquals}: SHA-256 of both, then `timingSafeEqual` on the
 * equal-length digests, so neither the content nor the length of the secret leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const BEARER = /^[Bb][Ee][Aa][Rr][Ee][Rr] ([\x21-\x7e]+)$/;

/** Every value of the `Authorization` header in Node's `rawHeaders` (name/value pairs), in order. */
export function authorizationValues(rawHeaders: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2)
    if (rawHeaders[i]?.toLowerCase() === 'authorization') out.push(rawHeaders[i + 1] ?? '');
  return out;
}

/**
 * The token of the request's `Authorization` header when it is exactly one `Bearer <token>`;
 * undefined for a missing, repeated or malformed header. `values`: every copy of the header.
 */
export function bearerToken(values: readonly string[]): string | undefined {
  if (values.length !== 1) return undefined;
  return BEARER.exec(values[0] ?? '')?.[1];
}

/** Constant-time equality of two secrets (SHA-256 digests compared with `timingSafeEqual`). */
export function secretEquals(got: string, want: string): boolean {
  const a = createHash('sha256').update(got, 'utf8').digest();
  const b = createHash('sha256').update(want, 'utf8').digest();
  return timingSafeEqual(a, b);
}
