import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EgressEntry } from '../snapshot.js';
import { isAllowed } from './allow.js';

const NOW = 1_700_000_000_000;

describe('isAllowed', () => {
  it('denies everything when the list is empty (fail closed)', () => {
    assert.deepEqual(isAllowed([], 'example.com', 443, NOW), { allowed: false });
    assert.deepEqual(isAllowed([], '127.0.0.1', 80, NOW), { allowed: false });
  });

  it('compares hosts case-insensitively and exactly, ignoring one trailing dot', () => {
    const entries: EgressEntry[] = [{ host: 'api.example.com', port: 443 }];
    assert.equal(isAllowed(entries, 'API.Example.COM', 443, NOW).allowed, true);
    assert.equal(isAllowed(entries, 'api.example.com.', 443, NOW).allowed, true);
    assert.equal(isAllowed(entries, 'example.com', 443, NOW).allowed, false);
    assert.equal(isAllowed(entries, 'x.api.example.com', 443, NOW).allowed, false);
    assert.equal(isAllowed(entries, 'api.example.com.evil.test', 443, NOW).allowed, false);
  });

  it('compares ports exactly', () => {
    const entries: EgressEntry[] = [{ host: 'example.com', port: 443 }];
    assert.equal(isAllowed(entries, 'example.com', 80, NOW).allowed, false);
    assert.equal(isAllowed(entries, 'example.com', 4430, NOW).allowed, false);
  });

  it('lets a *. entry match any host strictly below the domain, not the domain itself', () => {
    const entries: EgressEntry[] = [{ host: '*.example.com', port: 443 }];
    assert.equal(isAllowed(entries, 'a.example.com', 443, NOW).allowed, true);
    assert.equal(isAllowed(entries, 'a.b.Example.com', 443, NOW).allowed, true);
    assert.equal(isAllowed(entries, 'example.com', 443, NOW).allowed, false);
    assert.equal(isAllowed(entries, 'badexample.com', 443, NOW).allowed, false);
    assert.equal(isAllowed(entries, '.example.com', 443, NOW).allowed, false);
  });

  it('treats a * that does not start the entry as a literal', () => {
    assert.equal(isAllowed([{ host: 'a*.example.com', port: 443 }], 'ab.example.com', 443, NOW).allowed, false);
    assert.equal(isAllowed([{ host: '*', port: 443 }], 'example.com', 443, NOW).allowed, false);
  });

  it('ignores entries that have expired, up to and including the expiry instant', () => {
    const entries: EgressEntry[] = [{ host: 'example.com', port: 443, approval: 'a1', expiresAtMs: NOW }];
    assert.equal(isAllowed(entries, 'example.com', 443, NOW - 1).allowed, true);
    assert.equal(isAllowed(entries, 'example.com', 443, NOW).allowed, false);
    assert.equal(isAllowed(entries, 'example.com', 443, NOW + 1).allowed, false);
  });

  it('ignores an entry whose expiry is NaN', () => {
    assert.equal(isAllowed([{ host: 'example.com', port: 443, expiresAtMs: Number.NaN }], 'example.com', 443, NOW).allowed, false);
  });

  it('returns the first matching entry, so a baseline entry listed first wins over an approval', () => {
    const baseline: EgressEntry = { host: 'example.com', port: 443 };
    const approval: EgressEntry = { host: 'example.com', port: 443, approval: 'a1', expiresAtMs: NOW + 1000 };
    assert.deepEqual(isAllowed([baseline, approval], 'example.com', 443, NOW), { allowed: true, entry: baseline });
    assert.deepEqual(isAllowed([{ ...approval, expiresAtMs: NOW - 1 }, approval], 'example.com', 443, NOW), {
      allowed: true,
      entry: approval,
    });
  });

  it('matches IPv6 literals with or without brackets', () => {
    assert.equal(isAllowed([{ host: '[::1]', port: 8080 }], '::1', 8080, NOW).allowed, true);
    assert.equal(isAllowed([{ host: '::1', port: 8080 }], '[::1]', 8080, NOW).allowed, true);
  });

  it('denies an empty host', () => {
    assert.equal(isAllowed([{ host: '', port: 443 }], '', 443, NOW).allowed, false);
  });
});
