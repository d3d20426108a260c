/**
 * Two processes writing one router echo Lease (ADR 0024). Routers take a lease only when it is free or
 * its holder is dead, but the controller does not rely on that: it watches every write, and a holder
 * change while the previous holder's lease was still valid, without `took-over-from` naming that
 * holder (a restart), means two live processes write the lease. Such a lease's echo does not count
 * until the last holder it replaced would have expired: a lease flapping between two holders never
 * counts as the echo of either.
 */
import type { KubeObject } from '@kars/kube-core';
import type { Change } from '@kars/kube-runtime';
import { ROUTER_LEASE_SECONDS, TOOK_OVER_ANNOTATION } from '@kars/policy-api';
import type { RouterEcho } from '@kars/policy-api';

interface Seen {
  holder: string;
  expiresAtMs: number;
  contestedUntilMs?: number;
  contested?: string;
}

type LeaseSpec = { holderIdentity?: unknown; renewTime?: unknown; leaseDurationSeconds?: unknown };

function holderOf(l: KubeObject): { holder: string; renewedAtMs: number; expiresAtMs: number } {
  const spec = ((l as { spec?: LeaseSpec }).spec ?? {}) as LeaseSpec;
  const holder = typeof spec.holderIdentity === 'string' ? spec.holderIdentity : '';
  const renew = typeof spec.renewTime === 'string' ? Date.parse(spec.renewTime) : NaN;
  const renewedAtMs = Number.isNaN(renew) ? 0 : renew;
  const duration = typeof spec.leaseDurationSeconds === 'number' ? spec.leaseDurationSeconds : ROUTER_LEASE_SECONDS;
  return { holder, renewedAtMs, expiresAtMs: renewedAtMs + duration * 1000 };
}

const keyOf = (l: KubeObject): string => `${l.metadata.namespace ?? ''}/${l.metadata.name ?? ''}`;

/** Remembers each router lease's holder across watch events, and which leases two processes write. */
export class LeaseHolderTracker {
  private readonly seen = new Map<string, Seen>();

  /** Feed every change of the router-lease reflector, in order (subscribe before reconciles read). */
  observe(c: Change<KubeObject>): void {
    const key = keyOf(c.object);
    if (c.type === 'delete') {
      this.seen.delete(key);
      return;
    }
    const now = holderOf(c.object);
    const prev = this.seen.get(key);
    const next: Seen = { holder: now.holder, expiresAtMs: now.expiresAtMs };
    if (prev?.contestedUntilMs !== undefined) {
      next.contestedUntilMs = prev.contestedUntilMs;
      if (prev.contested !== undefined) next.contested = prev.contested;
    }
    if (prev && prev.holder !== now.holder) {
      const tookOver = c.object.metadata.annotations?.[TOOK_OVER_ANNOTATION] === prev.holder;
      // The previous holder's lease was valid when this write was made: unless this is the restart
      // that says it replaced exactly that holder, both are alive.
      if (!tookOver && prev.expiresAtMs > now.renewedAtMs) {
        next.contestedUntilMs = Math.max(next.contestedUntilMs ?? 0, prev.expiresAtMs);
        next.contested = `lease written by two processes: ${prev.holder} and ${now.holder}`;
      }
    }
    this.seen.set(key, next);
  }

  /** `echo` (read from `lease`) marked contested when two processes were seen writing the lease. */
  mark(lease: KubeObject, echo: RouterEcho): RouterEcho {
    const s = this.seen.get(keyOf(lease));
    if (s?.contestedUntilMs === undefined) return echo;
    return { ...echo, contestedUntilMs: s.contestedUntilMs, ...(s.contested !== undefined ? { contested: s.contested } : {}) };
  }
}
