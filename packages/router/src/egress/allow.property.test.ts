/**
 * Property (issue 9 item 8): no input admits a host outside baseline ∪ active approvals.
 *
 * Entries are drawn from a small pool of hosts (names, wildcards, IPv4 and IPv6 literals, special
 * addresses) with random ports and expiries; targets are drawn from the same pool in other
 * spellings (case, trailing dot, decimal/hex IPv4, IPv4-mapped IPv6, brackets). Whenever
 * `isAllowed` admits a target, an independent oracle must find an entry that is baseline or an
 * active approval for a host an approval may open, on that port, naming the same address or name.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { approvalHostProblem } from '@kars/policy-api';
import type { EgressEntry } from '../snapshot.js';
import { isAllowed } from './allow.js';

const POOL = [
  'api.example.com',
  'Example.COM',
  '*.example.com',
  '*.com',
  '*',
  '8.8.8.8',
  '169.254.169.254',
  '127.0.0.1',
  '10.0.0.1',
  '::1',
  '2606:4700::1111',
  'localhost',
];

/** Independent spellings: [what the oracle compares, how the target is written]. */
function spellings(h: string): Array<[string, string]> {
  const lower = h.toLowerCase();
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(lower);
  if (m) {
    const [a, b, c, d] = m.slice(1).map(Number) as [number, number, number, number];
    const v = ((a * 256 + b) * 256 + c) * 256 + d;
    return [
      [lower, lower],
      [lower, String(v)],
      [lower, `0x${v.toString(16)}`],
      [lower, `::ffff:${lower}`],
      [lower, `[::ffff:${lower}]`],
    ];
  }
  if (lower.includes(':'))
    return [
      [lower, lower],
      [lower, `[${lower}]`],
      [lower, lower.toUpperCase()],
    ];
  if (lower.startsWith('*'))
    return [
      [`sub.${lower.slice(2)}`, `sub.${lower.slice(2)}`],
      [`sub.${lower.slice(2)}`, `SUB.${lower.slice(2)}.`],
    ];
  return [
    [lower, lower],
    [lower, `${lower.toUpperCase()}.`],
  ];
}

function oracle(entries: readonly EgressEntry[], canonical: string, port: number, now: number): boolean {
  const baseline = entries.filter((e) => e.approval === undefined).map((e) => e.host);
  return entries.some((e) => {
    if (e.port !== port) return false;
    if (e.approval !== undefined) {
      if (!(e.expiresAtMs !== undefined && e.expiresAtMs > now)) return false;
      // The one egress rule (ADR 0045): names, literals and wildcards alike.
      if (approvalHostProblem(e.host, baseline) !== undefined) return false;
    }
    const eh = e.host.toLowerCase();
    if (eh.startsWith('*.')) return canonical.endsWith(eh.slice(1)) && canonical.length > eh.length - 1;
    return eh === canonical || (eh === '::1' && canonical === '::1');
  });
}

const entry: fc.Arbitrary<EgressEntry> = fc
  .record({
    host: fc.constantFrom(...POOL),
    port: fc.constantFrom(80, 443),
    approval: fc.option(fc.constant('a'), { nil: undefined }),
    expiresAtMs: fc.option(fc.integer({ min: 0, max: 2000 }), { nil: undefined }),
  })
  .map((e) => {
    const out: EgressEntry = { host: e.host, port: e.port };
    if (e.approval !== undefined) {
      out.approval = e.approval;
      out.expiresAtMs = e.expiresAtMs ?? 0;
    }
    return out;
  });

describe('isAllowed (property)', () => {
  it('no input admits a host outside baseline ∪ active approvals', () => {
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 6 }),
        fc.constantFrom(...POOL),
        fc.nat(10),
        fc.constantFrom(80, 443),
        fc.integer({ min: 0, max: 2000 }),
        (entries, target, pick, port, now) => {
          const forms = spellings(target);
          const [canonical, written] = forms[pick % forms.length]!;
          if (isAllowed(entries, written, port, now).allowed) {
            assert.ok(oracle(entries, canonical, port, now), `${written}:${port} admitted at ${now} by ${JSON.stringify(entries)}`);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });
});
