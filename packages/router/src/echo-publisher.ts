import { Resources, traceHop } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import {
  echoLease,
  heartbeatSeenAnnotation,
  HEARTBEAT_SEEN_ANNOTATION,
  HOLDER_PROCESS_ANNOTATION,
  routerLeaseName,
  TOOK_OVER_ANNOTATION,
  ROUTER_LEASE_SECONDS,
  ROUTER_RENEW_SECONDS,
} from '@kars/policy-api';
import { systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger, Timer } from '@kars/kube-core';
import { decideClaim, leaseHolderSelf } from './lease-holder.js';
import type { LeaseHolderSelf } from './lease-holder.js';
import type { HeartbeatStaleness } from './staleness.js';
import type { PolicyState } from './state.js';

export interface EchoPublisherOptions {
  client: KubeClient;
  namespace: string;
  sandbox: string;
  instance: string;
  state: PolicyState;
  /** Capability names advertised in the lease (`capabilityNames(...)`). */
  capabilities?: string[];
  log?: Logger;
  /** Time for the debounce, retry and beat timers (`now`) and the lease's renew stamp (`wallNow`); default the system clock. */
  clock?: Clock;
  /**
   * Debounce before publishing a change (default 0: the next turn of the event loop, which still
   * folds the changes of one watch batch into one write). Every millisecond here is on the
   * edit → echo path, and a publish in flight already coalesces later changes into one more write.
   */
  debounceMs?: number;
  /** Liveness beat (default ROUTER_RENEW_SECONDS) and lease validity (default ROUTER_LEASE_SECONDS). */
  renewMs?: number;
  leaseSeconds?: number;
  /**
   * When set, every lease write that happens anyway (a change or the liveness beat) also carries the
   * newest heartbeat seen, so `kars policy status` can show staleness per router with no extra writes.
   */
  staleness?: HeartbeatStaleness;
  /** Longest a graceful stop waits for the lease to be withdrawn (default 2 s). */
  withdrawTimeoutMs?: number;
  /** While another live process holds the lease, how often to look at it again (default 5 s; and at its expiry). */
  blockedRecheckMs?: number;
  /** This process's holder identity and process record (default {@link leaseHolderSelf}(instance)). */
  holder?: LeaseHolderSelf;
}

type LeaseObject = KubeObject & { spec?: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number } };

/**
 * Publishes what this router has loaded through the shared echo contract: one Lease per router
 * instance, applied with server-side apply. A change is published within `debounceMs`; otherwise
 * the lease is renewed every ROUTER_RENEW_SECONDS (the liveness beat) so the controller knows the
 * router is alive. A failed publish is retried after 0.5 s, doubling up to one beat; it never
 * affects enforcement. When the router stops, the lease is deleted, so its echo stops counting at once
 * instead of lingering until it expires.
 */
export class EchoPublisher {
  /** Pending publish: the debounced change, a retry after a failure, or the liveness beat. */
  private timer: Timer | undefined;
  private timerDueAt = Infinity;
  private timerIsBeat = false;
  private inFlight: Promise<void> | undefined;
  private again = false;
  private lastPublishedMs = 0;
  private failures = 0;
  private conflicts = 0;
  private stopped = false;
  /** resourceVersion of this process's last write of the lease; undefined while it does not hold it. */
  private rv: string | undefined;
  /** Why this process does not hold the lease (another live router does), or undefined. */
  private blocked: string | undefined;
  /** The dead predecessor this process took the lease over from (kept on every write). */
  private tookOverFrom: string | undefined;

  private readonly clock: Clock;
  private readonly self: LeaseHolderSelf;

  constructor(private readonly opts: EchoPublisherOptions) {
    this.clock = opts.clock ?? systemClock;
    this.self = opts.holder ?? leaseHolderSelf(opts.instance);
  }

  /** This process's holder identity in the lease (`<instance>/<process id>`). */
  holderIdentity(): string {
    return this.self.identity;
  }

  /**
   * Why this router does not publish its echo: another live process holds the lease (ADR 0024).
   * Undefined while it holds the lease or has not yet been refused it. The router is not ready meanwhile.
   */
  blockedReason(): string | undefined {
    return this.blocked;
  }

  /** When the lease was last written successfully (epoch ms; 0 = never). */
  lastPublished(): number {
    return this.lastPublishedMs;
  }

  /**
   * Publish after `delayMs` unless a publish is already due sooner. The liveness beat (`beat`)
   * replaces an earlier beat but never a pending change or retry: a renewal must not postpone a change.
   */
  private schedule(delayMs: number, beat = false): void {
    const due = this.clock.now() + delayMs;
    if (this.timer && this.timerDueAt <= due && !(beat && this.timerIsBeat)) return;
    this.timer?.cancel();
    this.timerDueAt = due;
    this.timerIsBeat = beat;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.timerDueAt = Infinity;
      this.timerIsBeat = false;
      void this.publish();
    }, delayMs);
  }

  private async publish(): Promise<void> {
    if (this.stopped) return;
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    traceHop('echo.publish');
    const renewMs = this.opts.renewMs ?? ROUTER_RENEW_SECONDS * 1000;
    this.inFlight = this.write().then(
      (outcome) => {
        this.failures = 0;
        if (outcome === 'written') {
          this.conflicts = 0;
          this.lastPublishedMs = this.clock.wallNow();
          if (!this.stopped && !this.again) this.schedule(renewMs, true);
        } else if (outcome === 'conflict') {
          // Someone else wrote the lease since our last write: read it again and decide at once
          // (backing off only if that keeps happening).
          const delay = this.conflicts++ < 3 ? 0 : Math.min(renewMs, 500 * 2 ** Math.min(this.conflicts - 3, 10));
          if (!this.stopped) this.schedule(delay);
        } else if (!this.stopped) {
          // Held by another live process: look again when its lease runs out, and meanwhile every few
          // seconds (a holder that stops gracefully deletes its lease: take it then, not at expiry).
          const recheckMs = this.opts.blockedRecheckMs ?? 5000;
          this.schedule(Math.max(0, Math.min(recheckMs, outcome.retryAtMs - this.clock.wallNow() + 50)), true);
        }
      },
      (err: unknown) => {
        // Retry soon (0.5 s doubling, at most one beat): an echo that failed during a fault must
        // not wait for the liveness beat, or Ready would lag the load by up to a beat.
        const retryMs = Math.min(renewMs, 500 * 2 ** Math.min(this.failures++, 10));
        this.opts.log?.warn(
          { err: err instanceof Error ? err.message : String(err), retryInMs: retryMs },
          'could not publish the router echo lease; retrying',
        );
        if (!this.stopped) this.schedule(retryMs);
      },
    );
    void this.inFlight.finally(() => {
      this.inFlight = undefined;
      if (this.again) {
        this.again = false;
        void this.publish();
      }
    });
    await this.inFlight;
  }

  /** The lease as this process writes it now. */
  private build(): ReturnType<typeof echoLease> {
    const { namespace, sandbox, instance, state } = this.opts;
    const echo = state.echo();
    const lease = echoLease(namespace, {
      sandbox,
      instance,
      holder: this.self.identity,
      digests: echo.digests,
      errors: echo.errors,
      rejected: echo.rejected,
      ...(echo.dryRun !== undefined ? { dryRun: echo.dryRun } : {}),
      capabilities: this.opts.capabilities ?? [],
      renewedAtMs: this.clock.wallNow(),
      leaseDurationSeconds: this.opts.leaseSeconds ?? ROUTER_LEASE_SECONDS,
    });
    lease.metadata.annotations[HOLDER_PROCESS_ANNOTATION] = JSON.stringify(this.self.process);
    if (this.tookOverFrom) lease.metadata.annotations[TOOK_OVER_ANNOTATION] = this.tookOverFrom;
    if (this.opts.staleness)
      lease.metadata.annotations[HEARTBEAT_SEEN_ANNOTATION] = heartbeatSeenAnnotation(
        this.opts.staleness.newestControllerTimeMs(),
        this.opts.staleness.stalenessSeconds(),
      );
    return lease;
  }

  /**
   * One write of the lease, never over another live process's: a renewal is a replace conditioned
   * on this process's last resourceVersion; without one, the lease is created, or taken only when
   * {@link decideClaim} allows it (conditioned on the resourceVersion read).
   */
  private async write(): Promise<'written' | 'conflict' | { retryAtMs: number }> {
    const { client, namespace, sandbox, instance } = this.opts;
    const name = routerLeaseName(sandbox, instance);
    const fieldManager = `kars-router/${instance}`;
    const built = this.build();
    const lease = built as unknown as LeaseObject & { metadata: { name: string; namespace: string } };
    const onConflict = (err: unknown): 'conflict' => {
      const code = (err as { code?: number }).code;
      if (code !== 409 && code !== 404) throw err;
      this.rv = undefined;
      return 'conflict';
    };
    if (this.rv !== undefined) {
      lease.metadata.resourceVersion = this.rv;
      return client.replace<LeaseObject>(Resources.leases, lease, { fieldManager }).then((got) => {
        this.rv = got.metadata.resourceVersion;
        return 'written' as const;
      }, onConflict);
    }
    const current = await client.getOrUndefined<LeaseObject>(Resources.leases, namespace, name);
    if (current) {
      const renew = Date.parse(current.spec?.renewTime ?? '');
      const decision = decideClaim(
        {
          holderIdentity: current.spec?.holderIdentity ?? '',
          renewedAtMs: Number.isNaN(renew) ? 0 : renew,
          leaseDurationSeconds: current.spec?.leaseDurationSeconds ?? ROUTER_LEASE_SECONDS,
          annotations: current.metadata.annotations ?? {},
        },
        this.self,
        this.clock.wallNow(),
        `${namespace}/${name}`,
      );
      if (!decision.take) {
        if (this.blocked !== decision.reason) this.opts.log?.error({ lease: `${namespace}/${name}` }, decision.reason);
        this.blocked = decision.reason;
        return { retryAtMs: decision.retryAtMs };
      }
      if (decision.tookOverFrom) {
        this.tookOverFrom = decision.tookOverFrom;
        built.metadata.annotations[TOOK_OVER_ANNOTATION] = decision.tookOverFrom;
        this.opts.log?.info(
          { lease: `${namespace}/${name}`, previousHolder: decision.tookOverFrom },
          'took over the echo lease of a router process that no longer runs (a restart)',
        );
      }
      lease.metadata.resourceVersion = current.metadata.resourceVersion ?? '';
    }
    const written = current
      ? client.replace<LeaseObject>(Resources.leases, lease, { fieldManager })
      : client.create<LeaseObject>(Resources.leases, lease, { fieldManager });
    return written.then((got) => {
      this.rv = got.metadata.resourceVersion;
      if (this.blocked !== undefined) this.opts.log?.info({ lease: `${namespace}/${name}` }, 'the echo lease is free again: publishing');
      this.blocked = undefined;
      return 'written' as const;
    }, onConflict);
  }

  /** Delete this process's lease, if it holds it (best effort, bounded by withdrawTimeoutMs). */
  private async withdraw(): Promise<void> {
    const { client, namespace, sandbox, instance } = this.opts;
    // Never another live router's lease: only the version this process wrote last.
    const rv = this.rv;
    if (rv === undefined) return;
    let timedOut: (v: 'timeout') => void = () => undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timedOut = resolve));
    const timer = this.clock.setTimeout(() => timedOut('timeout'), this.opts.withdrawTimeoutMs ?? 2000);
    const del = client.delete(Resources.leases, namespace, routerLeaseName(sandbox, instance), { resourceVersion: rv }).then(
      () => 'deleted' as const,
      (err: unknown) => {
        const code = (err as { code?: number }).code;
        if (code === 404 || code === 409) return 'deleted' as const;
        this.opts.log?.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'could not withdraw the router echo lease; it expires on its own',
        );
        return 'failed' as const;
      },
    );
    const outcome = await Promise.race([del, timeout]);
    timer.cancel();
    if (outcome === 'timeout')
      this.opts.log?.warn(
        { timeoutMs: this.opts.withdrawTimeoutMs ?? 2000 },
        'withdrawing the router echo lease timed out; it expires on its own',
      );
  }

  /**
   * Publish now and on every change, renewing periodically, until `signal` aborts; then withdraw
   * the lease (a graceful stop must not leave an echo that blocks Ready until it expires).
   */
  async run(signal: AbortSignal): Promise<void> {
    const unsub = this.opts.state.onChange(() => this.schedule(this.opts.debounceMs ?? 0));
    this.schedule(0);
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
    this.stopped = true;
    unsub();
    this.timer?.cancel();
    await this.inFlight;
    this.timer?.cancel();
    await this.withdraw();
  }
}
