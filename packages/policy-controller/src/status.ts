import { ApiError, isObject, kubeTime } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import type { ResourceRef } from '@kars/kube-client';
import type { ControllerContext } from './context.js';

/** RFC 3339 UTC with whole seconds, as status timestamps are written (kube-core's `kubeTime`). */
export const rfc3339: (ms: number) => string = kubeTime;

/** Canonical JSON: keys sorted, undefined members left out; `applied` also leaves out null members. */
function stable(v: unknown, applied = false): string {
  if (Array.isArray(v)) return `[${v.map((x) => stable(x, applied)).join(',')}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined && !(applied && v[k] === null))
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable(v[k], applied)}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** Deep equality of JSON values, ignoring key order and undefined members. */
export function sameJson(a: unknown, b: unknown): boolean {
  return stable(a) === stable(b);
}

/**
 * Whether applying `applied` with server-side apply would leave `stored` as it is: a null member in
 * an apply removes the field, so the server never stores it, and it must not count as a difference
 * (or every reconcile would send a write the server then drops as a no-op).
 */
export function appliesAsStored(stored: unknown, applied: unknown): boolean {
  return stable(stored, true) === stable(applied, true);
}

/**
 * Write `status` with server-side apply (force) as the reconciler's status manager, unless it is
 * already what is stored (null members count as absent, as server-side apply treats them). Returns true when it wrote.
 */
export async function applyStatus(
  ctx: ControllerContext,
  ref: ResourceRef,
  obj: KubeObject,
  status: Record<string, unknown>,
  manager: string,
): Promise<boolean> {
  if (appliesAsStored(obj['status'], status)) return false;
  try {
    const written = await ctx.client.apply(
      ref,
      {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        metadata: { name: obj.metadata.name ?? '', namespace: obj.metadata.namespace ?? '' },
        status,
      },
      manager,
      { force: true, subresource: 'status' },
    );
    ctx.ownWrites.wrote(ownWriteKey(ref, obj), obj.metadata.resourceVersion, written);
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 404) return false;
    throw err;
  }
}

/** The key {@link ControllerContext.ownWrites} records a primary object's writes under. */
export function ownWriteKey(ref: ResourceRef, obj: { metadata: { namespace?: string; name?: string } }): string {
  return `${ref.group}/${ref.resource}/${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

/**
 * Milliseconds to hold off reconciling `cached`, or undefined to go on: its cached copy predates
 * a write of this controller's (the watch has not delivered it yet) or a version a 409 proved
 * outdated. See {@link OwnWrites}.
 */
export function cacheBehindOwnWrites(ctx: ControllerContext, ref: ResourceRef, cached: KubeObject): number | undefined {
  return ctx.ownWrites.waitMs(ownWriteKey(ref, cached), cached);
}

/**
 * Thrown when an optimistic-concurrency write made from the cached copy met a 409: the server holds
 * a newer version that the watch has not delivered yet. The manager ends the reconcile without an
 * error and waits for that version (its watch event enqueues the key), instead of retrying with
 * the same outdated copy.
 */
export class CachedCopyOutdated extends Error {
  readonly code = 'KARS_CACHED_COPY_OUTDATED';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CachedCopyOutdated';
  }
}

/**
 * Set an object's finalizers with an optimistic-concurrency merge patch made from the cached copy
 * (its resourceVersion as the precondition, so a finalizer list someone else changed meanwhile is
 * never overwritten). Success is recorded in `ctx.ownWrites`; a 409 is recorded too and thrown as
 * {@link CachedCopyOutdated}.
 */
async function patchFinalizers(ctx: ControllerContext, ref: ResourceRef, obj: KubeObject, finalizers: string[]): Promise<void> {
  const from = obj.metadata.resourceVersion;
  const key = ownWriteKey(ref, obj);
  try {
    const written = await ctx.client.patch<KubeObject>(
      ref,
      obj.metadata.namespace,
      obj.metadata.name ?? '',
      { metadata: { finalizers, resourceVersion: from } },
      'merge',
    );
    ctx.ownWrites.wrote(key, from, written);
  } catch (err) {
    if (err instanceof ApiError && err.code === 409) {
      ctx.ownWrites.conflicted(key, from);
      throw new CachedCopyOutdated(`${ref.resource} ${key}: the cached copy (resourceVersion ${from ?? 'none'}) is outdated`, {
        cause: err,
      });
    }
    throw err;
  }
}

/** Add a finalizer with an optimistic-concurrency merge patch (409 → {@link CachedCopyOutdated}). */
export async function addFinalizer(ctx: ControllerContext, ref: ResourceRef, obj: KubeObject, finalizer: string): Promise<void> {
  await patchFinalizers(ctx, ref, obj, [...(obj.metadata.finalizers ?? []), finalizer]);
}

/** Remove a finalizer with an optimistic-concurrency merge patch (409 → {@link CachedCopyOutdated}); a 404 means it is already gone. */
export async function removeFinalizer(ctx: ControllerContext, ref: ResourceRef, obj: KubeObject, finalizer: string): Promise<void> {
  try {
    await patchFinalizers(
      ctx,
      ref,
      obj,
      (obj.metadata.finalizers ?? []).filter((f) => f !== finalizer),
    );
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 404)) throw err;
  }
}
