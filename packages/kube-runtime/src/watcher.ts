import { ApiError } from '@kars/kube-core';
import type { KubeObject, Status, WatchEvent } from '@kars/kube-core';
import { ConnectionLostError } from '@kars/kube-client';
import type { KubeClient, ResourceRef } from '@kars/kube-client';
import { Backoff } from './backoff.js';
import type { WatchMetrics, WatchRestartReason } from './metrics.js';
import type { WatchConfig } from './watch-config.js';
import { watchTimeoutSeconds } from './watch-config.js';

/** Why the watcher (re)lists. */
export type RelistReason = 'initial' | 'expired' | 'periodic';

/**
 * What the watcher produces. A (re)list is framed by `init` … `initApply`* … `initDone`, so a
 * consumer can buffer it and swap it in at once; `apply`/`delete` follow individual changes.
 * `restart` reports a lifecycle change (the stream ended or failed and is being resumed).
 */
export type WatcherEvent<T extends KubeObject = KubeObject> =
  | { type: 'init'; reason: RelistReason }
  | { type: 'initApply'; object: T }
  | { type: 'initDone'; resourceVersion: string; reason: RelistReason; count: number }
  | { type: 'apply'; object: T }
  | { type: 'delete'; object: T }
  | { type: 'bookmark'; resourceVersion: string }
  | { type: 'restart'; reason: WatchRestartReason; delayMs: number; error?: string };

/** The watcher's state: nothing known (must list) or watching from a resourceVersion. */
export type WatcherState = { phase: 'empty'; reason: RelistReason } | { phase: 'watching'; resourceVersion: string };

/** How a watch stream ended. */
export type StreamOutcome =
  | { kind: 'ended' } // the server ended it cleanly (timeoutSeconds)
  | { kind: 'expired' } // 410: the resourceVersion is gone
  | { kind: 'relist-due' } // the periodic relist-and-diff is due
  | { kind: 'failed'; reason: 'idle' | 'ping' | 'error'; error: unknown };

/**
 * The transition function of the watcher, with no I/O: where to go after a stream ends, and
 * whether to wait first. A clean end resumes at once from the last resourceVersion; 410 relists;
 * failures resume from the last resourceVersion after a backoff; a due relist lists again.
 */
export function nextState(
  state: Extract<WatcherState, { phase: 'watching' }>,
  outcome: StreamOutcome,
): { state: WatcherState; restart: WatchRestartReason | undefined; backoff: boolean } {
  switch (outcome.kind) {
    case 'ended':
      return { state, restart: 'server_timeout', backoff: false };
    case 'expired':
      return { state: { phase: 'empty', reason: 'expired' }, restart: 'expired', backoff: false };
    case 'relist-due':
      return { state: { phase: 'empty', reason: 'periodic' }, restart: undefined, backoff: false };
    case 'failed':
      return { state, restart: outcome.reason, backoff: true };
  }
}

/** How long an opened watch must stay up before it proves the server reachable again. */
export const MIN_HEALTHY_WATCH_MS = 1000;

/**
 * Whether the reconnect backoff starts over after a stream ended. A watch that the server
 * accepted (response headers arrived) proves the server reachable: the next failure is a new fault,
 * not the next step of the old one, so it waits only the initial delay, whether the watch then stayed
 * up ({@link MIN_HEALTHY_WATCH_MS} or more) or was cut at once by a new fault. Only when the server
 * accepts and drops watch after watch (`acceptedDropsBefore`: streams in a row that were accepted and
 * then lasted less than MIN_HEALTHY_WATCH_MS) does the backoff keep growing, so such a server is not
 * hammered. A watch that never opened keeps it growing too (the server is not reachable). A stream
 * healthy for `backoffResetMs` resets it whatever happened.
 *
 * (Before: an accepted watch cut within a second kept the backoff grown by an outage just before it,
 * so a fault right after an apiserver restart waited 4–8 s instead of ≤ 1 s.)
 */
export function shouldResetBackoff(
  opened: boolean,
  healthyForMs: number,
  cfg: Pick<WatchConfig, 'backoffResetMs'>,
  acceptedDropsBefore = 0,
): boolean {
  return healthyForMs >= cfg.backoffResetMs || (opened && (healthyForMs >= MIN_HEALTHY_WATCH_MS || acceptedDropsBefore === 0));
}

/** Classify a failure of a watch stream into a restart reason. */
export function classifyFailure(err: unknown): { kind: 'expired' } | { kind: 'failed'; reason: 'idle' | 'ping' | 'error'; error: unknown } {
  if (err instanceof ApiError && (err.code === 410 || err.reason === 'Expired' || err.reason === 'Gone')) return { kind: 'expired' };
  if (err instanceof ConnectionLostError)
    return { kind: 'failed', reason: err.reason === 'idle' ? 'idle' : err.reason === 'ping' ? 'ping' : 'error', error: err };
  return { kind: 'failed', reason: 'error', error: err };
}

export interface WatcherOptions {
  client: KubeClient;
  resource: ResourceRef;
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  config: WatchConfig;
  metrics?: WatchMetrics | undefined;
  /** Called at each lifecycle change (for one structured log line). */
  onLifecycle?: ((msg: string, fields: Record<string, unknown>) => void) | undefined;
  /** Called whenever the watcher has confirmation that it is current (list done, watch opened, event, bookmark). */
  onFresh?: (() => void) | undefined;
  /** Told when a watch stream is open (true) and when it has ended (false). */
  onWatching?: ((open: boolean) => void) | undefined;
  random?: () => number;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * List and watch one resource forever, keeping the consumer's view fresh within a bound.
 *
 * Guarantees:
 * - every watch asks for `allowWatchBookmarks` and a jittered server `timeoutSeconds`;
 * - no byte for `idleTimeoutMs` aborts the stream and resumes from the last resourceVersion
 *   (the connection is probed with a PING and replaced if it is dead);
 * - with HTTP/2 PINGs on, a silently dropped connection fails its streams within
 *   pingInterval + pingTimeout, and they resume on a new connection;
 * - 410 relists (paginated) and frames the result with init/initDone so the store is replaced
 *   atomically, reporting deletes for vanished objects;
 * - failures back off with jitter (about 0.5–1 s first, doubling, capped at backoffMax) and never
 *   give up; the backoff starts over once the server accepts a watch (unless it keeps dropping
 *   them at once; see {@link shouldResetBackoff}), so a reachable server is watched again within the
 *   initial delay;
 *   a clean server end resumes at once;
 * - every relistInterval a full relist-and-diff runs as a last-resort consistency check.
 *
 * Recovery: it never throws; it returns when `signal` aborts.
 */
export async function* watcher<T extends KubeObject = KubeObject>(
  opts: WatcherOptions,
  signal: AbortSignal,
): AsyncGenerator<WatcherEvent<T>, void, undefined> {
  const cfg = opts.config;
  const random = opts.random ?? Math.random;
  const backoff = new Backoff(cfg.backoffInitialMs, cfg.backoffMaxMs, random);
  const log = opts.onLifecycle ?? (() => undefined);
  const fresh = opts.onFresh ?? (() => undefined);
  let state: WatcherState = { phase: 'empty', reason: 'initial' };
  let lastListAt = 0;
  /** Streams in a row the server accepted and then dropped within MIN_HEALTHY_WATCH_MS. */
  let acceptedDrops = 0;

  while (!signal.aborted) {
    if (state.phase === 'empty') {
      const reason = state.reason;
      try {
        opts.metrics?.relist();
        log('list started', { reason });
        const items: T[] = [];
        let cont: string | undefined;
        let rv = '';
        yield { type: 'init', reason };
        do {
          const page = await opts.client.list<T>(
            opts.resource,
            {
              namespace: opts.namespace,
              labelSelector: opts.labelSelector,
              fieldSelector: opts.fieldSelector,
              limit: cfg.pageSize,
              continueToken: cont,
            },
            signal,
          );
          if (!rv) rv = page.metadata.resourceVersion ?? '';
          for (const o of page.items) {
            items.push(o);
            yield { type: 'initApply', object: o };
          }
          cont = page.metadata.continue || undefined;
        } while (cont && !signal.aborted);
        if (signal.aborted) return;
        lastListAt = Date.now();
        fresh();
        yield { type: 'initDone', resourceVersion: rv, reason, count: items.length };
        log('list done', { reason, objects: items.length, resourceVersion: rv });
        state = { phase: 'watching', resourceVersion: rv };
      } catch (err) {
        if (signal.aborted) return;
        const failure = classifyFailure(err);
        const restart: WatchRestartReason = failure.kind === 'expired' ? 'expired' : failure.reason;
        const delayMs = failure.kind === 'expired' ? 0 : backoff.next();
        opts.metrics?.restart(restart);
        yield { type: 'restart', reason: restart, delayMs, error: errMessage(err) };
        log('list failed', { reason, error: errMessage(err), retryInMs: delayMs });
        await sleep(delayMs, signal);
      }
      continue;
    }

    // Watching: open one stream from the current resourceVersion and follow it.
    const from = state.resourceVersion;
    const streamAbort = new AbortController();
    const stopStream = (): void => streamAbort.abort();
    signal.addEventListener('abort', stopStream, { once: true });
    let relistDue = false;
    const relistTimer =
      cfg.relistIntervalMs > 0
        ? setTimeout(
            () => {
              relistDue = true;
              streamAbort.abort();
            },
            Math.max(0, lastListAt + cfg.relistIntervalMs - Date.now()),
          )
        : undefined;
    const openedAt = Date.now();
    let opened = false;
    let upSince = openedAt;
    let outcome: StreamOutcome;
    let rv = from;
    try {
      const stream = opts.client.watch<T>(opts.resource, {
        namespace: opts.namespace,
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        resourceVersion: from,
        timeoutSeconds: watchTimeoutSeconds(cfg, random),
        allowWatchBookmarks: true,
        idleTimeoutMs: cfg.idleTimeoutMs,
        signal: streamAbort.signal,
        onOpen: () => {
          opened = true;
          upSince = Date.now();
          fresh();
          opts.onWatching?.(true);
          log('watch started', { resourceVersion: from });
        },
      });
      outcome = { kind: 'ended' };
      for await (const ev of stream as AsyncGenerator<WatchEvent<T>>) {
        fresh();
        if (ev.type === 'ERROR') {
          const st = ev.object as Status;
          outcome =
            st.code === 410
              ? { kind: 'expired' }
              : {
                  kind: 'failed',
                  reason: 'error',
                  error: new ApiError(st.code ?? 500, (st.reason ?? 'InternalError') as ApiError['reason'], st.message ?? 'watch error'),
                };
          break;
        }
        const obj = ev.object as T;
        const objRv = obj.metadata?.resourceVersion;
        if (ev.type === 'BOOKMARK') {
          if (objRv) rv = objRv;
          opts.metrics?.bookmark();
          yield { type: 'bookmark', resourceVersion: rv };
          continue;
        }
        if (objRv) rv = objRv;
        opts.metrics?.event(ev.type);
        if (ev.type === 'DELETED') yield { type: 'delete', object: obj };
        else yield { type: 'apply', object: obj };
        state = { phase: 'watching', resourceVersion: rv };
      }
      if (relistDue) outcome = { kind: 'relist-due' };
    } catch (err) {
      if (signal.aborted) return;
      outcome = relistDue ? { kind: 'relist-due' } : classifyFailure(err);
    } finally {
      opts.onWatching?.(false);
      if (relistTimer) clearTimeout(relistTimer);
      signal.removeEventListener('abort', stopStream);
    }
    if (signal.aborted) return;
    state = { phase: 'watching', resourceVersion: rv };
    const healthyFor = Date.now() - openedAt;
    const upFor = opened ? Date.now() - upSince : 0;
    if (shouldResetBackoff(opened, upFor, cfg, acceptedDrops)) backoff.reset();
    acceptedDrops = opened && upFor < MIN_HEALTHY_WATCH_MS ? acceptedDrops + 1 : 0;
    // A stream the server ends at once, again and again, must not become a tight loop.
    if (outcome.kind === 'ended' && healthyFor < 1000)
      outcome = { kind: 'failed', reason: 'error', error: new Error('the server ended the watch immediately') };
    const next = nextState(state, outcome);
    state = next.state;
    if (next.restart) {
      const delayMs = next.backoff ? backoff.next() : 0;
      opts.metrics?.restart(next.restart);
      const error = outcome.kind === 'failed' ? errMessage(outcome.error) : undefined;
      yield { type: 'restart', reason: next.restart, delayMs, ...(error !== undefined ? { error } : {}) };
      log('watch restarting', { reason: next.restart, resourceVersion: rv, retryInMs: delayMs, ...(error !== undefined ? { error } : {}) });
      if (delayMs > 0) await sleep(delayMs, signal);
    } else if (state.phase === 'empty') {
      log('periodic relist due', { resourceVersion: rv });
    }
  }
}
