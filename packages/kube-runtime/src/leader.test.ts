import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError, FakeClock, httpStatusOf, sleep } from '@kars/kube-core';
import { until } from '@kars/kube-core/testing';
import type { Clock, StatusReason } from '@kars/kube-core';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestClient, TestResponse, TestServer } from '@kars/apiserver/testing';
import { LeaderElectionError, LeaderElector, leaderElectionEnabled } from './leader.js';
import type { Lease, LeaseApi, LeaderElectionOptions } from './leader.js';

const NS = 'default';
const LEASE_MS = 1000;
const RENEW_MS = 700;
const RETRY_MS = 200;

/** LeaseApi over real HTTPS against `kars apiserver`, as an integrator would adapt its client. */
class HttpLeaseApi implements LeaseApi {
  constructor(private readonly client: TestClient) {}

  private path(ns: string, name?: string): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases${name === undefined ? '' : `/${name}`}`;
  }

  async get(namespace: string, name: string): Promise<Lease | undefined> {
    const r = await this.client.get(this.path(namespace, name));
    if (r.status === 404) return undefined;
    return expectStatus(r, 200);
  }

  async create(namespace: string, lease: Lease): Promise<Lease> {
    return expectStatus(await this.client.post(this.path(namespace), lease), 201);
  }

  async replace(namespace: string, lease: Lease): Promise<Lease> {
    assert.ok(lease.metadata.resourceVersion, 'replace must carry the resourceVersion it is based on');
    return expectStatus(await this.client.put(this.path(namespace, lease.metadata.name), lease), 200);
  }
}

function expectStatus(r: TestResponse, want: number): Lease {
  if (r.status === want) return r.body as Lease;
  const reason = (r.body?.reason ?? 'InternalError') as StatusReason;
  throw new ApiError(r.status, reason, r.body?.message ?? r.text);
}

interface Candidate {
  elector: LeaderElector;
  abort: AbortController;
  done: Promise<void>;
  events: string[];
  /** Resolves when run() settles; true if it rejected. */
  rejected: () => boolean;
}

function candidate(api: LeaseApi, lease: string, identity: string, extra: Partial<LeaderElectionOptions> = {}): Candidate {
  const events: string[] = [];
  const elector = new LeaderElector({
    api,
    namespace: NS,
    name: lease,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    onStartedLeading: () => events.push('started'),
    onStoppedLeading: () => events.push('stopped'),
    onNewLeader: (id) => events.push(`leader:${id}`),
    ...extra,
  });
  const abort = new AbortController();
  let rejected = false;
  const done = elector.run(abort.signal).catch((err: unknown) => {
    rejected = true;
    throw err;
  });
  return { elector, abort, done, events, rejected: () => rejected };
}

async function stop(...cs: Candidate[]): Promise<void> {
  for (const c of cs) c.abort.abort();
  await Promise.all(cs.map((c) => c.done));
}

/** Records the outcome (HTTP status) of every replace the elector sends, passing calls through. */
class RecordingLeaseApi implements LeaseApi {
  readonly replaces: number[] = [];
  constructor(private readonly inner: LeaseApi) {}

  get(namespace: string, name: string): Promise<Lease | undefined> {
    return this.inner.get(namespace, name);
  }

  create(namespace: string, lease: Lease): Promise<Lease> {
    return this.inner.create(namespace, lease);
  }

  async replace(namespace: string, lease: Lease): Promise<Lease> {
    try {
      const r = await this.inner.replace(namespace, lease);
      this.replaces.push(200);
      return r;
    } catch (err) {
      this.replaces.push(httpStatusOf(err) ?? 0);
      throw err;
    }
  }
}

/**
 * Wait (in real time, while the real HTTP calls finish) until the elector is idle between attempts:
 * its only timer is the sleep before its next renew, one retry period away on its clock. While a
 * call is in flight its one timer is that call's deadline instead, at least 500 ms away.
 */
function idle(clock: FakeClock): Promise<boolean> {
  return until('the elector to wait for its next renew', () => clock.pending() === 1 && clock.nextTimerInMs() === RETRY_MS);
}

/**
 * These run the elector on a FakeClock against the real server: the server's rules (409 on a stale
 * replace, the stored fields) are real, and time moves only when the test advances it, so a loaded
 * machine that makes an HTTP call take longer than the 700 ms renew deadline cannot make the
 * elector give up (on the real clock that flaked at load 10: 'started', 'stopped', 'started').
 */
describe('leader election against kars apiserver', () => {
  let ts: TestServer;
  let api: HttpLeaseApi;
  before(async () => {
    ts = await startTestServer();
    api = new HttpLeaseApi(ts.client);
  });
  after(async () => ts.close());

  it('a single elector creates the lease, leads, names itself holder and keeps renewing', async () => {
    const clock = new FakeClock();
    const a = candidate(api, 'single', 'a', { clock });
    try {
      await until('a to lead', () => a.elector.isLeader());
      await idle(clock);
      const first = await api.get(NS, 'single');
      assert.equal(first?.spec.holderIdentity, 'a');
      assert.equal(first?.spec.leaseDurationSeconds, 1);
      assert.equal(first?.spec.leaseTransitions, 0);
      assert.match(first?.spec.renewTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'renewTime is a MicroTime');
      assert.deepEqual(a.events, ['leader:a', 'started']);
      for (let i = 0; i < 3; i++) {
        await clock.advanceAsync(RETRY_MS);
        await idle(clock);
      }
      const later = await api.get(NS, 'single');
      assert.equal(
        Date.parse(later!.spec.renewTime!) - Date.parse(first!.spec.renewTime!),
        3 * RETRY_MS,
        'renewTime advanced with each of the three renews',
      );
      assert.notEqual(later?.metadata.resourceVersion, first?.metadata.resourceVersion);
      assert.equal(later?.spec.acquireTime, first?.spec.acquireTime, 'renewing keeps acquireTime');
      assert.ok(a.elector.isLeader());
    } finally {
      // Abort needs no time to pass: run() must not wait for its retry sleep (or any timer) to end.
      const t0 = clock.now();
      const stopped = await Promise.race([stop(a).then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 15_000).unref())]);
      assert.ok(stopped, 'run() did not resolve after abort without its clock advancing');
      assert.equal(clock.now(), t0);
    }
    assert.equal(a.elector.isLeader(), false);
    assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
    assert.equal((await api.get(NS, 'single'))?.spec.holderIdentity, '', 'released on abort');
  });

  it('a leader whose renew conflicts with an unrelated write re-reads the lease and keeps leading', async () => {
    const clock = new FakeClock();
    const rec = new RecordingLeaseApi(api);
    const a = candidate(rec, 'conflict', 'a', { clock });
    try {
      await until('a to lead', () => a.elector.isLeader());
      await idle(clock);
      const lease = (await api.get(NS, 'conflict'))!;
      const labelled = await api.replace(NS, { ...lease, metadata: { ...lease.metadata, labels: { touched: 'yes' } } });
      await clock.advanceAsync(RETRY_MS); // the renew, based on the lease a wrote, now carries a stale resourceVersion
      await idle(clock);
      assert.deepEqual([...rec.replaces], [409, 200], 'the renew conflicted, then succeeded from the re-read lease');
      const now = (await api.get(NS, 'conflict'))!;
      assert.notEqual(now.metadata.resourceVersion, labelled.metadata.resourceVersion, 'a renewed after the other write');
      assert.equal(now.spec.holderIdentity, 'a');
      assert.ok(Date.parse(now.spec.renewTime!) > Date.parse(labelled.spec.renewTime!), 'renewTime advanced');
      assert.ok(a.elector.isLeader());
      assert.deepEqual(a.events, ['leader:a', 'started'], 'no leadership interruption');
      assert.equal(now.metadata.labels?.['touched'], 'yes', 'the renew kept the other writer’s change');
    } finally {
      await stop(a);
    }
  });

  it('a leader that finds another holder in the lease stops leading at once', async () => {
    const clock = new FakeClock();
    const a = candidate(api, 'usurped', 'a', { clock });
    try {
      await until('a to lead', () => a.elector.isLeader());
      await idle(clock);
      const lease = (await api.get(NS, 'usurped'))!;
      await api.replace(NS, {
        ...lease,
        spec: { ...lease.spec, holderIdentity: 'intruder', renewTime: new Date().toISOString().replace('Z', '000Z') },
      });
      // Only the time to a's next renew passes; the renew deadline (RENEW_MS) is far off.
      await clock.advanceAsync(RETRY_MS);
      await until('a to stop leading', () => a.events.includes('stopped'));
      assert.equal(clock.now(), RETRY_MS, 'stopped at its first renew after the takeover, not at the renew deadline');
      assert.equal(a.elector.isLeader(), false);
      assert.ok(a.events.includes('leader:intruder'));
    } finally {
      await stop(a);
    }
  });
});

/**
 * Leases in memory with the server rules leader election relies on (resourceVersion
 * compare-and-swap: 409 on a stale replace or a second create, 404 on a missing lease), each call
 * taking `latencyMs` of virtual time. The HTTP tests above check the same rules against the real
 * server; these run the timing on virtual time, with production timings.
 */
class MemoryLeaseApi implements LeaseApi {
  private readonly leases = new Map<string, Lease>();
  private rv = 0;
  failing = false;
  failedCalls = 0;
  constructor(
    private readonly clock: FakeClock,
    private readonly latencyMs = 5,
  ) {}

  private async io(): Promise<void> {
    await sleep(this.clock, this.latencyMs);
    if (!this.failing) return;
    this.failedCalls++;
    if (this.failedCalls % 2 === 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    throw new ApiError(500, 'InternalError', 'Internal error occurred: injected');
  }

  async get(namespace: string, name: string): Promise<Lease | undefined> {
    await this.io();
    const l = this.leases.get(`${namespace}/${name}`);
    return l && structuredClone(l);
  }

  async create(namespace: string, lease: Lease): Promise<Lease> {
    await this.io();
    const k = `${namespace}/${lease.metadata.name ?? ''}`;
    if (this.leases.has(k)) throw new ApiError(409, 'AlreadyExists', `leases "${lease.metadata.name ?? ''}" already exists`);
    return this.store(k, lease);
  }

  async replace(namespace: string, lease: Lease): Promise<Lease> {
    await this.io();
    const k = `${namespace}/${lease.metadata.name ?? ''}`;
    const cur = this.leases.get(k);
    if (!cur) throw new ApiError(404, 'NotFound', `leases "${lease.metadata.name ?? ''}" not found`);
    if (lease.metadata.resourceVersion !== cur.metadata.resourceVersion)
      throw new ApiError(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again');
    return this.store(k, lease);
  }

  /** The stored lease, read without a call (for assertions). */
  peek(namespace: string, name: string): Lease | undefined {
    return this.leases.get(`${namespace}/${name}`);
  }

  private store(k: string, lease: Lease): Lease {
    const stored = structuredClone({ ...lease, metadata: { ...lease.metadata, resourceVersion: String(++this.rv) } });
    this.leases.set(k, stored);
    return structuredClone(stored);
  }
}

/** Advance virtual time in small steps until `pred` holds; returns the virtual time it took. */
async function advanceUntil(clock: FakeClock, pred: () => boolean, maxMs: number, stepMs = 5): Promise<number> {
  const t0 = clock.now();
  while (!pred()) {
    if (clock.now() - t0 > maxMs) throw new Error(`not within ${maxMs} ms of virtual time`);
    await clock.advanceAsync(stepMs);
  }
  return clock.now() - t0;
}

describe('leader election timing on virtual time (production timings)', () => {
  const LEASE = 15_000;
  const RENEW = 10_000;
  const RETRY = 2_000;
  const LATENCY = 5;
  const timings = { leaseDurationMs: LEASE, renewDeadlineMs: RENEW, retryPeriodMs: RETRY };
  const setup = (): { clock: FakeClock; api: MemoryLeaseApi } => {
    const clock = new FakeClock();
    return { clock, api: new MemoryLeaseApi(clock, LATENCY) };
  };
  const stopOn = async (clock: FakeClock, ...cs: Candidate[]): Promise<void> => {
    for (const c of cs) c.abort.abort();
    await clock.advanceAsync(RENEW);
    await Promise.all(cs.map((c) => c.done));
  };

  it('two electors are never both leader over five minutes, and one of them leads all but the first moments', async () => {
    const { clock, api } = setup();
    const a = candidate(api, 'pair', 'a', { ...timings, clock });
    const b = candidate(api, 'pair', 'b', { ...timings, clock });
    let both = 0;
    let one = 0;
    let samples = 0;
    try {
      for (let t = 0; t < 300_000; t += 20) {
        await clock.advanceAsync(20);
        const n = Number(a.elector.isLeader()) + Number(b.elector.isLeader());
        samples++;
        if (n === 2) both++;
        if (n === 1) one++;
      }
      assert.equal(api.peek(NS, 'pair')?.spec.leaseTransitions, 0, 'leadership flapped');
    } finally {
      await stopOn(clock, a, b);
    }
    assert.equal(both, 0, `${both} of ${samples} samples saw two leaders`);
    assert.ok(samples - one <= 2, `no leader in ${samples - one} of ${samples} samples`);
  });

  it('when the leader dies without releasing, the standby takes over after the lease expires and not before', async () => {
    const { clock, api } = setup();
    const a = candidate(api, 'crash', 'a', { ...timings, clock, releaseOnCancel: false });
    await advanceUntil(clock, () => a.elector.isLeader(), 1000);
    const b = candidate(api, 'crash', 'b', { ...timings, clock });
    try {
      await advanceUntil(clock, () => b.events.includes('leader:a'), RETRY * 2);
      await clock.advanceAsync(7_000); // b watches a renew a few times
      assert.equal(b.elector.isLeader(), false);
      a.abort.abort();
      const failover = await advanceUntil(clock, () => b.elector.isLeader(), LEASE * 2, 1);
      await a.done;
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
      // a renewed at most one retry period (plus a call) before it died; b's clock for that record
      // starts when b first saw it, and b wakes just after the expiry.
      assert.ok(failover >= LEASE - RETRY - LATENCY, `took over after only ${failover} ms, before the lease could have expired`);
      assert.ok(failover <= LEASE + 4 * LATENCY + 1, `failover took ${failover} ms`);
      assert.deepEqual(b.events, ['leader:a', 'leader:b', 'started']);
    } finally {
      await stopOn(clock, a, b);
    }
  });

  it('when the leader releases on cancel, the standby takes over within one jittered retry period', async () => {
    const { clock, api } = setup();
    const a = candidate(api, 'handoff', 'a', { ...timings, clock });
    await advanceUntil(clock, () => a.elector.isLeader(), 1000);
    const b = candidate(api, 'handoff', 'b', { ...timings, clock });
    try {
      await advanceUntil(clock, () => b.events.includes('leader:a'), RETRY * 2);
      await clock.advanceAsync(3_000);
      a.abort.abort();
      const failover = await advanceUntil(clock, () => b.elector.isLeader(), LEASE, 1);
      await a.done;
      assert.ok(failover <= RETRY * 1.2 + 6 * LATENCY, `failover took ${failover} ms`);
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
    } finally {
      await stopOn(clock, a, b);
    }
  });

  it('a standby whose wall clock runs an hour ahead does not take a live lease', async () => {
    const { clock, api } = setup();
    const skewed: Clock = {
      now: () => clock.now(),
      wallNow: () => clock.wallNow() + 3_600_000,
      setTimeout: (fn, ms) => clock.setTimeout(fn, ms),
    };
    const a = candidate(api, 'skew', 'a', { ...timings, clock });
    await advanceUntil(clock, () => a.elector.isLeader(), 1000);
    const b = candidate(api, 'skew', 'b', { ...timings, clock: skewed });
    let bLed = false;
    try {
      for (let t = 0; t < 3 * LEASE; t += 50) {
        await clock.advanceAsync(50);
        bLed ||= b.elector.isLeader();
      }
      assert.equal(bLed, false, 'b judged expiry from renewTime instead of its own observation time');
      assert.ok(a.elector.isLeader());
    } finally {
      await stopOn(clock, a, b);
    }
  });

  it('API errors neither crash run() nor keep leadership past the renew deadline, and leadership is regained after', async () => {
    const { clock, api } = setup();
    api.failing = true;
    const a = candidate(api, 'flaky', 'a', { ...timings, clock });
    try {
      await clock.advanceAsync(5 * RETRY);
      assert.ok(api.failedCalls >= 4, `only ${api.failedCalls} calls while failing: it stopped retrying`);
      assert.equal(a.elector.isLeader(), false);
      api.failing = false;
      await advanceUntil(clock, () => a.elector.isLeader(), RETRY * 2);
      const wasLeaderAt = clock.now();
      api.failing = true;
      const lostAfter = await advanceUntil(clock, () => !a.elector.isLeader(), LEASE, 1);
      assert.ok(lostAfter <= RENEW, `still leader ${lostAfter} ms into an outage`);
      assert.ok(clock.now() - wasLeaderAt > RENEW - RETRY - LATENCY, `gave up after ${lostAfter} ms, before the renew deadline`);
      await advanceUntil(clock, () => a.events.includes('stopped'), RETRY * 2);
      await clock.advanceAsync(LEASE);
      assert.equal(a.rejected(), false);
      api.failing = false;
      await advanceUntil(clock, () => a.elector.isLeader(), RETRY * 2);
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped', 'started']);
    } finally {
      await stopOn(clock, a);
    }
    assert.equal(a.rejected(), false);
  });

  it('aborting a standby that never led resolves run() without callbacks or writes', async () => {
    const { clock, api } = setup();
    const a = candidate(api, 'quiet', 'a', { ...timings, clock });
    await advanceUntil(clock, () => a.elector.isLeader(), 1000);
    const b = candidate(api, 'quiet', 'b', { ...timings, clock });
    try {
      await advanceUntil(clock, () => b.events.includes('leader:a'), RETRY * 2);
      await stopOn(clock, b);
      assert.deepEqual(b.events, ['leader:a']);
      assert.ok(a.elector.isLeader());
    } finally {
      await stopOn(clock, a, b);
    }
  });
});

describe('LeaderElector options', () => {
  const api: LeaseApi = {
    get: () => Promise.resolve(undefined),
    create: (_ns, l) => Promise.resolve(l),
    replace: (_ns, l) => Promise.resolve(l),
  };
  const base = { api, namespace: NS, name: 'x', identity: 'a' };

  it('rejects timings where a standby could take over before the leader gives up', () => {
    assert.throws(
      () => new LeaderElector({ ...base, leaseDurationMs: 1000, renewDeadlineMs: 1000 }),
      (e: unknown) => e instanceof LeaderElectionError && e.code === 'KARS_LEADER_ELECTION_INVALID_CONFIG',
    );
    assert.throws(
      () => new LeaderElector({ ...base, leaseDurationMs: 1000, renewDeadlineMs: 700, retryPeriodMs: 600 }),
      LeaderElectionError,
    );
    assert.throws(() => new LeaderElector({ ...base, retryPeriodMs: 0 }), LeaderElectionError);
    assert.throws(() => new LeaderElector({ ...base, identity: '' }), LeaderElectionError);
    assert.doesNotThrow(() => new LeaderElector(base));
  });

  it('run() resolves at once when the signal is already aborted, and a second concurrent run() is refused', async () => {
    const e = new LeaderElector(base);
    await e.run(AbortSignal.abort());
    assert.equal(e.isLeader(), false);
    const ac = new AbortController();
    const first = e.run(ac.signal);
    await assert.rejects(
      e.run(ac.signal),
      (err: unknown) => err instanceof LeaderElectionError && err.code === 'KARS_LEADER_ELECTION_ALREADY_RUNNING',
    );
    ac.abort();
    await first;
  });
});

describe('leaderElectionEnabled', () => {
  it('reads LEADER_ELECTION_ENABLED as on unless it is a recognised "off" word', () => {
    const cases: Array<[string | undefined, boolean]> = [
      [undefined, true],
      ['', true],
      ['   ', true],
      ['true', true],
      ['1', true],
      ['yes', true],
      ['on', true],
      ['banana', true],
      ['false', false],
      ['FALSE', false],
      [' False ', false],
      ['0', false],
      ['no', false],
      ['NO', false],
      ['off', false],
      ['\tOff\n', false],
    ];
    for (const [value, want] of cases) {
      assert.equal(leaderElectionEnabled({ LEADER_ELECTION_ENABLED: value }), want, JSON.stringify(value));
    }
    assert.equal(leaderElectionEnabled({}), true, 'unset');
    assert.equal(leaderElectionEnabled({ OTHER: 'false' }), true, 'other variables are ignored');
  });
});
