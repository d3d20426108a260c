// The auto-echo router simulator.

import { KubeClient, Resources } from '@kars/kube-client';
import type { Change, StoreReader } from '@kars/kube-runtime';
import { canonicalDigest, INFERENCE_POLICY_KIND } from '@kars/policy-compiler';
import { echoLease, ROUTER_LEASE_SECONDS, ROUTER_RENEW_SECONDS } from '@kars/policy-api';
import { errMsg } from '../../lib/dist/index.js';
import type { ConfigMapObject } from './objects.js';

/** One simulated router: the sandbox it serves and what it last published. */
interface SimSandbox {
  ns: string;
  name: string;
  instance: string;
  cmKey: string;
  busy: boolean;
  dirty: boolean;
  target: string | null | undefined;
  published: string | null | undefined;
  lastPublishAt: number;
}

/**
 * One router instance per registered sandbox. Its view is the shared ConfigMap Reflector (label
 * managed-by=kars-controller). On every ConfigMap change it recomputes the InferencePolicy digest
 * for the sandboxes that load that ConfigMap, and when it differs from what it last published it
 * applies the sandbox's echo Lease at once (one apply in flight per sandbox; a change during an
 * apply causes exactly one more). It renews every lease every ROUTER_RENEW_SECONDS, as routers do.
 */
export class RouterSim {
  private readonly sandboxes = new Map<string, SimSandbox>();
  private readonly byConfigMap = new Map<string, Set<SimSandbox>>();
  /** Lease applies that succeeded. */
  applies = 0;
  /** Lease applies that failed, as messages. */
  readonly errors: string[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly client: KubeClient,
    private readonly cmStore: StoreReader<ConfigMapObject>,
  ) {
    this.timer = setInterval(() => this.renew(), 250);
  }

  /** A router for sandbox ns/name, which loads the InferencePolicy `policy`. Publishes at once. */
  add(ns: string, name: string, policy: string): Promise<void> {
    const cmKey = `${ns}/${INFERENCE_POLICY_KIND.configMap.name(policy)}`;
    const s: SimSandbox = {
      ns,
      name,
      instance: 'r0',
      cmKey,
      busy: false,
      dirty: false,
      target: undefined,
      published: undefined,
      lastPublishAt: 0,
    };
    this.sandboxes.set(`${ns}/${name}`, s);
    let set = this.byConfigMap.get(cmKey);
    if (!set) this.byConfigMap.set(cmKey, (set = new Set()));
    set.add(s);
    return this.publish(s);
  }

  private digestFor(s: SimSandbox): string | null {
    const body = this.cmStore.get(s.cmKey)?.data?.['inference-policy.json'];
    return body === undefined ? null : canonicalDigest('inference-policy.json', body);
  }

  /** Subscriber for the ConfigMap Reflector. */
  onChange(c: Change<ConfigMapObject>): void {
    const md = c.object.metadata;
    const set = this.byConfigMap.get(`${md.namespace ?? ''}/${md.name ?? ''}`);
    if (!set) return;
    for (const s of set) {
      if (this.digestFor(s) !== (s.busy ? s.target : s.published)) void this.publish(s);
    }
  }

  private renew(): void {
    const now = Date.now();
    for (const s of this.sandboxes.values()) if (!s.busy && now - s.lastPublishAt >= ROUTER_RENEW_SECONDS * 1000) void this.publish(s);
  }

  private async publish(s: SimSandbox): Promise<void> {
    if (s.busy) {
      s.dirty = true;
      return;
    }
    s.busy = true;
    try {
      do {
        s.dirty = false;
        const digest = this.digestFor(s);
        s.target = digest;
        const now = Date.now();
        const lease = echoLease(s.ns, {
          sandbox: s.name,
          instance: s.instance,
          digests: { InferencePolicy: digest },
          errors: {},
          renewedAtMs: now,
          leaseDurationSeconds: ROUTER_LEASE_SECONDS,
        });
        try {
          await this.client.apply(Resources.leases, { ...lease }, `kars-router/${s.instance}`, { force: true });
          s.published = digest;
          s.lastPublishAt = now;
          this.applies++;
        } catch (err) {
          this.errors.push(`lease ${s.ns}/${lease.metadata.name}: ${errMsg(err)}`);
          s.lastPublishAt = now; // retried at the next renewal
        }
      } while (s.dirty);
    } finally {
      s.busy = false;
    }
  }

  /** Stop the renewals. */
  close(): void {
    clearInterval(this.timer);
  }
}
