import { badRequest, isObject } from '@kars/kube-core';
import type { ApiError } from '@kars/kube-core';
import { scanGoJson } from './http/go-json.js';

/**
 * List continue tokens: base64url (unpadded) JSON naming the revision of the list and the last key
 * it returned. A token that cannot be read is refused as kube-apiserver's DecodeContinue refuses
 * it: `invalid continue token: continue key is not valid: <Go's base64 or JSON error>`.
 *
 * Caveats: kars's JSON fields (`rv`, `ns`, `name`) are not kube's (`v`, `rv`, `start`); a token of
 * valid JSON in another shape is refused as kube refuses a version it does not recognize.
 */

/** Where a list resumes: the revision it reads and the key after which it continues. */
export interface ContinueKey {
  rv: number;
  ns: string;
  name: string;
}

const INVALID = 'invalid continue token: continue key is not valid';

/** The token of a list that continues after `key` at revision `rv`. */
export function encodeContinue(k: ContinueKey): string {
  return Buffer.from(JSON.stringify({ rv: k.rv, ns: k.ns, name: k.name }), 'utf8').toString('base64url');
}

/** The key a continue token names; a malformed token is refused with kube's 400. */
export function decodeContinue(token: string): ContinueKey {
  const bad = (why: string): ApiError => badRequest(`${INVALID}: ${why}`);
  const at = base64Error(token);
  if (at !== undefined) throw bad(`illegal base64 data at input byte ${at}`);
  const bytes = Buffer.from(token.replace(/[\r\n]/g, ''), 'base64url');
  const scan = scanGoJson(bytes);
  if (scan.error !== undefined) throw bad(scan.error);
  const tok = JSON.parse(bytes.toString('utf8')) as unknown;
  if (tok !== null && !isObject(tok))
    throw bad(
      `json: cannot unmarshal ${Array.isArray(tok) ? 'array' : typeof tok === 'boolean' ? 'bool' : typeof tok} into Go value of type storage.continueToken`,
    );
  const t = (tok ?? {}) as Record<string, unknown>;
  if (typeof t['rv'] !== 'number' || typeof t['ns'] !== 'string' || typeof t['name'] !== 'string')
    throw bad(`server does not recognize this encoded version ${typeof t['v'] === 'string' ? t['v'] : ''}`);
  return { rv: t['rv'], ns: t['ns'], name: t['name'] };
}

/** Where Go's base64.RawURLEncoding refuses `s` (the byte offset it reports), or undefined when it decodes. */
function base64Error(s: string): number | undefined {
  let n = 0;
  let last = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x0a || c === 0x0d) continue;
    const ok = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f;
    // Go reports the offset in bytes; a character beyond ASCII starts at its first UTF-8 byte.
    if (!ok) return Buffer.byteLength(s.slice(0, i), 'utf8');
    n++;
    last = i;
  }
  // A last group of one character holds no whole byte.
  return n % 4 === 1 ? Buffer.byteLength(s.slice(0, last), 'utf8') : undefined;
}
