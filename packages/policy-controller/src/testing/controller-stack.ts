/**
 * The setup the controller's integration tests share: a real `kars apiserver` with the kars CRDs
 * and one namespace, the real PolicyController running against it, and a second client for test
 * routers. Test-only: exported as `@kars/policy-controller/testing/controller-stack` for other
 * packages' tests (the router's end-to-end stack builds on it), never imported by product code.
 */
import assert from 'node:assert/strict';
import type { ApiServerOptions } from '@kars/apiserver';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { clientFor } from '@kars/kube-runtime/testing';
import { allCrds } from '@kars/policy-api';
import { pino } from 'pino';
import { PolicyController } from '../manager.js';
import type { PolicyControllerOptions } from '../manager.js';

export interface ControllerStackOptions {
  /** Created before the controller starts. */
  namespace: string;
  /** The controller's watch config; its client is `clientFor(kubeconfig, config)`. */
  config: WatchConfig;
  server?: Partial<ApiServerOptions>;
  metrics?: RuntimeMetrics;
  notEnforcedGraceMs?: PolicyControllerOptions['notEnforcedGraceMs'];
  heartbeatIntervalMs?: PolicyControllerOptions['heartbeatIntervalMs'];
  /** The controller's leader-election identity (election is off; heartbeats carry it). Default `test`. */
  identity?: string;
  /** PING settings of the router client (default: the client's own defaults). */
  routerClientConfig?: Pick<WatchConfig, 'pingIntervalMs' | 'pingTimeoutMs'>;
  /** Reconciles in flight per kind (the controller's default when unset). */
  concurrency?: number;
  /** Called with the controller's client before the controller starts (to record its requests). */
  instrument?: (client: KubeClient) => void;
}

export interface ControllerStack {
  ts: TestServer;
  /** The controller's client. */
  client: KubeClient;
  /** A separate client for test routers. */
  routerClient: KubeClient;
  /** Stop the controller, close both clients and the server. */
  close(): Promise<void>;
}

/** Start a test apiserver, install the kars CRDs and `namespace`, and run the controller on it. */
export async function startControllerStack(o: ControllerStackOptions): Promise<ControllerStack> {
  const ts = await startTestServer(o.server);
  await createCrds(ts.client, ...allCrds());
  const ns = await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: o.namespace } });
  assert.equal(ns.status, 201, ns.text);
  const client = clientFor(ts.server.kubeconfigPath, o.config);
  o.instrument?.(client);
  const routerClient = o.routerClientConfig
    ? clientFor(ts.server.kubeconfigPath, o.routerClientConfig)
    : KubeClient.fromKubeconfig({ kubeconfig: ts.server.kubeconfigPath });
  const controller = new PolicyController({
    client,
    config: o.config,
    metrics: o.metrics ?? new RuntimeMetrics(),
    log: pino({ level: 'silent' }),
    leaderElection: { enabled: false, namespace: o.namespace, name: 'kars-controller', identity: o.identity ?? 'test' },
    env: {},
    ...(o.notEnforcedGraceMs !== undefined ? { notEnforcedGraceMs: o.notEnforcedGraceMs } : {}),
    ...(o.heartbeatIntervalMs !== undefined ? { heartbeatIntervalMs: o.heartbeatIntervalMs } : {}),
    ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
  });
  const ac = new AbortController();
  const run = controller.run(ac.signal);
  return {
    ts,
    client,
    routerClient,
    async close() {
      ac.abort();
      await run;
      client.close();
      routerClient.close();
      await ts.close();
    },
  };
}
