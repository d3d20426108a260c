/**
 * The wire-contract digests (kars-wire-contract.md §2.1).
 *
 * `canonicalDigest(name, body)` hashes `u64BE(len(name)) ‖ name ‖ u64BE(len(body)) ‖ body`, where
 * lengths count UTF-8 bytes and `name` is a fixed filename acting as a domain separator. The router
 * computes the same function over the bytes it reads from disk, so `body` must be the exact bytes
 * written to the ConfigMap value.
 *
 * Guarantees: pure, synchronous, and total (never throws for string or Buffer input).
 */
import { createHash } from 'node:crypto';

/** Prefix of every wire-contract digest. */
export const DIGEST_PREFIX = 'sha256:';

function toBytes(v: Buffer | string): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
}

function u64be(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** The length-prefixed record `u64BE(len(name)) ‖ name ‖ u64BE(len(body)) ‖ body` that digests hash. */
export function canonicalRecord(name: string, body: Buffer | string): Buffer {
  const n = toBytes(name);
  const b = toBytes(body);
  return Buffer.concat([u64be(n.length), n, u64be(b.length), b]);
}

/** `sha256:` + 64 lowercase hex over {@link canonicalRecord}. */
export function canonicalDigest(name: string, body: Buffer | string): string {
  return DIGEST_PREFIX + createHash('sha256').update(canonicalRecord(name, body)).digest('hex');
}

/**
 * Digest of a directory of files as the router's AGT loader computes it: the canonical records of
 * every file, sorted by name, concatenated and hashed once. With one file this equals
 * {@link canonicalDigest} of that file.
 */
export function directoryDigest(files: ReadonlyArray<{ name: string; body: Buffer | string }>): string {
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const h = createHash('sha256');
  for (const f of sorted) h.update(canonicalRecord(f.name, f.body));
  return DIGEST_PREFIX + h.digest('hex');
}

/** Legacy change-detection hash: the first 16 bytes of SHA-256(body) as 32 lowercase hex, unprefixed. */
export function versionHash(body: Buffer | string): string {
  return createHash('sha256').update(toBytes(body)).digest('hex').slice(0, 32);
}
