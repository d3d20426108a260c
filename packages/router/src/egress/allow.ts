/**
 * Is `host:port` in the sandbox's egress allowlist (baseline ∪ active approvals) right now?
 *
 * Matching:
 * - Hosts compare case-insensitively and exactly, after removing one trailing dot
 *   (`Example.COM.` equals `example.com`) and the brackets of an IPv6 literal (`[::1]` equals `::1`).
 *   No DNS resolution: `localhost` and `127.0.0.1` are different hosts.
 * - An entry host starting with `*.` matches any host strictly below that domain, at any depth:
 *   `*.example.com` matches `api.example.com` and `a.b.example.com`, not `example.com` itself.
 *   No other wildcard form exists; a `*` anywhere else is a literal character that no valid host has.
 * - Ports compare exactly.
 * - An entry whose `expiresAtMs <= nowMs` (or is NaN) does not count, whatever the loader thinks
 *   (defence in depth); an entry without `expiresAtMs` (the baseline) never expires.
 * - An empty list allows nothing (fail closed).
 *
 * Guarantees: pure, no I/O; the first matching entry is returned (baseline entries first when the
 * loader puts them first).
 */
import type { EgressEntry } from '../snapshot.js';

export type EgressVerdict = { allowed: true; entry: EgressEntry } | { allowed: false };

/** Canonical form of a host for comparison: lowercase, no IPv6 brackets, no trailing dot. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.') && h.length > 1) h = h.slice(0, -1);
  return h;
}

function hostMatches(entryHost: string, host: string): boolean {
  const e = normalizeHost(entryHost);
  if (e.startsWith('*.')) {
    const suffix = e.slice(1); // ".example.com"
    return suffix.length > 1 && host.length > suffix.length && host.endsWith(suffix);
  }
  return e === host;
}

export function isAllowed(entries: readonly EgressEntry[], host: string, port: number, nowMs: number): EgressVerdict {
  const h = normalizeHost(host);
  if (h === '') return { allowed: false };
  for (const entry of entries) {
    if (entry.port !== port) continue;
    // `!(x > now)` also refuses a NaN expiry
    if (entry.expiresAtMs !== undefined && !(entry.expiresAtMs > nowMs)) continue;
    if (hostMatches(entry.host, h)) return { allowed: true, entry };
  }
  return { allowed: false };
}
