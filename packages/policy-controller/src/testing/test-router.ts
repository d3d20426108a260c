import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import { echoLease, KARS_SANDBOX, ROUTER_LEASE_SECONDS } from '@kars/policy-api';
import type { EchoKind, KarsSandbox } from '@kars/policy-api';
import {
  capabilityNames,
  EchoLedger,
  egressApprovalsConfigMapName,
  GUARDRAIL_PROVIDERS,
  PROFILE_KINDS,
  routerView,
} from '@kars/policy-compiler';
import type { EchoState, RouterCapabilities } from '@kars/policy-compiler';

/**
 * A stand-in for one router instance in controller tests. It reads what the real router reads
 * (the sandbox, its compiled ConfigMaps) and computes its echo with the wire contract's own
 * `routerView` and `EchoLedger` (`@kars/policy-compiler`), the very functions the real router
 * runs, so it accepts, refuses and digests exactly what the real router does. `step()` loads and
 * publishes once; tests call it when they want the router to "load", so they control exactly when
 * enforcement happens.
 *
 * By default it has every guardrail backend and fronts the MCP servers named in `capabilities`
 * (none unless given).
 */
export class TestRouter {
  /** When set, the router reports this digest for the kind instead of what it computed. */
  readonly override: Partial<Record<EchoKind, string | null>> = {};
  private readonly ledger = new EchoLedger(() => Date.now());

  constructor(
    private readonly client: KubeClient,
    readonly namespace: string,
    readonly sandbox: string,
    readonly instance: string,
    readonly capabilities: RouterCapabilities = { mcpServers: [], guardrailProviders: [...GUARDRAIL_PROVIDERS] },
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

  /** Load what this router would load now and return its echo (digests, errors, refused digests). */
  async load(nowMs = Date.now()): Promise<EchoState> {
    let sb: KarsSandbox | undefined;
    try {
      sb = (await this.client.get(KARS_SANDBOX, this.namespace, this.sandbox)) as unknown as KarsSandbox;
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
    const names = sb
      ? [
          ...PROFILE_KINDS.map((k) => {
            const p = k.referencedBy(sb);
            return p === undefined ? undefined : k.configMap.name(p);
          }),
          egressApprovalsConfigMapName(this.sandbox),
        ]
      : [];
    const data = new Map<string, Record<string, string> | undefined>();
    for (const n of names) if (n) data.set(n, await this.data(n));
    this.ledger.applyView(
      routerView(sb, (name) => data.get(name), { nowMs, capabilities: this.capabilities, sourcePrefix: `configmap:${this.namespace}/` }),
    );
    const echo = this.ledger.echo();
    return { ...echo, digests: { ...echo.digests, ...this.override } };
  }

  /** Compute what this router would have loaded now (digests only). */
  async loaded(nowMs = Date.now()): Promise<Partial<Record<EchoKind, string | null>>> {
    return (await this.load(nowMs)).digests;
  }

  /**
   * Publish (renew) this router's echo lease with what it has loaded. `holder` writes another
   * holderIdentity (default the instance) and `annotations` adds to the lease's, so a test can play
   * two processes writing one lease (ADR 0024).
   */
  async step(opts: { leaseSeconds?: number; holder?: string; annotations?: Record<string, string> } = {}): Promise<void> {
    const echo = await this.load();
    const lease = echoLease(this.namespace, {
      sandbox: this.sandbox,
      instance: this.instance,
      ...(opts.holder !== undefined ? { holder: opts.holder } : {}),
      ...echo,
      capabilities: capabilityNames(this.capabilities),
      renewedAtMs: Date.now(),
      leaseDurationSeconds: opts.leaseSeconds ?? ROUTER_LEASE_SECONDS,
    });
    Object.assign(lease.metadata.annotations, opts.annotations ?? {});
    await this.client.apply(
      Resources.leases,
      lease as unknown as Record<string, unknown> & { metadata: { name: string; namespace: string } },
      `kars-router/${this.instance}`,
      { force: true },
    );
  }
}
