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
 * - Hosts are compared in canonical form (`@kars/policy-api` `canonicalHost`): every `inet_aton`
 *   spelling of an IPv4 address (`2130706433`, `0x7f.1`, `0177.0.0.1`) and its IPv4-mapped IPv6
 *   form are the dotted quad, so no spelling reaches an address the list does not name.
 * - An **approval** entry whose host is a too-wide wildcard (`*`, `*.com`, `*.co.uk`), a special
 *   address literal (loopback, private, link-local such as 169.254.169.254, in any spelling) or a
 *   special name (`localhost`, metadata names) is ignored unless the baseline lists that host: the
 *   one egress rule (`@kars/policy-api` `approvalHostProblem`, ADR 0045), which the controller
 *   applies too, so an approval the router ignores is never Active. The addresses a name resolves
 *   to are checked by the proxy (`resolvedAddressProblem`, the same rule's connect-time half).
 *
 * Guarantees: pure, no I/O; the first matching entry is returned (baseline entries first when the
 * loader puts them first).
 */
import { isIP } from 'node:net';
import { approvalHostProblem, canonicalHost, resolvedAddressProblem } from '@kars/policy-api';
import type { EgressEntry } from '../snapshot.js';

export type EgressVerdict = { allowed: true; entry: EgressEntry } | { allowed: false };

/** Canonical form of a host for comparison: lowercase, no IPv6 brackets, no trailing dot. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.') && h.length > 1) h = h.slice(0, -1);
  return h;
}

/** The canonical spelling of a host for comparison (see the module comment). */
export function canonicalSpelling(host: string): string {
  return canonicalHost(host)?.host ?? normalizeHost(host);
}

function hostMatches(entryHost: string, host: string): boolean {
  const e = canonicalSpelling(entryHost);
  if (e.startsWith('*.')) {
    const suffix = e.slice(1); // ".example.com"
    return suffix.length > 1 && host.length > suffix.length && host.endsWith(suffix);
  }
  return e === host;
}

const effectiveCache = new WeakMap<readonly EgressEntry[], readonly EgressEntry[]>();

/** The entries that count: every baseline entry, and approval entries whose host an approval may open. */
export function effectiveEntries(entries: readonly EgressEntry[]): readonly EgressEntry[] {
  const hit = effectiveCache.get(entries);
  if (hit !== undefined) return hit;
  const baseline = entries.filter((e) => e.approval === undefined).map((e) => e.host);
  const out = entries.filter((e) => e.approval === undefined || approvalHostProblem(e.host, baseline) === undefined);
  effectiveCache.set(entries, out);
  return out;
}

export function isAllowed(entries: readonly EgressEntry[], host: string, port: number, nowMs: number): EgressVerdict {
  const h = canonicalSpelling(host);
  if (h === '') return { allowed: false };
  for (const entry of effectiveEntries(entries)) {
    if (entry.port !== port) continue;
    // `!(x > now)` also refuses a NaN expiry
    if (entry.expiresAtMs !== undefined && !(entry.expiresAtMs > nowMs)) continue;
    if (hostMatches(entry.host, h)) return { allowed: true, entry };
  }
  return { allowed: false };
}

/**
 * Which address the proxy connects to for an admitted `host` (ADR 0014, ADR 0045): an address
 * literal is itself; for a name, the first of `addresses` (the resolver's answer, in its order)
 * that the one egress rule's connect-time half (`resolvedAddressProblem`) accepts. `admittedBy` is
 * the entry {@link isAllowed} returned. `why` lists each refused address's reason.
 */
export function pickAddress(
  entries: readonly EgressEntry[],
  host: string,
  admittedBy: EgressEntry,
  addresses: ReadonlyArray<{ address: string }>,
): { ok: true; address: string } | { ok: false; why: string[] } {
  if (isIP(host) !== 0) return { ok: true, address: host };
  const baselineHosts = entries.filter((e) => e.approval === undefined).map((e) => e.host);
  const why: string[] = [];
  for (const a of addresses) {
    const problem = resolvedAddressProblem(host, a.address, { admittedByBaseline: admittedBy.approval === undefined, baselineHosts });
    if (problem === undefined) return { ok: true, address: a.address };
    why.push(problem);
  }
  return { ok: false, why };
}
