import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FakeClock } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { compareResourceVersions, OwnWrites } from './own-writes.js';

const at = (resourceVersion: string): KubeObject => ({ apiVersion: 'v1', kind: 'X', metadata: { name: 'a', resourceVersion } });

describe('compareResourceVersions', () => {
  it('orders decimal integers by value and leaves anything else unordered', () => {
    assert.equal(compareResourceVersions('9', '10'), -1, 'by value, not as strings');
    assert.equal(compareResourceVersions('10', '9'), 1);
    assert.equal(compareResourceVersions('42', '42'), 0);
    assert.equal(compareResourceVersions('abc', 'abc'), 0, 'equal opaque versions are equal');
    for (const odd of ['', ' 1', '1e3', '0x10', '-1', '1.5', 'abc', '9999999999999999999'])
      assert.equal(compareResourceVersions(odd, '5'), undefined, JSON.stringify(odd));
    assert.equal(compareResourceVersions(undefined, '5'), undefined);
  });

  it('property: agrees with the numeric order of safe integers', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 999_999_999_999_999 }), fc.integer({ min: 0, max: 999_999_999_999_999 }), (a, b) => {
        assert.equal(compareResourceVersions(String(a), String(b)), Math.sign(a - b) + 0);
      }),
    );
  });
});

describe('OwnWrites', () => {
  it('holds a key back while its cached copy predates our write, and releases it once the write is seen', () => {
    const clock = new FakeClock();
    const w = new OwnWrites({ clock, ttlMs: 10_000 });
    assert.equal(w.waitMs('k', at('5')), undefined, 'nothing recorded: go on');
    w.wrote('k', '5', at('6'));
    w.wrote('k', '5', at('7')); // a second write of the same reconcile, made from the same cached copy
    clock.advance(4000);
    assert.equal(w.waitMs('k', at('5')), 6000, 'the copy we wrote from');
    assert.equal(w.waitMs('k', at('6')), 6000, 'older than our newest write');
    assert.equal(w.size, 1);
    assert.equal(w.waitMs('k', at('7')), undefined, 'our newest write is in the cache');
    assert.equal(w.size, 0, 'and the record is gone');
    assert.equal(w.waitMs('k', at('5')), undefined, 'a released key is not held again without a new write');
  });

  it('a newer copy written by someone else releases the key at once', () => {
    const w = new OwnWrites({ clock: new FakeClock() });
    w.wrote('k', '5', at('6'));
    assert.equal(w.waitMs('k', at('8')), undefined);
  });

  it('a write the server answered with the same version (it changed nothing) holds nothing back', () => {
    const w = new OwnWrites({ clock: new FakeClock() });
    w.wrote('k', '5', at('5'));
    w.wrote('k', '5', undefined);
    w.wrote('k', '5', { apiVersion: 'v1', kind: 'X', metadata: {} });
    assert.equal(w.size, 0);
    assert.equal(w.waitMs('k', at('5')), undefined);
  });

  it('a 409 marks the copy it was made from as outdated until the watch brings a different one', () => {
    const w = new OwnWrites({ clock: new FakeClock(), ttlMs: 1000 });
    w.conflicted('k', '5');
    assert.equal(w.waitMs('k', at('5')), 1000);
    assert.equal(w.waitMs('k', at('9')), undefined);
  });

  it('never holds a key past the TTL after its last record', () => {
    const clock = new FakeClock();
    const w = new OwnWrites({ clock, ttlMs: 1000 });
    w.wrote('k', '5', at('6'));
    clock.advance(999);
    assert.equal(w.waitMs('k', at('5')), 1);
    clock.advance(1);
    assert.equal(w.waitMs('k', at('5')), undefined, 'expired');
    assert.equal(w.size, 0);
  });

  it('with opaque resourceVersions, holds back only the copies a write proved outdated', () => {
    const w = new OwnWrites({ clock: new FakeClock() });
    w.wrote('k', 'a', at('b'));
    assert.ok(w.waitMs('k', at('a')) !== undefined);
    assert.equal(w.waitMs('k', at('c')), undefined, 'unordered: cannot tell, so go on');
  });

  it('keys are independent, and forget drops a key', () => {
    const w = new OwnWrites({ clock: new FakeClock() });
    w.wrote('k', '5', at('6'));
    w.wrote('j', '1', at('2'));
    assert.equal(w.waitMs('other', at('1')), undefined);
    w.forget('k');
    assert.equal(w.waitMs('k', at('5')), undefined);
    assert.ok(w.waitMs('j', at('1')) !== undefined);
  });

  it('rejects a TTL that is negative or not finite', () => {
    assert.throws(() => new OwnWrites({ ttlMs: -1 }), RangeError);
    assert.throws(() => new OwnWrites({ ttlMs: Infinity }), RangeError);
    assert.throws(() => new OwnWrites({ ttlMs: NaN }), RangeError);
  });
});
