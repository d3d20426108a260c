import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '@kars/kube-core';
import type { StatusReason } from '@kars/kube-core';
import { eventually, startTestServer } from '@kars/apiserver/testing';
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

/** Wraps a LeaseApi and fails every call while `failing`: 500s and code-less network errors alternately. */
class FlakyLeaseApi implements LeaseApi {
  failing = false;
  failedCalls = 0;
  constructor(private readonly inner: LeaseApi) {}

  private check(): void {
    if (!this.failing) return;
    this.failedCalls++;
    if (this.failedCalls % 2 === 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    throw new ApiError(500, 'InternalError', 'Internal error occurred: injected');
  }
  async get(namespace: string, name: string): Promise<Lease | undefined> {
    this.check();
    return this.inner.get(namespace, name);
  }
  async create(namespace: string, lease: Lease): Promise<Lease> {
    this.check();
    return this.inner.create(namespace, lease);
  }
  async replace(namespace: string, lease: Lease): Promise<Lease> {
    this.check();
    return this.inner.replace(namespace, lease);
  }
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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('leader election against kars apiserver', () => {
  let ts: TestServer;
  let api: HttpLeaseApi;
  before(async () => {
    ts = await startTestServer();
    api = new HttpLeaseApi(ts.client);
  });
  after(async () => ts.close());

  it('a single elector creates the lease, leads, names itself holder and keeps renewing', async () => {
    const a = candidate(api, 'single', 'a');
    try {
      await eventually(() => a.elector.isLeader(), 3000);
      const first = await api.get(NS, 'single');
      assert.equal(first?.spec.holderIdentity, 'a');
      assert.equal(first?.spec.leaseDurationSeconds, 1);
      assert.equal(first?.spec.leaseTransitions, 0);
      assert.match(first?.spec.renewTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'renewTime is a MicroTime');
      assert.deepEqual(a.events, ['leader:a', 'started']);
      await sleep(3 * RETRY_MS);
      const later = await api.get(NS, 'single');
      assert.ok(Date.parse(later!.spec.renewTime!) > Date.parse(first!.spec.renewTime!), 'renewTime advanced');
      assert.notEqual(later?.metadata.resourceVersion, first?.metadata.resourceVersion);
      assert.equal(later?.spec.acquireTime, first?.spec.acquireTime, 'renewing keeps acquireTime');
      assert.ok(a.elector.isLeader());
    } finally {
      const t0 = Date.now();
      await stop(a);
      assert.ok(Date.now() - t0 < 500, `run() resolved ${Date.now() - t0} ms after abort`);
    }
    assert.equal(a.elector.isLeader(), false);
    assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
  });

  it('two electors are never both leader, and one of them leads nearly all the time', async () => {
    const a = candidate(api, 'pair', 'a');
    const b = candidate(api, 'pair', 'b');
    let both = 0;
    let one = 0;
    let samples = 0;
    try {
      const end = Date.now() + 3000;
      while (Date.now() < end) {
        const n = Number(a.elector.isLeader()) + Number(b.elector.isLeader());
        samples++;
        if (n === 2) both++;
        if (n === 1) one++;
        await sleep(50);
      }
      const lease = await api.get(NS, 'pair');
      assert.equal(lease?.spec.leaseTransitions, 0, 'leadership flapped between the two');
    } finally {
      await stop(a, b);
    }
    assert.equal(both, 0, `${both} of ${samples} samples saw two leaders`);
    assert.ok(one / samples >= 0.9, `one leader in only ${one} of ${samples} samples`);
  });

  it('when the leader dies without releasing, the standby takes over after the lease expires and not before', async (t) => {
    const a = candidate(api, 'crash', 'a', { releaseOnCancel: false });
    await eventually(() => a.elector.isLeader(), 3000);
    const b = candidate(api, 'crash', 'b');
    try {
      await eventually(() => b.events.includes('leader:a'), 3000);
      await sleep(500); // let b watch a renew for a while
      assert.equal(b.elector.isLeader(), false);
      const t0 = Date.now();
      await stop(a);
      assert.equal(a.elector.isLeader(), false);
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
      assert.equal((await api.get(NS, 'crash'))?.spec.holderIdentity, 'a', 'a crashed leader leaves its name in the lease');
      await eventually(() => b.elector.isLeader(), 3000, 5);
      const failover = Date.now() - t0;
      t.diagnostic(`failover without release: ${failover} ms (bound ${LEASE_MS + 2 * RETRY_MS} ms)`);
      assert.ok(failover <= LEASE_MS + 2 * RETRY_MS, `failover took ${failover} ms`);
      assert.ok(
        failover >= LEASE_MS - RETRY_MS * 1.2 - 50,
        `standby took over after only ${failover} ms, before the lease could have expired`,
      );
      const lease = await api.get(NS, 'crash');
      assert.equal(lease?.spec.holderIdentity, 'b');
      assert.equal(lease?.spec.leaseTransitions, 1);
      assert.deepEqual(b.events, ['leader:a', 'leader:b', 'started']);
    } finally {
      await stop(a, b);
    }
  });

  it('when the leader releases on cancel, the standby takes over within about one retry period', async (t) => {
    const a = candidate(api, 'handoff', 'a');
    await eventually(() => a.elector.isLeader(), 3000);
    const b = candidate(api, 'handoff', 'b');
    try {
      await eventually(() => b.events.includes('leader:a'), 3000);
      await sleep(300);
      const t0 = Date.now();
      a.abort.abort();
      await eventually(() => b.elector.isLeader(), 3000, 5);
      const failover = Date.now() - t0;
      await a.done;
      t.diagnostic(`failover with release: ${failover} ms (bound ${2 * RETRY_MS} ms)`);
      assert.ok(failover <= 2 * RETRY_MS, `failover took ${failover} ms`);
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
      const lease = await api.get(NS, 'handoff');
      assert.equal(lease?.spec.holderIdentity, 'b');
      assert.equal(lease?.spec.leaseTransitions, 1);
    } finally {
      await stop(a, b);
    }
  });

  it('a standby whose clock runs an hour ahead does not take a live lease', async () => {
    const a = candidate(api, 'skew', 'a');
    await eventually(() => a.elector.isLeader(), 3000);
    const b = candidate(api, 'skew', 'b', { now: () => Date.now() + 3_600_000 });
    let bLed = false;
    try {
      const end = Date.now() + 2 * LEASE_MS;
      while (Date.now() < end) {
        bLed ||= b.elector.isLeader();
        await sleep(50);
      }
      assert.equal(bLed, false, 'b judged expiry from renewTime instead of its own observation time');
      assert.ok(a.elector.isLeader());
      assert.equal((await api.get(NS, 'skew'))?.spec.leaseTransitions, 0);
    } finally {
      await stop(a, b);
    }
  });

  it('a leader whose renew conflicts with an unrelated write re-reads the lease and keeps leading', async () => {
    const a = candidate(api, 'conflict', 'a');
    try {
      await eventually(() => a.elector.isLeader(), 3000);
      const lease = (await api.get(NS, 'conflict'))!;
      const labelled = await api.replace(NS, { ...lease, metadata: { ...lease.metadata, labels: { touched: 'yes' } } });
      await eventually(async () => {
        const now = await api.get(NS, 'conflict');
        return now !== undefined && now.metadata.resourceVersion !== labelled.metadata.resourceVersion && now.spec.holderIdentity === 'a';
      }, 2000);
      assert.ok(a.elector.isLeader());
      assert.deepEqual(a.events, ['leader:a', 'started'], 'no leadership interruption');
      assert.equal((await api.get(NS, 'conflict'))?.metadata.labels?.['touched'], 'yes', 'the renew kept the other writer’s change');
    } finally {
      await stop(a);
    }
  });

  it('a leader that finds another holder in the lease stops leading at once', async () => {
    const a = candidate(api, 'usurped', 'a');
    try {
      await eventually(() => a.elector.isLeader(), 3000);
      const lease = (await api.get(NS, 'usurped'))!;
      await api.replace(NS, {
        ...lease,
        spec: { ...lease.spec, holderIdentity: 'intruder', renewTime: new Date().toISOString().replace('Z', '000Z') },
      });
      const t0 = Date.now();
      await eventually(() => a.events.includes('stopped'), 2000, 5);
      const took = Date.now() - t0;
      assert.ok(took < RENEW_MS, `stopped after ${took} ms, i.e. waited for the renew deadline`);
      assert.equal(a.elector.isLeader(), false);
      assert.ok(a.events.includes('leader:intruder'));
    } finally {
      await stop(a);
    }
  });

  it('API errors neither crash run() nor keep leadership past the renew deadline, and leadership is regained after', async () => {
    const flaky = new FlakyLeaseApi(api);
    flaky.failing = true;
    const a = candidate(flaky, 'flaky', 'a');
    try {
      await sleep(500);
      assert.ok(flaky.failedCalls >= 2, `only ${flaky.failedCalls} calls while failing: it stopped retrying`);
      assert.equal(a.elector.isLeader(), false);
      flaky.failing = false;
      await eventually(() => a.elector.isLeader(), 2000);

      flaky.failing = true;
      const t0 = Date.now();
      await eventually(() => !a.elector.isLeader(), 2000, 5);
      const lostAfter = Date.now() - t0;
      assert.ok(lostAfter <= RENEW_MS + 50, `still leader ${lostAfter} ms into an outage`);
      await eventually(() => a.events.includes('stopped'), 1000);
      await sleep(LEASE_MS);
      assert.equal(a.rejected(), false);
      flaky.failing = false;
      await eventually(() => a.elector.isLeader(), 2000);
      assert.deepEqual(a.events, ['leader:a', 'started', 'stopped', 'started']);
      assert.equal((await api.get(NS, 'flaky'))?.spec.leaseTransitions, 0, 'regaining our own lease is not a transition');
    } finally {
      await stop(a);
    }
    assert.equal(a.rejected(), false);
  });

  it('aborting a standby that never led resolves run() without callbacks or writes', async () => {
    const a = candidate(api, 'quiet', 'a');
    await eventually(() => a.elector.isLeader(), 3000);
    const b = candidate(api, 'quiet', 'b');
    try {
      await eventually(() => b.events.includes('leader:a'), 3000);
      const before = (await api.get(NS, 'quiet'))!;
      await stop(b);
      assert.deepEqual(b.events, ['leader:a']);
      const after = (await api.get(NS, 'quiet'))!;
      assert.equal(after.spec.holderIdentity, 'a');
      assert.equal(after.spec.leaseTransitions, before.spec.leaseTransitions);
    } finally {
      await stop(a, b);
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
      (e: unknown) => e instanceof LeaderElectionError && e.code === 'INVALID_CONFIG',
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
    await assert.rejects(e.run(ac.signal), (err: unknown) => err instanceof LeaderElectionError && err.code === 'ALREADY_RUNNING');
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
