import { Resources, traceHop } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import {
  echoLease,
  heartbeatSeenAnnotation,
  HEARTBEAT_SEEN_ANNOTATION,
  routerLeaseName,
  ROUTER_LEASE_SECONDS,
  ROUTER_RENEW_SECONDS,
} from '@kars/policy-api';
import { systemClock } from '@kars/kube-core';
import type { Clock, Logger, Timer } from '@kars/kube-core';
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
}

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
  private stopped = false;

  private readonly clock: Clock;

  constructor(private readonly opts: EchoPublisherOptions) {
    this.clock = opts.clock ?? systemClock;
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
    const { client, namespace, sandbox, instance, state } = this.opts;
    traceHop('echo.publish');
    const echo = state.echo();
    const lease = echoLease(namespace, {
      sandbox,
      instance,
      digests: echo.digests,
      errors: echo.errors,
      rejected: echo.rejected,
      capabilities: this.opts.capabilities ?? [],
      renewedAtMs: this.clock.wallNow(),
      leaseDurationSeconds: this.opts.leaseSeconds ?? ROUTER_LEASE_SECONDS,
    });
    const renewMs = this.opts.renewMs ?? ROUTER_RENEW_SECONDS * 1000;
    if (this.opts.staleness)
      lease.metadata.annotations[HEARTBEAT_SEEN_ANNOTATION] = heartbeatSeenAnnotation(
        this.opts.staleness.newestControllerTimeMs(),
        this.opts.staleness.stalenessSeconds(),
      );
    this.inFlight = client
      .apply(
        Resources.leases,
        lease as unknown as Record<string, unknown> & { metadata: { name: string; namespace: string } },
        `kars-router/${instance}`,
        { force: true },
      )
      .then(
        () => {
          this.lastPublishedMs = this.clock.wallNow();
          this.failures = 0;
          if (!this.stopped && !this.again) this.schedule(renewMs, true);
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
      )
      .finally(() => {
        this.inFlight = undefined;
        if (this.again) {
          this.again = false;
          void this.publish();
        }
      });
    await this.inFlight;
  }

  /** Delete this instance's lease (best effort, bounded by withdrawTimeoutMs). */
  private async withdraw(): Promise<void> {
    const { client, namespace, sandbox, instance } = this.opts;
    let timedOut: (v: 'timeout') => void = () => undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timedOut = resolve));
    const timer = this.clock.setTimeout(() => timedOut('timeout'), this.opts.withdrawTimeoutMs ?? 2000);
    const del = client.delete(Resources.leases, namespace, routerLeaseName(sandbox, instance)).then(
      () => 'deleted' as const,
      (err: unknown) => {
        const code = (err as { code?: number }).code;
        if (code === 404) return 'deleted' as const;
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
