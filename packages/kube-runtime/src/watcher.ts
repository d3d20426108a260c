import { ApiError, silentLogger, sleep, systemClock } from '@kars/kube-core';
import type { Clock, KubeObject, LogFields, Logger, Status, WatchEvent } from '@kars/kube-core';
import { ConnectionLostError } from '@kars/kube-client';
import type { KubeClient, ResourceRef, WatchParams } from '@kars/kube-client';
import { backoffDelayMs } from './backoff.js';
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

/**
 * The watcher's state. *empty*: nothing known, list from the start. *listing*: pages received so
 * far (the continue token, the list's resourceVersion, how many objects). *watching*: follow
 * changes from a resourceVersion; `listedAt` (on the watcher's clock) dates the last complete list
 * for the periodic relist. {@link BackoffState} rides along in every state.
 */
export type WatcherState = (
  | { phase: 'empty'; reason: RelistReason }
  | { phase: 'listing'; reason: RelistReason; continueToken: string; resourceVersion: string; count: number }
  | { phase: 'watching'; resourceVersion: string; listedAt: number }
) &
  BackoffState;

/**
 * What the backoff remembers across states: failures since it last reset, and streams in a row
 * the server accepted and then dropped within {@link MIN_HEALTHY_WATCH_MS}.
 */
export interface BackoffState {
  failures: number;
  acceptedDrops: number;
}

/** Where every watcher starts. */
export const INITIAL_WATCHER_STATE: WatcherState = Object.freeze({ phase: 'empty', reason: 'initial', failures: 0, acceptedDrops: 0 });

/** How a watch stream ended. */
export type StreamOutcome =
  | { kind: 'ended' } // the server ended it cleanly (timeoutSeconds)
  | { kind: 'expired'; message?: string } // 410: the resourceVersion is gone (the server's message says which window it fell out of)
  | { kind: 'relist-due' } // the periodic relist-and-diff is due
  | { kind: 'failed'; reason: 'idle' | 'ping' | 'error'; error: unknown };

/** What happened since the last step: the result of the I/O the state asked for. */
export type WatcherInput<T extends KubeObject = KubeObject> =
  /** One page of a list (in state empty or listing). */
  | { kind: 'page'; items: T[]; resourceVersion: string; continueToken: string | undefined }
  /** A list request failed (in state empty or listing). */
  | { kind: 'list-failed'; error: unknown }
  /** One event on the open watch stream (in state watching). */
  | { kind: 'event'; event: WatchEvent<T> }
  /**
   * The watch stream ended (in state watching): how, whether the server accepted it, how long
   * since it was requested, how long it was up after it was accepted, and whether it moved the
   * resourceVersion (`progressed`: it delivered an event or a bookmark newer than where it started).
   */
  | { kind: 'stream-ended'; outcome: StreamOutcome; opened: boolean; lifetimeMs: number; upForMs: number; progressed?: boolean };

/** The timing knobs the step function reads (a subset of {@link WatchConfig}). */
export type WatcherTiming = Pick<WatchConfig, 'relistIntervalMs' | 'backoffInitialMs' | 'backoffMaxMs' | 'backoffResetMs'>;

/** What a step knows besides the state and the input: the time, the knobs and a jitter draw in [0, 1). */
export interface StepContext {
  now: number;
  config: WatcherTiming;
  jitter: number;
}

/** What a step decides. */
export interface StepResult<T extends KubeObject = KubeObject> {
  state: WatcherState;
  /** Events for the consumer, in order. */
  events: WatcherEvent<T>[];
  /** Wait this long before the I/O the new state asks for (a list page, or opening a watch). */
  delayMs: number;
  /** For an `event` input: the stream must be closed, ending like this (an ERROR event). */
  endStream?: StreamOutcome;
  /** Lifecycle lines to log (one structured line each). */
  notes: Array<{ msg: string; fields: LogFields }>;
}

/** How long an opened watch must stay up before it proves the server reachable again. */
export const MIN_HEALTHY_WATCH_MS = 1000;

/** A watch the server ends sooner than this after it was requested counts as a failure (no tight loop). */
export const IMMEDIATE_END_MS = 1000;

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

/** Classify a failure of a list or watch into expired (410) or a restart reason. */
export function classifyFailure(
  err: unknown,
): { kind: 'expired'; message?: string } | { kind: 'failed'; reason: 'idle' | 'ping' | 'error'; error: unknown } {
  if (err instanceof ApiError && (err.code === 410 || err.reason === 'Expired' || err.reason === 'Gone'))
    return { kind: 'expired', message: err.message };
  if (err instanceof ConnectionLostError)
    return { kind: 'failed', reason: err.reason === 'idle' ? 'idle' : err.reason === 'ping' ? 'ping' : 'error', error: err };
  return { kind: 'failed', reason: 'error', error: err };
}

/** How a watch stream that delivered an ERROR event ends: 410 (or reason Expired/Gone) relists, anything else fails. */
export function errorEventOutcome(st: Partial<Status>): StreamOutcome {
  if (st.code === 410 || st.reason === 'Expired' || st.reason === 'Gone')
    return st.message !== undefined ? { kind: 'expired', message: st.message } : { kind: 'expired' };
  return {
    kind: 'failed',
    reason: 'error',
    error: new ApiError(st.code ?? 500, (st.reason ?? 'InternalError') as ApiError['reason'], st.message ?? 'watch error', st.details),
  };
}

/**
 * The wait a server asked for with a failure: `details.retryAfterSeconds` of a 429 or 5xx Status
 * (kube-apiserver's 429 "storage is (re)initializing" while a watch cache fills after a restart,
 * its 503 "before all known HTTP paths have been installed" while it starts), capped at `maxMs`;
 * undefined when it asked for none.
 */
export function retryAfterMs(err: unknown, maxMs: number): number | undefined {
  if (!(err instanceof ApiError) || (err.code !== 429 && err.code < 500)) return undefined;
  const s = err.details?.retryAfterSeconds;
  return typeof s === 'number' && Number.isFinite(s) && s > 0 ? Math.min(maxMs, s * 1000) : undefined;
}

/** Milliseconds until the periodic relist is due in this state, or undefined when none is (not watching, or disabled). */
export function relistInMs(state: WatcherState, now: number, cfg: Pick<WatchConfig, 'relistIntervalMs'>): number | undefined {
  if (state.phase !== 'watching' || !(cfg.relistIntervalMs > 0)) return undefined;
  return Math.max(0, state.listedAt + cfg.relistIntervalMs - now);
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * {@link step} for an `event` input in state *watching* (what `step` does with one): the new
 * resourceVersion and the consumer's event, or, for an ERROR event, how the stream must end. Small
 * on purpose: the watcher calls it for every watch event, without the rest of `step`.
 */
export function stepEvent<T extends KubeObject>(state: WatcherState & { phase: 'watching' }, ev: WatchEvent<T>): StepResult<T> {
  if (ev.type === 'ERROR') return { state, events: [], delayMs: 0, endStream: errorEventOutcome(ev.object as Status), notes: NO_NOTES };
  const obj = ev.object as T;
  const resourceVersion = obj.metadata?.resourceVersion || state.resourceVersion;
  const next: WatcherState = {
    phase: 'watching',
    resourceVersion,
    listedAt: state.listedAt,
    failures: state.failures,
    acceptedDrops: state.acceptedDrops,
  };
  const out: WatcherEvent<T> =
    ev.type === 'BOOKMARK'
      ? { type: 'bookmark', resourceVersion }
      : ev.type === 'DELETED'
        ? { type: 'delete', object: obj }
        : { type: 'apply', object: obj };
  return { state: next, events: [out], delayMs: 0, notes: NO_NOTES };
}

/** The notes of every {@link stepEvent} result: none (one shared, frozen array instead of one per event). */
const NO_NOTES: StepResult['notes'] = Object.freeze([]) as unknown as StepResult['notes'];

/**
 * The watcher's transition function, with no I/O: given the state, what just happened, the time
 * and a jitter draw, the next state, the events to emit and how long to wait before the next
 * request. {@link watcher} is the thin loop that does the I/O each state asks for.
 *
 * - **Paging**: a page with a continue token moves to *listing* (the next request carries the
 *   token); the last page emits `initDone` with the first page's resourceVersion and starts
 *   watching. The first page of a list emits `init`, so a consumer drops any half-received
 *   earlier attempt. A continue token that expired (410 while listing) lists again at once.
 * - **Stream ends**: a clean end resumes at once from the last resourceVersion; 410 relists; a
 *   failure resumes from the last resourceVersion after a backoff (about 0.5–1 s first, doubling,
 *   capped); the backoff starts over once the server accepts a watch, unless it keeps dropping
 *   them at once ({@link shouldResetBackoff}, ADR 0007).
 * - **Immediate-end guard**: a clean end within {@link IMMEDIATE_END_MS} of the request that did not
 *   move the resourceVersion counts as a failure, so a server that ends every watch at once is
 *   retried with backoff, not in a loop. A stream that delivered newer events resumes at once.
 * - **Relist timer**: `relistIntervalMs` after the last complete list, the stream is ended
 *   (`relist-due`) and the watcher lists again; a restart that would resume after that moment
 *   lists instead of opening a watch that would be cut at once. See {@link relistInMs}.
 */
export function step<T extends KubeObject>(state: WatcherState, input: WatcherInput<T>, ctx: StepContext): StepResult<T> {
  const cfg = ctx.config;
  const backoff = (failures: number): number => backoffDelayMs(cfg.backoffInitialMs, cfg.backoffMaxMs, failures, ctx.jitter);
  switch (input.kind) {
    case 'page': {
      if (state.phase === 'watching') throw new Error('watcher step: a list page arrived while watching');
      const events: WatcherEvent<T>[] = [];
      const first = state.phase === 'empty';
      if (first) events.push({ type: 'init', reason: state.reason });
      for (const o of input.items) events.push({ type: 'initApply', object: o });
      const resourceVersion = first ? input.resourceVersion : state.resourceVersion;
      const count = (first ? 0 : state.count) + input.items.length;
      const notes: StepResult['notes'] = first ? [{ msg: 'list started', fields: { reason: state.reason } }] : [];
      if (input.continueToken) {
        return {
          state: {
            phase: 'listing',
            reason: state.reason,
            continueToken: input.continueToken,
            resourceVersion,
            count,
            failures: state.failures,
            acceptedDrops: state.acceptedDrops,
          },
          events,
          delayMs: 0,
          notes,
        };
      }
      events.push({ type: 'initDone', resourceVersion, reason: state.reason, count });
      notes.push({ msg: 'list done', fields: { reason: state.reason, objects: count, resourceVersion } });
      return {
        state: { phase: 'watching', resourceVersion, listedAt: ctx.now, failures: state.failures, acceptedDrops: state.acceptedDrops },
        events,
        delayMs: 0,
        notes,
      };
    }
    case 'list-failed': {
      if (state.phase === 'watching') throw new Error('watcher step: a list failure arrived while watching');
      const failure = classifyFailure(input.error);
      const error = errMessage(input.error);
      // An expired continue token means "list again from the start", at once. A 410 on a first
      // page makes no sense from a conforming server: treat it like any failure (backoff).
      const atOnce = failure.kind === 'expired' && state.phase === 'listing';
      const restart: WatchRestartReason = failure.kind === 'expired' ? 'expired' : failure.reason;
      // A server that says when to come back is reachable: no later than it asked (nor than the
      // backoff), and the failure count kept.
      const asked = retryAfterMs(input.error, cfg.backoffMaxMs);
      const delayMs = atOnce ? 0 : Math.min(backoff(state.failures), asked ?? Infinity);
      const failures = atOnce || asked !== undefined ? state.failures : state.failures + 1;
      return {
        state: { phase: 'empty', reason: state.reason, failures, acceptedDrops: state.acceptedDrops },
        events: [{ type: 'restart', reason: restart, delayMs, error }],
        delayMs,
        notes: [{ msg: 'list failed', fields: { reason: state.reason, error, retryInMs: delayMs } }],
      };
    }
    case 'event': {
      if (state.phase !== 'watching') throw new Error('watcher step: a watch event arrived while not watching');
      return stepEvent(state, input.event);
    }
    case 'stream-ended': {
      if (state.phase !== 'watching') throw new Error('watcher step: a stream ended while not watching');
      // A stream that moved the resourceVersion did work, however short it was: kube-apiserver ends
      // the watch of a client that falls behind a burst (its cacher closes a watcher whose buffer
      // stays full), and the client must resume at once from where it got to, not back off as from a
      // server that drops every watch (client-go's "very short watch" is likewise short and empty).
      const progressed = input.progressed === true;
      const failures = progressed || shouldResetBackoff(input.opened, input.upForMs, cfg, state.acceptedDrops) ? 0 : state.failures;
      const acceptedDrops = input.opened && input.upForMs < MIN_HEALTHY_WATCH_MS && !progressed ? state.acceptedDrops + 1 : 0;
      let outcome = input.outcome;
      if (outcome.kind === 'ended' && input.lifetimeMs < IMMEDIATE_END_MS && !progressed)
        outcome = { kind: 'failed', reason: 'error', error: new Error('the server ended the watch immediately') };
      const rv = state.resourceVersion;
      switch (outcome.kind) {
        case 'relist-due':
          return {
            state: { phase: 'empty', reason: 'periodic', failures, acceptedDrops },
            events: [],
            delayMs: 0,
            notes: [{ msg: 'periodic relist due', fields: { resourceVersion: rv } }],
          };
        case 'expired':
          return {
            state: { phase: 'empty', reason: 'expired', failures, acceptedDrops },
            events: [{ type: 'restart', reason: 'expired', delayMs: 0 }],
            delayMs: 0,
            notes: [
              {
                msg: 'watch restarting',
                fields: {
                  reason: 'expired',
                  resourceVersion: rv,
                  retryInMs: 0,
                  ...(outcome.message !== undefined ? { message: outcome.message } : {}),
                },
              },
            ],
          };
        case 'ended':
        case 'failed': {
          const reason: WatchRestartReason = outcome.kind === 'ended' ? 'server_timeout' : outcome.reason;
          // A server that says when to come back (429/5xx with retryAfterSeconds) is reachable: no
          // later than it asked (nor than the backoff), and the failure count kept.
          const asked = outcome.kind === 'failed' ? retryAfterMs(outcome.error, cfg.backoffMaxMs) : undefined;
          const delayMs = outcome.kind === 'ended' ? 0 : Math.min(backoff(failures), asked ?? Infinity);
          const error = outcome.kind === 'failed' ? errMessage(outcome.error) : undefined;
          const due = relistInMs(state, ctx.now, cfg);
          const relistFirst = due !== undefined && due <= delayMs;
          const counted = outcome.kind === 'failed' && asked === undefined ? failures + 1 : failures;
          const next: WatcherState = relistFirst
            ? { phase: 'empty', reason: 'periodic', failures: counted, acceptedDrops }
            : { ...state, failures: counted, acceptedDrops };
          const notes: StepResult['notes'] = [
            {
              msg: 'watch restarting',
              fields: { reason, resourceVersion: rv, retryInMs: delayMs, ...(error !== undefined ? { error } : {}) },
            },
          ];
          if (relistFirst) notes.push({ msg: 'periodic relist due', fields: { resourceVersion: rv } });
          return {
            state: next,
            events: [{ type: 'restart', reason, delayMs, ...(error !== undefined ? { error } : {}) }],
            delayMs,
            notes,
          };
        }
      }
    }
  }
}

/**
 * The calls the watcher makes; a `KubeClient` is one (tests script their own). With `watchBatches`
 * (KubeClient has it) the watcher takes the events that arrived together as one array; without it,
 * it reads `watch` one event at a time, with the same result. With `watchEach` (KubeClient has it
 * too), {@link runWatcher} takes them in a callback, without a promise per read.
 */
export type WatchClient = Pick<KubeClient, 'list' | 'watch'> & Partial<Pick<KubeClient, 'watchBatches' | 'watchEach'>>;

export interface WatcherOptions {
  client: WatchClient;
  resource: ResourceRef;
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  config: WatchConfig;
  metrics?: WatchMetrics | undefined;
  /** One structured line at each lifecycle change (list started/done, restart); default silent. */
  log?: Logger | undefined;
  /** Time source for backoff waits, the relist timer and stream lifetimes; default the system clock. */
  clock?: Clock | undefined;
  /** Called whenever the watcher has confirmation that it is current (list done, watch opened, event, bookmark). */
  onFresh?: (() => void) | undefined;
  /** Told when a watch stream is open (true) and when it has ended (false). */
  onWatching?: ((open: boolean) => void) | undefined;
  /** Source of jitter in [0, 1); default Math.random. */
  random?: (() => number) | undefined;
}

/**
 * List and watch one resource forever, keeping the consumer's view fresh within a bound. The
 * decisions are {@link step}'s; this loop does the I/O each state asks for.
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
  for await (const batch of watcherBatches<T>(opts, signal)) for (const ev of batch) yield ev;
}

/** One event array per read: the single-event adapter for a client without `watchBatches`. */
async function* oneByOne<T extends KubeObject>(
  events: AsyncIterable<WatchEvent<T>>,
): AsyncGenerator<Array<WatchEvent<T>>, void, undefined> {
  for await (const ev of events) yield [ev];
}

/**
 * {@link watcher}, one batch at a time: the events of one list page, of one stream read, or of one
 * lifecycle change come as one array (in order, never empty), with exactly the same events and
 * guarantees.
 */
export function watcherBatches<T extends KubeObject = KubeObject>(
  opts: WatcherOptions,
  signal: AbortSignal,
): AsyncGenerator<Array<WatcherEvent<T>>, void, undefined> {
  return watchLoop<T>(opts, signal, undefined);
}

/**
 * {@link watcherBatches} as callbacks: `onBatch` gets every batch, in the same order and with the
 * same guarantees, and must handle it synchronously (it is called from the stream's 'data'
 * event when the client has `watchEach`, as KubeClient does, so a watch event costs no promise
 * and no microtask on its way to the consumer). Whatever `onBatch` throws ends the watcher and
 * rejects the promise, which otherwise resolves when `signal` aborts. The {@link Reflector} runs on this.
 */
export async function runWatcher<T extends KubeObject = KubeObject>(
  opts: WatcherOptions,
  signal: AbortSignal,
  onBatch: (events: Array<WatcherEvent<T>>) => void,
): Promise<void> {
  for await (const batch of watchLoop<T>(opts, signal, onBatch)) onBatch(batch);
}

/** A consumer's throw, carried out of the stream read so it is not taken for a stream failure. */
class SinkError extends Error {
  constructor(readonly error: unknown) {
    super("the watcher's consumer threw", { cause: error });
  }
}

/**
 * The watcher's loop. Without `sink` every batch is yielded; with it, the batches of an open
 * watch stream go to `sink` synchronously as they are read (the list and lifecycle batches are
 * still yielded, so the consumer sees one order either way).
 */
async function* watchLoop<T extends KubeObject>(
  opts: WatcherOptions,
  signal: AbortSignal,
  sink: ((events: Array<WatcherEvent<T>>) => void) | undefined,
): AsyncGenerator<Array<WatcherEvent<T>>, void, undefined> {
  const cfg = opts.config;
  const clock = opts.clock ?? systemClock;
  const random = opts.random ?? Math.random;
  const log = opts.log ?? silentLogger;
  const fresh = opts.onFresh ?? (() => undefined);
  const ctx = (): StepContext => ({ now: clock.now(), config: cfg, jitter: random() });
  const select = { namespace: opts.namespace, labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector };
  let state: WatcherState = INITIAL_WATCHER_STATE;

  while (!signal.aborted) {
    let result: StepResult<T>;
    if (state.phase !== 'watching') {
      let input: WatcherInput<T>;
      try {
        const page = await opts.client.list<T>(
          opts.resource,
          { ...select, limit: cfg.pageSize, continueToken: state.phase === 'listing' ? state.continueToken : undefined },
          signal,
        );
        input = {
          kind: 'page',
          items: page.items,
          resourceVersion: page.metadata.resourceVersion ?? '',
          continueToken: page.metadata.continue || undefined,
        };
      } catch (err) {
        input = { kind: 'list-failed', error: err };
      }
      if (signal.aborted) return;
      result = step(state, input, ctx());
      if (result.events.some((e) => e.type === 'initDone')) fresh();
    } else {
      // Watching: open one stream from the current resourceVersion and follow it.
      const streamAbort = new AbortController();
      const stopStream = (): void => streamAbort.abort();
      signal.addEventListener('abort', stopStream, { once: true });
      let relistDue = false;
      const dueIn = relistInMs(state, clock.now(), cfg);
      const relistTimer =
        dueIn === undefined
          ? undefined
          : clock.setTimeout(() => {
              relistDue = true;
              streamAbort.abort();
            }, dueIn);
      const requestedAt = clock.now();
      let opened = false;
      let upSince = requestedAt;
      let outcome: StreamOutcome = { kind: 'ended' };
      const from = state.resourceVersion;
      try {
        const params: WatchParams = {
          ...select,
          resourceVersion: from,
          timeoutSeconds: watchTimeoutSeconds(cfg, random),
          allowWatchBookmarks: true,
          idleTimeoutMs: cfg.idleTimeoutMs,
          signal: streamAbort.signal,
          onOpen: () => {
            opened = true;
            upSince = clock.now();
            fresh();
            opts.onWatching?.(true);
            log.info({ resourceVersion: from }, 'watch started');
          },
        };
        // The events of one read, stepped ({@link stepEvent}: `step` for an event, which reads
        // neither the time nor the jitter). An ERROR event ends the stream (`endedBy`).
        let endedBy: StreamOutcome | undefined;
        const metrics = opts.metrics;
        const take = (evs: ReadonlyArray<WatchEvent<T>>): Array<WatcherEvent<T>> => {
          fresh();
          const out: Array<WatcherEvent<T>> = [];
          for (let i = 0; i < evs.length; i++) {
            const ev = evs[i] as WatchEvent<T>;
            if (state.phase !== 'watching') throw new Error('watcher: a watch event arrived while not watching');
            const r: StepResult<T> = stepEvent<T>(state, ev);
            state = r.state;
            metrics?.event(ev.type);
            if (r.endStream) {
              endedBy = r.endStream;
              break;
            }
            for (let j = 0; j < r.events.length; j++) out.push(r.events[j] as WatcherEvent<T>);
          }
          return out;
        };
        let sinkError: SinkError | undefined;
        // With a sink: step a read's events and hand them to it at once; false stops the stream (an
        // ERROR event, or the sink threw). watchEach calls it from the stream's 'data' event.
        const sinkAll =
          sink === undefined
            ? undefined
            : (evs: Array<WatchEvent<T>>): boolean => {
                const out = take(evs);
                if (out.length > 0) {
                  try {
                    sink(out);
                  } catch (err) {
                    sinkError = new SinkError(err);
                    return false;
                  }
                }
                return endedBy === undefined;
              };
        if (sinkAll !== undefined && opts.client.watchEach) {
          await opts.client.watchEach<T>(opts.resource, params, sinkAll);
        } else {
          const batches = opts.client.watchBatches
            ? opts.client.watchBatches<T>(opts.resource, params)
            : oneByOne(opts.client.watch<T>(opts.resource, params));
          for await (const evs of batches) {
            if (sinkAll !== undefined) {
              if (!sinkAll(evs)) break;
              continue;
            }
            const out = take(evs);
            if (out.length > 0) yield out;
            if (endedBy !== undefined) break;
          }
        }
        if (sinkError !== undefined) throw sinkError;
        if (endedBy !== undefined) outcome = endedBy;
        if (relistDue) outcome = { kind: 'relist-due' };
      } catch (err) {
        if (err instanceof SinkError) throw err.error;
        if (signal.aborted) return;
        outcome = relistDue ? { kind: 'relist-due' } : classifyFailure(err);
      } finally {
        opts.onWatching?.(false);
        relistTimer?.cancel();
        signal.removeEventListener('abort', stopStream);
      }
      if (signal.aborted) return;
      const now = clock.now();
      result = step(
        state,
        {
          kind: 'stream-ended',
          outcome,
          opened,
          lifetimeMs: now - requestedAt,
          upForMs: opened ? now - upSince : 0,
          progressed: state.phase === 'watching' && state.resourceVersion !== from,
        },
        ctx(),
      );
    }
    state = result.state;
    for (const n of result.notes) log.info(n.fields, n.msg);
    for (const ev of result.events) {
      if (ev.type === 'init') opts.metrics?.relist();
      else if (ev.type === 'restart') opts.metrics?.restart(ev.reason);
    }
    if (result.events.length > 0) yield result.events;
    if (result.delayMs > 0) await sleep(clock, result.delayMs, signal);
  }
}
