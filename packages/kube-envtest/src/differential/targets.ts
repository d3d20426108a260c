import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { ApiServer } from '@kars/apiserver';
import type { ControlPlane } from '../control-plane.js';
import { send } from './client.js';
import type { Target } from './runner.js';
import { SUITE_CRDS } from './crds.js';

/** kars apiserver in this process, fresh, with RBAC on (as kube-apiserver runs here). */
export interface KarsTarget extends Target {
  server: ApiServer;
  stop(): Promise<void>;
}

/**
 * Start a fresh kars apiserver (temporary data dir, `--authorization-mode=RBAC`). `DIFF_KARS_APISERVER`
 * names another build's `dist/index.js` to compare instead (how the share before a fix is measured).
 */
export async function startKarsTarget(): Promise<KarsTarget> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kars-diff-'));
  const other = process.env['DIFF_KARS_APISERVER'];
  const Server = other ? ((await import(other)) as { ApiServer: typeof ApiServer }).ApiServer : ApiServer;
  const server = await Server.start({ listen: '127.0.0.1:0', dataDir, authorizationMode: 'RBAC' });
  return {
    name: 'kars',
    url: server.url,
    ca: server.caCert,
    admin: { ca: server.caCert, token: server.token },
    server,
    stop: async () => {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** kube-apiserver of a started control plane, as its admin (a `system:masters` client certificate; the pki holds file paths). */
export function kubeTarget(cp: ControlPlane): Target {
  return {
    name: `kube-apiserver ${cp.version}`,
    url: cp.url,
    ca: cp.caPem,
    admin: { ca: cp.caPem, cert: readFileSync(cp.pki.adminCert, 'utf8'), key: readFileSync(cp.pki.adminKey, 'utf8') },
  };
}

/** The kars CRDs as deploy/crds ships them. */
export function karsCrds(): unknown[] {
  const file = fileURLToPath(new URL('../../../../deploy/crds/all.yaml', import.meta.url));
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as unknown)
    .filter((d) => d !== null);
}

/**
 * What every run installs before the scenarios, on both servers: the kars CRDs and the suite's own
 * CRDs; resolves once each custom resource answers a list (kube-apiserver serves a CRD's resource
 * a moment after it is created).
 */
export async function prepareTarget(t: Target, timeoutMs = 60_000): Promise<void> {
  const crds = [...karsCrds(), ...SUITE_CRDS] as Array<{
    metadata: { name: string };
    spec: { group: string; scope: string; names: { plural: string }; versions: Array<{ name: string; served: boolean }> };
  }>;
  for (const crd of crds) {
    const r = await send({
      method: 'POST',
      url: `${t.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: Buffer.from(JSON.stringify(crd)),
      cred: t.admin,
    });
    if (r.status !== 201 && r.status !== 409)
      throw new Error(`${t.name}: creating CRD ${crd.metadata.name}: ${r.status} ${r.body.toString()}`);
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (const v of crd.spec.versions.filter((x) => x.served)) {
      const path = `/apis/${crd.spec.group}/${v.name}/${crd.spec.names.plural}`;
      for (;;) {
        const r = await send({ method: 'GET', url: t.url + path, headers: { accept: 'application/json' }, cred: t.admin });
        if (r.status === 200) break;
        if (Date.now() > deadline) throw new Error(`${t.name}: ${path} not served after ${timeoutMs} ms: ${r.status}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }
}
