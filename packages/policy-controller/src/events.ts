import type { KubeObject } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import type { Logger } from 'pino';

/**
 * Publishes core/v1 Events about policies. Each (object uid, reason, message key) is published
 * once per process, so a policy waiting on routers does not spam a Warning every requeue.
 */
export class EventRecorder {
  private readonly sent = new Set<string>();

  constructor(
    private readonly client: KubeClient,
    private readonly log: Logger,
  ) {}

  /** Publish a Warning (best effort: failures are logged, never thrown). */
  async warn(obj: KubeObject, reason: string, message: string, dedupeKey: string): Promise<void> {
    const key = `${obj.metadata.uid ?? ''}/${reason}/${dedupeKey}`;
    if (this.sent.has(key)) return;
    this.sent.add(key);
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${obj.metadata.name ?? 'object'}.`, namespace: obj.metadata.namespace ?? 'default' },
      involvedObject: { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace, uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion },
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
      this.log.warn({ err: err instanceof Error ? err.message : String(err), reason, object: obj.metadata.name }, 'could not publish event');
    }
  }
}
