/**
 * A real router on the API policy source, and the stack the router's end-to-end tests share: the
 * policy controller's test stack (a real `kars apiserver` with the kars CRDs and one namespace,
 * the real PolicyController) plus the router on its own client. Test-only: not exported from the
 * package.
 */
import assert from 'node:assert/strict';
import { silentLogger } from '@kars/kube-core';
import type { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { startControllerStack } from '@kars/policy-controller/testing/controller-stack';
import type { ControllerStack, ControllerStackOptions } from '@kars/policy-controller/testing/controller-stack';
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
  /** Further controller settings. */
  controller?: Pick<ControllerStackOptions, 'identity' | 'heartbeatIntervalMs'>;
  server?: ControllerStackOptions['server'];
  /** Objects created, in order, once the controller runs and before the router starts: [collection path, body]. */
  objects?: ReadonlyArray<readonly [string, unknown]>;
  /** The router (its namespace is `namespace`). */
  router: Omit<ApiRouterOptions, 'namespace'>;
}

/** The controller stack (its `client` is the controller's) and the router on `routerClient`. */
export interface ApiStack extends ControllerStack {
  router: RunningRouter;
}

/**
 * Start the controller stack for `namespace`, create `objects`, and start the router on the API
 * source. `close()` stops the router, then the controller, the clients and the server.
 */
export async function startApiStack(o: ApiStackOptions): Promise<ApiStack> {
  const stack = await startControllerStack({
    namespace: o.namespace,
    config: o.controllerConfig ?? o.config,
    routerClientConfig: o.config,
    ...o.controller,
    ...(o.server !== undefined ? { server: o.server } : {}),
  });
  for (const [path, body] of o.objects ?? []) {
    const r = await stack.ts.client.post(path, body);
    assert.equal(r.status, 201, `create in ${path}: ${r.text}`);
  }
  const router = await startApiRouter(stack.routerClient, o.config, { ...o.router, namespace: o.namespace });
  return {
    ...stack,
    router: router.router,
    async close() {
      await router.stop();
      await stack.close();
    },
  };
}
