import { setMaxListeners } from 'node:events';
import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient, ResourceRef } from '@kars/kube-client';
import {
  Controller,
  dropManagedFields,
  LeaderElector,
  leaseApi,
  OwnWrites,
  Reflector,
  reconcileWatchdog,
  splitKey,
  trigger,
} from '@kars/kube-runtime';
import type {
  Change,
  ControllerHandle,
  LeaderElectionOptions,
  LivenessCheck,
  ReadinessCheck,
  ReconcileResult,
  ReflectorHandle,
  RuntimeMetrics,
  Trigger,
  WatchConfig,
} from '@kars/kube-runtime';
import {
  EGRESS_APPROVAL,
  HEARTBEAT_LABEL,
  heartbeatIntervalMsFromEnv,
  INFERENCE_POLICY,
  KARS_SANDBOX,
  ROUTER_LABEL,
  SANDBOX_LABEL,
  TOOL_POLICY,
} from '@kars/policy-api';
import type { EgressApproval, InferencePolicy, KarsSandbox, ToolPolicy } from '@kars/policy-api';
import { EGRESS_APPROVAL_KIND, INFERENCE_POLICY_KIND, MANAGED_BY_LABEL, MANAGED_BY_VALUE, TOOL_POLICY_KIND } from '@kars/policy-compiler';
import type { ProfileKindIdentity } from '@kars/policy-compiler';
import { LeaseHolderTracker } from './lease-holders.js';
import { BY_SANDBOX, dryRunPoliciesOf, notEnforcedGraceFromEnv } from './context.js';
import type { ControllerContext } from './context.js';
import { EventRecorder } from './events.js';
import { HeartbeatWriter } from './heartbeat.js';
import { PropagationTracker } from './propagation.js';
import { reconcileEgressApproval } from './reconcile-egress.js';
import { reconcileInferencePolicy, reconcileToolPolicy } from './reconcile-policy.js';
import { reconcileSandbox } from './reconcile-sandbox.js';
import { CachedCopyOutdated, cacheBehindOwnWrites, ownWriteKey } from './status.js';

/** Whether to elect a leader, and the lease settings kube-runtime's election takes when it does. */
export type LeaderElectionSettings = { enabled: boolean } & Pick<
  LeaderElectionOptions,
  'namespace' | 'name' | 'identity' | 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'
>;

export interface PolicyControllerOptions {
  client: KubeClient;
  /** The one shared watch configuration; every watch below uses it. */
  config: WatchConfig;
  metrics: RuntimeMetrics;
  log: Logger;
  /** Watch one namespace only; all namespaces when unset. */
  namespace?: string;
  leaderElection: LeaderElectionSettings;
  env?: Record<string, string | undefined>;
  concurrency?: number;
  /**
   * Time source for every watch, timer and timestamp (default the system clock): `wallNow()` for
   * status times and comparisons with routers' echo times, `now()` for durations.
   */
  clock?: Clock;
  /** Grace before a `PolicyNotEnforced` Warning (default from KARS_NOT_ENFORCED_GRACE_SECS in `env`, else 10 s). */
  notEnforcedGraceMs?: number;
  /** Heartbeat period (default from KARS_HEARTBEAT_INTERVAL_SECS in `env`, else 15 s; 0 = off). */
  heartbeatIntervalMs?: number;
}

type IP = InferencePolicy & KubeObject;
type TP = ToolPolicy & KubeObject;
type EA = EgressApproval & KubeObject;
type SB = KarsSandbox & KubeObject;

const key = (o: KubeObject, name = o.metadata.name ?? ''): string => `${o.metadata.namespace ?? ''}/${name}`;

/** Keys from the object and its previous copy (a reference that moved must reconcile both ends). */
function both<T extends KubeObject>(c: Change<T>, f: (o: T) => string[]): string[] {
  const out = f(c.object);
  if (c.type === 'apply' && c.old) out.push(...f(c.old));
  return [...new Set(out)];
}

/**
 * Run `reconcile` for `key` unless the cached primary predates one of this controller's own writes
 * (read-your-writes, {@link OwnWrites}): then do nothing and look again when the watch delivers
 * that write (its event enqueues the key) or, as a backstop, when the record expires. A finalizer
 * patch that met a 409 ends the same way, without an error and without retrying from the same
 * outdated copy.
 */
async function reconcileOwnWritesSeen(
  ctx: ControllerContext,
  ref: ResourceRef,
  primary: ReflectorHandle,
  key: string,
  reconcile: (ctx: ControllerContext, key: string) => Promise<ReconcileResult>,
  log: Logger,
): Promise<ReconcileResult> {
  const cached = primary.store.get(key);
  if (!cached) ctx.ownWrites.forget(ownWriteKey(ref, { metadata: splitKey(key) }));
  else {
    const waitMs = cacheBehindOwnWrites(ctx, ref, cached);
    if (waitMs !== undefined) {
      log.debug(
        { resource: ref.resource, key, resourceVersion: cached.metadata.resourceVersion, waitMs },
        'cached copy predates our own write; waiting for the watch',
      );
      return { requeueAfterMs: waitMs };
    }
  }
  try {
    return await reconcile(ctx, key);
  } catch (err) {
    if (!(err instanceof CachedCopyOutdated) || !cached) throw err;
    const waitMs = cacheBehindOwnWrites(ctx, ref, cached) ?? 1000;
    log.debug(
      { resource: ref.resource, key, resourceVersion: cached.metadata.resourceVersion, waitMs },
      'conflict: the cached copy is outdated; waiting for the watch',
    );
    return { requeueAfterMs: waitMs };
  }
}

/**
 * The kars controller: reflectors for the four kinds, router echo Leases and compiled ConfigMaps,
 * one Controller per kind, leader election, and propagation metrics. Every watch uses the one
 * shared WatchConfig; reconcilers read the stores and act only while this replica leads.
 */
export class PolicyController {
  private readonly ctx: ControllerContext;
  private readonly reflectors: ReflectorHandle[];
  private readonly elector: LeaderElector | undefined;
  private readonly controllers: ControllerHandle[];
  private readonly heartbeat: HeartbeatWriter;

  constructor(private readonly opts: PolicyControllerOptions) {
    const { client, config, metrics, log } = opts;
    const ns = opts.namespace;
    const clock = opts.clock ?? systemClock;
    const reflector = <T extends KubeObject>(
      name: string,
      resource: ResourceRef,
      extra: Partial<ConstructorParameters<typeof Reflector<T>>[0]> = {},
    ): Reflector<T> =>
      new Reflector<T>({
        name,
        client,
        resource,
        config,
        metrics: metrics.watch(name),
        log,
        // Nothing here reads managedFields; not caching them saves memory per object (client-go's usual transform).
        transform: dropManagedFields,
        clock,
        ...(ns ? { namespace: ns } : {}),
        ...extra,
      });
    const inference = reflector<IP>('inferencepolicies', INFERENCE_POLICY);
    const tool = reflector<TP>('toolpolicies', TOOL_POLICY);
    const egress = reflector<EA>('egressapprovals', EGRESS_APPROVAL, {
      indexers: { [BY_SANDBOX]: (a) => [`${a.metadata.namespace ?? ''}/${a.spec?.sandbox ?? ''}`] },
    });
    const sandboxes = reflector<SB>('karssandboxes', KARS_SANDBOX);
    const leases = reflector<KubeObject>('router-leases', Resources.leases, {
      labelSelector: `${ROUTER_LABEL}=true`,
      indexers: { [BY_SANDBOX]: (l) => [`${l.metadata.namespace ?? ''}/${l.metadata.labels?.[SANDBOX_LABEL] ?? ''}`] },
    });
    // The heartbeat ConfigMaps share the managed-by label (so routers get them on their policy watch);
    // the controller has no use for its own heartbeats and leaves them out.
    const configmaps = reflector<KubeObject>('compiled-configmaps', Resources.configmaps, {
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},!${HEARTBEAT_LABEL}`,
    });
    // Before any reconcile reads the leases: which of them two processes write (ADR 0024).
    const leaseHolders = new LeaseHolderTracker();
    leases.subscribe((c) => leaseHolders.observe(c));
    this.reflectors = [inference, tool, egress, sandboxes, leases, configmaps];
    if (log.isLevelEnabled?.('debug') ?? true) {
      // At debug, every change each watch delivers (the watch lifecycle itself is logged at info).
      for (const r of this.reflectors)
        r.subscribe((c) =>
          log.debug(
            {
              watch: r.name,
              change: c.type,
              key: key(c.object),
              resourceVersion: c.object.metadata.resourceVersion,
              generation: c.object.metadata.generation,
            },
            'watch change',
          ),
        );
    }
    const now = (): number => clock.wallNow();
    this.ctx = {
      client,
      inference,
      tool,
      egress,
      sandboxes,
      leases,
      leaseHolders,
      configmaps,
      log,
      events: new EventRecorder(client, log, clock),
      propagation: new PropagationTracker(metrics.registry, clock),
      now,
      env: opts.env ?? {},
      notEnforcedGraceMs: opts.notEnforcedGraceMs ?? notEnforcedGraceFromEnv(opts.env ?? {}),
      ownWrites: new OwnWrites({ clock }),
    };
    const policies: ReflectorHandle[] = [inference, tool, egress];
    for (const r of policies) {
      r.subscribe((c) => {
        if (c.type === 'apply' && c.object.metadata.generation !== c.old?.metadata.generation) this.ctx.propagation.observe(c.object);
      });
    }
    const le = opts.leaderElection;
    this.elector = le.enabled
      ? new LeaderElector({
          api: leaseApi(client),
          namespace: le.namespace,
          name: le.name,
          identity: le.identity,
          ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
          ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
          ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
          log,
          clock,
          onStartedLeading: () => {
            metrics.leader(le.name).set(true);
            log.info({ identity: le.identity }, 'started leading; reconcilers active');
            for (const c of this.controllers) c.wake();
            this.heartbeat.wake();
          },
          onStoppedLeading: () => {
            metrics.leader(le.name).set(false);
            log.warn({ identity: le.identity }, 'stopped leading; reconcilers paused');
          },
        })
      : undefined;
    const isActive = (): boolean => this.elector?.isLeader() ?? true;
    this.heartbeat = new HeartbeatWriter({
      client,
      sandboxes: sandboxes.store,
      isLeader: isActive,
      identity: le.identity,
      intervalMs: opts.heartbeatIntervalMs ?? heartbeatIntervalMsFromEnv(opts.env ?? {}),
      log,
      registry: metrics.registry,
      clock,
    });
    // The first beat goes out when this replica leads and the sandbox store is ready, and a namespace
    // that gets its first sandbox is beaten at once, instead of one interval later.
    void sandboxes.store.ready().then(
      () => this.heartbeat.wake(),
      () => undefined,
    );
    sandboxes.subscribe((c) => {
      if (c.type === 'apply') this.heartbeat.noteNamespace(c.object.metadata.namespace ?? '');
    });
    const sandboxOf = (l: KubeObject): SB | undefined => sandboxes.store.get(key(l, l.metadata.labels?.[SANDBOX_LABEL] ?? ''));
    const ctx = this.ctx;
    const common = { isActive, concurrency: opts.concurrency ?? 32, log, clock };
    const mk = <T extends KubeObject>(
      name: string,
      ref: ResourceRef,
      primary: Reflector<T>,
      triggers: Trigger[],
      reconcile: (ctx: ControllerContext, key: string) => Promise<ReconcileResult>,
    ): ControllerHandle =>
      new Controller<T>({
        name,
        primary,
        triggers,
        metrics: metrics.controller(name),
        reconcile: (k) => reconcileOwnWritesSeen(ctx, ref, primary, k, reconcile, log),
        ...common,
      });
    // A sandbox (or its router's lease) reaches the policies of a kind it references and the
    // DryRun ones that select it (ADR 0050); a compiled ConfigMap reaches the policy its label names.
    const profileTriggers = (d: ProfileKindIdentity): Trigger[] => {
      const of = (s: SB): string[] => {
        const n = d.referencedBy(s);
        return [...(n ? [key(s, n)] : []), ...dryRunPoliciesOf(ctx, d.kind, s)];
      };
      return [
        trigger(sandboxes, (c) => both(c, of)),
        trigger(leases, (c) =>
          both(c, (l) => {
            const s = sandboxOf(l);
            return s ? of(s) : [];
          }),
        ),
        trigger(configmaps, (c) =>
          both(c, (cm) => {
            const p = cm.metadata.labels?.[d.configMap.policyLabel];
            return p ? [key(cm, p)] : [];
          }),
        ),
      ];
    };
    const approvalsOf = (namespace: string, sandbox: string): string[] =>
      egress.store.byIndex(BY_SANDBOX, `${namespace}/${sandbox}`).map((a) => key(a));
    this.controllers = [
      mk('inferencepolicy', INFERENCE_POLICY, inference, profileTriggers(INFERENCE_POLICY_KIND), reconcileInferencePolicy),
      mk('toolpolicy', TOOL_POLICY, tool, profileTriggers(TOOL_POLICY_KIND), reconcileToolPolicy),
      mk(
        'egressapproval',
        EGRESS_APPROVAL,
        egress,
        [
          trigger(sandboxes, (c) => both(c, (s) => approvalsOf(s.metadata.namespace ?? '', s.metadata.name ?? ''))),
          trigger(leases, (c) => both(c, (l) => approvalsOf(l.metadata.namespace ?? '', l.metadata.labels?.[SANDBOX_LABEL] ?? ''))),
          trigger(configmaps, (c) =>
            both(c, (cm) => {
              const sandbox = cm.metadata.labels?.[EGRESS_APPROVAL_KIND.configMap.sandboxLabel];
              return sandbox ? approvalsOf(cm.metadata.namespace ?? '', sandbox) : [];
            }),
          ),
          trigger(egress, (c) => both(c, (a) => approvalsOf(a.metadata.namespace ?? '', EGRESS_APPROVAL_KIND.referencedBy(a) ?? ''))),
        ],
        reconcileEgressApproval,
      ),
      mk(
        'karssandbox',
        KARS_SANDBOX,
        sandboxes,
        [trigger(leases, (c) => both(c, (l) => (l.metadata.labels?.[SANDBOX_LABEL] ? [key(l, l.metadata.labels[SANDBOX_LABEL])] : [])))],
        reconcileSandbox,
      ),
    ];
  }

  /** Whether this replica reconciles (always true without leader election). */
  isLeader(): boolean {
    return this.elector?.isLeader() ?? true;
  }

  /**
   * Liveness: the reconcile-activity watchdog over every controller: fails while this replica leads,
   * keys wait, and no reconcile has started or finished for `stallMs`.
   */
  liveness(stallMs: number): LivenessCheck[] {
    return [reconcileWatchdog({ controllers: this.controllers, isLeader: () => this.isLeader(), stallMs })];
  }

  /** Readiness: every watch is synced and confirmed fresh within its bound. */
  readiness(): ReadinessCheck[] {
    return this.reflectors.map((r) => ({
      name: `watch-${r.name}`,
      check: () => ({
        ok: r.isFresh(),
        detail: r.store.isReady()
          ? `unconfirmed for ${Math.round(r.staleForMs())} ms (bound ${r.freshnessBoundMs()} ms)`
          : 'initial list not complete',
      }),
    }));
  }

  /** Run every watch, the elector and the reconcilers until `signal` aborts. */
  async run(outer: AbortSignal): Promise<void> {
    // One internal signal with room for every watch, controller and timer to listen on it.
    const inner = new AbortController();
    setMaxListeners(0, inner.signal);
    const stop = (): void => inner.abort(outer.reason);
    if (outer.aborted) stop();
    else outer.addEventListener('abort', stop, { once: true });
    const signal = inner.signal;
    const runs: Promise<void>[] = this.reflectors.map((r) => r.run(signal));
    if (this.elector) runs.push(this.elector.run(signal));
    runs.push(...this.controllers.map((c) => c.run(signal)));
    runs.push(this.heartbeat.run(signal));
    try {
      await Promise.all(runs);
    } finally {
      outer.removeEventListener('abort', stop);
    }
  }
}
