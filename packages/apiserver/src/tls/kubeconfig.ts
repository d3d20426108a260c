import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';

/** Write a kubeconfig that reaches the server at `url`, trusting `caPem`, with a bearer token. */
export function writeKubeconfig(file: string, url: string, caPem: string, token: string, contextName = 'kars'): void {
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: contextName, cluster: { server: url, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: `${contextName}-admin`, user: { token } }],
    contexts: [{ name: contextName, context: { cluster: contextName, user: `${contextName}-admin`, namespace: 'default' } }],
    'current-context': contextName,
    preferences: {},
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, stringify(doc), { mode: 0o600 });
}
