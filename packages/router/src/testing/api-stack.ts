/**
 * A real router on the API policy source, and the stack the router's end-to-end tests share: a
 * real `kars apiserver` with the kars CRDs and one namespace, the real PolicyController, and the
 * router, each on its own client. Test-only: not exported from the package.
 */
import assert from 'node:assert/strict';
import type { ApiServerOptions } from '@kars/apiserver';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { silentLogger } from '@kars/kube-core';
import type { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { clientFor } from '@kars/kube-runtime/testing';
import { allCrds } from '@kars/policy-api';
import { PolicyController } from '@kars/policy-controller';
import type { PolicyControllerOptions } from '@kars/policy-controller';
import { startRouter } from '../server.js';
import type { RouterOptions, RunningRouter } from '../server.js';

/** What a test says about a router on the API source; the rest defaults (127.0.0.1:0, fresh metrics, silent log). */
export type ApiRouterOptions = Partial<Omit<RouterOptions, 'source'>> &
  Pick<RouterOptions, 'sandbox' | 'namespace' | 'upstream' | 'instance'>;

/** A running router on the API source. */
export interface ApiRouter {
  router: RunningRouter;
  /** Abort the router and wait until it has stopped (the client stays open: it is the caller's). */
  stop(): Promise<void>;
}

/** Start a router whose policy source is the API through `client`, watching with `config`. */
export async function startApiRouter(client: KubeClient, config: WatchConfig, o: ApiRouterOptions): Promise<ApiRouter> {
  const ac = new AbortController();
  const router = await startRouter(
    {
      listen: '127.0.0.1:0',
      metrics: new RuntimeMetrics(),
      log: silentLogger,
      ...o,
      source: { kind: 'api', client, config },
    },
    ac.signal,
  );
  return {
    router,
    async stop() {
      ac.abort();
      await router.done;
    },
  };
}

export interface ApiStackOptions {
  /** Created before the controller starts; the router's namespace. */
  namespace: string;
  /** The router's watch config; its client is `clientFor(kubeconfig, config)`. */
  config: WatchConfig;
  /** The controller's watch config and client settings (default `config`). */
  controllerConfig?: WatchConfig;
  /** The controller's leader-election identity (leader election is off; the heartbeat carries it). */
  controllerIdentity?: string;
  /** Further controller options (e.g. `heartbeatIntervalMs`). */
  controller?: Partial<Omit<PolicyControllerOptions, 'client' | 'config' | 'leaderElection'>>;
  server?: Partial<ApiServerOptions>;
  /** Objects created, in order, once the controller runs and before the router starts: [collection path, body]. */
  objects?: ReadonlyArray<readonly [string, unknown]>;
  /** The router (its namespace is `namespace`). */
  router: Omit<ApiRouterOptions, 'namespace'>;
}

export interface ApiStack {
  ts: TestServer;
  controllerClient: KubeClient;
  routerClient: KubeClient;
  router: RunningRouter;
  /** Stop the router and the controller, close both clients and the server. */
  close(): Promise<void>;
}

/**
 * Start a test apiserver with the kars CRDs and `namespace`, run the controller on it, create
 * `objects`, and start the router on the API source.
 */
export async function startApiStack(o: ApiStackOptions): Promise<ApiStack> {
  const ts = await startTestServer(o.server);
  await createCrds(ts.client, ...allCrds());
  const ns = await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: o.namespace } });
  assert.equal(ns.status, 201, ns.text);
  const controllerConfig = o.controllerConfig ?? o.config;
  const controllerClient = clientFor(ts.server.kubeconfigPath, controllerConfig);
  const routerClient = clientFor(ts.server.kubeconfigPath, o.config);
  const controller = new PolicyController({
    client: controllerClient,
    config: controllerConfig,
    metrics: new RuntimeMetrics(),
    log: silentLogger,
    leaderElection: { enabled: false, namespace: o.namespace, name: 'c', identity: o.controllerIdentity ?? 'c' },
    ...o.controller,
  });
  const ac = new AbortController();
  const controllerRun = controller.run(ac.signal);
  for (const [path, body] of o.objects ?? []) {
    const r = await ts.client.post(path, body);
    assert.equal(r.status, 201, `create in ${path}: ${r.text}`);
  }
  const router = await startApiRouter(routerClient, o.config, { ...o.router, namespace: o.namespace });
  return {
    ts,
    controllerClient,
    routerClient,
    router: router.router,
    async close() {
      ac.abort();
      await Promise.all([controllerRun, router.stop()]);
      controllerClient.close();
      routerClient.close();
      await ts.close();
    },
  };
}
