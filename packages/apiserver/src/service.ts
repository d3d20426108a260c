import { ApiError, alreadyExists, badRequest, conflict, invalid, isObject, notFound } from '@kars/kube-core';
import type { FieldRequirement, KubeObject, LabelSelector } from '@kars/kube-core';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, PatchError, serverSideApply, trackUpdate } from '@kars/kube-patch';
import { admitObject } from './admission.js';
import { decodeContinue, encodeContinue } from './continue-token.js';
import type { Admitted, FieldValidation } from './admission.js';
import { clone, nowRfc3339, randomSuffix } from './meta.js';
import { resourceFromCrd } from './registry/crd.js';
import type { Registry } from './registry/registry.js';
import { grKey, storageVersion } from './registry/resource.js';
import type { ResourceInfo } from './registry/resource.js';
import type { ChangeRecord, Store } from './storage/store.js';
import { addressesInUse, allocateServiceAddresses, SERVICES_GR } from './service-addresses.js';
import type { AddressesInUse } from './service-addresses.js';
import { selects } from './watch/cache.js';
import type { WatchCache } from './watch/cache.js';
import {
  CRD_CLEANUP,
  CRD_GR,
  NS_GR,
  apiVersionOf,
  applyConflictMessage,
  bumpGeneration,
  checkPreconditions,
  conflictingManager,
  coerceBody,
  deletesDuringUpdate,
  FOREGROUND_FINALIZER,
  ORPHAN_FINALIZER,
  fieldOptions,
  finalizeForCreate,
  finalizeForUpdate,
  managedFieldsView,
  ownerUids,
  sameIgnoringManagedTimes,
  target,
} from './strategy.js';
import type { Preconditions, Target } from './strategy.js';
import { specFinalizers } from './namespace.js';

export type { Target } from './strategy.js';

/**
 * `stored` (what an update of `old` stores) with the managedFields kube gives it: the fields that
 * changed are the manager's, compared as kube's field manager sees the request ({@link managedFieldsView}).
 */
function trackedUpdate(t: Target, old: KubeObject, requested: KubeObject, stored: KubeObject, manager: string): KubeObject {
  const view = managedFieldsView(t, requested, stored);
  const out = trackUpdate(old, view, manager, apiVersionOf(t.ri, t.version), nowRfc3339(), t.subresource, fieldOptions(t));
  if (view === stored) return out;
  const meta = { ...stored.metadata };
  if (out.metadata.managedFields) meta.managedFields = out.metadata.managedFields;
  else delete meta.managedFields;
  return { ...stored, metadata: meta };
}

function parse(body: string): KubeObject {
  return JSON.parse(body) as KubeObject;
}

/** Options common to writes. */
export interface WriteOptions {
  dryRun: boolean;
  manager: string;
  fieldValidation: FieldValidation;
  /** Strict decoding errors the body's decoder found (`duplicate field "spec.size"`), judged by `fieldValidation` with the unknown fields. */
  strictErrors?: string[];
}

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

/** What a patch takes beside {@link WriteOptions}. */
export interface PatchOptions {
  /** Apply only: take over conflicting fields. */
  force: boolean;
  /** Called (and may throw 403) before a server-side apply creates the object. */
  authorizeCreate?: () => void;
}

/** The result of a write: the object as stored, the HTTP status, and warnings for the client. */
export interface WriteResult {
  object: KubeObject;
  code: number;
  warnings: string[];
  /** `object` as JSON text, when the write already has it (so the answer is not encoded twice). */
  body?: string | undefined;
  /** The write removed the object (a delete without finalizers, or the last finalizer removed). */
  gone: boolean;
}

/** Options of {@link ObjectService.delete} (metav1.DeleteOptions). */
export interface DeleteOptions {
  dryRun: boolean;
  /** `preconditions.uid`: the delete fails with 409 unless the object has this uid. */
  preconditionUid?: string;
  /** `preconditions.resourceVersion`: the delete fails with 409 unless the object is at this version. */
  preconditionRv?: string;
  /**
   * `Orphan` keeps dependents (their owner reference is removed), `Foreground` deletes them before
   * the owner goes, `Background` (or none) deletes them after.
   */
  propagationPolicy?: string;
}

/**
 * The finalizers a delete with `policy` leaves (kube's deletionFinalizersForGarbageCollection):
 * `Orphan` adds `orphan` and drops `foregroundDeletion`, `Foreground` the reverse, `Background`
 * drops both; without a policy they are kept as they are.
 */
export function propagationFinalizers(finalizers: readonly string[], policy: string | undefined): string[] {
  if (policy === undefined) return [...finalizers];
  const out = finalizers.filter((f) => f !== ORPHAN_FINALIZER && f !== FOREGROUND_FINALIZER);
  if (policy === 'Orphan') out.push(ORPHAN_FINALIZER);
  if (policy === 'Foreground') out.push(FOREGROUND_FINALIZER);
  const same = out.length === finalizers.length && out.every((f) => finalizers.includes(f));
  return same ? [...finalizers] : out;
}

/** What a write's logic decided: the new object and which kind of change it is. */
interface Computed {
  obj: KubeObject;
  warnings: string[];
  op: 'create' | 'update' | 'delete';
}

/** The result of a list: bodies already rendered at the requested version. */
export interface ListResult {
  rv: number;
  items: string[];
  continue?: string;
  remainingItemCount?: number;
}

export interface ListOptions {
  labels?: LabelSelector;
  fields?: FieldRequirement[];
  limit?: number;
  continueToken?: string;
}

const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];
/** Options of the server's own writes (system namespaces, lifecycle controllers). */
const SYSTEM_OPTS: WriteOptions = { dryRun: false, manager: 'kars-apiserver', fieldValidation: 'Ignore' };

/**
 * The object service: kube-apiserver's generic registry semantics over the {@link Store}.
 * Every write's logic runs synchronously inside the store's open group-commit batch, so concurrent
 * requests are serialised and optimistic concurrency is exact: for each resourceVersion exactly one
 * update wins. A write's promise settles only after its batch has committed (ADR 0002); the watch
 * cache, the registry and the follow-up controllers see a change only after it is committed.
 */
export class ObjectService {
  /** Subscribers to committed changes (the lifecycle controllers); see {@link ObjectService.onAfterCommit}. */
  private readonly afterCommitListeners: Array<(changes: readonly ChangeRecord[]) => void> = [];

  constructor(
    private readonly store: Store,
    private readonly registry: Registry,
    private readonly cache: WatchCache,
    private readonly onError: (err: unknown, what: string) => void,
  ) {
    store.onCommit = (changes) => {
      try {
        this.afterCommit(changes);
      } catch (err) {
        this.onError(err, 'publishing committed changes');
      }
    };
  }

  /** Load CRDs from storage into the registry and create the system namespaces on first start. */
  async bootstrap(): Promise<void> {
    for (const row of this.scan(CRD_GR, undefined)) {
      const crd = parse(row.body);
      const { info } = resourceFromCrd(crd);
      if (info) this.registry.set(info);
    }
    const nsInfo = this.registry.get('', 'namespaces');
    if (!nsInfo) return;
    for (const name of SYSTEM_NAMESPACES) {
      if (this.store.get(NS_GR, '', name)) continue;
      await this.create(
        { ri: nsInfo, version: 'v1', ns: '', name },
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
        SYSTEM_OPTS,
      );
    }
  }

  /** The newest committed resourceVersion. */
  currentRv(): number {
    return this.store.currentRv();
  }

  /** Render a stored body at the version the client asked for. */
  render(ri: ResourceInfo, version: string, body: string): string {
    if (version === storageVersion(ri)) return body;
    const obj = parse(body);
    obj.apiVersion = apiVersionOf(ri, version);
    return JSON.stringify(obj);
  }

  get(t: Target): KubeObject {
    const row = this.store.get(grKey(t.ri.group, t.ri.resource), t.ns, t.name);
    if (!row) throw notFound(target(t));
    return parse(this.render(t.ri, t.version, row.body));
  }

  /** Read rows of one resource in key order, in pages, without loading everything at once. */
  *scan(gr: string, ns: string | undefined, after = { ns: '', name: '' }): Generator<{ ns: string; name: string; body: string }> {
    let cursor = after;
    for (;;) {
      const rows = this.store.list(gr, ns, cursor, 500);
      for (const r of rows) yield r;
      const last = rows[rows.length - 1];
      if (!last || rows.length < 500) return;
      cursor = { ns: last.ns, name: last.name };
    }
  }

  list(ri: ResourceInfo, version: string, ns: string | undefined, opts: ListOptions): ListResult {
    const gr = grKey(ri.group, ri.resource);
    let after = { ns: '', name: '' };
    let rv = this.store.currentRv();
    if (opts.continueToken) {
      const tok = decodeContinue(opts.continueToken);
      after = { ns: tok.ns, name: tok.name };
      rv = tok.rv;
    }
    const filtering = (opts.labels?.length ?? 0) > 0 || (opts.fields?.length ?? 0) > 0;
    const filter = filtering
      ? { gr, ...(opts.labels ? { labels: opts.labels } : {}), ...(opts.fields ? { fields: opts.fields } : {}) }
      : undefined;
    const limit = opts.limit !== undefined && opts.limit > 0 ? opts.limit : Infinity;
    const items: string[] = [];
    let lastKey: { ns: string; name: string } | undefined;
    let more = false;
    for (const row of this.scan(gr, ns, after)) {
      if (items.length >= limit) {
        more = true;
        break;
      }
      lastKey = { ns: row.ns, name: row.name };
      if (filter && !selects(filter, parse(row.body))) continue;
      items.push(this.render(ri, version, row.body));
    }
    const res: ListResult = { rv, items };
    if (more && lastKey) {
      res.continue = encodeContinue({ rv, ...lastKey });
      if (!filtering) res.remainingItemCount = this.store.countAfter(gr, ns, lastKey);
    }
    return res;
  }

  /** Current state at the current revision, for a watch that starts without a resourceVersion. */
  snapshot(ri: ResourceInfo, ns: string | undefined): { rv: number; bodies: string[] } {
    const gr = grKey(ri.group, ri.resource);
    return { rv: this.store.currentRv(), bodies: [...this.scan(gr, ns)].map((r) => r.body) };
  }

  // ---- writes ----

  /** Admission shared by every create and update (admission.ts): metadata, schema and CEL, unknown fields, CRD checks. */
  private admitObject(t: Target, obj: KubeObject, old: KubeObject | undefined, opts: WriteOptions): Admitted {
    return admitObject(t.ri, t.version, t.name, obj, old, opts.fieldValidation, opts.strictErrors);
  }

  /** The cluster IPs and node ports every Service but `t`'s holds (read inside the write's savepoint). */
  private serviceAddressesInUse(t: Target): AddressesInUse {
    const others: KubeObject[] = [];
    for (const r of this.scan(SERVICES_GR, undefined)) if (r.ns !== t.ns || r.name !== t.name) others.push(parse(r.body));
    return addressesInUse(others);
  }

  private requireNamespace(t: Target): void {
    if (!t.ri.namespaced) return;
    const row = this.store.get(NS_GR, '', t.ns);
    if (!row) throw notFound({ group: '', resource: 'namespaces', name: t.ns, kind: 'Namespace' });
    // (Parsed only when the text says it may be marked for deletion: a create reads its namespace.)
    if (row.body.includes('"deletionTimestamp"') && parse(row.body).metadata.deletionTimestamp) {
      throw new ApiError(
        403,
        'Forbidden',
        `${t.ri.resource} "${t.name}" is forbidden: unable to create new content in namespace ${t.ns} because it is being terminated`,
        {
          name: t.name,
          ...(t.ri.group ? { group: t.ri.group } : {}),
          kind: t.ri.resource,
          causes: [{ reason: 'NamespaceTerminating', message: `namespace ${t.ns} is being terminated`, field: 'metadata.namespace' }],
        },
      );
    }
  }

  /**
   * The single write path of every create, update, patch, apply and delete (clients' and the
   * lifecycle controllers'). Inside one savepoint of the open group commit it reads the current
   * object, checks the preconditions, lets `compute` decide the new object (admission happens
   * there, per operation) or throw an ApiError, drops a change that changes nothing, answers a dry
   * run without storing, and stages the change: ADDED, MODIFIED, or DELETED for a `delete` and for
   * an update that leaves an object marked for deletion without finalizers. It settles after the
   * commit (ADR 0002); nothing is stored if anything throws.
   */
  private async write(
    t: Target,
    opts: WriteOptions,
    compute: (old: KubeObject | undefined) => Computed,
    pre?: Preconditions,
  ): Promise<WriteResult> {
    const gr = grKey(t.ri.group, t.ri.resource);
    let result: WriteResult | undefined;
    await this.store.write((stage) => {
      const row = this.store.get(gr, t.ns, t.name);
      const old = row ? parse(row.body) : undefined;
      if (pre && old) checkPreconditions(t, old, pre);
      const { obj, warnings, op } = compute(old);
      obj.apiVersion = apiVersionOf(t.ri, storageVersion(t.ri));
      // What kube's Service storage allocates, after managedFields were tracked (so no manager owns it).
      if (gr === SERVICES_GR && op !== 'delete') allocateServiceAddresses(obj, old, () => this.serviceAddressesInUse(t));
      if (old && op === 'update' && sameIgnoringManagedTimes(old, obj)) {
        result = { object: old, code: 200, warnings, gone: false, body: row?.body };
        return;
      }
      const emptied = op === 'update' && old !== undefined && deletesDuringUpdate(gr, old, obj);
      const gone = op === 'delete' || emptied;
      const code = op === 'create' ? 201 : 200;
      // A delete answers with the object as it was last stored (kube's etcd store does the same).
      const answer = op === 'delete' && old ? old : obj;
      // An update that empties the finalizers of a marked object is never stored: kube deletes the
      // stored object instead (its DELETED event carries that last state, finalizers and all) and
      // answers the update's object at the stored resourceVersion.
      const removed = emptied ? old : obj;
      if (emptied && old.metadata.resourceVersion) obj.metadata.resourceVersion = old.metadata.resourceVersion;
      if (opts.dryRun) {
        // kube's dry-run create has no resourceVersion (an update keeps the stored one).
        if (old?.metadata.resourceVersion) obj.metadata.resourceVersion = old.metadata.resourceVersion;
        else delete obj.metadata.resourceVersion;
        result = { object: answer, code, warnings, gone };
        return;
      }
      const rec = stage({
        gr,
        ns: t.ns,
        name: t.name,
        type: gone ? 'DELETED' : op === 'create' ? 'ADDED' : 'MODIFIED',
        prev: row ? row.body : null,
        owners: ownerUids(obj),
        render: (rv) => {
          removed.metadata.resourceVersion = String(rv);
          return JSON.stringify(removed);
        },
      });
      // `obj` is what `render` encoded (resourceVersion included): the answer needs no second decode.
      // A delete answers with the object as it was last stored.
      if (op === 'delete') result = { object: answer, code, warnings, gone, body: row?.body };
      else result = { object: obj, code, warnings, gone, ...(emptied ? {} : { body: rec.body }) };
    });
    if (!result) throw new Error('write produced no result');
    if (t.version !== storageVersion(t.ri)) {
      const text = this.render(t.ri, t.version, result.body ?? JSON.stringify(result.object));
      result.object = parse(text);
      result.body = text;
    }
    return result;
  }

  async create(t: Target, body: unknown, opts: WriteOptions): Promise<WriteResult> {
    if (t.subresource) throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
    const obj = coerceBody(t, body, true);
    if ((obj.metadata.name ?? '') === '' && obj.metadata.generateName) obj.metadata.name = obj.metadata.generateName + randomSuffix();
    const name = obj.metadata.name ?? '';
    if (name === '')
      throw invalid(target({ ...t, name }), [
        { reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' },
      ]);
    const tt: Target = { ...t, name };
    this.requireNamespace(tt);
    return this.write(tt, opts, (old) => {
      if (old) throw alreadyExists(target(tt));
      return this.created(tt, obj, opts);
    });
  }

  /** The object a create stores: admitted, its managed fields tracked, finalized for create. */
  private created(t: Target, obj: KubeObject, opts: WriteOptions): { obj: KubeObject; warnings: string[]; op: 'create' } {
    const admitted = this.admitObject(t, obj, undefined, opts);
    // Tracked before finalizing, as kube's field manager runs before the strategy's PrepareForCreate.
    const apiVersion = apiVersionOf(t.ri, t.version);
    const tracked = trackUpdate(undefined, admitted.obj, opts.manager, apiVersion, nowRfc3339(), undefined, fieldOptions(t));
    return { obj: finalizeForCreate(t, tracked), warnings: admitted.warnings, op: 'create' };
  }

  async update(t: Target, body: unknown, opts: WriteOptions): Promise<WriteResult> {
    const obj = coerceBody(t, body, false);
    obj.metadata.name = t.name;
    return this.write(t, opts, (old) => {
      if (!old) {
        // kube's AllowCreateOnUpdate: the PUT creates the object (without a resourceVersion precondition).
        if (!t.ri.allowCreateOnUpdate || t.subresource) throw notFound(target(t));
        if (obj.metadata.resourceVersion) throw notFound(target(t));
        this.requireNamespace(t);
        return this.created(t, obj, opts);
      }
      const rv = obj.metadata.resourceVersion;
      if (rv === undefined || rv === '') {
        // kube's rest.Update: an Invalid naming the resource (not the kind), value 0.
        if (!t.ri.allowUnconditionalUpdate)
          throw invalid({ ...target(t), kind: t.ri.resource }, [
            {
              reason: 'FieldValueInvalid',
              field: 'metadata.resourceVersion',
              message: 'Invalid value: 0: must be specified for an update',
            },
          ]);
      } else if (rv !== old.metadata.resourceVersion) {
        throw conflict(target(t), 'the object has been modified; please apply your changes to the latest version and try again');
      }
      return this.updateFrom(t, old, obj, opts);
    });
  }

  private updateFrom(t: Target, old: KubeObject, obj: KubeObject, opts: WriteOptions, tracked = false): Computed {
    const next = finalizeForUpdate(t, old, obj);
    const admitted = this.admitObject(t, next, old, opts);
    bumpGeneration(t.ri, old, admitted.obj);
    const withFields = tracked ? admitted.obj : trackedUpdate(t, old, obj, admitted.obj, opts.manager);
    return { obj: withFields, warnings: admitted.warnings, op: 'update' };
  }

  /**
   * A patch of `t`. A server-side apply of a missing object creates it; `authorizeCreate` (throwing
   * when refused) is called before it does, since kube-apiserver authorizes `create` then as well.
   */
  async patch(t: Target, type: PatchType, patchBody: unknown, opts: WriteOptions & PatchOptions): Promise<WriteResult> {
    if (type === 'strategic' && !t.ri.strategic) {
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
      );
    }
    // An apply without an explicit fieldManager was refused with the other PatchOptions (http/options.ts).
    return this.write(t, opts, (old) => {
      if (type === 'apply') return this.applyPatch(t, old, patchBody, opts);
      if (!old) throw notFound(target(t));
      let patched: unknown;
      try {
        const base = this.render(t.ri, t.version, JSON.stringify(old));
        const live = JSON.parse(base) as unknown;
        if (type === 'merge') patched = applyMergePatch(live, patchBody);
        else if (type === 'json') patched = applyJsonPatch(live, patchBody);
        else patched = applyStrategicMergePatch(live, patchBody, t.ri.strategic ?? { mergeKeys: {} });
      } catch (err) {
        if (err instanceof PatchError) {
          // kube answers a well-formed patch that fails to apply with a generic 422 (NewGenericServerResponse).
          if (err.httpStatus === 422)
            throw new ApiError(422, 'Invalid', 'the server rejected our request due to an error in our request', {}, { cause: err });
          throw badRequest(err.message, err);
        }
        throw err;
      }
      const obj = coerceBody(t, patched, false);
      const rv = obj.metadata.resourceVersion;
      if (rv !== undefined && rv !== '' && rv !== old.metadata.resourceVersion) {
        throw conflict(target(t), 'the object has been modified; please apply your changes to the latest version and try again');
      }
      return this.updateFrom(t, old, obj, opts);
    });
  }

  private applyPatch(t: Target, old: KubeObject | undefined, patchBody: unknown, opts: WriteOptions & PatchOptions): Computed {
    if (old === undefined) opts.authorizeCreate?.();
    if (!isObject(patchBody)) throw badRequest('the apply configuration must be an object');
    const applied = clone(patchBody);
    const meta = isObject(applied['metadata']) ? applied['metadata'] : undefined;
    if (meta && meta['name'] !== undefined && meta['name'] !== t.name)
      throw badRequest(`the name of the object (${String(meta['name'])}) does not match the name on the URL (${t.name})`);
    if (old === undefined) this.requireNamespace(t);
    if (t.ri.namespaced && meta && meta['namespace'] === undefined) meta['namespace'] = t.ns;
    // serverSideApply copies what it changes (it never writes to `live`), so the stored object is
    // passed as it is when the request is at the storage version.
    const live =
      old && t.version !== storageVersion(t.ri) ? (JSON.parse(this.render(t.ri, t.version, JSON.stringify(old))) as KubeObject) : old;
    let res;
    try {
      res = serverSideApply({
        live,
        applied,
        manager: opts.manager,
        force: opts.force,
        apiVersion: apiVersionOf(t.ri, t.version),
        now: nowRfc3339(),
        ...(t.subresource ? { subresource: t.subresource } : {}),
        options: fieldOptions(t),
      });
    } catch (err) {
      if (err instanceof PatchError) throw badRequest(err.message, err);
      throw err;
    }
    if (!res.ok) {
      const causes = res.conflicts.map((c) => ({
        reason: 'FieldManagerConflict',
        field: c.field,
        message: `conflict with ${conflictingManager(c)}`,
      }));
      // kube's apply conflict is a bare 409 (NewApplyConflict): its message and causes, no name or kind.
      throw new ApiError(409, 'Conflict', applyConflictMessage(res.conflicts), { causes });
    }
    const obj = coerceBody(t, res.object, old === undefined);
    obj.metadata.name = t.name;
    if (!old) {
      const admitted = this.admitObject(t, obj, undefined, opts);
      return { obj: finalizeForCreate(t, admitted.obj), warnings: admitted.warnings, op: 'create' };
    }
    return this.updateFrom(t, old, obj, opts, true);
  }

  /**
   * Delete an object, through the one write path. With finalizers (or as a namespace, which its
   * controller must empty first) it is only marked: deletionTimestamp, grace 0 (none for a
   * Namespace), generation bumped, a MODIFIED event; a second delete of a marked object changes
   * nothing. Otherwise it is removed (a DELETED event) and the answer is the object as it was.
   * `propagationPolicy: Orphan` adds the `orphan` finalizer, `Foreground` the `foregroundDeletion`
   * one, and a CRD always gets the instance-cleanup finalizer; the lifecycle controllers remove them.
   * Preconditions that do not hold are a 409; schema admission does not run, as in kube (an object
   * must stay deletable whatever its schema now says).
   */
  delete(t: Target, opts: DeleteOptions): Promise<WriteResult> {
    const gr = grKey(t.ri.group, t.ri.resource);
    const pre: Preconditions = {};
    if (opts.preconditionUid) pre.uid = opts.preconditionUid;
    if (opts.preconditionRv) pre.resourceVersion = opts.preconditionRv;
    const writeOpts: WriteOptions = { ...SYSTEM_OPTS, dryRun: opts.dryRun };
    return this.write(
      t,
      writeOpts,
      (old) => {
        if (!old) throw notFound(target(t));
        const next = clone(old);
        const finalizers = propagationFinalizers(next.metadata.finalizers ?? [], opts.propagationPolicy);
        if (gr === CRD_GR && !finalizers.includes(CRD_CLEANUP)) finalizers.push(CRD_CLEANUP);
        // A Namespace is always marked first; it goes once its spec finalizers are gone too.
        const held = gr === NS_GR && (!old.metadata.deletionTimestamp || specFinalizers(old).length > 0);
        if (finalizers.length === 0 && !held) return { obj: next, warnings: [], op: 'delete' };
        if (old.metadata.deletionTimestamp) return { obj: next, warnings: [], op: 'update' }; // already marked: unchanged
        next.metadata.deletionTimestamp = nowRfc3339();
        // kube's Namespace deletion sets no grace period; the generic store's sets 0.
        if (gr !== NS_GR) next.metadata.deletionGracePeriodSeconds = 0;
        next.metadata.finalizers = finalizers;
        if (finalizers.length === 0) delete next.metadata.finalizers;
        if (t.ri.tracksGeneration) next.metadata.generation = (next.metadata.generation ?? 1) + 1;
        if (gr === NS_GR) next['status'] = { ...(isObject(next['status']) ? next['status'] : {}), phase: 'Terminating' };
        return { obj: next, warnings: [], op: 'update' };
      },
      pre,
    );
  }

  /**
   * Remove an object already marked for deletion and without finalizers (a terminating namespace,
   * once its controller emptied it), through the one write path. Unchanged otherwise; 404 when gone.
   */
  async finishDeletion(t: Target): Promise<void> {
    await this.write(t, SYSTEM_OPTS, (old) => {
      if (!old) throw notFound(target(t));
      const done = deletesDuringUpdate(grKey(t.ri.group, t.ri.resource), old, old);
      return { obj: clone(old), warnings: [], op: done ? 'delete' : 'update' };
    });
  }

  /**
   * Read-modify-write as the server itself (the lifecycle controllers): `change` gets a copy of the
   * current object and returns the new one. No admission and no managedFields entry; 404 when the
   * object is gone. Removing the last finalizer of an object marked for deletion removes it.
   */
  modify(t: Target, change: (copy: KubeObject) => KubeObject): Promise<WriteResult> {
    return this.write(t, SYSTEM_OPTS, (old) => {
      if (!old) throw notFound(target(t));
      return { obj: change(clone(old)), warnings: [], op: 'update' };
    });
  }

  // ---- after a commit ----

  /**
   * Subscribe to committed changes. `listener` runs synchronously after each group commit, with the
   * batch's changes in revision order, after the watch cache and the registry have seen them and
   * before the batch's writes are answered. It must be quick and must not write synchronously;
   * follow-up writes are queued (see {@link Lifecycle}). Returns the unsubscribe function.
   */
  onAfterCommit(listener: (changes: readonly ChangeRecord[]) => void): () => void {
    this.afterCommitListeners.push(listener);
    return () => {
      const i = this.afterCommitListeners.indexOf(listener);
      if (i >= 0) this.afterCommitListeners.splice(i, 1);
    };
  }

  private afterCommit(changes: ChangeRecord[]): void {
    if (changes.length === 0) return;
    this.cache.publish(changes);
    this.cache.compact(this.store.oldestResumableRv());
    for (const c of changes) if (c.gr === CRD_GR) this.syncCrd(c);
    for (const listener of [...this.afterCommitListeners]) {
      try {
        listener(changes);
      } catch (err) {
        this.onError(err, 'afterCommit listener');
      }
    }
  }

  private syncCrd(c: ChangeRecord): void {
    const crd = parse(c.body);
    const { info } = resourceFromCrd(crd);
    if (c.type === 'DELETED') {
      if (info) this.registry.remove(info.group, info.resource);
      return;
    }
    if (info) this.registry.set(info);
  }
}
