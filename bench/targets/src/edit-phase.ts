// Phase 1: edit → ConfigMap / router echo / Ready, with the real controller and router.

import { KubeClient, Resources } from '@kars/kube-client';
import type { ResourceRef } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';
import { Reflector, watchConfigFromEnv } from '@kars/kube-runtime';
import type { Change } from '@kars/kube-runtime';
import { INFERENCE_POLICY_DIGEST_ANNOTATION, INFERENCE_POLICY_KIND, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '@kars/policy-compiler';
import { allCrds, INFERENCE_POLICY, KARS_SANDBOX, readEcho, ROUTER_LABEL } from '@kars/policy-api';
import { errMsg, log, sleep } from '../../lib/dist/index.js';
import type { Config } from './config.js';
import {
  API_VERSION,
  EDIT_NS,
  INSTANCE,
  POLICY,
  SANDBOX,
  dailyOf,
  inferencePolicy,
  isConflict,
  isReadyFor,
  quietLog,
  retry,
} from './objects.js';
import type { ConfigMapObject, PolicyObject } from './objects.js';
import type { Server } from './servers.js';
import { karsChild, onShutdown } from './shutdown.js';
import { nowMs, remove } from './util.js';

/** What the edit phase measured (milliseconds per measured edit). */
export interface EditResult {
  toCm: number[];
  toEcho: number[];
  toReady: number[];
  patchMs: number[];
  timeouts: number;
  errors: string[];
  /** The observers' watch warnings. */
  warnings?: string[];
}

/** A change one of the bench's three watches saw, by watch. */
type Observed =
  | { watch: 'ip'; change: Change<PolicyObject> }
  | { watch: 'cm'; change: Change<ConfigMapObject> }
  | { watch: 'lease'; change: Change<KubeObject> };

/** Run phase 1 against `srv`; edits not Ready in time are reported in `failures`. */
export async function editPhase(srv: Server, cfg: Config, failures: string[]): Promise<EditResult> {
  const watchCfg = watchConfigFromEnv(process.env);
  const api = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const obs = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const ac = new AbortController();
  const runs: Array<Promise<void>> = [];
  const warnings: string[] = [];
  const closeClients = onShutdown('edit-phase clients', async () => {
    ac.abort();
    await Promise.allSettled(runs);
    api.close();
    obs.close();
  });
  const res: EditResult = { toCm: [], toEcho: [], toReady: [], patchMs: [], timeouts: 0, errors: [] };
  try {
    for (const crd of allCrds()) {
      await api.create(Resources.customresourcedefinitions, { ...crd }).catch((err: unknown) => {
        if (!isConflict(err)) throw err;
      });
    }
    await retry('the kars CRDs served', 60_000, async () => {
      await api.list(INFERENCE_POLICY, { limit: 1 });
      await api.list(KARS_SANDBOX, { limit: 1 });
    });
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: EDIT_NS } });
    let value = 1_000_000;
    await retry('creating the KarsSandbox', 60_000, () =>
      api.create(KARS_SANDBOX, {
        apiVersion: API_VERSION,
        kind: 'KarsSandbox',
        metadata: { name: SANDBOX, namespace: EDIT_NS },
        spec: { inferenceRef: { name: POLICY } },
      }),
    );
    await retry('creating the InferencePolicy', 60_000, () => api.create(INFERENCE_POLICY, inferencePolicy(value)));

    // Observers (watches; every time below is taken in their change subscribers).
    const subs: Array<(o: Observed) => void> = [];
    const mk = <T extends KubeObject>(
      name: Observed['watch'],
      resource: ResourceRef,
      wrap: (c: Change<T>) => Observed,
      extra: { labelSelector?: string } = {},
    ): Reflector<T> => {
      const r = new Reflector<T>({
        name,
        client: obs,
        resource,
        namespace: EDIT_NS,
        config: watchCfg,
        log: quietLog((w) => warnings.push(w)),
        ...extra,
      });
      r.subscribe((c) => {
        const o = wrap(c);
        for (const f of [...subs]) f(o);
      });
      runs.push(r.run(ac.signal));
      return r;
    };
    const ips = mk<PolicyObject>('ip', INFERENCE_POLICY, (change) => ({ watch: 'ip', change }));
    const cms = mk<ConfigMapObject>('cm', Resources.configmaps, (change) => ({ watch: 'cm', change }), {
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
    });
    const leases = mk<KubeObject>('lease', Resources.leases, (change) => ({ watch: 'lease', change }), {
      labelSelector: `${ROUTER_LABEL}=true`,
    });
    await Promise.all([ips.store.ready(), cms.store.ready(), leases.store.ready()]);

    // The real processes.
    const stub = karsChild('stub', ['stub', 'openai', '--listen', '127.0.0.1:0']);
    const upstream = await stub.url;
    const ctl = karsChild('controller', ['controller', '--kubeconfig', srv.kubeconfig, '--metrics-addr', 'disabled'], {
      LEADER_ELECTION_ENABLED: 'false',
    });
    const router = karsChild('router', [
      'router',
      '--sandbox',
      SANDBOX,
      '--namespace',
      EDIT_NS,
      '--instance',
      INSTANCE,
      '--listen',
      '127.0.0.1:0',
      '--upstream',
      upstream,
      '--kubeconfig',
      srv.kubeconfig,
    ]);
    await router.url;
    const children = [stub, ctl, router];
    const childTail = (): string => children.map((c) => `--- kars ${c.name}:\n${c.output.join('').slice(-1500)}`).join('\n');
    const dead = (): (typeof children)[number] | undefined => children.find((c) => c.proc.exitCode !== null || c.proc.signalCode !== null);

    const cmKey = `${EDIT_NS}/${INFERENCE_POLICY_KIND.configMap.name(POLICY)}`;
    const ipKey = `${EDIT_NS}/${POLICY}`;
    // When each InferencePolicy digest first showed up in the router's echo Lease. The Lease and the
    // ConfigMap come on separate watches, so the echo may be seen before the ConfigMap that names
    // the digest; every edit's digest is new (a new dailyTokens), so the first sighting is its echo.
    const echoSeenAt = new Map<string, number>();
    subs.unshift((o) => {
      const d = o.watch === 'lease' && o.change.type === 'apply' ? readEcho(o.change.object)?.digests.InferencePolicy : undefined;
      if (d && !echoSeenAt.has(d)) echoSeenAt.set(d, nowMs());
    });
    const waitFor = (pred: () => boolean, timeoutMs: number, what: string): Promise<void> =>
      new Promise((resolve, reject) => {
        let done = false;
        const check = (): void => {
          if (done) return;
          const d = dead();
          if (d) finish(new Error(`${what}: kars ${d.name} exited\n${childTail()}`));
          else if (pred()) finish();
        };
        const finish = (err?: Error): void => {
          done = true;
          clearTimeout(timer);
          clearInterval(poll);
          remove(subs, check);
          if (err) reject(err);
          else resolve();
        };
        const timer = setTimeout(() => finish(new Error(`${what}: not within ${timeoutMs / 1000} s\n${childTail()}`)), timeoutMs);
        const poll = setInterval(check, 250);
        subs.push(check);
        check();
      });
    await waitFor(() => isReadyFor(ips.store.get(ipKey)), 120_000, 'the initial Ready (controller compiled, router echoed)');
    log(`  ${POLICY} Ready: controller, router and stub running`);

    const runEdits = async (n: number, measured: boolean): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const v = ++value;
        const w: { t0: number; cmAt?: number; digest?: string; echoAt?: number; readyAt?: number } = { t0: 0 };
        const on = (o: Observed): void => {
          if (o.change.type !== 'apply') return;
          const t = nowMs();
          const key = `${o.change.object.metadata.namespace}/${o.change.object.metadata.name}`;
          if (o.watch === 'cm' && w.cmAt === undefined && key === cmKey && dailyOf(o.change.object) === v) {
            w.cmAt = t;
            const digest = o.change.object.metadata.annotations?.[INFERENCE_POLICY_DIGEST_ANNOTATION];
            if (digest !== undefined) w.digest = digest;
          }
          if (w.echoAt === undefined && w.digest !== undefined) {
            const at = echoSeenAt.get(w.digest);
            if (at !== undefined) w.echoAt = at;
          }
          if (
            o.watch === 'ip' &&
            w.readyAt === undefined &&
            key === ipKey &&
            o.change.object.spec?.tokenBudget?.dailyTokens === v &&
            isReadyFor(o.change.object)
          )
            w.readyAt = t;
        };
        subs.splice(1, 0, on); // after the echo recorder (subs[0]), before the waiters
        try {
          w.t0 = nowMs();
          await api.patch(INFERENCE_POLICY, EDIT_NS, POLICY, { spec: { tokenBudget: { dailyTokens: v } } }, 'merge');
          const tPatch = nowMs() - w.t0;
          await waitFor(() => w.readyAt !== undefined && w.echoAt !== undefined, cfg.editTimeoutMs, `edit ${i} (dailyTokens=${v})`);
          if (measured) {
            res.patchMs.push(tPatch);
            res.toCm.push((w.cmAt ?? NaN) - w.t0);
            res.toEcho.push((w.echoAt ?? NaN) - w.t0);
            res.toReady.push((w.readyAt ?? NaN) - w.t0);
          }
        } catch (err) {
          if (!measured) throw err;
          res.timeouts++;
          res.errors.push(errMsg(err));
          if (dead()) throw err;
        } finally {
          remove(subs, on);
        }
        if (cfg.editGapMs) await sleep(cfg.editGapMs);
      }
    };
    await runEdits(cfg.warmupEdits, false);
    log(`  ${cfg.edits} measured edits`);
    await runEdits(cfg.edits, true);
    if (res.timeouts) failures.push(`${srv.label}: ${res.timeouts} of ${cfg.edits} edits not Ready in time (first: ${res.errors[0]})`);
    for (const c of children.reverse()) await c.stop();
  } finally {
    await closeClients();
  }
  res.warnings = warnings;
  return res;
}
