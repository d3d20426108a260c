import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { baselineAllowlist, canonicalHosts, mergedAllowlist, rfc3339Seconds } from './egress.js';
import { approvalFile } from './kinds/egress-approval.js';
import { canonicalDigest } from './digest.js';

describe('mergedAllowlist', () => {
  it('matches the contract golden vector: example.com:443 with an empty baseline', () => {
    const m = mergedAllowlist([], [[{ host: 'example.com', port: 443 }]]);
    assert.equal(m.body, '{"schemaVersion":1,"endpoints":[{"host":"example.com","port":443}]}');
    assert.equal(m.digest, 'sha256:fe6cf9580a22eaacff45a3c8d3bb06f5f635b34c5981558b4587524c45e9c8a5');
  });

  it('gives the golden digest too when the port is omitted and the host is upper case', () => {
    assert.equal(
      mergedAllowlist([], [[{ host: 'EXAMPLE.com' }]]).digest,
      'sha256:fe6cf9580a22eaacff45a3c8d3bb06f5f635b34c5981558b4587524c45e9c8a5',
    );
  });

  it('covers baseline ∪ every approval: two approvals for one sandbox give a digest over both', () => {
    const baseline = [{ host: 'api.github.com' }];
    const a = [{ host: 'pypi.org' }];
    const b = [{ host: 'files.pythonhosted.org', port: 8443 }];
    const both = mergedAllowlist(baseline, [a, b]);
    assert.equal(
      both.body,
      '{"schemaVersion":1,"endpoints":[{"host":"api.github.com","port":443},{"host":"files.pythonhosted.org","port":8443},{"host":"pypi.org","port":443}]}',
    );
    assert.equal(both.digest, canonicalDigest('merged-allowlist.json', both.body));
    assert.notEqual(both.digest, mergedAllowlist(baseline, [a]).digest);
    assert.notEqual(both.digest, mergedAllowlist(baseline, [b]).digest);
    assert.equal(both.digest, mergedAllowlist(b, [a, baseline]).digest, 'the digest depends on the set, not on who contributed it');
  });

  it('does not change when an approval repeats a baseline host', () => {
    const baseline = [{ host: 'api.github.com', port: 443 }];
    assert.equal(mergedAllowlist(baseline, [[{ host: 'API.github.com' }]]).digest, mergedAllowlist(baseline, []).digest);
  });

  it('hashes an empty endpoint list when there is neither baseline nor approval', () => {
    const m = mergedAllowlist([], []);
    assert.equal(m.body, '{"schemaVersion":1,"endpoints":[]}');
  });
});

describe('baselineAllowlist', () => {
  it('uses the allowlist.json domain separator, so its digest differs from the merged one for the same hosts', () => {
    const hosts = [{ host: 'example.com' }];
    const base = baselineAllowlist(hosts);
    assert.equal(base.body, mergedAllowlist(hosts, []).body);
    assert.equal(base.digest, canonicalDigest('allowlist.json', base.body));
    assert.notEqual(base.digest, mergedAllowlist(hosts, []).digest);
  });
});

describe('canonicalHosts', () => {
  it('lowercases, defaults the port to 443, sorts by (host, port) and removes duplicates', () => {
    assert.deepEqual(
      canonicalHosts([
        { host: 'Z.example.com' },
        { host: 'a.example.com', port: 8443 },
        { host: 'A.EXAMPLE.COM', port: 80 },
        { host: 'a.example.com', port: 443 },
        { host: 'a.example.com' },
        { host: 'z.example.com', port: 443 },
      ]),
      [
        { host: 'a.example.com', port: 80 },
        { host: 'a.example.com', port: 443 },
        { host: 'a.example.com', port: 8443 },
        { host: 'z.example.com', port: 443 },
      ],
    );
  });

  it('sorts ports numerically, not as strings', () => {
    assert.deepEqual(
      canonicalHosts([
        { host: 'h', port: 10000 },
        { host: 'h', port: 9 },
      ]).map((e) => e.port),
      [9, 10000],
    );
  });

  it('trims hosts and drops blank ones, as the reference compiler does', () => {
    assert.deepEqual(canonicalHosts([{ host: '  ' }, { host: ' real.example ' }]), [{ host: 'real.example', port: 443 }]);
  });

  it('lowercases ASCII only and sorts by UTF-8 bytes', () => {
    // U+00C9 (É) keeps its case (Rust to_ascii_lowercase).
    assert.deepEqual(
      canonicalHosts([{ host: 'Éa' }, { host: 'Z' }]).map((e) => e.host),
      ['z', 'Éa'],
    );
    // U+FF21 (UTF-8 EF BC A1) sorts before U+1F600 (F0 9F 98 80) by bytes, though not by UTF-16 units.
    assert.deepEqual(
      canonicalHosts([{ host: '\u{1F600}' }, { host: '\uFF21' }]).map((e) => e.host),
      ['\uFF21', '\u{1F600}'],
    );
  });
});

describe('approvalFile', () => {
  const approval = {
    metadata: { name: 'inc-1' },
    spec: { sandbox: 'demo', hosts: [{ host: 'PyPI.org' }, { host: 'a.example', port: 80 }], reason: 'install deps' },
  };

  it('omits ticket when unset and keeps the contract key order', () => {
    const f = approvalFile(approval, '2026-05-14T18:30:00Z', '2026-05-14T22:30:00Z');
    assert.equal(f.key, 'approval-inc-1.json');
    assert.equal(
      f.body,
      '{"schemaVersion":1,"approvalName":"inc-1","sandbox":"demo","hosts":[{"host":"a.example","port":80},{"host":"pypi.org","port":443}],"reason":"install deps","effectiveAt":"2026-05-14T18:30:00Z","expiresAt":"2026-05-14T22:30:00Z"}',
    );
    assert.equal('ticket' in (JSON.parse(f.body) as object), false);
  });

  it('writes ticket between reason and effectiveAt when set', () => {
    const f = approvalFile({ ...approval, spec: { ...approval.spec, ticket: 'INC-1' } }, 't0', 't1');
    assert.deepEqual(Object.keys(JSON.parse(f.body) as object), [
      'schemaVersion',
      'approvalName',
      'sandbox',
      'hosts',
      'reason',
      'ticket',
      'effectiveAt',
      'expiresAt',
    ]);
  });
});

describe('rfc3339Seconds', () => {
  it('formats whole seconds with Z (20 characters), truncating milliseconds', () => {
    assert.equal(rfc3339Seconds(Date.UTC(2026, 4, 14, 18, 30, 0, 999)), '2026-05-14T18:30:00Z');
  });
});
