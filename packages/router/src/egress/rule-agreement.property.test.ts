/**
 * Property (issue 22 item 3, ADR 0045): the controller and the router apply one egress rule. For a
 * random sandbox baseline and a random approval host, each drawn from special and ordinary hosts in
 * hostile spellings (case, trailing dot, every inet_aton IPv4 form, IPv4-mapped and expanded IPv6,
 * brackets, full-width letters, soft hyphens, zone ids), the controller's verdict
 * (`validateEgressApprovalSpec` with the baseline: no cause means the approval may go Active) equals
 * the router's: the approval compiled to its ConfigMap file (policy-compiler), read back as the
 * router reads it (`egressOutcome`), the target as a client sends it through `parseAuthority`,
 * admitted by `isAllowed` and given an address by `pickAddress` (the proxy's two decisions).
 *
 * Names resolve through a fake resolver as DNS would answer them: special names (localhost,
 * metadata) to special addresses, ordinary names to a public address. The one case the status
 * cannot foresee, an ordinary name that DNS points at a special address, is `proxy.test.ts`'s
 * egress_special_address case.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatHostPort } from '@kars/kube-core';
import { canonicalHost, specialHostReason, validateEgressApprovalSpec } from '@kars/policy-api';
import { approvalFile, egressOutcome } from '@kars/policy-compiler/runtime';
import { isAllowed, pickAddress } from './allow.js';
import { parseAuthority } from './proxy.js';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const BASELINE_PORT = 1;

/** Spellings of one IPv4 address that `inet_aton` (and so the resolver) reads as it. */
function v4Spellings(v: number): string[] {
  const b = [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255];
  const hex = (n: number): string => `0x${n.toString(16)}`;
  const oct = (n: number): string => `0${n.toString(8)}`;
  return [
    b.join('.'),
    String(v),
    hex(v),
    b.map(hex).join('.'),
    b.map(oct).join('.'),
    `${b[0]}.${(v & 0xffffff) >>> 0}`,
    `${b[0]}.${b[1]}.${v & 0xffff}`,
    `::ffff:${b.join('.')}`,
    `::FFFF:${((v >>> 16) & 0xffff).toString(16)}:${(v & 0xffff).toString(16)}`,
    `0:0:0:0:0:ffff:${b.join('.')}`,
  ];
}

const V4 = ['127.0.0.1', '10.1.2.3', '169.254.169.254', '192.168.0.10', '100.64.0.1', '0.0.0.0', '8.8.8.8', '93.184.216.34'].map((s) =>
  s.split('.').reduce((a, x) => a * 256 + Number(x), 0),
);
const V6 = [
  ['::1', '0:0:0:0:0:0:0:1', '0::1', '::0:1'],
  ['fe80::1', 'FE80:0:0:0:0:0:0:1', 'fe80::0001'],
  ['fd00:ec2::254', 'FD00:EC2:0:0:0:0:0:254'],
  ['2606:4700::1111', '2606:4700:0:0:0:0:0:1111', '2606:4700::1111'.toUpperCase()],
  ['64:ff9b::a9fe:a9fe', '64:ff9b::169.254.169.254'],
];
const NAMES = ['localhost', 'x.localhost', 'metadata.google.internal', 'metadata', 'api.example.com', 'example.org', 'instance-data'];

/** Name spellings the resolver (IDNA, case folding) reads as the same name. */
function nameSpellings(n: string): string[] {
  const fullWidth = [...n].map((c) => (/[a-z]/.test(c) ? String.fromCharCode(c.charCodeAt(0) - 0x61 + 0xff41) : c)).join('');
  return [n, n.toUpperCase(), `${n}.`, fullWidth, `${n.slice(0, 1)}\u00ad${n.slice(1)}`, `${n.slice(0, 1).toUpperCase()}${n.slice(1)}.`];
}

/** The spellings of one host: IPv4, IPv6, a name, a wildcard, or something that is not a host. */
const GROUPS: string[][] = [
  ...V4.map(v4Spellings),
  ...V6,
  ...NAMES.map(nameSpellings),
  ...['*.example.com', '*.com', '*', '*.localhost', 'fe80::1%eth0', 'a..b'].map((w) => [w]),
];
const group: fc.Arbitrary<string[]> = fc.constantFrom(...GROUPS);
/** A host in one of its spellings. */
const host: fc.Arbitrary<string> = group.chain((g) => fc.constantFrom(...g));
/** An approval host, and a baseline that half the time lists that same host in some spelling. */
const scenario = group.chain((g) =>
  fc.record({
    approvalHost: fc.constantFrom(...g),
    baseline: fc
      .tuple(fc.array(host, { maxLength: 3 }), fc.option(fc.constantFrom(...g), { nil: undefined }))
      .map(([rest, same]) => (same === undefined ? rest : [...rest, same])),
    port: fc.integer({ min: 2, max: 65535 }),
  }),
);

/** The fake resolver: special names to special addresses, ordinary names to a public one. */
function resolveFake(name: string): Array<{ address: string }> {
  if (specialHostReason(name) === undefined) return [{ address: '93.184.216.34' }];
  return name.startsWith('metadata') || name.startsWith('instance-data') ? [{ address: '169.254.169.254' }] : [{ address: '127.0.0.1' }];
}

/** What a client would send for `approvalHost`: its canonical spelling (the proxy refuses the raw Unicode). */
function targetFor(approvalHost: string): string | undefined {
  const c = canonicalHost(approvalHost);
  if (c === undefined) return undefined;
  return c.kind === 'wildcard' ? `sub.${c.base}` : c.host;
}

/** The router's verdict on `approvalHost:port`, given the approval written as the controller would write it. */
function routerAdmits(baseline: readonly string[], approvalHost: string, port: number): boolean {
  const spec = { sandbox: 'sb', hosts: [{ host: approvalHost, port }], reason: 'r', ttl: 'PT1H' };
  const file = approvalFile({ metadata: { name: 'ea' }, spec }, new Date(NOW).toISOString(), new Date(NOW + 3_600_000).toISOString());
  const { outcome } = egressOutcome(
    baseline.map((h) => ({ host: h, port: BASELINE_PORT })),
    { [file.key]: file.body },
    NOW,
    'test',
  );
  assert.equal(outcome.kind, 'loaded');
  if (outcome.kind !== 'loaded') return false;
  const entries = [...outcome.value.baseline, ...outcome.value.approvals];
  const t = targetFor(approvalHost);
  if (t === undefined) return false;
  const target = parseAuthority(formatHostPort(t, port));
  if (target === undefined) return false;
  const v = isAllowed(entries, target.host, target.port, NOW);
  return v.allowed && pickAddress(entries, target.host, v.entry, resolveFake(target.host)).ok;
}

function controllerAccepts(baseline: readonly string[], approvalHost: string, port: number): boolean {
  const spec = { sandbox: 'sb', hosts: [{ host: approvalHost, port }], reason: 'r', ttl: 'PT1H' };
  return validateEgressApprovalSpec(spec, { baseline: baseline.map((h) => ({ host: h, port: BASELINE_PORT })) }).length === 0;
}

describe('one egress rule: the controller accepts an approval exactly when the router admits it (ADR 0045)', () => {
  it('property: for random baselines and approval hosts in hostile spellings, both verdicts agree', () => {
    fc.assert(
      fc.property(scenario, ({ baseline, approvalHost, port }) => {
        const c = controllerAccepts(baseline, approvalHost, port);
        const r = routerAdmits(baseline, approvalHost, port);
        assert.equal(
          r,
          c,
          `baseline ${JSON.stringify(baseline)}, approval ${JSON.stringify(approvalHost)}:${port}: controller ${c}, router ${r}`,
        );
      }),
      { numRuns: 1000 },
    );
  });

  it("the issue's case, and each direction of it, in every spelling of localhost", () => {
    for (const spelled of nameSpellings('localhost')) {
      assert.equal(controllerAccepts(['localhost'], spelled, 8080), true, spelled);
      assert.equal(routerAdmits(['localhost'], spelled, 8080), true, spelled);
      assert.equal(controllerAccepts(['127.0.0.1'], spelled, 8080), false, spelled);
      assert.equal(routerAdmits(['127.0.0.1'], spelled, 8080), false, spelled);
    }
    for (const spelled of v4Spellings(0x7f000001)) {
      assert.equal(controllerAccepts(['localhost'], spelled, 8080), false, spelled);
      assert.equal(routerAdmits(['localhost'], spelled, 8080), false, spelled);
      assert.equal(controllerAccepts(['127.0.0.1'], spelled, 8080), true, spelled);
      assert.equal(routerAdmits(['127.0.0.1'], spelled, 8080), true, spelled);
    }
  });
});
