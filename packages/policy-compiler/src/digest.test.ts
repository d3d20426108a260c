import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { canonicalDigest, canonicalRecord, directoryDigest, versionHash } from './digest.js';

/** Build the canonical record by hand, byte by byte, without the module's helpers. */
function handRecord(nameBytes: number[], bodyBytes: number[]): Buffer {
  const len = (n: number): number[] => [0, 0, 0, 0, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
  return Buffer.from([...len(nameBytes.length), ...nameBytes, ...len(bodyBytes.length), ...bodyBytes]);
}

describe('canonicalDigest', () => {
  it('hashes u64BE(len name) ‖ name ‖ u64BE(len body) ‖ body, as computed independently from raw bytes', () => {
    const name = [...Buffer.from('inference-policy.json', 'latin1')];
    const body = [...Buffer.from('{"a":1}', 'latin1')];
    const expected = 'sha256:' + createHash('sha256').update(handRecord(name, body)).digest('hex');
    assert.equal(canonicalDigest('inference-policy.json', '{"a":1}'), expected);
    assert.equal(canonicalDigest('inference-policy.json', Buffer.from('{"a":1}')), expected);
  });

  it('counts lengths in UTF-8 bytes, not UTF-16 code units', () => {
    // "é" is one UTF-16 unit but two UTF-8 bytes (0xc3 0xa9); "€" is three bytes.
    const expected =
      'sha256:' +
      createHash('sha256')
        .update(handRecord([0xc3, 0xa9], [0xe2, 0x82, 0xac]))
        .digest('hex');
    assert.equal(canonicalDigest('é', '€'), expected);
    assert.deepEqual([...canonicalRecord('é', '€').subarray(0, 8)], [0, 0, 0, 0, 0, 0, 0, 2]);
  });

  it('separates domains: the same body under two names gives two digests', () => {
    assert.notEqual(canonicalDigest('allowlist.json', '{}'), canonicalDigest('merged-allowlist.json', '{}'));
  });

  it('is sha256: followed by 64 lowercase hex characters', () => {
    assert.match(canonicalDigest('x', ''), /^sha256:[0-9a-f]{64}$/);
  });
});

describe('directoryDigest', () => {
  it('equals the single-file canonical digest when the directory holds one file', () => {
    assert.equal(directoryDigest([{ name: 'agt-profile.yaml', body: 'a: 1\n' }]), canonicalDigest('agt-profile.yaml', 'a: 1\n'));
  });

  it('hashes the records of every file sorted by name, whatever order they come in', () => {
    const a = { name: 'a.yaml', body: 'x' };
    const b = { name: 'b.yaml', body: 'y' };
    const expected =
      'sha256:' +
      createHash('sha256')
        .update(Buffer.concat([canonicalRecord('a.yaml', 'x'), canonicalRecord('b.yaml', 'y')]))
        .digest('hex');
    assert.equal(directoryDigest([b, a]), expected);
  });
});

describe('versionHash', () => {
  it('is the first 16 bytes of SHA-256 as 32 lowercase hex, unprefixed', () => {
    // SHA-256("") = e3b0c442 98fc1c14 9afbf4c8 996fb924 27ae41e4 ...
    assert.equal(versionHash(''), 'e3b0c44298fc1c149afbf4c8996fb924');
    assert.match(versionHash('{"a":1}'), /^[0-9a-f]{32}$/);
  });
});
