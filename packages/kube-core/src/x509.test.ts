import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { x509Serial } from './x509.js';

describe('certificate serials', () => {
  // Go's x509 (kube-apiserver, etcd) refuses a non-minimal DER INTEGER as "malformed serial number":
  // a random serial whose first byte was 0x00 made one control-plane start in 128 fail.
  it('are 16 bytes whose DER INTEGER is positive and minimal (first byte 0x01–0x7f), every time', () => {
    for (let i = 0; i < 20_000; i++) {
      const hex = x509Serial();
      assert.match(hex, /^[0-9a-f]{32}$/);
      const first = parseInt(hex.slice(0, 2), 16);
      assert.ok(first >= 0x01 && first <= 0x7f, hex);
    }
  });
});
