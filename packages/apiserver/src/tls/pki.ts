import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import forge from 'node-forge';
import { x509Serial } from '@kars/kube-core';

/** PEM material the server needs: its CA (for clients to trust) and its serving certificate. */
export interface Pki {
  caCert: string;
  serverCert: string;
  serverKey: string;
}

/** A fresh RSA-2048 key pair in PEM: the public key as SPKI, the private key as `privateKey` says (PKCS #8 by default). */
export function newKeyPair(privateKey: 'pkcs1' | 'pkcs8' = 'pkcs8'): { pub: string; priv: string } {
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    pub: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    priv: pair.privateKey.export({ type: privateKey, format: 'pem' }).toString(),
  };
}

/** What a certificate is for: a CA, a server (with the names it covers), or a client (with its groups). */
export type CertificateUse = { kind: 'ca' } | { kind: 'server'; hosts: string[] } | { kind: 'client'; organizations: string[] };

/**
 * A certificate for the common name `cn` and the public key `pub`, valid from a minute ago for
 * `years`, signed by `signer` (self-signed when it has no `cert`), as PEM.
 */
export function issueCertificate(
  cn: string,
  pub: string,
  use: CertificateUse,
  signer: { cert?: forge.pki.Certificate; key: string },
  years: number,
): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(pub);
  cert.serialNumber = x509Serial();
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + years * 365 * 24 * 3600 * 1000);
  const subject: forge.pki.CertificateField[] = [{ name: 'commonName', value: cn }];
  if (use.kind === 'client') for (const o of use.organizations) subject.push({ name: 'organizationName', value: o });
  cert.setSubject(subject);
  cert.setIssuer(signer.cert ? signer.cert.subject.attributes : subject);
  const ext: object[] = [{ name: 'basicConstraints', cA: use.kind === 'ca', critical: true }];
  if (use.kind === 'ca') ext.push({ name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true });
  else ext.push({ name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true });
  if (use.kind === 'server') {
    ext.push({ name: 'extKeyUsage', serverAuth: true });
    ext.push({ name: 'subjectAltName', altNames: use.hosts.map((h) => (isIP(h) ? { type: 7, ip: h } : { type: 2, value: h })) });
  }
  if (use.kind === 'client') ext.push({ name: 'extKeyUsage', clientAuth: true });
  ext.push({ name: 'subjectKeyIdentifier' });
  cert.setExtensions(ext);
  cert.sign(forge.pki.privateKeyFromPem(signer.key), forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

function covers(certPem: string, hosts: string[]): boolean {
  try {
    const c = new X509Certificate(certPem);
    if (new Date(c.validTo).getTime() < Date.now() + 24 * 3600 * 1000) return false;
    return hosts.every((h) => (isIP(h) ? c.checkIP(h) !== undefined : c.checkHost(h) !== undefined));
  } catch {
    return false;
  }
}

/**
 * Load the CA and serving certificate from `dir`, creating them on first start.
 * The serving certificate is re-issued (by the same CA) when it does not cover `hosts`.
 */
export function ensurePki(dir: string, hosts: string[]): Pki {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const p = (f: string): string => join(dir, f);
  if (!existsSync(p('ca.crt')) || !existsSync(p('ca.key'))) {
    const k = newKeyPair();
    writeFileSync(p('ca.key'), k.priv, { mode: 0o600 });
    writeFileSync(p('ca.crt'), issueCertificate('kars-apiserver-ca', k.pub, { kind: 'ca' }, { key: k.priv }, 10));
  }
  const caCert = readFileSync(p('ca.crt'), 'utf8');
  const caKey = readFileSync(p('ca.key'), 'utf8');
  const want = [...new Set(['localhost', '127.0.0.1', '::1', ...hosts])];
  if (!existsSync(p('server.crt')) || !existsSync(p('server.key')) || !covers(readFileSync(p('server.crt'), 'utf8'), want)) {
    const k = newKeyPair();
    const ca = { cert: forge.pki.certificateFromPem(caCert), key: caKey };
    const cert = issueCertificate('kars-apiserver', k.pub, { kind: 'server', hosts: want }, ca, 2);
    writeFileSync(p('server.key'), k.priv, { mode: 0o600 });
    writeFileSync(p('server.crt'), cert);
  }
  return { caCert, serverCert: readFileSync(p('server.crt'), 'utf8'), serverKey: readFileSync(p('server.key'), 'utf8') };
}

/** Load the bearer token from `file`, creating a random one on first start. */
export function ensureToken(file: string): string {
  if (existsSync(file)) {
    const t = readFileSync(file, 'utf8').trim();
    if (t.length >= 16) return t;
  }
  const t = randomBytes(32).toString('base64url');
  writeFileSync(file, t + '\n', { mode: 0o600 });
  return t;
}
