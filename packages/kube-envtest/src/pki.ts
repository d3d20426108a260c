import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import forge from 'node-forge';
import { issueCertificate, newKeyPair } from '@kars/apiserver/pki';
import type { CertificateUse } from '@kars/apiserver/pki';

/** The paths of the control plane's key material, all under one directory. */
export interface ControlPlanePki {
  dir: string;
  /** The CA every certificate here is issued by; kube-apiserver's `--client-ca-file`, kube-controller-manager's `--root-ca-file`. */
  caCert: string;
  caKey: string;
  /** kube-apiserver's serving certificate (localhost, 127.0.0.1, the `kubernetes` Service names and IP). */
  servingCert: string;
  servingKey: string;
  /** A client certificate in `system:masters` (the admin kubeconfig's credential). */
  adminCert: string;
  adminKey: string;
  /** kube-controller-manager's own client certificate (`system:kube-controller-manager`, bound by the bootstrap RBAC). */
  controllerManagerCert: string;
  controllerManagerKey: string;
  /** The ServiceAccount token signing key pair. */
  serviceAccountKey: string;
  serviceAccountPub: string;
}

/** Keys as kubeadm writes them (PKCS #1), for the Go binaries' key files. */
const newKey = (): { pub: string; priv: string } => newKeyPair('pkcs1');

/** A certificate of the control plane: a CA for ten years, anything else for one. */
const issue = (cn: string, pub: string, use: CertificateUse, signer: { cert?: forge.pki.Certificate; key: string }): string =>
  issueCertificate(cn, pub, use, signer, use.kind === 'ca' ? 10 : 1);

/** The names kube-apiserver's serving certificate covers (in-cluster clients use the `kubernetes` Service). */
export const SERVING_HOSTS = [
  'localhost',
  '127.0.0.1',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
  // The first address of the Service range the harness gives kube-apiserver (10.0.0.0/24).
  '10.0.0.1',
];

// The files of the first PKI this process generated: a fresh directory gets a copy instead of new
// keys (six RSA keys and five signatures take seconds on a busy 2-core machine, per start).
let generated: Map<string, { data: string; mode: number }> | undefined;
const FILES = [
  'ca.crt',
  'ca.key',
  'apiserver.crt',
  'apiserver.key',
  'admin.crt',
  'admin.key',
  'controller-manager.crt',
  'controller-manager.key',
  'sa.key',
  'sa.pub',
];

/**
 * The control plane's CA, certificates and ServiceAccount signing key in `dir`, created on first
 * use and reused after (so a person's `kars kube up --dir` keeps working kubeconfigs across runs).
 * Fresh directories in one process share the first set generated (`fresh: true` forces new keys).
 */
export function ensureControlPlanePki(dir: string, { fresh: forceFresh = false }: { fresh?: boolean } = {}): ControlPlanePki {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!forceFresh && generated && FILES.every((f) => !existsSync(join(dir, f))))
    for (const [f, { data, mode }] of generated) writeFileSync(join(dir, f), data, { mode });
  const p = (f: string): string => join(dir, f);
  const pki: ControlPlanePki = {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    servingCert: p('apiserver.crt'),
    servingKey: p('apiserver.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    controllerManagerCert: p('controller-manager.crt'),
    controllerManagerKey: p('controller-manager.key'),
    serviceAccountKey: p('sa.key'),
    serviceAccountPub: p('sa.pub'),
  };
  const have = (...fs: string[]): boolean => fs.every((f) => existsSync(f));
  const write = (cert: string, key: string, k: { pub: string; priv: string }, pem: string): void => {
    writeFileSync(key, k.priv, { mode: 0o600 });
    writeFileSync(cert, pem);
  };
  let fresh = false;
  if (!have(pki.caCert, pki.caKey)) {
    const k = newKey();
    write(pki.caCert, pki.caKey, k, issue('kars-envtest-ca', k.pub, { kind: 'ca' }, { key: k.priv }));
    fresh = true;
  }
  const ca = { cert: forge.pki.certificateFromPem(readFileSync(pki.caCert, 'utf8')), key: readFileSync(pki.caKey, 'utf8') };
  const leaf = (cert: string, key: string, cn: string, use: CertificateUse): void => {
    if (!fresh && have(cert, key)) return;
    const k = newKey();
    write(cert, key, k, issue(cn, k.pub, use, ca));
  };
  leaf(pki.servingCert, pki.servingKey, 'kube-apiserver', { kind: 'server', hosts: SERVING_HOSTS });
  leaf(pki.adminCert, pki.adminKey, 'kars-envtest-admin', { kind: 'client', organizations: ['system:masters'] });
  leaf(pki.controllerManagerCert, pki.controllerManagerKey, 'system:kube-controller-manager', { kind: 'client', organizations: [] });
  if (!have(pki.serviceAccountKey, pki.serviceAccountPub)) {
    const k = newKey();
    writeFileSync(pki.serviceAccountKey, k.priv, { mode: 0o600 });
    writeFileSync(pki.serviceAccountPub, k.pub);
  }
  generated ??= new Map(FILES.map((f) => [f, { data: readFileSync(join(dir, f), 'utf8'), mode: f.endsWith('.key') ? 0o600 : 0o644 }]));
  return pki;
}
