import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import { echoLease, ROUTER_LEASE_SECONDS, ROUTER_RENEW_SECONDS } from '@kars/policy-api';
import type { RuntimeLogger } from '@kars/kube-runtime';
import type { PolicyState } from './state.js';

export interface EchoPublisherOptions {
  client: KubeClient;
  namespace: string;
  sandbox: string;
  instance: string;
  state: PolicyState;
  log?: RuntimeLogger;
  /** Debounce before publishing a change (default 10 ms): well inside the 100 ms budget. */
  debounceMs?: number;
  renewMs?: number;
}

/**
 * Publishes what this router has loaded through the shared echo contract: one Lease per router
 * instance, applied with server-side apply. A change is published within `debounceMs`; the lease
 * is renewed every ROUTER_RENEW_SECONDS so the controller knows the router is alive. A failed
 * publish is retried at the next renewal (or change); it never affects enforcement.
 */
export class EchoPublisher {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private again = false;
  private lastPublishedMs = 0;

  constructor(private readonly opts: EchoPublisherOptions) {}

  /** When the lease was last written successfully (epoch ms; 0 = never). */
  lastPublished(): number {
    return this.lastPublishedMs;
  }

  private schedule(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.publish(), delayMs);
  }

  private async publish(): Promise<void> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    const { client, namespace, sandbox, instance, state } = this.opts;
    const lease = echoLease(namespace, { sandbox, instance, digests: state.digests(), errors: state.errors(), renewedAtMs: Date.now(), leaseDurationSeconds: ROUTER_LEASE_SECONDS });
    this.inFlight = client
      .apply(Resources.leases, lease as unknown as Record<string, unknown> & { metadata: { name: string; namespace: string } }, `kars-router/${instance}`, { force: true })
      .then(
        () => {
          this.lastPublishedMs = Date.now();
        },
        (err: unknown) => this.opts.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not publish the router echo lease; retrying at the next renewal'),
      )
      .finally(() => {
        this.inFlight = undefined;
        if (this.again) {
          this.again = false;
          void this.publish();
        }
      });
    await this.inFlight;
    this.schedule(this.opts.renewMs ?? ROUTER_RENEW_SECONDS * 1000);
  }

  /** Publish now and on every change, renewing periodically, until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const unsub = this.opts.state.onChange(() => this.schedule(this.opts.debounceMs ?? 10));
    this.schedule(0);
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
    unsub();
    if (this.timer) clearTimeout(this.timer);
    await this.inFlight;
  }
}
