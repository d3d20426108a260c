import { httpStatusOf, kubeMicroTime, sleep, systemClock } from '@kars/kube-core';
import type { Clock, Logger, ObjectMeta } from '@kars/kube-core';

/**
 * The four calls leader election needs on coordination.k8s.io/v1 Leases; the integrator adapts the
 * real REST client to it. Errors must carry a numeric `code` (HTTP status): 404 on get of a missing
 * lease, 409 on create-exists or stale update. Errors without a numeric code are treated like 5xx.
 */
export interface LeaseApi {
  /** The lease, or undefined on 404. */
  get(namespace: string, name: string): Promise<Lease | undefined>;
  /** Create the lease; 409 when it already exists. */
  create(namespace: string, lease: Lease): Promise<Lease>;
  /** Replace the lease; must send `metadata.resourceVersion`, so a stale write fails with 409. */
  replace(namespace: string, lease: Lease): Promise<Lease>;
}

/** A coordination.k8s.io/v1 Lease. Times are MicroTime strings (RFC 3339 with microseconds). */
export interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: ObjectMeta;
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export interface LeaderElectionOptions {
  api: LeaseApi;
  namespace: string;
  name: string;
  /** Unique per process (pod name plus a random suffix is typical). */
  identity: string;
  /**
   * How long a standby waits without seeing the lease change before it takes over. Written to the
   * lease rounded up to whole seconds, and standbys honour the written value. Default 15000.
   */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it stops leading. Default 10000. */
  renewDeadlineMs?: number;
  /** Pause between attempts (jittered up to 20% while acquiring). Default 2000. */
  retryPeriodMs?: number;
  /**
   * On abort while leading, write an empty holder so a standby can take over at its next retry
   * instead of waiting a full lease duration. Default true. Set false to behave like a crash.
   */
  releaseOnCancel?: boolean;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
  /** Called with every new non-empty holder this elector observes, including itself. */
  onNewLeader?: (identity: string) => void;
  /** Default silent. */
  log?: Logger;
  /**
   * Time source (default the system clock): `now()` times observations, renew deadlines and
   * waits; `wallNow()` only stamps acquireTime/renewTime, which other processes never trust.
   */
  clock?: Clock;
  /** Source of the retry jitter in [0, 1); default Math.random. */
  random?: () => number;
}

/** Codes of {@link LeaderElectionError}. */
export type LeaderElectionErrorCode = 'KARS_LEADER_ELECTION_INVALID_CONFIG' | 'KARS_LEADER_ELECTION_ALREADY_RUNNING';

/** A misuse of {@link LeaderElector}: a bad option, or `run` called while already running. */
export class LeaderElectionError extends Error {
  readonly code: LeaderElectionErrorCode;

  constructor(code: LeaderElectionErrorCode, message: string) {
    super(message);
    this.name = 'LeaderElectionError';
    this.code = code;
  }
}

const JITTER = 0.2;
/** How many times release re-reads after a conflict before it gives up. */
const RELEASE_ATTEMPTS = 3;

/** An API call we stopped waiting for (abort or renew deadline). Never escapes this module. */
class Interrupted extends Error {}

/**
 * Lease-based leader election, with client-go's semantics.
 *
 * One loop: try to acquire every `retryPeriod` (jittered); once acquired, renew every
 * `retryPeriod`; when no renew attempt that *started* within the last `renewDeadline` has succeeded,
 * stop leading and go back to acquiring.
 *
 * # Guarantees
 * - A standby takes over only when the lease is missing, has an empty holder, names this identity,
 *   or has not changed for its `leaseDurationSeconds` as measured from when *this process first saw*
 *   that version of the record. Lease timestamps are informational; clocks may be offset.
 * - Every write carries the resourceVersion it was based on, so of two racing candidates one wins.
 * - With clocks advancing at the same rate, two electors never both report {@link isLeader}: the
 *   leader's own deadline (attempt start + renewDeadline) ends before any standby's expiry
 *   (observation of that write + leaseDuration), because renewDeadline < leaseDuration.
 * - `isLeader()` turns false at the renew deadline even if the event loop has not yet run the
 *   step that calls `onStoppedLeading`.
 * - `run()` never rejects for API errors: it logs, retries, and resolves once the signal aborts.
 *   On abort it cancels its timers, stops waiting for in-flight calls, calls `onStoppedLeading`
 *   (if leading) and then releases the lease (when `releaseOnCancel`).
 *
 * # Caveats
 * - No fencing: work already in flight when leadership is lost keeps running until the callback
 *   stops it. Stop leader-only work in `onStoppedLeading`, which runs before the lease is released.
 * - Callbacks run synchronously inside the loop; exceptions from them are logged and swallowed.
 * - `onStoppedLeading` is called only after `onStartedLeading`, not on every exit as in client-go.
 */
export class LeaderElector {
  private readonly api: LeaseApi;
  private readonly namespace: string;
  private readonly name: string;
  private readonly identity: string;
  private readonly leaseDurationMs: number;
  private readonly leaseSeconds: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly releaseOnCancel: boolean;
  private readonly callbacks: Pick<LeaderElectionOptions, 'onStartedLeading' | 'onStoppedLeading' | 'onNewLeader'>;
  private readonly log: Logger | undefined;
  private readonly clock: Clock;
  private readonly random: () => number;

  private running = false;
  private leading = false;
  /** Start time of the last successful acquire or renew attempt. */
  private renewedAt = 0;
  /** The last lease read or written, with the resourceVersion to base the next write on. */
  private observed: Lease | undefined;
  /** The observed record's identity (its spec), to detect change. */
  private observedKey = '';
  /** When the current record was first seen, on our clock. */
  private observedAt = 0;
  private reportedLeader = '';
  /** The latest API call, settled or not, so release can order its write after it. */
  private inflight: Promise<void> = Promise.resolve();

  constructor(opts: LeaderElectionOptions) {
    const leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    const retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    const where = `lease ${opts.namespace}/${opts.name}`;
    const bad = (what: string): LeaderElectionError =>
      new LeaderElectionError('KARS_LEADER_ELECTION_INVALID_CONFIG', `leader election for ${where}: ${what}`);
    for (const [k, v] of Object.entries({ leaseDurationMs, renewDeadlineMs, retryPeriodMs })) {
      if (!Number.isFinite(v) || v <= 0) throw bad(`${k} must be a positive number of milliseconds, got ${v}`);
    }
    if (leaseDurationMs <= renewDeadlineMs)
      throw bad(`leaseDurationMs (${leaseDurationMs}) must be greater than renewDeadlineMs (${renewDeadlineMs})`);
    if (renewDeadlineMs <= retryPeriodMs * (1 + JITTER))
      throw bad(`renewDeadlineMs (${renewDeadlineMs}) must be greater than 1.2 × retryPeriodMs (${retryPeriodMs})`);
    if (opts.identity === '') throw bad('identity must not be empty; use something unique per process such as the pod name');
    if (opts.namespace === '' || opts.name === '') throw bad('namespace and name must not be empty');

    this.api = opts.api;
    this.namespace = opts.namespace;
    this.name = opts.name;
    this.identity = opts.identity;
    this.leaseDurationMs = leaseDurationMs;
    this.leaseSeconds = Math.max(1, Math.ceil(leaseDurationMs / 1000));
    this.renewDeadlineMs = renewDeadlineMs;
    this.retryPeriodMs = retryPeriodMs;
    this.releaseOnCancel = opts.releaseOnCancel ?? true;
    this.callbacks = opts;
    this.log = opts.log?.child({ lease: `${opts.namespace}/${opts.name}`, identity: opts.identity });
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
  }

  /** Monotonic now on this elector's clock. */
  private now(): number {
    return this.clock.now();
  }

  /** True while this elector holds the lease and its last renew is within the renew deadline. */
  isLeader(): boolean {
    return this.leading && this.now() < this.renewedAt + this.renewDeadlineMs;
  }

  /**
   * Acquire-and-renew loop until `signal` aborts. On abort while leading: call `onStoppedLeading`,
   * then release the lease (empty holder, fresh renewTime) unless `releaseOnCancel` is false.
   * Resolves after that; rejects only if called while already running.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.running)
      throw new LeaderElectionError(
        'KARS_LEADER_ELECTION_ALREADY_RUNNING',
        `leader election for lease ${this.namespace}/${this.name} is already running; abort the first run() before starting another`,
      );
    this.running = true;
    try {
      while (!signal.aborted) {
        const startedAt = await this.acquire(signal);
        if (startedAt === undefined) break;
        if (signal.aborted) {
          // Won the lease in the same moment we were told to stop: give it straight back.
          if (this.releaseOnCancel) await this.release();
          break;
        }
        this.startLeading(startedAt);
        await this.renew(signal);
        this.stopLeading(signal.aborted ? 'aborted' : 'renew deadline passed');
        if (signal.aborted && this.releaseOnCancel) await this.release();
      }
    } catch (err) {
      // Defensive: every step catches its own failures, so this is a bug, not an API error.
      this.log?.error({ err }, 'leader election loop failed unexpectedly; stopping');
      this.stopLeading('internal error');
    } finally {
      this.running = false;
    }
  }

  /** Try until acquired; returns the start time of the winning attempt, or undefined on abort. */
  private async acquire(signal: AbortSignal): Promise<number | undefined> {
    this.log?.info({}, 'attempting to acquire leader lease');
    while (!signal.aborted) {
      const startedAt = this.now();
      if (await this.tryAcquireOrRenew(signal, startedAt + this.renewDeadlineMs)) return startedAt;
      await sleep(this.clock, this.acquireDelay(), signal);
    }
    return undefined;
  }

  /** Renew every retryPeriod; returns when leadership is lost or the signal aborts. */
  private async renew(signal: AbortSignal): Promise<void> {
    for (;;) {
      await sleep(this.clock, this.retryPeriodMs, signal);
      if (signal.aborted) return;
      const deadlineAt = this.renewedAt + this.renewDeadlineMs;
      const startedAt = this.now();
      if (startedAt >= deadlineAt) return;
      const ok = await this.tryAcquireOrRenew(signal, deadlineAt);
      if (signal.aborted) return;
      if (ok) {
        this.renewedAt = startedAt;
        continue;
      }
      if (this.now() >= deadlineAt) return;
      const holder = this.observed === undefined ? '' : holderOf(this.observed);
      if (holder !== this.identity) {
        this.log?.warn({ holder }, 'lease was taken by another holder; stopping leading');
        return;
      }
    }
  }

  /**
   * One attempt: renew optimistically from the last observed lease when leading, otherwise (or on
   * 409) read the lease and create, renew or take it over as the rules allow. True on success.
   */
  private async tryAcquireOrRenew(signal: AbortSignal, deadlineAt: number): Promise<boolean> {
    const stamp = kubeMicroTime(this.clock.wallNow());
    try {
      const seen = this.observed;
      if (this.leading && seen !== undefined && holderOf(seen) === this.identity) {
        try {
          this.observe(await this.call(() => this.api.replace(this.namespace, this.renewed(seen, stamp)), signal, deadlineAt));
          return true;
        } catch (err) {
          if (httpStatusOf(err) !== 409) throw err;
          this.log?.debug({}, 'renew conflicted with another write; re-reading the lease');
        }
      }

      const current = await this.call(() => this.api.get(this.namespace, this.name), signal, deadlineAt);
      if (current === undefined) {
        this.observe(await this.call(() => this.api.create(this.namespace, this.fresh(stamp)), signal, deadlineAt));
        this.log?.info({}, 'created the lease and acquired it');
        return true;
      }
      this.observe(current);
      const holder = holderOf(current);
      if (holder !== '' && holder !== this.identity && !this.expired()) return false;

      const next = holder === this.identity ? this.renewed(current, stamp) : this.takenOver(current, stamp);
      this.observe(await this.call(() => this.api.replace(this.namespace, next), signal, deadlineAt));
      if (holder !== this.identity) this.log?.info({ previous: holder }, 'took over the lease');
      return true;
    } catch (err) {
      if (err instanceof Interrupted) return false;
      if (httpStatusOf(err) === 409) this.log?.debug({}, 'lost a write race on the lease; will re-read');
      else this.log?.warn({ err }, 'leader election API call failed; will retry');
      return false;
    }
  }

  /** Give the lease up so a standby can take it at once. Best effort, bounded by renewDeadline. */
  private async release(): Promise<void> {
    const deadlineAt = this.now() + this.renewDeadlineMs;
    try {
      // An abandoned renew may still land; write after it so our release is not the stale one.
      await bounded(this.clock, this.inflight, undefined, Math.max(0, deadlineAt - this.now()));
      let lease = this.observed;
      for (let attempt = 0; attempt < RELEASE_ATTEMPTS; attempt++) {
        if (attempt > 0 || lease === undefined)
          lease = await this.call(() => this.api.get(this.namespace, this.name), undefined, deadlineAt);
        if (lease === undefined || holderOf(lease) !== this.identity) return;
        const released = this.releasedFrom(lease);
        try {
          this.observe(await this.call(() => this.api.replace(this.namespace, released), undefined, deadlineAt));
          this.log?.info({}, 'released the lease');
          return;
        } catch (err) {
          if (httpStatusOf(err) !== 409) throw err;
        }
      }
      this.log?.warn({}, 'could not release the lease after repeated conflicts; standbys will take it when it expires');
    } catch (err) {
      this.log?.warn({ err }, 'could not release the lease; standbys will take it when it expires');
    }
  }

  private startLeading(startedAt: number): void {
    this.leading = true;
    this.renewedAt = startedAt;
    this.log?.info({}, 'started leading');
    this.fire('onStartedLeading', () => this.callbacks.onStartedLeading?.());
  }

  private stopLeading(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.log?.info({ reason }, 'stopped leading');
    this.fire('onStoppedLeading', () => this.callbacks.onStoppedLeading?.());
  }

  /** Record what we saw; the observation clock restarts only when the record itself changed. */
  private observe(lease: Lease): void {
    const s = specOf(lease);
    const key = JSON.stringify([
      s.holderIdentity ?? '',
      s.leaseDurationSeconds ?? 0,
      s.acquireTime ?? '',
      s.renewTime ?? '',
      s.leaseTransitions ?? 0,
    ]);
    if (key !== this.observedKey) {
      this.observedKey = key;
      this.observedAt = this.now();
    }
    this.observed = lease;
    const holder = holderOf(lease);
    if (holder !== '' && holder !== this.reportedLeader) {
      this.reportedLeader = holder;
      this.log?.info({ leader: holder }, 'new leader observed');
      this.fire('onNewLeader', () => this.callbacks.onNewLeader?.(holder));
    }
  }

  /** True when the observed record has not changed for its lease duration, on our clock. */
  private expired(): boolean {
    if (this.observed === undefined) return false;
    return this.observedAt + this.durationOf(this.observed) < this.now();
  }

  private durationOf(lease: Lease): number {
    const secs = specOf(lease).leaseDurationSeconds;
    return secs !== undefined && secs > 0 ? secs * 1000 : this.leaseDurationMs;
  }

  /** Jittered retry, but wake just after the observed lease would expire if that is sooner. */
  private acquireDelay(): number {
    const jittered = this.retryPeriodMs * (1 + this.random() * JITTER);
    const seen = this.observed;
    if (seen === undefined || holderOf(seen) === '' || holderOf(seen) === this.identity) return jittered;
    const untilExpiry = this.observedAt + this.durationOf(seen) - this.now() + 1;
    return untilExpiry > 0 ? Math.min(jittered, untilExpiry) : jittered;
  }

  private fresh(stamp: string): Lease {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.name, namespace: this.namespace },
      spec: {
        holderIdentity: this.identity,
        leaseDurationSeconds: this.leaseSeconds,
        acquireTime: stamp,
        renewTime: stamp,
        leaseTransitions: 0,
      },
    };
  }

  /** `lease` renewed by this candidate at `stamp`: its acquire time and transitions kept. */
  private renewed(lease: Lease, stamp: string): Lease {
    const s = specOf(lease);
    return this.heldBy(lease, stamp, s.acquireTime ?? stamp, s.leaseTransitions ?? 0);
  }

  /** `lease` taken over by this candidate at `stamp`: acquired now, one more transition. */
  private takenOver(lease: Lease, stamp: string): Lease {
    return this.heldBy(lease, stamp, stamp, (specOf(lease).leaseTransitions ?? 0) + 1);
  }

  private heldBy(lease: Lease, stamp: string, acquireTime: string, leaseTransitions: number): Lease {
    return {
      ...lease,
      spec: {
        ...specOf(lease),
        holderIdentity: this.identity,
        leaseDurationSeconds: this.leaseSeconds,
        acquireTime,
        renewTime: stamp,
        leaseTransitions,
      },
    };
  }

  private releasedFrom(lease: Lease): Lease {
    const stamp = kubeMicroTime(this.clock.wallNow());
    const s = specOf(lease);
    return {
      ...lease,
      spec: {
        ...s,
        holderIdentity: '',
        leaseDurationSeconds: 1,
        acquireTime: stamp,
        renewTime: stamp,
        leaseTransitions: s.leaseTransitions ?? 0,
      },
    };
  }

  /** Start an API call, remember it as in flight, and wait for it no longer than allowed. */
  private call<T>(op: () => Promise<T>, signal: AbortSignal | undefined, deadlineAt: number): Promise<T> {
    const p = Promise.resolve().then(op);
    this.inflight = p.then(
      () => undefined,
      () => undefined,
    );
    return bounded(this.clock, p, signal, Math.max(0, deadlineAt - this.now()));
  }

  private fire(name: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log?.error({ err, callback: name }, 'leader election callback threw; ignoring');
    }
  }
}

/**
 * Parse LEADER_ELECTION_ENABLED: unset or empty means true; 'false', '0', 'no' or 'off'
 * (case-insensitive, trimmed) mean false; anything else means true.
 */
export function leaderElectionEnabled(env: Record<string, string | undefined>): boolean {
  const raw = (env['LEADER_ELECTION_ENABLED'] ?? '').trim().toLowerCase();
  return !['false', '0', 'no', 'off'].includes(raw);
}

function specOf(lease: Lease): Lease['spec'] {
  // A server may omit an empty spec entirely.
  return (lease.spec as Lease['spec'] | undefined) ?? {};
}

function holderOf(lease: Lease): string {
  return specOf(lease).holderIdentity ?? '';
}

/** Settle like `p`, or reject with Interrupted on abort or after `ms`. Cleans up either way. */
function bounded<T>(clock: Clock, p: Promise<T>, signal: AbortSignal | undefined, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cleanup = (): void => {
      timer.cancel();
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      cleanup();
      reject(new Interrupted('aborted'));
    };
    const timer = clock.setTimeout(() => {
      cleanup();
      reject(new Interrupted(`no answer within ${ms} ms`));
    }, ms);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (err: unknown) => {
        cleanup();
        reject(err);
      },
    );
  });
}
