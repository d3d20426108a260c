import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { FaultRelay } from '@kars/kube-core';
import type { ControlPlane } from './control-plane.js';
import { kubeRequest } from './http.js';

/** kube-apiserver behind a {@link FaultRelay} of ours: what a fault suite points its clients at. */
export interface ApiserverRelay {
  relay: FaultRelay;
  /** `https://127.0.0.1:RELAYPORT`: the relay, which passes TLS through to kube-apiserver. */
  url: string;
  /** A copy of the admin kubeconfig whose server is the relay. */
  kubeconfig: string;
  /** Reset every relayed connection and stop listening. */
  close(): Promise<void>;
}

/**
 * Put a TCP relay in front of `cp`'s kube-apiserver and write `kubeconfig` (default
 * `<cp.dir>/relay.kubeconfig`): the admin kubeconfig with its server replaced by the relay. TLS
 * passes through untouched, so the control plane's CA and the serving certificate's 127.0.0.1 SAN
 * still hold. The relay keeps its port across `cp.restartApiserver()` (same upstream port): while
 * kube-apiserver is down a new connection is accepted and then closed.
 */
export async function startApiserverRelay(
  cp: Pick<ControlPlane, 'url' | 'kubeconfig' | 'dir'>,
  { kubeconfig = join(cp.dir, 'relay.kubeconfig') }: { kubeconfig?: string } = {},
): Promise<ApiserverRelay> {
  const upstream = new URL(cp.url);
  const relay = new FaultRelay(Number(upstream.port), upstream.hostname);
  const port = await relay.listen('127.0.0.1:0');
  const url = `https://127.0.0.1:${port}`;
  // The admin kubeconfig is JSON (which is YAML); every cluster entry points at the relay.
  const config = JSON.parse(readFileSync(cp.kubeconfig, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
  for (const c of config.clusters) c.cluster.server = url;
  writeFileSync(kubeconfig, JSON.stringify(config, null, 2), { mode: 0o600 });
  return { relay, url, kubeconfig, close: () => relay.close() };
}

/** A relay in front of etcd's client port, made before the control plane starts (see {@link startEtcdRelay}). */
export interface EtcdRelay {
  relay: FaultRelay;
  /** The port etcd must listen on: `startControlPlane({ ports: { etcd: etcdPort } })`. */
  etcdPort: number;
  /** The relay's URL, for kube-apiserver: `startControlPlane({ apiserverEtcdUrl: url })`. */
  url: string;
}

/**
 * Put a relay between kube-apiserver and etcd: pick a free port for etcd, listen in front of it, and
 * give both to `startControlPlane` (`ports.etcd`, `apiserverEtcdUrl`). `relay.resetAll()` then cuts
 * kube-apiserver's storage connections (its etcd client reconnects and resumes its watches), while
 * the harness and {@link compactEtcd} still reach etcd directly at `cp.etcdUrl`.
 */
export async function startEtcdRelay(): Promise<EtcdRelay> {
  const etcdPort = await new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no free port'))));
    });
  });
  const relay = new FaultRelay(etcdPort);
  const port = await relay.listen('127.0.0.1:0');
  return { relay, etcdPort, url: `http://127.0.0.1:${port}` };
}

/** The etcd key {@link compactEtcd} writes to move the revision on: outside `/registry`, so no kube watch sees it. */
export const COMPACTION_MARKER_KEY = '/kars-envtest/compaction-marker';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

async function etcdCall(
  etcdUrl: string,
  path: string,
  body: unknown,
): Promise<{ header?: { revision?: string } } & Record<string, unknown>> {
  const r = await kubeRequest(`${etcdUrl}${path}`, { method: 'POST', body, timeoutMs: 10_000 });
  if (r.status !== 200) throw new Error(`etcd ${path}: HTTP ${r.status}: ${r.body}`);
  return JSON.parse(r.body) as { header?: { revision?: string } };
}

/**
 * Compact etcd's whole history up to its current revision (physically), through etcd's
 * gRPC-gateway on its client URL (`POST /v3/kv/put`, `/v3/kv/range`, `/v3/kv/compaction`).
 *
 * It first writes {@link COMPACTION_MARKER_KEY} twice, so the compaction revision R is at least two
 * above anything a kube watch has seen: kube-apiserver (without its watch cache) resumes a watch at
 * `resourceVersion + 1`, which is then below R, and etcd answers "compacted", which kube-apiserver
 * passes on as 410 Expired. Resolves with R.
 */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  for (let i = 0; i < 2; i++) await etcdCall(etcdUrl, '/v3/kv/put', { key: b64(COMPACTION_MARKER_KEY), value: b64(String(i)) });
  const head = await etcdCall(etcdUrl, '/v3/kv/range', { key: b64(COMPACTION_MARKER_KEY) });
  const revision = Number(head.header?.revision);
  if (!Number.isSafeInteger(revision) || revision <= 0) throw new Error(`etcd range: no header.revision in ${JSON.stringify(head)}`);
  await etcdCall(etcdUrl, '/v3/kv/compaction', { revision: String(revision), physical: true });
  return revision;
}
