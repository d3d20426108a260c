// The apiserver, the CRDs, the bench's observers (Reflectors that time what the controller writes)
// and the router simulator; and their teardown, which stops whatever was started so far.

import { KubeClient, Resources } from '@kars/kube-client';
import type { Logger } from '@kars/kube-core';
import { Reflector, watchConfigFromEnv } from '@kars/kube-runtime';
import type { Change } from '@kars/kube-runtime';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '@kars/policy-compiler';
import { allCrds, INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';
import { errMsg, log, removeTempDir, sleep } from '../../lib/dist/index.js';
import type { KarsApiserver, PinoStderr } from '../../lib/dist/index.js';
import type { Config } from './config.js';
import { startServer } from './controller-process.js';
import type { ControllerProcess } from './controller-process.js';
import type { ConfigMapObject, PolicyObject } from './objects.js';
import { RouterSim } from './router-sim.js';
import { remove } from './util.js';

/** Everything a run starts, filled in as it starts; {@link teardown} stops what is there. */
export interface Handles {
  srv?: KarsApiserver<PinoStderr>;
  api?: KubeClient;
  obsClient?: KubeClient;
  routerClient?: KubeClient;
  router?: RouterSim;
  ac: AbortController;
  reflectorRuns: Array<Promise<void>>;
  ctls: ControllerProcess[];
}

/** The running apiserver with the bench's clients, observers and router simulator. */
export interface World {
  srv: KarsApiserver<PinoStderr>;
  api: KubeClient;
  /** The ConfigMaps labelled managed-by=kars-controller. */
  cms: Reflector<ConfigMapObject>;
  /** The InferencePolicies. */
  ips: Reflector<PolicyObject>;
  /** Subscribers called on every ConfigMap / InferencePolicy change, before the router's. */
  cmSubs: Array<(c: Change<ConfigMapObject>) => void>;
  ipSubs: Array<(c: Change<PolicyObject>) => void>;
  router: RouterSim;
  /** Warnings and errors the observers' watches logged. */
  reflectorWarnings: string[];
  /** The apiserver's current resourceVersion (of a ConfigMap list). */
  currentRv(): Promise<number>;
  /**
   * Wait until `pred()` holds, re-checked on every observer change (and every 250 ms as a
   * backstop, e.g. for a child that died). Timestamps are taken by the change subscribers.
   */
  waitFor(pred: () => boolean, timeoutMs: number, what: string): Promise<number>;
}

/** Start the apiserver (data in `dataDir`), create the CRDs, and start the observers and the router simulator. */
export async function startWorld(cfg: Config, dataDir: string, h: Handles): Promise<World> {
  const tBoot = performance.now();
  const srv = (h.srv = await startServer(dataDir, cfg.historyWindow));
  log(`apiserver pid ${srv.pid} at ${srv.url} (started in ${(performance.now() - tBoot).toFixed(0)} ms)`);
  const watchCfg = watchConfigFromEnv(process.env);
  const mkClient = (): KubeClient =>
    KubeClient.fromKubeconfig({
      kubeconfig: srv.kubeconfig,
      pingIntervalMs: watchCfg.pingIntervalMs,
      pingTimeoutMs: watchCfg.pingTimeoutMs,
    });
  const api = (h.api = mkClient());
  const obsClient = (h.obsClient = mkClient());
  const routerClient = (h.routerClient = mkClient());

  for (const crd of allCrds()) await api.create(Resources.customresourcedefinitions, { ...crd });
  for (let t0 = performance.now(); ;) {
    try {
      await api.list(INFERENCE_POLICY, { limit: 1 });
      await api.list(KARS_SANDBOX, { limit: 1 });
      break;
    } catch (err) {
      if (performance.now() - t0 > 10_000) throw new Error(`CRDs not served within 10 s: ${errMsg(err)}`);
      await sleep(50);
    }
  }
  const currentRv = async (): Promise<number> => Number((await api.list(Resources.configmaps, { limit: 1 })).metadata.resourceVersion);

  const reflectorWarnings: string[] = [];
  const rlog: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (o, msg) => reflectorWarnings.push(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    error: (o, msg) => reflectorWarnings.push(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    child: () => rlog,
    isLevelEnabled: (level) => level !== 'debug' && level !== 'info',
  };
  const cms = new Reflector<ConfigMapObject>({
    name: 'bench-configmaps',
    client: routerClient,
    resource: Resources.configmaps,
    labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
    config: watchCfg,
    log: rlog,
  });
  const ips = new Reflector<PolicyObject>({
    name: 'bench-inferencepolicies',
    client: obsClient,
    resource: INFERENCE_POLICY,
    config: watchCfg,
    log: rlog,
  });
  // Measurement subscribers are registered first, so their timestamps precede the router's work.
  const cmSubs: World['cmSubs'] = [];
  const ipSubs: World['ipSubs'] = [];
  cms.subscribe((c) => {
    for (const f of [...cmSubs]) f(c);
  });
  ips.subscribe((c) => {
    for (const f of [...ipSubs]) f(c);
  });
  const router = (h.router = new RouterSim(routerClient, cms.store));
  cms.subscribe((c) => router.onChange(c));
  h.reflectorRuns.push(cms.run(h.ac.signal), ips.run(h.ac.signal));
  await Promise.all([cms.store.ready(), ips.store.ready()]);

  const waitFor = (pred: () => boolean, timeoutMs: number, what: string): Promise<number> =>
    new Promise((res, rej) => {
      if (pred()) return res(performance.now());
      let settled = false;
      const check = (): void => {
        if (!settled && pred()) {
          cleanup();
          res(performance.now());
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        rej(new Error(`${what}: not within ${timeoutMs} ms`));
      }, timeoutMs);
      const poll = setInterval(check, 250);
      const cleanup = (): void => {
        settled = true;
        clearTimeout(timer);
        clearInterval(poll);
        remove(cmSubs, check);
        remove(ipSubs, check);
      };
      cmSubs.push(check);
      ipSubs.push(check);
    });

  return { srv, api, cms, ips, cmSubs, ipSubs, router, reflectorWarnings, currentRv, waitFor };
}

/** Stop the controllers, the router simulator, the observers, the clients and the apiserver; remove `dataRoot`. */
export async function teardown(h: Handles, dataRoot: string): Promise<void> {
  for (const c of h.ctls) await c.stop().catch(() => undefined);
  h.router?.close();
  h.ac.abort();
  await Promise.all(h.reflectorRuns);
  h.api?.close();
  h.obsClient?.close();
  h.routerClient?.close();
  if (h.srv) await h.srv.stop();
  removeTempDir(dataRoot);
}
