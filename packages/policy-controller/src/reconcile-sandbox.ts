import type { ReconcileResult } from '@kars/kube-runtime';
import { splitKey } from '@kars/kube-runtime';
import { isLive, KARS_SANDBOX } from '@kars/policy-api';
import type { RouterInstance } from '@kars/policy-api';
import { echoesFor, nextLeaseExpiryMs } from './context.js';
import type { ControllerContext } from './context.js';
import { applyStatus, rfc3339 } from './status.js';

/**
 * Reconcile one KarsSandbox: `Running` while at least one router's echo lease is live, `Pending`
 * otherwise, with the live router instances listed. Re-checks when the soonest lease runs out.
 */
export async function reconcileSandbox(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const sb = ctx.sandboxes.store.get(key);
  if (!sb || sb.metadata.deletionTimestamp) return;
  const { namespace = '', name } = splitKey(key);
  const nowMs = ctx.now();
  const live = echoesFor(ctx, namespace, name).filter((e) => isLive(e, nowMs));
  const prevRouters = sb.status?.routers ?? [];
  const routers: RouterInstance[] = [...new Set(live.map((e) => e.instance))].sort().map((instance) => ({
    instance,
    lastSeen: prevRouters.find((r) => r.instance === instance)?.lastSeen ?? rfc3339(Math.max(...live.filter((e) => e.instance === instance).map((e) => e.renewedAtMs))),
  }));
  const status = { ...(sb.status ?? {}), phase: routers.length > 0 ? 'Running' : 'Pending', routers, observedGeneration: sb.metadata.generation ?? 1 };
  await applyStatus(ctx, KARS_SANDBOX, sb, status, 'kars-controller/karssandbox-status');
  const expiry = nextLeaseExpiryMs(live, nowMs);
  return expiry === undefined ? undefined : { requeueAfterMs: Math.max(50, expiry - nowMs + 50) };
}
