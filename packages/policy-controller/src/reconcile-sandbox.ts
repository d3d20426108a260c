import { sortedRecord } from '@kars/kube-core';
import type { ReconcileResult } from '@kars/kube-runtime';
import { splitKey } from '@kars/kube-runtime';
import { isLive, KARS_SANDBOX } from '@kars/policy-api';
import type { RouterInstance } from '@kars/policy-api';
import { echoesFor, nextLeaseExpiryMs } from './context.js';
import type { ControllerContext } from './context.js';
import { applyStatus, rfc3339 } from './status.js';

/**
 * Reconcile one KarsSandbox: `Running` while at least one router's echo lease is live, `Pending`
 * otherwise, with the live router instances listed and, per instance, the digests it has loaded
 * and its last load errors (from its echo Lease), so `kubectl get ksb -o yaml` shows what each router enforces. Re-checks when the soonest lease runs out.
 */
export async function reconcileSandbox(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const sb = ctx.sandboxes.store.get(key);
  if (!sb || sb.metadata.deletionTimestamp) return;
  const { namespace = '', name } = splitKey(key);
  const nowMs = ctx.now();
  const echoes = echoesFor(ctx, namespace, name);
  const live = echoes.filter((e) => isLive(e, nowMs));
  const prevRouters = sb.status?.routers ?? [];
  const routers: RouterInstance[] = [...new Set(live.map((e) => e.instance))].sort().map((instance) => {
    // The newest lease of this instance says what it has loaded (a restarted instance may leave an older one).
    const newest = live.filter((e) => e.instance === instance).reduce((a, b) => (b.renewedAtMs > a.renewedAtMs ? b : a));
    const loaded = sortedRecord(newest.digests);
    const lastErrors = sortedRecord(newest.errors);
    const prev = prevRouters.find((r) => r.instance === instance);
    const same = prev !== undefined && sameRecord(prev.loaded ?? {}, loaded) && sameRecord(prev.lastErrors ?? {}, lastErrors);
    // lastSeen moves only when what the router reports changes, so lease renewals do not rewrite the status.
    return { instance, lastSeen: same ? prev.lastSeen : rfc3339(newest.renewedAtMs), loaded, lastErrors };
  });
  const status = {
    ...(sb.status ?? {}),
    phase: routers.length > 0 ? 'Running' : 'Pending',
    routers,
    observedGeneration: sb.metadata.generation ?? 1,
  };
  await applyStatus(ctx, KARS_SANDBOX, sb, status, 'kars-controller/karssandbox-status');
  const expiry = nextLeaseExpiryMs(echoes, nowMs);
  return expiry === undefined ? undefined : { requeueAfterMs: Math.max(50, expiry - nowMs + 50) };
}

/**
 * Whether two records hold the same values, a null member counting as absent: the stored status
 * never has one (server-side apply removes null members), while a router's echo does (`AgtProfile:
 * null`), and without this every lease renewal would move lastSeen and rewrite the status.
 */
export function sameRecord(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const ka = Object.keys(a).filter((k) => a[k] !== null && a[k] !== undefined);
  const kb = Object.keys(b).filter((k) => b[k] !== null && b[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => a[k] === b[k]);
}
