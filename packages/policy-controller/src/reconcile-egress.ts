import type { KubeObject } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { ReconcileResult } from '@kars/kube-runtime';
import { splitKey } from '@kars/kube-runtime';
import { isLive, parseTtl, validateEgressApprovalSpec } from '@kars/policy-api';
import type { EgressApproval } from '@kars/policy-api';
import { approvalFile, EGRESS_APPROVAL_KIND, egressApprovalsConfigMap, expectedEgressDigest } from '@kars/policy-compiler';
import { echoesFor, nextLeaseExpiryMs } from './context.js';
import type { ControllerContext } from './context.js';
import { withTransitions } from './enforcement.js';
import { ownerReferencesOf } from './owner.js';
import { addFinalizer, applyStatus, removeFinalizer, rfc3339 } from './status.js';

type Approval = EgressApproval & KubeObject;
const K = EGRESS_APPROVAL_KIND;

interface Outcome {
  phase: 'Pending' | 'Active' | 'Expired';
  ready: { status: 'True' | 'False'; reason: string; message: string };
  degraded?: { reason: string; message: string };
}

function conditions(
  o: Outcome,
): Array<{ type: 'Ready' | 'Progressing' | 'Degraded'; status: 'True' | 'False'; reason: string; message: string }> {
  return [
    { type: 'Ready', status: o.ready.status, reason: o.ready.reason, message: o.ready.message },
    { type: 'Progressing', status: o.phase === 'Pending' ? 'True' : 'False', reason: o.ready.reason, message: o.ready.message },
    o.degraded
      ? { type: 'Degraded', status: 'True', reason: o.degraded.reason, message: o.degraded.message }
      : { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'reconciled' },
  ];
}

/** Apply this approval's key into the sandbox's approvals ConfigMap (or, with no file, drop it). */
async function writeKey(ctx: ControllerContext, a: Approval, file: { key: string; body: string } | undefined): Promise<void> {
  const cm = egressApprovalsConfigMap({ sandbox: a.spec.sandbox, namespace: a.metadata.namespace ?? '', files: file ? [file] : [] });
  // The approval owns the shared ConfigMap while its key is there (one reference per approval, under
  // its own field manager; ADR 0032): with every owner gone, the garbage collector removes it.
  const owners = file ? ownerReferencesOf(K.resource, K.kind, a, { controller: false }) : [];
  const applied = owners.length > 0 ? { ...cm, metadata: { ...cm.metadata, ownerReferences: owners } } : { ...cm };
  await ctx.client.apply(Resources.configmaps, applied, K.fieldManager(a.metadata.name ?? ''), { force: true });
}

/** Approvals of one sandbox whose key is written (effective, not expired, not deleting), with their expiry. */
function liveApprovals(
  ctx: ControllerContext,
  namespace: string,
  sandbox: string,
  self: Approval,
  selfExpiresAtMs: number,
): Array<{ hosts: Approval['spec']['hosts']; expiresAtMs: number }> {
  const out: Array<{ hosts: Approval['spec']['hosts']; expiresAtMs: number }> = [];
  for (const a of ctx.egress.store.list()) {
    if (a.metadata.namespace !== namespace || a.spec?.sandbox !== sandbox) continue;
    if (a.metadata.uid === self.metadata.uid) {
      out.push({ hosts: a.spec.hosts, expiresAtMs: selfExpiresAtMs });
      continue;
    }
    if (a.metadata.deletionTimestamp || a.status?.phase === 'Expired' || !a.status?.effectiveAt || !a.status.expiresAt) continue;
    out.push({ hosts: a.spec.hosts, expiresAtMs: Date.parse(a.status.expiresAt) });
  }
  return out;
}

/**
 * Reconcile one EgressApproval (contract §3.6): validate, wait for a Running sandbox, stamp
 * effectiveAt once, write this approval's key with its own field manager, compute the merged digest
 * (baseline ∪ this ∪ active siblings) and compare it with what the sandbox's routers echo. At expiry
 * the key is removed by a timer set to the exact expiry time, not by a periodic poll.
 */
export async function reconcileEgressApproval(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const a = ctx.egress.store.get(key);
  const { namespace = '' } = splitKey(key);
  if (!a) return;
  if (a.metadata.deletionTimestamp) {
    if (a.metadata.finalizers?.includes(K.finalizer)) {
      await writeKey(ctx, a, undefined);
      await removeFinalizer(ctx, K.resource, a, K.finalizer);
    }
    return;
  }
  const nowMs = ctx.now();
  const generation = a.metadata.generation ?? 1;
  const prev = a.status ?? {};
  const finish = async (o: Outcome, extra: Record<string, unknown>, requeueMs: number | undefined): Promise<ReconcileResult> => {
    const status: Record<string, unknown> = {
      ...prev,
      ...extra,
      observedGeneration: generation,
      phase: o.phase,
      hostCount: Array.isArray(a.spec?.hosts) ? a.spec.hosts.length : 0,
    };
    status['conditions'] = withTransitions(conditions(o), prev.conditions, generation, rfc3339(nowMs));
    await applyStatus(ctx, K.resource, a, status, K.statusManager);
    return requeueMs === undefined ? undefined : { requeueAfterMs: requeueMs };
  };

  if (prev.phase === 'Expired') {
    await writeKey(ctx, a, undefined);
    return;
  }
  if (!a.metadata.finalizers?.includes(K.finalizer)) {
    await addFinalizer(ctx, K.resource, a, K.finalizer);
    return;
  }
  // The sandbox's baseline decides which special addresses an approval may open; a sandbox without
  // one has an empty baseline (so none). Unknown until the sandbox exists: then only wildcards are
  // refused here, and the approval waits (BlockedOnSandbox) and is checked again when it appears.
  const boundSandbox = ctx.sandboxes.store.get(`${namespace}/${a.spec?.sandbox ?? ''}`);
  const baseline = boundSandbox ? (boundSandbox.spec?.networkPolicy?.allowedEndpoints ?? []) : undefined;
  const causes = validateEgressApprovalSpec(a.spec, { env: ctx.env, ...(baseline ? { baseline } : {}) });
  if (causes.length > 0) {
    const c = causes[0]!;
    const message = causes.map((x) => `${x.field}: ${x.message}`).join('; ');
    return finish(
      { phase: 'Pending', ready: { status: 'False', reason: c.reason, message }, degraded: { reason: c.reason, message } },
      {},
      30_000,
    );
  }
  const sandbox = boundSandbox;
  if (!sandbox || sandbox.status?.phase !== 'Running') {
    return finish(
      {
        phase: 'Pending',
        ready: {
          status: 'False',
          reason: 'BlockedOnSandbox',
          message: `sandbox "${a.spec.sandbox}" ${sandbox ? 'has no running router' : 'does not exist'} in namespace ${namespace}`,
        },
      },
      {},
      5_000,
    );
  }
  const ttlSeconds = parseTtl(a.spec.ttl) ?? 0;
  const effectiveAt = prev.effectiveAt ?? rfc3339(nowMs);
  const expiresAtMs = Date.parse(effectiveAt) + ttlSeconds * 1000;
  const expiresAt = rfc3339(expiresAtMs);
  if (nowMs >= expiresAtMs) {
    await writeKey(ctx, a, undefined);
    const r = await finish(
      { phase: 'Expired', ready: { status: 'False', reason: 'Expired', message: `expired at ${expiresAt}` } },
      { effectiveAt, expiresAt, loadedDigest: null },
      undefined,
    );
    // The finalizer stays (the contract removes it here): deleting an expired approval later is then
    // still cleaned up the same way, and an Expired approval is never reconciled back to life.
    ctx.log.info({ approval: key, expiresAt }, 'egress approval expired; key removed');
    return r;
  }
  const file = approvalFile({ metadata: { name: a.metadata.name ?? '' }, spec: a.spec }, effectiveAt, expiresAt);
  await writeKey(ctx, a, file);
  const merged = { digest: expectedEgressDigest(sandbox, liveApprovals(ctx, namespace, a.spec.sandbox, a, expiresAtMs), nowMs) };
  const echoes = echoesFor(ctx, namespace, a.spec.sandbox);
  const routers = echoes.filter((r) => isLive(r, nowMs));
  ctx.log.debug(
    { approval: key, sandbox: a.spec.sandbox, mergedDigest: merged.digest, echoes: routers.map((r) => r.digests.EgressApproval ?? null) },
    'compiled egress allowlist',
  );
  const confirmed = routers.length > 0 && routers.every((r) => r.digests.EgressApproval === merged.digest);
  const untilExpiry = Math.max(1, expiresAtMs - nowMs);
  const leaseExpiry = nextLeaseExpiryMs(echoes, nowMs);
  const leaseWait = leaseExpiry === undefined ? Infinity : Math.max(50, leaseExpiry - nowMs + 50);
  if (confirmed) {
    return finish(
      {
        phase: 'Active',
        ready: { status: 'True', reason: 'RouterConfirmed', message: `${routers.length} router(s) enforce the merged allowlist` },
      },
      { effectiveAt, expiresAt, mergedDigest: merged.digest, loadedDigest: merged.digest },
      Math.min(untilExpiry, 30_000, leaseWait),
    );
  }
  const seen = routers.map((r) => r.digests.EgressApproval ?? 'nothing').join(', ');
  return finish(
    {
      phase: 'Pending',
      ready: {
        status: 'False',
        reason: 'AwaitingRouterEcho',
        message: `waiting for the sandbox router to echo ${merged.digest}${routers.length ? ` (echoes: ${seen})` : ''}`,
      },
    },
    { effectiveAt, expiresAt, mergedDigest: merged.digest, loadedDigest: null },
    Math.min(untilExpiry, 5_000, leaseWait),
  );
}
