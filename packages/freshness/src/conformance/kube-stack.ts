import { until } from '@kars/kube-core/testing';
import { compactEtcd, startApiserverRelay, startControlPlane, startEtcdRelay } from '@kars/kube-envtest';
import type { ApiserverRelay, ControlPlane, EtcdRelay, KubeBinaries } from '@kars/kube-envtest';
import { INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';
import { KarsProcesses, suiteClientWithCrds } from './stack.js';
import type { FaultStack } from './stack.js';

/**
 * The fault suite's stack on a real kube-apiserver (kube-envtest's etcd and kube-apiserver with its
 * watch cache, as every cluster runs it; no kube-controller-manager, which nothing here needs), with
 * the kars processes of {@link KarsProcesses} and the probe's client all connecting through an
 * {@link ApiserverRelay} of ours (the admin kubeconfig with the relay as server), and kube-apiserver
 * reaching etcd through an {@link EtcdRelay}. Each fault comes from outside kube-apiserver: freeze
 * and reset at the client relay, a restart of the process (same port, same etcd), and a compaction
 * in etcd itself (ADR 0029): etcd's history is compacted, then kube-apiserver's storage connections
 * are cut, so its watch cache resumes its etcd watches from compacted revisions, has to list again,
 * and answers the kars watches' resumes (cut at the client relay) with 410 "too old resource version".
 */
export class KubeStack extends KarsProcesses implements FaultStack {
  readonly server: string;
  cp: ControlPlane | undefined;
  relay: ApiserverRelay | undefined;
  etcdRelay: EtcdRelay | undefined;
  private stopped = false;

  constructor(
    private readonly binaries: KubeBinaries,
    namespace = 'default',
    sandbox = 'kars-probe',
  ) {
    super(namespace, sandbox);
    this.server = `kube-apiserver ${binaries.version}`;
  }

  protected async startAll(): Promise<void> {
    this.etcdRelay = await startEtcdRelay();
    this.cp = await startControlPlane({
      binaries: this.binaries,
      controllers: false,
      ports: { etcd: this.etcdRelay.etcdPort },
      apiserverEtcdUrl: this.etcdRelay.url,
    });
    this.relay = await startApiserverRelay(this.cp);
    this.kubeconfig = this.relay.kubeconfig;
    this.client = await suiteClientWithCrds(this.kubeconfig);
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

  /**
   * Compact etcd's history (directly, not through the relay), then cut kube-apiserver's etcd
   * connections: its watch cache's etcd watches resume from compacted revisions and fail, so each
   * cache lists again and starts a new window; a client resuming from an older resourceVersion then
   * gets 410. (Without the cut the cache's watches stay open, the compaction never reaches them, and
   * every resume is served from the cache.)
   */
  async compact(): Promise<number> {
    if (!this.cp) throw new Error('the stack is not started');
    const revision = await compactEtcd(this.cp.etcdUrl);
    this.etcdRelay?.relay.resetAll();
    return revision;
  }

  /** Stop the kars processes, the relay and the control plane (which removes its directory). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.client?.close();
    await this.stopKars();
    await this.relay?.close();
    await this.cp?.stop();
    await this.etcdRelay?.relay.close();
  }

  logs(): string {
    return this.karsLogs().join('\n');
  }
}
