import { KubeClient, Resources } from '@kars/kube-client';
import { until } from '@kars/kube-core/testing';
import { compactEtcd, startApiserverRelay, startControlPlane } from '@kars/kube-envtest';
import type { ApiserverRelay, ControlPlane, KubeBinaries } from '@kars/kube-envtest';
import { allCrds, INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';
import { KarsProcesses, suiteWatchConfig } from './stack.js';
import type { FaultStack } from './stack.js';

/**
 * kube-apiserver's flags for the fault suite. `--watch-cache=false`: with its watch cache on,
 * kube-apiserver serves a resumed watch from memory and never asks etcd, so a compaction in etcd
 * cannot cause a 410 (the cache's own window decides, not etcd's history); without it every watch is
 * an etcd watch, and a resume from a compacted revision gets etcd's "compacted", passed on as 410
 * Expired (ADR 0029).
 */
export const KUBE_FAULT_SUITE_APISERVER_ARGS: readonly string[] = ['--watch-cache=false'];

/**
 * The fault suite's stack on a real kube-apiserver (kube-envtest's etcd and kube-apiserver; no
 * kube-controller-manager, which nothing here needs), with the kars processes of {@link KarsProcesses}
 * and the probe's client all connecting through a {@link ApiserverRelay} of ours (the admin kubeconfig
 * with the relay as server). Each fault comes from outside kube-apiserver: freeze and reset at the
 * relay, a restart of the process (same port, same etcd), a compaction in etcd itself.
 */
export class KubeStack extends KarsProcesses implements FaultStack {
  readonly server: string;
  cp: ControlPlane | undefined;
  relay: ApiserverRelay | undefined;
  private stopped = false;

  constructor(
    private readonly binaries: KubeBinaries,
    namespace = 'default',
    sandbox = 'kars-probe',
  ) {
    super(namespace, sandbox);
    this.server = `kube-apiserver ${binaries.version}`;
  }

  /** Start the stack; if any part fails to start, stop what did start before rethrowing. */
  async start(): Promise<void> {
    try {
      await this.startAll();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  private async startAll(): Promise<void> {
    this.cp = await startControlPlane({ binaries: this.binaries, controllers: false, apiserverArgs: KUBE_FAULT_SUITE_APISERVER_ARGS });
    this.relay = await startApiserverRelay(this.cp);
    this.kubeconfig = this.relay.kubeconfig;
    const cfg = suiteWatchConfig();
    this.client = KubeClient.fromKubeconfig({
      kubeconfig: this.kubeconfig,
      pingIntervalMs: cfg.pingIntervalMs,
      pingTimeoutMs: cfg.pingTimeoutMs,
    });
    for (const crd of allCrds()) await this.client.create(Resources.customresourcedefinitions, crd as never);
    // A CRD serves its kind a moment after it is created (Established); the controllers' first lists
    // would fail and back off meanwhile.
    await until(
      'the kars kinds are served',
      async () => {
        await this.client.list(INFERENCE_POLICY, { namespace: this.namespace });
        await this.client.list(KARS_SANDBOX, { namespace: this.namespace });
        return true;
      },
      { timeoutMs: 60_000, everyMs: 200 },
    );
    await this.startKars();
  }

  freeze(): Promise<void> {
    this.relay?.relay.freeze();
    return Promise.resolve();
  }

  reset(): Promise<void> {
    this.relay?.relay.resetAll();
    return Promise.resolve();
  }

  async restartApiserver(): Promise<void> {
    await this.cp?.restartApiserver();
  }

  async compact(): Promise<void> {
    if (this.cp) await compactEtcd(this.cp.etcdUrl);
  }

  /** Stop the kars processes, the relay and the control plane (which removes its directory). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.client?.close();
    await this.stopKars();
    await this.relay?.close();
    await this.cp?.stop();
  }

  logs(): string {
    return this.karsLogs().join('\n');
  }
}
