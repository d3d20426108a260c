import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { approvalHostProblem, canonicalHost, parseIpv4Loose, resolvedAddressProblem, specialHostReason } from './egress-host.js';
import { validateEgressApprovalSpec } from './validate.js';

describe('egress hosts an approval may open (issue 9 item 5)', () => {
  it('reads every inet_aton spelling of IPv4 and IPv4-mapped IPv6 as the dotted quad', () => {
    for (const s of [
      '169.254.169.254',
      '2852039166',
      '0xa9fea9fe',
      '0xa9.0xfe.0xa9.0xfe',
      '0251.0376.0251.0376',
      '169.254.43518',
      '169.16689662',
      '::ffff:169.254.169.254',
      '[::FFFF:a9fe:a9fe]',
      '169.254.169.254.',
    ]) {
      assert.equal(canonicalHost(s)?.host, '169.254.169.254', s);
    }
    assert.equal(canonicalHost('127.1')?.host, '127.0.0.1');
    assert.equal(canonicalHost('[0:0:0:0:0:0:0:1]')?.host, '::1');
    assert.equal(parseIpv4Loose('256.1.1.1'), undefined);
    assert.equal(parseIpv4Loose('1.2.3.4.5'), undefined);
    assert.equal(canonicalHost('api.example.com')?.kind, 'name');
  });

  it('refuses wildcards wider than one label over a registrable domain, and special addresses and names', () => {
    for (const h of [
      '*',
      '*.com',
      '*.co.uk',
      '*.localhost',
      'api.*.com',
      '*foo.com',
      '169.254.169.254',
      '2852039166',
      '::ffff:169.254.169.254',
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      '64:ff9b::a9fe:a9fe',
      '2002:a9fe:a9fe::1',
      'localhost',
      'x.localhost',
      'metadata.google.internal',
    ]) {
      assert.ok(approvalHostProblem(h) !== undefined, h);
    }
    for (const h of ['*.example.com', 'api.github.com', '8.8.8.8', '2606:4700::1111', '*.example.co.uk'])
      assert.equal(approvalHostProblem(h), undefined, h);
  });

  it('accepts a special host the baseline lists (any spelling), and only that one', () => {
    assert.equal(approvalHostProblem('10.0.0.5', ['10.0.0.5']), undefined);
    assert.equal(approvalHostProblem('0xa000005', ['10.0.0.5']), undefined);
    assert.notEqual(approvalHostProblem('10.0.0.6', ['10.0.0.5']), undefined);
  });

  it('makes validation refuse such approvals with a clear cause, unless the baseline lists the host', () => {
    const spec = {
      sandbox: 'sb',
      hosts: [{ host: '169.254.169.254', port: 80 }, { host: '*.com' }, { host: '*' }],
      ttl: 'PT1H',
      reason: 'x',
    };
    const causes = validateEgressApprovalSpec(spec, { baseline: [] });
    assert.deepEqual(
      causes.map((c) => c.field),
      ['spec.hosts[0].host', 'spec.hosts[1].host', 'spec.hosts[2].host'],
    );
    assert.match(causes[0]!.message, /link-local/);
    assert.deepEqual(
      validateEgressApprovalSpec({ ...spec, hosts: [{ host: '10.0.0.5', port: 5432 }] }, { baseline: [{ host: '10.0.0.5', port: 22 }] }),
      [],
    );
    // Without the baseline (the CLI) wildcards are still refused; addresses are left to the controller.
    assert.deepEqual(
      validateEgressApprovalSpec(spec).map((c) => c.field),
      ['spec.hosts[1].host', 'spec.hosts[2].host'],
    );
  });

  it('property: any spelling of a special IPv4 address is special', () => {
    const special = fc.oneof(
      fc.tuple(fc.constant(127), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(10), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(169), fc.constant(254), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(192), fc.constant(168), fc.nat(255), fc.nat(255)),
    );
    fc.assert(
      fc.property(special, fc.constantFrom('dec', 'hex', 'oct', 'int', 'mapped', 'two'), ([a, b, c, d], how) => {
        const v = ((a * 256 + b) * 256 + c) * 256 + d;
        const s =
          how === 'dec'
            ? `${a}.${b}.${c}.${d}`
            : how === 'hex'
              ? [a, b, c, d].map((x) => `0x${x.toString(16)}`).join('.')
              : how === 'oct'
                ? [a, b, c, d].map((x) => `0${x.toString(8)}`).join('.')
                : how === 'int'
                  ? String(v)
                  : how === 'two'
                    ? `${a}.${b * 65536 + c * 256 + d}`
                    : `::ffff:${a}.${b}.${c}.${d}`;
        assert.ok(specialHostReason(s) !== undefined, s);
        assert.equal(canonicalHost(s)?.host, `${a}.${b}.${c}.${d}`, s);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads IDNA spellings of names as the resolver does, so no Unicode spelling hides a special name (ADR 0045)', () => {
    for (const [s, want] of [
      ['ＬＯＣＡＬＨＯＳＴ', 'localhost'],
      ['lo\u00adcalhost', 'localhost'],
      ['\u200blocalhost', 'localhost'],
      ['localhost\u3002', 'localhost'],
      ['LocalHost.', 'localhost'],
      ['ｍｅｔａｄａｔａ.google.internal', 'metadata.google.internal'],
    ] as const) {
      assert.equal(canonicalHost(s)?.host, want, s);
      assert.ok(specialHostReason(s) !== undefined, s);
    }
    assert.equal(canonicalHost('１２７.０.０.１')?.host, '127.0.0.1', 'full-width digits and dots are an IPv4 address');
    assert.equal(canonicalHost('bücher.de')?.host, 'xn--bcher-kva.de');
    assert.equal(canonicalHost('exa mple\u00e9.com'), undefined, 'an IDNA error is not a host');
  });

  it('refuses zone ids, empty labels and malformed wildcards whatever the baseline lists', () => {
    for (const h of ['fe80::1%eth0', '[fe80::1%25eth0]', 'a..b', 'localhost..']) {
      assert.equal(canonicalHost(h), undefined, h);
      assert.ok(approvalHostProblem(h, [h]) !== undefined, h);
    }
    for (const w of ['*', '*.com', '*.localhost', 'api.*.com']) assert.ok(approvalHostProblem(w, [w]) !== undefined, w);
  });

  it('lets a baseline listing a special name open that name, and not its address (and the other way round)', () => {
    assert.equal(approvalHostProblem('LOCALHOST.', ['localhost']), undefined);
    assert.ok(approvalHostProblem('127.0.0.1', ['localhost']) !== undefined);
    assert.ok(approvalHostProblem('localhost', ['127.0.0.1']) !== undefined);
    assert.equal(approvalHostProblem('0:0:0:0:0:0:0:1', ['::1']), undefined);
    assert.equal(approvalHostProblem('[::1]', ['0::1']), undefined);
  });

  it('resolvedAddressProblem: a special address is used only via the baseline, a baseline listing of the name, or of the address', () => {
    const no = { admittedByBaseline: false, baselineHosts: [] as string[] };
    assert.equal(resolvedAddressProblem('api.example.com', '93.184.216.34', no), undefined);
    assert.match(resolvedAddressProblem('api.example.com', '127.0.0.1', no) ?? '', /loopback/);
    assert.match(resolvedAddressProblem('api.example.com', '::ffff:169.254.169.254', no) ?? '', /link-local/);
    assert.equal(resolvedAddressProblem('api.example.com', '127.0.0.1', { ...no, admittedByBaseline: true }), undefined);
    assert.equal(resolvedAddressProblem('localhost', '127.0.0.1', { ...no, baselineHosts: ['LOCALHOST.'] }), undefined);
    assert.equal(resolvedAddressProblem('localhost', '::1', { ...no, baselineHosts: ['0::1'] }), undefined);
    assert.ok(resolvedAddressProblem('localhost', '127.0.0.1', { ...no, baselineHosts: ['example.com'] }) !== undefined);
  });

  it('property: every inet_aton spelling fast-check makes of an IPv4 address is that address, and special exactly when it is', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.ipV4Extended(), (plain, extended) => {
        for (const s of [plain, extended, `${extended}.`, `::ffff:${plain}`]) {
          const c = canonicalHost(s);
          assert.equal(c?.kind, 'ipv4', s);
          const dotted = s === extended || s === `${extended}.` ? canonicalHost(extended)?.host : plain;
          assert.equal(c?.host, dotted, s);
          assert.equal(specialHostReason(s) === undefined, specialHostReason(dotted ?? '') === undefined, s);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('property: every spelling of an IPv6 address (case, brackets, expanded) has one canonical form and one verdict', () => {
    fc.assert(
      fc.property(fc.ipV6(), (v6) => {
        const c = canonicalHost(v6);
        assert.ok(c !== undefined, v6);
        for (const s of [v6.toUpperCase(), `[${v6}]`, `[${v6.toUpperCase()}]`]) {
          assert.equal(canonicalHost(s)?.host, c.host, s);
          assert.equal(specialHostReason(s) === undefined, specialHostReason(v6) === undefined, s);
          assert.equal(approvalHostProblem(s, [v6]), undefined, `${s} with the baseline listing ${v6}`);
        }
        assert.ok(canonicalHost(`${v6}%eth0`) === undefined, 'a zone id is never a host');
      }),
      { numRuns: 2000 },
    );
  });
});
