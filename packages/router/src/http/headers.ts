/**
 * The one hop-by-hop header filter of the router, used wherever it copies headers from one HTTP
 * connection to another (inference, the MCP gateway, the egress proxy).
 *
 * Hop-by-hop headers (RFC 9110 §7.6.1, plus the legacy `keep-alive` / `proxy-connection` and the
 * RFC 2616 list) and every header named in `Connection` are connection-scoped and never copied;
 * nor are the headers only the router sets ({@link ROUTER_OWNED}).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** Headers that belong to one connection and are never forwarded. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Headers only the router sets (`x-kars-policy-digest`, `x-kars-request-id`): never copied from one
 * side to the other, so neither an agent nor an upstream can put words in the router's mouth.
 */
export const ROUTER_OWNED: ReadonlySet<string> = new Set(['x-kars-policy-digest', 'x-kars-request-id']);

const NONE: ReadonlySet<string> = new Set();

/** Header names listed in a `Connection` value (lower case); none for the common `keep-alive` / `close`. */
function connectionTokens(v: string | string[] | undefined): string[] {
  if (v === undefined || v === 'keep-alive' || v === 'close') return [];
  const out: string[] = [];
  for (const part of typeof v === 'string' ? [v] : v) for (const t of part.split(',')) out.push(t.trim().toLowerCase());
  return out;
}

/**
 * The end-to-end headers of `h`: without hop-by-hop headers, without the headers its `Connection`
 * names, and without the (lower-case) names in `skip` (headers the caller recomputes). Header names
 * in `h` are lower case, as node:http and undici deliver them.
 */
export function endToEndHeaders(
  h: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  skip: ReadonlySet<string> = NONE,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const k in h) {
    if (HOP_BY_HOP.has(k) || skip.has(k) || ROUTER_OWNED.has(k)) continue;
    const v = h[k];
    if (v !== undefined) out[k] = v;
  }
  for (const t of connectionTokens(h['connection'])) if (!skip.has(t)) delete out[t];
  return out;
}
