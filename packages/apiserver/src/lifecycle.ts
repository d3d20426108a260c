/**
 * The lifecycle controllers kube-apiserver's controller manager would run, inside the apiserver:
 * - **garbage collection** through `metadata.ownerReferences`: when an owner is gone, a dependent
 *   whose only owner it was is deleted (background propagation); otherwise the dead reference is
 *   dropped. With `propagationPolicy: Orphan` the owner carries the `orphan` finalizer, and the
 *   controller strips the reference from every dependent, then drops the finalizer. With
 *   `propagationPolicy: Foreground` the owner carries `foregroundDeletion`: the controller deletes
 *   its dependents first (in the foreground too when they have dependents of their own) and drops
 *   the finalizer once no dependent with `blockOwnerDeletion` is left (ADR 0054);
 * - **namespace finalization**: a terminating namespace has its content deleted and, once it is
 *   empty, loses its `kubernetes` spec finalizer (what kube's controller does through `/finalize`),
 *   which removes it;
 * - **CRD cleanup**: a deleted CRD (which carries `customresourcecleanup.apiextensions.k8s.io`) has
 *   every instance deleted, then loses the finalizer and goes.
 *
 * The controllers react to committed changes only: {@link Lifecycle.start} subscribes to the
 * object service's `afterCommit` hook, which runs after a group commit (ADR 0002) with the batch's
 * changes in revision order. A change never reaches them before it is durable, and a batch that
 * failed to commit is never seen. Every write they make goes through the object service's one write
 * path (the same as a client's, as the server's own field manager), so it is itself committed,
 * watched and fed back here.
 *
 * Guarantees:
 * - Tasks run one at a time, in the order their changes committed. A task's own writes are started
 *   together so they share group commits.
 * - A task that loses a race (404: already gone, 409: changed meanwhile) is dropped silently: the
 *   change that won it is itself committed and brings its own follow-up.
 * - After a restart, {@link Lifecycle.start} resumes the cleanup of CRDs and namespaces that were
 *   terminating when the process stopped.
 *
 * Caveats: the queue is in memory. Garbage collection of dependents whose owner was deleted while
 * the process was down is not resumed (kube's GC rebuilds its graph on start; kars does not).
 */
import { ApiError, isObject } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { NAMESPACE_FINALIZER, specFinalizers } from './namespace.js';
import type { ObjectService } from './service.js';
import { CRD_CLEANUP, CRD_GR, FOREGROUND_FINALIZER, NS_GR, ORPHAN_FINALIZER, type Target } from './strategy.js';
import { resourceFromCrd } from './registry/crd.js';
import type { Registry } from './registry/registry.js';
import { grKey, storageVersion } from './registry/resource.js';
import type { ResourceInfo } from './registry/resource.js';
import type { ChangeRecord, Store } from './storage/store.js';

function parse(body: string): KubeObject {
  return JSON.parse(body) as KubeObject;
}

/** GC, namespace and CRD lifecycle controllers, fed by the object service's committed changes. */
export class Lifecycle {
  private readonly queue: Array<() => Promise<void>> = [];
  private running = false;
  private closed = false;
  private unsubscribe: (() => void) | undefined;

  /**
   * @param service the object service whose committed changes drive the controllers, and through
   *   which they write.
   * @param store read-only use: owner index, counts and current objects (committed state).
   * @param onError called for a task failure other than a lost race (404/409).
   */
  constructor(
    private readonly service: ObjectService,
    private readonly store: Store,
    private readonly registry: Registry,
    private readonly onError: (err: unknown, what: string) => void,
  ) {}

  /** Subscribe to committed changes and resume the cleanup of terminating CRDs and namespaces. */
  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.service.onAfterCommit((changes) => this.observe(changes));
    for (const row of this.service.scan(CRD_GR, undefined)) {
      const crd = parse(row.body);
      if (crd.metadata.deletionTimestamp) this.enqueue(() => this.finishCrdDeletion(crd.metadata.name ?? ''));
    }
    for (const row of this.service.scan(NS_GR, undefined)) {
      if (parse(row.body).metadata.deletionTimestamp) this.enqueue(() => this.terminateNamespace(row.name));
    }
    // Owners that were waiting for the garbage collector when the server stopped (orphan or foreground).
    for (const ri of this.registry.all()) {
      const gr = grKey(ri.group, ri.resource);
      for (const row of this.service.scan(gr, undefined)) {
        if (!row.body.includes('"deletionTimestamp"')) continue;
        const obj = parse(row.body);
        if (!obj.metadata.deletionTimestamp) continue;
        this.collectMarked(gr, row.ns, row.name, obj);
      }
    }
  }

  /** Stop: queued tasks are dropped, new changes are ignored. */
  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Turn a committed batch into follow-up tasks. Synchronous and cheap: the work runs later. */
  private observe(changes: readonly ChangeRecord[]): void {
    for (const c of changes) {
      // Only deletions and objects marked for deletion bring follow-up work. A body without the
      // text "deletionTimestamp" cannot be marked, so most changes are not parsed at all.
      if (c.type !== 'DELETED' && !c.body.includes('"deletionTimestamp"')) continue;
      const obj = parse(c.body);
      if (c.type === 'DELETED') {
        const uid = obj.metadata.uid;
        if (uid) this.enqueue(() => this.collectDependents(uid, obj.metadata.finalizers?.includes(ORPHAN_FINALIZER) ?? false));
        // An owner deleted in the foreground may have been waiting for this dependent.
        for (const ref of obj.metadata.ownerReferences ?? []) {
          if (ref.blockOwnerDeletion) this.enqueue(() => this.foregroundByRef(ref, c.ns));
        }
        if (c.ns !== '') this.enqueue(() => this.finishNamespace(c.ns));
        const crdName = `${c.gr.slice(c.gr.indexOf('/') + 1)}.${c.gr.slice(0, c.gr.indexOf('/'))}`;
        if (c.gr !== CRD_GR && c.gr.includes('.')) this.enqueue(() => this.finishCrdDeletion(crdName));
      } else if (obj.metadata.deletionTimestamp) {
        if (c.gr === NS_GR) this.enqueue(() => this.terminateNamespace(c.name));
        if (c.gr === CRD_GR) this.enqueue(() => this.finishCrdDeletion(c.name));
        this.collectMarked(c.gr, c.ns, c.name, obj);
      }
    }
  }

  /** The garbage collector's work for an owner marked for deletion: orphan its dependents, or delete them in the foreground. */
  private collectMarked(gr: string, ns: string, name: string, obj: KubeObject): void {
    if (obj.metadata.finalizers?.includes(ORPHAN_FINALIZER)) this.enqueue(() => this.orphan(obj));
    if (obj.metadata.finalizers?.includes(FOREGROUND_FINALIZER)) this.enqueue(() => this.foreground(gr, ns, name));
  }

  /** Run follow-up work one task at a time, in order, after the write that caused it committed. */
  private enqueue(task: () => Promise<void>): void {
    if (this.closed) return;
    this.queue.push(task);
    if (this.running) return;
    this.running = true;
    setImmediate(() => void this.drain());
  }

  private async drain(): Promise<void> {
    for (let task = this.queue.shift(); task && !this.closed; task = this.queue.shift()) {
      try {
        await task();
      } catch (err) {
        if (!(err instanceof ApiError && (err.code === 404 || err.code === 409))) this.onError(err, 'follow-up task');
      }
    }
    this.running = false;
  }

  private targetOf(ri: ResourceInfo, ns: string, name: string): Target {
    return { ri, version: storageVersion(ri), ns, name };
  }

  private async tryDelete(ri: ResourceInfo, ns: string, name: string, propagationPolicy = 'Background'): Promise<void> {
    try {
      await this.service.delete(this.targetOf(ri, ns, name), { dryRun: false, propagationPolicy });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }

  private byGr(gr: string): ResourceInfo | undefined {
    const slash = gr.indexOf('/');
    return this.registry.get(gr.slice(0, slash), gr.slice(slash + 1));
  }

  /** Garbage collection: delete dependents whose only owner is gone; drop the dead reference otherwise. */
  private async collectDependents(ownerUid: string, orphaned: boolean): Promise<void> {
    if (orphaned) return;
    const writes: Array<Promise<unknown>> = [];
    for (const dep of this.store.dependentsOf(ownerUid)) {
      const ri = this.byGr(dep.gr);
      const row = this.store.get(dep.gr, dep.ns, dep.name);
      if (!ri || !row) continue;
      const obj = parse(row.body);
      const remaining = (obj.metadata.ownerReferences ?? []).filter((r) => r.uid !== ownerUid);
      writes.push(remaining.length === 0 ? this.tryDelete(ri, dep.ns, dep.name) : this.removeOwnerRef(ri, dep.ns, dep.name, ownerUid));
    }
    await settleAll(writes);
  }

  private async removeOwnerRef(ri: ResourceInfo, ns: string, name: string, ownerUid: string): Promise<void> {
    await this.service.modify(this.targetOf(ri, ns, name), (next) => {
      next.metadata.ownerReferences = (next.metadata.ownerReferences ?? []).filter((r) => r.uid !== ownerUid);
      if (next.metadata.ownerReferences.length === 0) delete next.metadata.ownerReferences;
      return next;
    });
  }

  /** Orphan deletion: strip the owner reference from dependents, then drop the orphan finalizer. */
  private async orphan(owner: KubeObject): Promise<void> {
    const uid = owner.metadata.uid ?? '';
    const writes: Array<Promise<unknown>> = [];
    for (const dep of this.store.dependentsOf(uid)) {
      const ri = this.byGr(dep.gr);
      if (ri && this.store.get(dep.gr, dep.ns, dep.name)) writes.push(this.removeOwnerRef(ri, dep.ns, dep.name, uid));
    }
    await settleAll(writes);
    const ri = this.registry.byKind(owner.apiVersion.includes('/') ? (owner.apiVersion.split('/')[0] ?? '') : '', owner.kind);
    if (ri) await this.removeFinalizer(ri, owner.metadata.namespace ?? '', owner.metadata.name ?? '', ORPHAN_FINALIZER);
  }

  /**
   * Foreground deletion of the owner `gr`/`ns`/`name` (marked, with `foregroundDeletion`): delete
   * each dependent it alone owns (in the foreground when that dependent owns others), drop the
   * reference from the others, and drop the finalizer once no blocking dependent is left.
   */
  private async foreground(gr: string, ns: string, name: string): Promise<void> {
    const ri = this.byGr(gr);
    const row = this.store.get(gr, ns, name);
    if (!ri || !row) return;
    const owner = parse(row.body);
    const uid = owner.metadata.uid ?? '';
    if (!owner.metadata.deletionTimestamp || !owner.metadata.finalizers?.includes(FOREGROUND_FINALIZER)) return;
    const writes: Array<Promise<unknown>> = [];
    for (const dep of this.store.dependentsOf(uid)) {
      const depRi = this.byGr(dep.gr);
      const depRow = this.store.get(dep.gr, dep.ns, dep.name);
      if (!depRi || !depRow) continue;
      const obj = parse(depRow.body);
      if (obj.metadata.deletionTimestamp) continue;
      const others = (obj.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
      const itsDependents = this.store.dependentsOf(obj.metadata.uid ?? '');
      const policy = itsDependents.length > 0 ? 'Foreground' : 'Background';
      if (others.length > 0) {
        writes.push(this.removeOwnerRef(depRi, dep.ns, dep.name, uid));
        continue;
      }
      // kube's cycle breaker: a dependent that has a dependent of its own being deleted in the foreground
      // (A owns B owns A) first stops blocking its owners, then goes in the foreground itself.
      const cycle = itsDependents.some((d) => this.deletingInForeground(d.gr, d.ns, d.name));
      writes.push(
        (cycle ? this.unblockOwnerRefs(depRi, dep.ns, dep.name) : Promise.resolve()).then(() =>
          this.tryDelete(depRi, dep.ns, dep.name, policy),
        ),
      );
    }
    await settleAll(writes);
    const blocking = this.store.dependentsOf(uid).some((dep) => {
      const depRow = this.store.get(dep.gr, dep.ns, dep.name);
      const refs = depRow ? (parse(depRow.body).metadata.ownerReferences ?? []) : [];
      return refs.some((r) => r.uid === uid && r.blockOwnerDeletion === true);
    });
    if (!blocking) await this.removeFinalizer(ri, ns, name, FOREGROUND_FINALIZER);
  }

  /** Whether the stored object is marked for deletion and waits for its dependents (`foregroundDeletion`). */
  private deletingInForeground(gr: string, ns: string, name: string): boolean {
    const row = this.store.get(gr, ns, name);
    if (!row) return false;
    const meta = parse(row.body).metadata;
    return meta.deletionTimestamp !== undefined && (meta.finalizers ?? []).includes(FOREGROUND_FINALIZER);
  }

  /** Set blockOwnerDeletion false on every ownerReference of the object (kube's unblockOwnerReferences). */
  private async unblockOwnerRefs(ri: ResourceInfo, ns: string, name: string): Promise<void> {
    await this.service.modify(this.targetOf(ri, ns, name), (next) => {
      next.metadata.ownerReferences = (next.metadata.ownerReferences ?? []).map((r) =>
        r.blockOwnerDeletion ? { ...r, blockOwnerDeletion: false } : r,
      );
      return next;
    });
  }

  /** {@link foreground} for the owner an ownerReference of a dependent in `ns` names, if it still exists. */
  private async foregroundByRef(ref: { apiVersion: string; kind: string; name: string }, ns: string): Promise<void> {
    const group = ref.apiVersion.includes('/') ? (ref.apiVersion.split('/')[0] ?? '') : '';
    const ri = this.registry.byKind(group, ref.kind);
    if (ri) await this.foreground(grKey(ri.group, ri.resource), ri.namespaced ? ns : '', ref.name);
  }

  private async removeFinalizer(ri: ResourceInfo, ns: string, name: string, finalizer: string): Promise<void> {
    await this.service.modify(this.targetOf(ri, ns, name), (next) => {
      next.metadata.finalizers = (next.metadata.finalizers ?? []).filter((f) => f !== finalizer);
      return next;
    });
  }

  /** Namespace controller: delete everything inside a terminating namespace. */
  private async terminateNamespace(ns: string): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    for (const ri of this.registry.all()) {
      if (!ri.namespaced) continue;
      for (const row of [...this.service.scan(grKey(ri.group, ri.resource), ns)]) {
        if (!parse(row.body).metadata.deletionTimestamp) writes.push(this.tryDelete(ri, ns, row.name));
      }
    }
    await settleAll(writes);
    await this.finishNamespace(ns);
  }

  /** Remove a terminating namespace once it is empty. */
  private async finishNamespace(ns: string): Promise<void> {
    const row = this.store.get(NS_GR, '', ns);
    if (!row || !parse(row.body).metadata.deletionTimestamp) return;
    for (const ri of this.registry.all()) if (ri.namespaced && this.store.count(grKey(ri.group, ri.resource), ns) > 0) return;
    const nsRi = this.registry.get('', 'namespaces');
    if (!nsRi) return;
    if (!specFinalizers(parse(row.body)).includes(NAMESPACE_FINALIZER)) return this.service.finishDeletion(this.targetOf(nsRi, '', ns));
    // The namespace controller's finalize: without the `kubernetes` spec finalizer (and no other) the namespace goes.
    await this.service.modify(this.targetOf(nsRi, '', ns), (next) => {
      const spec: Record<string, unknown> = { ...(isObject(next['spec']) ? next['spec'] : {}) };
      const left = specFinalizers(next).filter((f) => f !== NAMESPACE_FINALIZER);
      if (left.length > 0) spec['finalizers'] = left;
      else delete spec['finalizers'];
      next['spec'] = spec;
      return next;
    });
  }

  /** CRD cleanup: delete every instance, then drop the cleanup finalizer so the CRD goes. */
  private async finishCrdDeletion(crdName: string): Promise<void> {
    const row = this.store.get(CRD_GR, '', crdName);
    if (!row) return;
    const crd = parse(row.body);
    if (!crd.metadata.deletionTimestamp) return;
    const { info } = resourceFromCrd(crd);
    if (info) {
      const gr = grKey(info.group, info.resource);
      const writes: Array<Promise<unknown>> = [];
      for (const r of [...this.service.scan(gr, undefined)]) {
        if (!parse(r.body).metadata.deletionTimestamp) writes.push(this.tryDelete(info, r.ns, r.name));
      }
      await settleAll(writes);
      if (this.store.count(gr, undefined) > 0) return;
    }
    const ri = this.registry.get('apiextensions.k8s.io', 'customresourcedefinitions');
    if (ri && (crd.metadata.finalizers ?? []).includes(CRD_CLEANUP)) await this.removeFinalizer(ri, '', crdName, CRD_CLEANUP);
  }
}

/**
 * Wait for writes started together (so they share a group commit), then throw the first failure,
 * as the sequential loop they replace did.
 */
async function settleAll(writes: Array<Promise<unknown>>): Promise<void> {
  const results = await Promise.allSettled(writes);
  for (const r of results) if (r.status === 'rejected') throw r.reason;
}
