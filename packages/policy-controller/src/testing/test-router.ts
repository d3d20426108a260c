import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import { echoLease, KARS_SANDBOX, ROUTER_LEASE_SECONDS, toolPolicyNameOf } from '@kars/policy-api';
import type { EchoKind, KarsSandbox } from '@kars/policy-api';
import { canonicalDigest, egressApprovalsConfigMapName, inferencePolicyConfigMapName, mergedAllowlist, toolPolicyConfigMapName } from '@kars/policy-compiler';

/**
 * A stand-in for one router instance in controller tests: it reads what the real router reads
 * (the sandbox, its compiled ConfigMaps), computes the digests the same way, and publishes them
 * through the shared echo contract. `step()` publishes once; tests call it when they want the
 * router to "load", so they control exactly when enforcement happens.
 */
export class TestRouter {
  /** When set, the router reports this digest for the kind instead of what it computed. */
  readonly override: Partial<Record<EchoKind, string | null>> = {};

  constructor(
    private readonly client: KubeClient,
    readonly namespace: string,
    readonly sandbox: string,
    readonly instance: string,
  ) {}

  private async data(name: string): Promise<Record<string, string> | undefined> {
    try {
      const cm = await this.client.get(Resources.configmaps, this.namespace, name);
      return (cm as KubeObject & { data?: Record<string, string> }).data ?? {};
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return undefined;
      throw err;
    }
  }

  /** Compute what this router would have loaded now. */
  async loaded(nowMs = Date.now()): Promise<Partial<Record<EchoKind, string | null>>> {
    const sb = (await this.client.get(KARS_SANDBOX, this.namespace, this.sandbox)) as unknown as KarsSandbox;
    const out: Partial<Record<EchoKind, string | null>> = {};
    const ip = sb.spec.inferenceRef?.name;
    if (ip) {
      const body = (await this.data(inferencePolicyConfigMapName(ip)))?.['inference-policy.json'];
      out.InferencePolicy = body === undefined ? null : canonicalDigest('inference-policy.json', body);
    }
    const tpName = toolPolicyNameOf(sb);
    if (tpName) {
      const agt = (await this.data(toolPolicyConfigMapName(tpName)))?.['agt-profile.yaml'];
      out.AgtProfile = agt === undefined ? null : canonicalDigest('agt-profile.yaml', agt);
    }
    const approvals = (await this.data(egressApprovalsConfigMapName(this.sandbox))) ?? {};
    const hosts = Object.entries(approvals)
      .filter(([k]) => k.startsWith('approval-') && k.endsWith('.json'))
      .map(([, v]) => JSON.parse(v) as { hosts: Array<{ host: string; port: number }>; expiresAt: string })
      .filter((a) => Date.parse(a.expiresAt) > nowMs)
      .map((a) => a.hosts);
    out.EgressApproval = mergedAllowlist(sb.spec.networkPolicy?.allowedEndpoints ?? [], hosts).digest;
    return { ...out, ...this.override };
  }

  /** Publish (renew) this router's echo lease with what it has loaded. */
  async step(opts: { leaseSeconds?: number } = {}): Promise<void> {
    const digests = await this.loaded();
    const lease = echoLease(this.namespace, { sandbox: this.sandbox, instance: this.instance, digests, errors: {}, renewedAtMs: Date.now(), leaseDurationSeconds: opts.leaseSeconds ?? ROUTER_LEASE_SECONDS });
    await this.client.apply(Resources.leases, lease as unknown as Record<string, unknown> & { metadata: { name: string; namespace: string } }, `kars-router/${this.instance}`, { force: true });
  }
}
