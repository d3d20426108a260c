import { ApiError } from '@kars/kube-core';
import type { KubeObject, OwnerReference } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { ReconcileResult } from '@kars/kube-runtime';
import { splitKey } from '@kars/kube-runtime';
import { INFERENCE_POLICY_KIND, TOOL_POLICY_KIND } from '@kars/policy-compiler';
import type { CompiledConfigMap, CompiledStatus, CompileFailure, ProfileKind, ProfileKindIdentity } from '@kars/policy-compiler';
import { echoesFor, referrersOf } from './context.js';
import { forMode } from './expectations.js';
import type { ControllerContext } from './context.js';
import { conditionsFor, phaseFor, shouldWarn, withTransitions } from './enforcement.js';
import type { EnforcementState } from './enforcement.js';
import { decidePolicyStatus, enforcementOf, isReadyState } from './policy-status.js';
import type { CompileOutcome, PolicyStatusFields, WrittenStatus } from './policy-status.js';
import { holdsOwnerReferences, ownerReferencesOf } from './owner.js';
import { addFinalizer, applyStatus, removeFinalizer, rfc3339, sameJson } from './status.js';

/**
 * A profile kind as its reconciler sees it: the kind's descriptor (resource, finalizer, field
 * managers, ConfigMap, referrers), its validate and compile over the cached object, and the two
 * things that are the controller's own: which cache holds it, and how soon to look again at a
 * policy no sandbox refers to.
 */
interface ReconciledKind<T extends KubeObject> {
  descriptor: ProfileKindIdentity;
  validate: (obj: T) => Array<{ field: string; message: string; reason: string }>;
  compile: (obj: T) => ({ ok: true } & CompiledStatus) | CompileFailure;
  store: (ctx: ControllerContext) => { get(key: string): T | undefined };
  noReferrersRequeueMs: number;
}

/** The reconciled form of a profile kind's descriptor. */
function reconciled<P extends { metadata: { name?: string; namespace?: string }; spec?: unknown }, C, L, T extends KubeObject & P>(
  d: ProfileKind<P, C, L>,
  store: (ctx: ControllerContext) => { get(key: string): T | undefined },
  noReferrersRequeueMs: number,
): ReconciledKind<T> {
  return {
    descriptor: d,
    validate: (obj) => d.validate(obj.spec as NonNullable<P['spec']>),
    compile: (obj) => {
      const c = d.compile(obj);
      return c.ok ? { ok: true, ...d.status(c) } : c;
    },
    store,
    noReferrersRequeueMs,
  };
}

const INFERENCE = reconciled(INFERENCE_POLICY_KIND, (ctx) => ctx.inference.store, 300_000);
const TOOL = reconciled(TOOL_POLICY_KIND, (ctx) => ctx.tool.store, 15_000);

/** Reconcile one InferencePolicy by key. */
export function reconcileInferencePolicy(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  return reconcilePolicy(ctx, INFERENCE, key);
}

/** Reconcile one ToolPolicy by key. */
export function reconcileToolPolicy(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  return reconcilePolicy(ctx, TOOL, key);
}

/** A compiled ConfigMap as applied: owned by the policy it was compiled from (ADR 0032). */
type OwnedConfigMap = CompiledConfigMap & { metadata: CompiledConfigMap['metadata'] & { ownerReferences: OwnerReference[] } };

/** Whether the watched copy of a compiled ConfigMap already holds exactly these labels, annotations, owners and data. */
function configMapMatches(ctx: ControllerContext, want: OwnedConfigMap): boolean {
  const have = ctx.configmaps.store.get(`${want.metadata.namespace}/${want.metadata.name}`) as
    (KubeObject & { data?: Record<string, string> }) | undefined;
  if (!have) return false;
  const sub = (a: Record<string, string>, b: Record<string, string> | undefined): boolean =>
    Object.entries(a).every(([k, v]) => b?.[k] === v);
  return (
    sub(want.metadata.labels, have.metadata.labels) &&
    sub(want.metadata.annotations, have.metadata.annotations) &&
    holdsOwnerReferences(have.metadata.ownerReferences, want.metadata.ownerReferences) &&
    sameJson(want.data, have.data ?? {})
  );
}

async function deleteConfigMap(ctx: ControllerContext, namespace: string, name: string): Promise<void> {
  try {
    await ctx.client.delete(Resources.configmaps, namespace, name);
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 404)) throw err;
  }
}

/**
 * The shared policy reconcile (contract §3.1/§3.2): finalizer, validation (an invalid spec never
 * replaces the last good ConfigMap), compile, server-side apply of the ConfigMap (which also
 * restores one edited or deleted by hand), referrers, router echo, status, events, requeue.
 */
async function reconcilePolicy<T extends KubeObject & { status?: PolicyStatusFields }>(
  ctx: ControllerContext,
  k: ReconciledKind<T>,
  key: string,
): Promise<ReconcileResult> {
  const obj = k.store(ctx).get(key);
  const { namespace = '', name } = splitKey(key);
  if (!obj) {
    ctx.propagation.forget(k.descriptor.kind, key);
    return;
  }
  if (obj.metadata.deletionTimestamp) {
    if (obj.metadata.finalizers?.includes(k.descriptor.finalizer)) {
      await deleteConfigMap(ctx, namespace, k.descriptor.configMap.name(name));
      await removeFinalizer(ctx, k.descriptor.resource, obj, k.descriptor.finalizer);
      ctx.log.info({ kind: k.descriptor.kind, key }, 'policy deleted; compiled ConfigMap removed');
    }
    ctx.propagation.forget(k.descriptor.kind, key, obj);
    ctx.events.forget(obj.metadata.uid);
    return;
  }
  // Add the finalizer and carry on in the same pass (the ConfigMap must never exist without it).
  if (!obj.metadata.finalizers?.includes(k.descriptor.finalizer))
    await addFinalizer(ctx, k.descriptor.resource, obj, k.descriptor.finalizer);
  const generation = obj.metadata.generation ?? 1;
  const nowMs = ctx.now();
  const prev = obj.status;

  const outcome = await compileAndApply(ctx, k, obj, namespace, name, generation, nowMs);
  const state = enforcementOf(outcome, nowMs);
  const compileMs = outcome.ok ? ctx.propagation.compiled(k.descriptor.kind, obj) : undefined;
  const decided = decidePolicyStatus({
    prev,
    generation,
    nowMs,
    outcome,
    state,
    compileMs,
    enforcedMs: outcome.ok && isReadyState(state) ? ctx.propagation.enforced(k.descriptor.kind, obj) : undefined,
    noReferrersRequeueMs: k.noReferrersRequeueMs,
  });
  let requeueMs = decided.requeueMs;
  if (!outcome.ok) {
    ctx.log.warn(
      { kind: k.descriptor.kind, key, reason: outcome.reason, message: outcome.message },
      'invalid spec; keeping the last good ConfigMap',
    );
  } else {
    const digest = outcome.digest;
    ctx.log.debug(
      { kind: k.descriptor.kind, key, generation, digest: digest ?? null, configMap: k.descriptor.configMap.name(name), compileMs },
      'compiled',
    );
    if (state.kind === 'Rejected') {
      ctx.log.warn({ kind: k.descriptor.kind, key, details: state.details }, 'a router refused the compiled policy');
      void ctx.events.warn(obj, 'RouterRejected', conditionsFor(state)[0]?.message ?? '', `${generation}/${digest ?? ''}`);
    }
    if (shouldWarn(state)) {
      // Only after the grace: routers echo a routine edit within milliseconds, and that is no news.
      const wait = ctx.events.warnAfterGrace(
        obj,
        'PolicyNotEnforced',
        `AwaitingRouterConfirmation: ${conditionsFor(state)[0]?.message ?? ''}`,
        `${generation}/${digest ?? ''}`,
        ctx.notEnforcedGraceMs,
        nowMs,
      );
      if (wait !== undefined) requeueMs = Math.min(requeueMs, wait + 50);
    } else ctx.events.settled(obj.metadata.uid);
  }
  await writeStatus(ctx, k, obj, decided.status, state, generation, nowMs);
  return { requeueAfterMs: requeueMs };
}

/**
 * Validate and compile `obj`, apply its ConfigMap (skipped when the watched copy already matches;
 * this also restores one edited or deleted by hand), and read the referencing sandboxes' echoes.
 * An invalid spec writes nothing, so the last good ConfigMap stays. A failed write is reported in
 * the status (ProfileWriteFailed) and rethrown, so the reconcile is retried.
 */
async function compileAndApply<T extends KubeObject & { status?: PolicyStatusFields }>(
  ctx: ControllerContext,
  k: ReconciledKind<T>,
  obj: T,
  namespace: string,
  name: string,
  generation: number,
  nowMs: number,
): Promise<CompileOutcome> {
  const causes = k.validate(obj);
  if (causes.length > 0)
    return { ok: false, reason: causes[0]?.reason ?? 'InvalidSpec', message: causes.map((c) => `${c.field}: ${c.message}`).join('; ') };
  const compiled = k.compile(obj);
  if (!compiled.ok) return { ok: false, reason: compiled.reason, message: `${compiled.field}: ${compiled.message}` };
  // A DryRun policy is echoed in its own slot by the routers it selects, never as the enforced kind (ADR 0050).
  const expect = forMode(compiled.expect, name, (obj as { spec?: { enforcement?: unknown } }).spec);
  const configMap: OwnedConfigMap = {
    ...compiled.configMap,
    metadata: {
      ...compiled.configMap.metadata,
      ownerReferences: ownerReferencesOf(k.descriptor.resource, k.descriptor.kind, obj, { controller: true }),
    },
  };
  try {
    // Skip the write when the cached ConfigMap already matches (our own apply echoing back).
    if (!configMapMatches(ctx, configMap))
      await ctx.client.apply(Resources.configmaps, { ...configMap }, k.descriptor.fieldManager, { force: true });
  } catch (err) {
    const message = `writing ConfigMap ${compiled.configMap.metadata.name}: ${err instanceof Error ? err.message : String(err)}`;
    const status: WrittenStatus = { ...(obj.status ?? {}), observedGeneration: generation };
    await writeStatus(ctx, k, obj, status, { kind: 'Degraded', reason: 'ProfileWriteFailed', message }, generation, nowMs);
    throw err;
  }
  const echoes = referrersOf(ctx, k.descriptor, namespace, name).map((s) => ({
    sandbox: s.metadata.name ?? '',
    routers: echoesFor(ctx, namespace, s.metadata.name ?? ''),
  }));
  return { ok: true, digest: compiled.digest, expect, extra: compiled.extra, echoes };
}

async function writeStatus<T extends KubeObject & { status?: PolicyStatusFields }>(
  ctx: ControllerContext,
  k: ReconciledKind<T>,
  obj: T,
  status: WrittenStatus,
  state: EnforcementState,
  generation: number,
  nowMs: number,
): Promise<void> {
  status['phase'] = phaseFor(state);
  status['conditions'] = withTransitions(conditionsFor(state), obj.status?.conditions, generation, rfc3339(nowMs));
  const wrote = await applyStatus(ctx, k.descriptor.resource, obj, status, k.descriptor.statusManager);
  ctx.propagation.setReady(
    k.descriptor.kind,
    `${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`,
    state.kind === 'Confirmed' || state.kind === 'NotApplicable',
  );
  // Debug, not info: a cold start writes one status per policy, and a line each held a measurable
  // share of the controller's CPU (ADR 0017). Phase changes that need attention come as Events.
  if (wrote)
    ctx.log.debug(
      {
        kind: k.descriptor.kind,
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        phase: status['phase'],
        state: state.kind,
        generation,
      },
      'status updated',
    );
}
