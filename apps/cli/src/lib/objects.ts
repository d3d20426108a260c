/**
 * Reading, validating, writing and waiting on kars objects for the policy commands. Everything goes through
 * @kars/kube-client (never kubectl); validation is policy-api's, the same function the controller runs, so the CLI
 * refuses exactly what the controller would mark Degraded, with the same messages.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { parseAllDocuments } from 'yaml';
import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { API_VERSION, ConditionType, enforcementModeOf, validateObject } from '@kars/policy-api';
import type { Condition, KarsObject, KarsResource } from '@kars/policy-api';
import type { KubeContext } from './kube.js';
import { CliError } from './output.js';
import { unknownFieldErrors } from './strict.js';
import { describeYamlError } from './yaml-errors.js';

/** `inferencepolicy.kars.azure.com/name`, as kubectl names an object in its messages. */
export function refOf(res: KarsResource, name: string): string {
  return `${res.singular}.${res.group}/${name}`;
}

/**
 * Read one object of `kind` from a YAML or JSON file (`-` is stdin). A file with several documents must hold exactly
 * one of that kind; anything else is an error naming the file. A YAML error names its line and column and shows the
 * offending line. Every kars document in the file (not only the one returned) is checked for unknown fields first:
 * one anywhere refuses the whole file, so nothing from a file with a typo in it is written.
 */
export function readObjectFile(path: string, kind: string, defaultNamespace = 'default'): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const docs: unknown[] = [];
  const unknown: string[] = [];
  for (const [i, doc] of parseAllDocuments(text, { uniqueKeys: true }).entries()) {
    const e = doc.errors[0];
    if (e !== undefined) throw new CliError(`${path} is not valid YAML or JSON ${describeYamlError(e)}`);
    let v: unknown;
    try {
      v = doc.toJS();
    } catch (err) {
      throw new CliError(`${path} is not valid YAML or JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (v === null || v === undefined) continue;
    docs.push(v);
    unknown.push(...unknownFieldErrors(v, { file: path, doc: i + 1 }, defaultNamespace));
  }
  if (unknown.length > 0) throw new CliError(`${unknown.join('\nerror: ')}\nnothing was written`);
  const objs = docs.filter((d): d is Record<string, unknown> => typeof d === 'object' && d !== null && !Array.isArray(d));
  const ofKind = objs.filter((d) => d['kind'] === kind);
  if (ofKind.length === 1 && ofKind[0] !== undefined) return ofKind[0];
  if (ofKind.length > 1) throw new CliError(`${path} holds ${ofKind.length} ${kind} objects; pass a file with one`);
  const kinds = objs.map((d) => String(d['kind'] ?? '(no kind)'));
  throw new CliError(`${path} holds no ${kind}${kinds.length > 0 ? ` (found: ${kinds.join(', ')})` : ''}`);
}

/**
 * Refuse an object with a field its CRD does not declare (naming each, with the nearest known one), then, with
 * policy-api's messages, an object the controller would mark Degraded (client-side rules included).
 */
export function assertValidObject(obj: KarsObject): void {
  const unknown = unknownFieldErrors(obj);
  if (unknown.length > 0) throw new CliError(`${unknown.join('\nerror: ')}\nnothing was written`);
  const causes = validateObject(obj, { clientSide: true, env: process.env });
  if (causes.length === 0) return;
  throw new CliError(
    `${obj.kind} ${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''} is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join('; ')}`,
  );
}

/** Get an object, or undefined when it does not exist. */
export async function getOrUndefined<T extends KubeObject>(ctx: KubeContext, res: KarsResource, name: string): Promise<T | undefined> {
  return ctx.client.getOrUndefined<T>(res, ctx.namespace, name);
}

/** Get an object, failing with kubectl's NotFound wording. */
export async function getRequired<T extends KubeObject>(ctx: KubeContext, res: KarsResource, name: string): Promise<T> {
  const obj = await getOrUndefined<T>(ctx, res, name);
  if (obj === undefined) throw new CliError(`${res.resource}.${res.group} "${name}" not found in namespace "${ctx.namespace}"`);
  return obj;
}

export interface UpsertResult<T> {
  obj: T & KubeObject;
  action: 'created' | 'configured' | 'unchanged';
  /** When the write was sent (ms since epoch): the start of edit → enforced. */
  writtenAtMs: number;
}

/**
 * How the CLI writes: as `kars-cli`, and with strict field validation, as kubectl does by default, so the server too
 * refuses (400 `strict decoding error: unknown field "spec.x"`) what the client-side check would have missed.
 */
const WRITE = { fieldManager: 'kars-cli', fieldValidation: 'Strict' } as const;

/**
 * Create the object, or replace the existing one's spec with `build(existing)`. The spec is validated before anything
 * is sent. A concurrent writer (409 Conflict) makes it re-read and rebuild, up to five times.
 */
export async function upsert<T extends KarsObject>(
  ctx: KubeContext,
  res: KarsResource,
  name: string,
  build: (existing: T | undefined) => { spec: T['spec']; labels?: Record<string, string>; annotations?: Record<string, string> },
): Promise<UpsertResult<T>> {
  for (let attempt = 0; ; attempt++) {
    const existing = await getOrUndefined<T & KubeObject>(ctx, res, name);
    const next = build(existing);
    const metadata = existing
      ? {
          ...existing.metadata,
          labels: { ...(existing.metadata.labels ?? {}), ...(next.labels ?? {}) },
          annotations: { ...(existing.metadata.annotations ?? {}), ...(next.annotations ?? {}) },
        }
      : {
          name,
          namespace: ctx.namespace,
          ...(next.labels ? { labels: next.labels } : {}),
          ...(next.annotations ? { annotations: next.annotations } : {}),
        };
    if (existing && Object.keys(metadata.labels ?? {}).length === 0) delete metadata.labels;
    if (existing && Object.keys(metadata.annotations ?? {}).length === 0) delete metadata.annotations;
    const obj = { apiVersion: API_VERSION, kind: res.kind, metadata, spec: next.spec } as unknown as T & KubeObject;
    assertValidObject(obj);
    const writtenAtMs = Date.now();
    try {
      if (!existing) return { obj: await ctx.client.create<T & KubeObject>(res, obj, WRITE), action: 'created', writtenAtMs };
      const written = await ctx.client.replace<T & KubeObject>(res, obj, WRITE);
      return {
        obj: written,
        action: written.metadata.resourceVersion === existing.metadata.resourceVersion ? 'unchanged' : 'configured',
        writtenAtMs,
      };
    } catch (err) {
      const retriable = err instanceof ApiError && err.code === 409 && attempt < 4;
      if (!retriable) throw err;
    }
  }
}

/** Delete an object (asking first on a terminal unless `noPrompt`). Prints kubectl's `… deleted`. */
export async function deleteObject(ctx: KubeContext, res: KarsResource, name: string, noPrompt: boolean): Promise<void> {
  if (!noPrompt && process.stdin.isTTY) {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const answer = await rl.question(`delete ${refOf(res, name)} in namespace ${ctx.namespace}? [y/N] `);
    rl.close();
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not deleted', 1);
  }
  try {
    await ctx.client.delete(res, ctx.namespace, name);
  } catch (err) {
    if (err instanceof ApiError && err.code === 404)
      throw new CliError(`${res.resource}.${res.group} "${name}" not found in namespace "${ctx.namespace}"`);
    throw err;
  }
  process.stdout.write(`${refOf(res, name)} deleted\n`);
}

/** The condition of `type`, if any. */
export function condition(obj: { status?: { conditions?: Condition[] } }, type: string): Condition | undefined {
  return obj.status?.conditions?.find((c) => c.type === type);
}

/** What {@link waitEnforced} decides about one state of the object. */
export type WaitVerdict = { done: true; ok: true } | { done: true; ok: false; message: string } | { done: false; message: string };

/**
 * Whether an edit of generation `generation` is enforced: the controller observed that generation, Ready is True,
 * and (for kinds a router echoes) the loaded digest equals the compiled one. Degraded at that generation fails.
 */
export function enforcementVerdict(obj: KubeObject, generation: number): WaitVerdict {
  const status = (obj['status'] ?? {}) as {
    observedGeneration?: number;
    phase?: string;
    compiledDigest?: string | null;
    loadedDigest?: string | null;
    mergedDigest?: string;
    conditions?: Condition[];
  };
  const observed = status.observedGeneration ?? 0;
  if (observed < generation)
    return { done: false, message: `the controller has not observed generation ${generation} yet (observedGeneration ${observed})` };
  const degraded = condition({ status }, ConditionType.Degraded);
  if (degraded?.status === 'True' && (degraded.observedGeneration ?? observed) >= generation)
    return { done: true, ok: false, message: `Degraded (${degraded.reason}): ${degraded.message}` };
  if (obj.kind === 'EgressApproval') {
    if (
      status.phase === 'Active' &&
      status.loadedDigest !== undefined &&
      status.loadedDigest !== null &&
      status.loadedDigest === status.mergedDigest
    )
      return { done: true, ok: true };
    if (status.phase === 'Expired') return { done: true, ok: false, message: 'the approval has expired' };
    const ready = condition({ status }, ConditionType.Ready);
    return { done: false, message: `phase ${status.phase ?? '(none)'}${ready ? `, ${ready.reason}: ${ready.message}` : ''}` };
  }
  const ready = condition({ status }, ConditionType.Ready);
  if (ready?.status === 'True' && (ready.observedGeneration ?? observed) >= generation) {
    const echoed = status.compiledDigest === undefined || status.compiledDigest === null || status.loadedDigest === status.compiledDigest;
    if (echoed) return { done: true, ok: true };
  }
  return { done: false, message: ready ? `Ready=${ready.status} (${ready.reason}): ${ready.message}` : 'no Ready condition yet' };
}

/**
 * Wait until {@link enforcementVerdict} is done for `generation`, following the object through a watch (not polling,
 * so the time measured is the time the change happened, within the watch's delivery). Resolves with the final object,
 * or throws a CliError naming what it was waiting for when `timeoutMs` passes or the object goes Degraded.
 */
export async function waitEnforced<T extends KubeObject>(ctx: KubeContext, res: KarsResource, start: T, timeoutMs: number): Promise<T> {
  const name = start.metadata.name ?? '';
  const generation = start.metadata.generation ?? 1;
  const deadline = Date.now() + timeoutMs;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  let last: T = start;
  let rv = start.metadata.resourceVersion ?? '0';
  const check = (obj: T): T | undefined => {
    last = obj;
    const v = enforcementVerdict(obj, generation);
    if (!v.done) return undefined;
    if (!v.ok) throw new CliError(`${refOf(res, name)} generation ${generation} is not enforced: ${v.message}`);
    return obj;
  };
  try {
    const now = check(start);
    if (now) return now;
    while (!ac.signal.aborted) {
      try {
        const left = Math.max(1, deadline - Date.now());
        for await (const ev of ctx.client.watch<T>(res, {
          namespace: ctx.namespace,
          fieldSelector: `metadata.name=${name}`,
          resourceVersion: rv,
          timeoutSeconds: Math.ceil(left / 1000) + 1,
          allowWatchBookmarks: true,
          idleTimeoutMs: left + 5_000,
          signal: ac.signal,
        })) {
          if (ev.type === 'ERROR') break;
          const obj = ev.object as T;
          rv = obj.metadata.resourceVersion ?? rv;
          if (ev.type === 'BOOKMARK') continue;
          if (ev.type === 'DELETED') throw new CliError(`${refOf(res, name)} was deleted while waiting`);
          const done = check(obj);
          if (done) return done;
        }
      } catch (err) {
        if (err instanceof CliError || ac.signal.aborted) throw err;
      }
      if (ac.signal.aborted) break;
      // The watch ended or failed: re-read (the change may have happened in between) and watch again.
      const fresh = await ctx.client.get<T>(res, ctx.namespace, name);
      rv = fresh.metadata.resourceVersion ?? rv;
      const done = check(fresh);
      if (done) return done;
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (!ac.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  const v = enforcementVerdict(last, generation);
  throw new CliError(
    `timed out after ${Math.round(timeoutMs / 1000)}s waiting for ${refOf(res, name)} generation ${generation} to be enforced: ${v.done ? '' : v.message}`,
    2,
  );
}

/** Parse `--timeout S` (seconds, > 0). */
export function parseTimeout(v: string): number {
  const n = Number(v);
  if (!/^\d+(\.\d+)?$/.test(v.trim()) || !(n > 0)) throw new CliError(`--timeout must be a positive number of seconds, got "${v}"`);
  return n;
}

/** Print the `--wait` outcome: edit → enforced as the CLI saw it, and as the controller measured it. */
export function printEnforced(res: KarsResource, obj: KubeObject, writtenAtMs: number): void {
  const status = (obj['status'] ?? {}) as { propagation?: { lastMs?: number }; compiledDigest?: string | null; mergedDigest?: string };
  const ms = Date.now() - writtenAtMs;
  const digest = status.compiledDigest ?? status.mergedDigest ?? null;
  const ctrl = status.propagation?.lastMs !== undefined ? `; controller: edit → every router ${status.propagation.lastMs} ms` : '';
  // A DryRun policy is recorded by its routers, never enforced (ADR 0050): say so.
  const dryRun = enforcementModeOf((obj['spec'] ?? {}) as { enforcement?: unknown }) === 'DryRun';
  const verb = dryRun ? 'recorded (DryRun, not enforced)' : 'enforced';
  process.stdout.write(
    `${refOf(res, obj.metadata.name ?? '')} ${verb}: generation ${obj.metadata.generation ?? 1}${digest ? `, digest ${digest}` : ''}, edit → ${dryRun ? 'recorded' : 'enforced'} ${ms} ms${ctrl}\n`,
  );
}
