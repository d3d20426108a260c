import { writeFileSync } from 'node:fs';
import type { ControlPlane } from './control-plane.js';

/** A ServiceAccount token minted by TokenRequest, and when it expires. */
export interface ServiceAccountToken {
  token: string;
  expirationTimestamp: string;
}

/**
 * Mint a token for the ServiceAccount `namespace/name` with TokenRequest
 * (`POST …/serviceaccounts/NAME/token`, as admin): what the kubelet projects into a pod. The
 * ServiceAccount must exist. Rejects with the apiserver's answer when it refuses.
 */
export async function serviceAccountToken(
  cp: Pick<ControlPlane, 'request'>,
  namespace: string,
  name: string,
  { expirationSeconds = 3600 }: { expirationSeconds?: number } = {},
): Promise<ServiceAccountToken> {
  const r = await cp.request(`/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`, {
    method: 'POST',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } },
  });
  if (r.status !== 201 && r.status !== 200) throw new Error(`TokenRequest for ${namespace}/${name}: HTTP ${r.status}: ${r.body}`);
  const status = (JSON.parse(r.body) as { status?: { token?: string; expirationTimestamp?: string } }).status;
  if (!status?.token) throw new Error(`TokenRequest for ${namespace}/${name}: no token in the answer: ${r.body}`);
  return { token: status.token, expirationTimestamp: status.expirationTimestamp ?? '' };
}

/**
 * Write a kubeconfig at `file` (mode 0600) that authenticates with the bearer `token` and trusts the
 * control plane's CA. `server` overrides the apiserver URL (for a relay in front of it); the
 * relay passes TLS through, so the CA and the serving certificate's 127.0.0.1 SAN still hold.
 */
export function writeTokenKubeconfig(
  cp: Pick<ControlPlane, 'url' | 'caPem'>,
  file: string,
  { token, user = 'token-user', server = cp.url, namespace }: { token: string; user?: string; server?: string; namespace?: string },
): string {
  // JSON is YAML: kubectl and client-node read it as a kubeconfig.
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'envtest', cluster: { server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'envtest', context: { cluster: 'envtest', user, ...(namespace ? { namespace } : {}) } }],
    'current-context': 'envtest',
  };
  writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 });
  return file;
}
