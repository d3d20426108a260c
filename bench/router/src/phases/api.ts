/**
 * Phase 4b: a ConfigMap PUT through the API → enforced by a router on `--kubeconfig`, against
 * `kars apiserver`.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { KARS_BIN, ROOT, expectStatus, fmt1, httpsJsonClient, log, sleep, splitArgs } from '../../../lib/dist/index.js';
import { chatBody } from '../apis.js';
import { CAP_HIGH, CAP_LOW, NS, POLICY, PROBE_TOKENS, SANDBOX } from '../config.js';
import { oneRequest } from '../http.js';
import { Prober } from '../prober.js';
import { startChild } from '../procs.js';
import { need, type Run } from '../run.js';
import { stats } from '../stats.js';
import { reloadPhase } from './reload.js';

/** What the phase reads of an object the API returns. */
interface Stored {
  metadata: { resourceVersion: string };
}

/** A CRD of deploy/crds/all.yaml, as far as the phase reads it. */
interface Crd {
  kind: string;
  metadata: { name: string };
}

const isCrd = (d: unknown): d is Crd =>
  typeof d === 'object' && d !== null && (d as { kind?: unknown }).kind === 'CustomResourceDefinition';

/**
 * Start `kars apiserver`, apply the CRDs, the namespace, the sandbox and the compiled ConfigMap,
 * start a router on the apiserver, then PUT the ConfigMap `cfg.changes` times and time each PUT
 * until the router enforces it; one control-plane row.
 */
export async function apiPhase(run: Run): Promise<void> {
  const { cfg, procs } = run;
  const stub = need(procs.stub, 'the stub');
  const t0 = performance.now();
  const dataDir = join(run.tmp, 'apiserver');
  mkdirSync(dataDir);
  const srv = await startChild('kars apiserver', [KARS_BIN, 'apiserver', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    nodeArgs: splitArgs(process.env.BENCH_SERVER_NODE_ARGS),
  });
  procs.srv = srv;
  const kubeconfig = srv.kubeconfig ?? join(dataDir, 'kubeconfig');
  const api = httpsJsonClient(
    srv.url,
    readFileSync(join(dataDir, 'pki', 'ca.crt'), 'utf8'),
    readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    { maxSockets: 4 },
  );
  procs.api = api;
  log(`api: kars apiserver (pid ${srv.pid}) at ${srv.url}; applying deploy/crds/all.yaml`);
  const { parseAllDocuments } = await import('yaml');
  const crds = parseAllDocuments(readFileSync(join(ROOT, 'deploy/crds/all.yaml'), 'utf8'))
    .map((d): unknown => d.toJSON())
    .filter(isCrd);
  for (const crd of crds)
    expectStatus(
      await api.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd),
      [201, 409],
      `create CRD ${crd.metadata.name}`,
    );
  expectStatus(
    await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
    [201, 409],
    `create namespace ${NS}`,
  );
  const sbPath = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
  for (let i = 0; ; i++) {
    const r = await api.request('POST', sbPath, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: SANDBOX },
      spec: { inferenceRef: { name: POLICY } },
    });
    if (r.status === 201 || r.status === 409) break;
    if (r.status !== 404 || i > 100) throw new Error(`create KarsSandbox: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    await sleep(100);
  }
  const cm = run.compiled(CAP_HIGH).configMap;
  const cmPath = `/api/v1/namespaces/${NS}/configmaps`;
  let rv = expectStatus<Stored>(await api.request('POST', cmPath, cm), [201], `create ConfigMap ${cm.metadata.name}`).metadata
    .resourceVersion;
  const router = await startChild(
    'router (api)',
    [
      KARS_BIN,
      'router',
      '--kubeconfig',
      kubeconfig,
      '--sandbox',
      SANDBOX,
      '--namespace',
      NS,
      '--listen',
      '127.0.0.1:0',
      '--upstream',
      stub.url,
    ],
    { nodeArgs: splitArgs(process.env.BENCH_ROUTER_NODE_ARGS) },
  );
  procs.router = router;
  log(`api: router (pid ${router.pid}) at ${router.url}, watching ${NS}/${SANDBOX} and its ConfigMaps`);
  const deadline = Date.now() + 30_000;
  for (;;) {
    run.checkChildren();
    const over = await oneRequest(router.url, chatBody(CAP_HIGH * 2)).catch(() => ({ status: 0 }));
    if (over.status === 429) break;
    if (Date.now() > deadline)
      throw new Error(`api: the router did not enforce the ConfigMap's policy within 30 s (max_tokens ${CAP_HIGH * 2} → ${over.status})`);
    await sleep(50);
  }
  const putSend: number[] = [];
  const result = await reloadPhase({
    cfg,
    prober: new Prober(router.url, chatBody(PROBE_TOKENS), cfg.probeMs),
    currentCap: CAP_HIGH,
    change: async (cap) => {
      const c = run.compiled(cap).configMap;
      const next = { ...c, metadata: { ...c.metadata, resourceVersion: rv } };
      const tSend = performance.now();
      const o = expectStatus<Stored>(await api.request('PUT', `${cmPath}/${next.metadata.name}`, next), [200], 'update ConfigMap');
      const t = performance.now();
      putSend.push(t - tSend);
      rv = o.metadata.resourceVersion;
      return { t, tSend };
    },
    failures: run.failures,
    label: 'api',
    checkChildren: run.checkChildren,
  });
  run.raw.api = result;
  result.putMs = stats(putSend);
  const s = result.stats;
  const ss = result.statsFromSend;
  run.ctlRows.push({
    metric: 'API: ConfigMap PUT response → enforced p50 / p99',
    display: `${fmt1(s.p50)} / ${fmt1(s.p99)} ms`,
    goal: '–',
    notes: `${s.n} of ${cfg.changes} PUTs of inferencepolicy-${POLICY}-profile (compiled with compileInferencePolicy, cap ${CAP_HIGH} ↔ ${CAP_LOW}, random 50–250 ms apart) on kars apiserver, router with --kubeconfig (watch on KarsSandbox + managed ConfigMaps); max ${fmt1(s.max)} ms, min ${fmt1(s.min)} ms (negative = enforced before the PUT response arrived); from the PUT's send: p50 ${fmt1(ss.p50)} / p99 ${fmt1(ss.p99)} ms; PUT itself p50 ${fmt1(result.putMs.p50)} ms; ${result.flipBacks} probes saw the old decision after the new one`,
  });
  run.phaseTimes.api = (performance.now() - t0) / 1000;
}
