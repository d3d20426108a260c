import type { KubeObject } from '@kars/kube-core';
import type { KubeClient } from '@kars/kube-client';
import type { OwnWrites, Reflector } from '@kars/kube-runtime';
import type { EgressApproval, InferencePolicy, KarsSandbox, RouterEcho, ToolPolicy } from '@kars/policy-api';
import { dryRunReaches, enforcementModeOf, expiresAtMs, readEcho } from '@kars/policy-api';
import type { ProfileKindIdentity } from '@kars/policy-compiler';
import type { Logger } from '@kars/kube-core';
import type { EventRecorder } from './events.js';
import type { PropagationTracker } from './propagation.js';
import type { LeaseHolderTracker } from './lease-holders.js';

/** Index names used on the reflector stores. */
export const BY_SANDBOX = 'bySandbox';

/** Everything a reconciler reads and writes through. Stores are caches: read, never mutate. */
export interface ControllerContext {
  client: KubeClient;
  inference: Reflector<InferencePolicy & KubeObject>;
  tool: Reflector<ToolPolicy & KubeObject>;
  egress: Reflector<EgressApproval & KubeObject>;
  sandboxes: Reflector<KarsSandbox & KubeObject>;
  /** Router echo Leases (label kars.azure.com/router=true), indexed by `<namespace>/<sandbox>`. */
  leases: Reflector;
  /** Which of those leases two processes were seen writing (ADR 0024); absent in tests that build a context by hand. */
  leaseHolders?: LeaseHolderTracker;
  /** The compiled ConfigMaps (label app.kubernetes.io/managed-by=kars-controller). */
  configmaps: Reflector;
  log: Logger;
  events: EventRecorder;
  propagation: PropagationTracker;
  /** Wall-clock epoch ms (the clock's `wallNow`): status timestamps, and comparisons with routers' echo times. */
  now: () => number;
  env: Record<string, string | undefined>;
  /**
   * What this controller's own writes of its primary objects told it (read-your-writes, see
   * `ownWriteKey`): a reconcile never acts on a cached copy that predates one of them.
   */
  ownWrites: OwnWrites;
  /** How long a policy may await its routers' echo before the `PolicyNotEnforced` Warning (default 10 s). */
  notEnforcedGraceMs: number;
}

/** Default grace before `PolicyNotEnforced`: routine edits are echoed in milliseconds; 10 s without one is news. */
export const DEFAULT_NOT_ENFORCED_GRACE_MS = 10_000;

/** The grace from `KARS_NOT_ENFORCED_GRACE_SECS` (a non-negative number of seconds), else the default. */
export function notEnforcedGraceFromEnv(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env['KARS_NOT_ENFORCED_GRACE_SECS']?.trim();
  const n = raw === undefined || raw === '' ? NaN : Number(raw);
  return Number.isFinite(n) && n >= 0 ? n * 1000 : DEFAULT_NOT_ENFORCED_GRACE_MS;
}

/** The echoes of every router serving `<namespace>/<sandbox>` (live or not; callers check liveness). */
export function echoesFor(ctx: ControllerContext, namespace: string, sandbox: string): RouterEcho[] {
  return ctx.leases.store
    .byIndex(BY_SANDBOX, `${namespace}/${sandbox}`)
    .map((l) => {
      const e = readEcho(l);
      return e && ctx.leaseHolders ? ctx.leaseHolders.mark(l, e) : e;
    })
    .filter((e): e is RouterEcho => e !== undefined);
}

/**
 * The earliest moment a currently live router's lease runs out, or a contested lease (ADR 0024) stops
 * being contested, so a reconcile can re-check then.
 */
export function nextLeaseExpiryMs(echoes: RouterEcho[], nowMs: number): number | undefined {
  let soonest: number | undefined;
  for (const e of echoes) {
    for (const at of [expiresAtMs(e), e.contestedUntilMs ?? 0]) if (at > nowMs && (soonest === undefined || at < soonest)) soonest = at;
  }
  return soonest;
}

/**
 * The sandboxes whose routers must echo the policy `name` of `kind`: those whose spec refers to it
 * (the kind's descriptor says how) or, for a DryRun policy (ADR 0050), those of the namespace its
 * `appliesTo` selects.
 */
export function referrersOf(ctx: ControllerContext, kind: ProfileKindIdentity, namespace: string, name: string): KarsSandbox[] {
  const policy = policyStore(ctx, kind.kind).get(`${namespace}/${name}`);
  if (enforcementModeOf(policy?.spec) === 'DryRun') return selectedBy(ctx, namespace, kind.kind, policy?.spec?.appliesTo);
  return live(ctx, namespace).filter((s) => kind.referencedBy(s) === name);
}

/** The keys of the DryRun policies of `kind` whose `appliesTo` selects `sandbox`, so its events reach them. */
export function dryRunPoliciesOf(ctx: ControllerContext, kind: 'InferencePolicy' | 'ToolPolicy', sandbox: KarsSandbox): string[] {
  const ns = sandbox.metadata.namespace ?? '';
  return policyStore(ctx, kind)
    .list()
    .filter((p) => p.metadata.namespace === ns && enforcementModeOf(p.spec) === 'DryRun' && dryRunReaches(kind, p.spec?.appliesTo, sandbox))
    .map((p) => `${ns}/${p.metadata.name ?? ''}`);
}

/** The cache of one profile kind's policies. */
function policyStore(
  ctx: ControllerContext,
  kind: 'InferencePolicy' | 'ToolPolicy',
): { get(key: string): (InferencePolicy | ToolPolicy) | undefined; list(): Array<(InferencePolicy | ToolPolicy) & KubeObject> } {
  return kind === 'InferencePolicy' ? ctx.inference.store : ctx.tool.store;
}

function live(ctx: ControllerContext, namespace: string): KarsSandbox[] {
  return ctx.sandboxes.store.list().filter((s) => s.metadata.namespace === namespace && !s.metadata.deletionTimestamp);
}

function selectedBy(
  ctx: ControllerContext,
  namespace: string,
  kind: 'InferencePolicy' | 'ToolPolicy',
  appliesTo: Parameters<typeof dryRunReaches>[1],
): KarsSandbox[] {
  return live(ctx, namespace).filter((s) => dryRunReaches(kind, appliesTo, s));
}
