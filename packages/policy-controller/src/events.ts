import { kubeTime, systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, Logger } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';

/**
 * Publishes core/v1 Events about policies. Each (object uid, reason, message key) is published
 * once per process, so a policy waiting on routers does not spam a Warning every requeue.
 */
export class EventRecorder {
  /** Last dedupe key published per (object uid, reason): one entry per object, not per event. */
  private readonly sent = new Map<string, Map<string, string>>();

  constructor(
    private readonly client: KubeClient,
    private readonly log: Logger,
    /** Stamps the events' timestamps (`wallNow`). */
    private readonly clock: Clock = systemClock,
  ) {}

  /** Since when each object (uid) has been in a warn-worthy condition, per dedupe key. */
  private readonly since = new Map<string, { key: string; atMs: number }>();

  /** Forget a deleted object. */
  forget(uid: string | undefined): void {
    if (uid) {
      this.sent.delete(uid);
      this.since.delete(uid);
    }
  }

  /**
   * Publish a Warning only once the condition (identified by `dedupeKey`, e.g. generation/digest)
   * has lasted `graceMs`: routine edits that routers confirm within the grace never warn. Returns
   * the ms still to wait (the caller requeues then), or undefined once published or past due.
   */
  warnAfterGrace(obj: KubeObject, reason: string, message: string, dedupeKey: string, graceMs: number, nowMs: number): number | undefined {
    const uid = obj.metadata.uid ?? '';
    const prev = this.since.get(uid);
    const at = prev?.key === dedupeKey ? prev.atMs : nowMs;
    if (prev?.key !== dedupeKey) this.since.set(uid, { key: dedupeKey, atMs: nowMs });
    const wait = at + graceMs - nowMs;
    if (wait > 0) return wait;
    void this.warn(obj, reason, message, dedupeKey);
    return undefined;
  }

  /** The condition ended (confirmed, degraded, deleted): the next one starts a new grace. */
  settled(uid: string | undefined): void {
    if (uid) this.since.delete(uid);
  }

  /** Publish a Warning (best effort: failures are logged, never thrown). */
  async warn(obj: KubeObject, reason: string, message: string, dedupeKey: string): Promise<void> {
    const uid = obj.metadata.uid ?? '';
    let byReason = this.sent.get(uid);
    if (!byReason) this.sent.set(uid, (byReason = new Map()));
    if (byReason.get(reason) === dedupeKey) return;
    byReason.set(reason, dedupeKey);
    const now = kubeTime(this.clock.wallNow());
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${obj.metadata.name ?? 'object'}.`, namespace: obj.metadata.namespace ?? 'default' },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      reason,
      message,
      type: 'Warning',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'kars-controller' },
      reportingComponent: 'kars-controller',
    };
    try {
      await this.client.create(Resources.events, event as unknown as KubeObject);
    } catch (err) {
      this.log.warn(
        { err: err instanceof Error ? err.message : String(err), reason, object: obj.metadata.name },
        'could not publish event',
      );
    }
  }
}
