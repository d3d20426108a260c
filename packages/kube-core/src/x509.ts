import { randomBytes } from 'node:crypto';

/**
 * A random X.509 certificate serial (16 bytes, hex) whose DER INTEGER encoding is positive and
 * minimal: the first byte is 0x01–0x7f. A first byte of 0x00 is a non-minimal encoding, which Go's
 * x509 (so kube-apiserver and etcd) refuses as "malformed serial number"; with the high bit only
 * cleared, one certificate in 128 was such, and one control-plane start in a few dozen failed.
 * Used by kars apiserver's PKI and by kube-envtest's control-plane PKI.
 */
export function x509Serial(): string {
  const b = randomBytes(16);
  b[0] = ((b[0] ?? 0) & 0x7f) | 0x01;
  return b.toString('hex');
}
