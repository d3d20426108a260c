import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '@kars/kube-core';
import type { KubeObject, WatchEvent } from '@kars/kube-core';
import { ConnectionLostError } from '@kars/kube-client';
import { Backoff, backoffDelayMs } from './backoff.js';
import { classifyFailure, IMMEDIATE_END_MS, INITIAL_WATCHER_STATE, relistInMs, step } from './watcher.js';
import type { StepContext, StepResult, WatcherInput, WatcherState, WatcherTiming } from './watcher.js';

const timing: WatcherTiming = { relistIntervalMs: 0, backoffInitialMs: 1000, backoffMaxMs: 30_000, backoffResetMs: 60_000 };
const ctx = (now = 0, over: Partial<WatcherTiming> = {}, jitter = 1): StepContext => ({ now, config: { ...timing, ...over }, jitter });
const obj = (name: string, rv: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'd', resourceVersion: rv },
});
const watching = (rv = '42', over: Partial<Extract<WatcherState, { phase: 'watching' }>> = {}): WatcherState => ({
  phase: 'watching',
  resourceVersion: rv,
  listedAt: 0,
  failures: 0,
  acceptedDrops: 0,
  ...over,
});
const ended = (
  outcome: Extract<WatcherInput, { kind: 'stream-ended' }>['outcome'],
  lifetimeMs = 5000,
  opened = true,
  upForMs = lifetimeMs,
  progressed = false,
): WatcherInput => ({ kind: 'stream-ended', outcome, opened, lifetimeMs, upForMs, progressed });
const types = (r: StepResult): string[] => r.events.map((e) => e.type);

describe('watcher step: paging', () => {
  it('lists in pages: init with the first page, the continue token carried, initDone with the first resourceVersion and the total', () => {
    const p1 = step(
      INITIAL_WATCHER_STATE,
      { kind: 'page', items: [obj('a', '5'), obj('b', '6')], resourceVersion: '10', continueToken: 'c1' },
      ctx(),
    );
    assert.deepEqual(types(p1), ['init', 'initApply', 'initApply']);
    assert.deepEqual(p1.state, {
      phase: 'listing',
      reason: 'initial',
      continueToken: 'c1',
      resourceVersion: '10',
      count: 2,
      failures: 0,
      acceptedDrops: 0,
    });
    assert.equal(p1.delayMs, 0);
    const p2 = step(p1.state, { kind: 'page', items: [obj('c', '7')], resourceVersion: '99', continueToken: undefined }, ctx(1234));
    assert.deepEqual(types(p2), ['initApply', 'initDone']);
    assert.deepEqual(p2.events[1], { type: 'initDone', resourceVersion: '10', reason: 'initial', count: 3 });
    assert.deepEqual(p2.state, { phase: 'watching', resourceVersion: '10', listedAt: 1234, failures: 0, acceptedDrops: 0 });
  });

  it('treats an empty continue token as the last page', () => {
    const r = step(INITIAL_WATCHER_STATE, { kind: 'page', items: [], resourceVersion: '3', continueToken: '' }, ctx());
    assert.deepEqual(types(r), ['init', 'initDone']);
    assert.equal(r.state.phase, 'watching');
  });

  it('lists again from the start, at once, when a continue token expired (410 while paging), and frames it with a new init', () => {
    const listing: WatcherState = {
      phase: 'listing',
      reason: 'expired',
      continueToken: 'c',
      resourceVersion: '10',
      count: 500,
      failures: 0,
      acceptedDrops: 0,
    };
    const r = step(listing, { kind: 'list-failed', error: new ApiError(410, 'Expired', 'continue token too old') }, ctx());
    assert.deepEqual(r.state, { phase: 'empty', reason: 'expired', failures: 0, acceptedDrops: 0 });
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'expired', delayMs: 0, error: 'continue token too old' }]);
    const again = step(r.state, { kind: 'page', items: [obj('a', '1')], resourceVersion: '20', continueToken: undefined }, ctx());
    assert.deepEqual(types(again), ['init', 'initApply', 'initDone']);
  });

  it('backs off, doubling to the cap, while lists fail, and never loops at once on a 410 for a first page', () => {
    let s: WatcherState = INITIAL_WATCHER_STATE;
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = step(s, { kind: 'list-failed', error: i === 0 ? new ApiError(410, 'Expired', 'odd') : new Error('refused') }, ctx());
      delays.push(r.delayMs);
      s = r.state;
      assert.equal(s.phase, 'empty');
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });
});

describe('watcher step: events on a stream', () => {
  it('follows the resourceVersion of applies, deletes and bookmarks', () => {
    const a = step(watching('1'), { kind: 'event', event: { type: 'ADDED', object: obj('a', '2') } }, ctx());
    assert.deepEqual(types(a), ['apply']);
    const d = step(a.state, { kind: 'event', event: { type: 'DELETED', object: obj('a', '3') } }, ctx());
    assert.deepEqual(types(d), ['delete']);
    const b = step(d.state, { kind: 'event', event: { type: 'BOOKMARK', object: obj('', '9') } }, ctx());
    assert.deepEqual(b.events, [{ type: 'bookmark', resourceVersion: '9' }]);
    assert.equal((b.state as { resourceVersion: string }).resourceVersion, '9');
  });

  it('ends the stream on an ERROR event: 410 relists, anything else fails', () => {
    const e410: WatchEvent = {
      type: 'ERROR',
      object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code: 410, reason: 'Expired' },
    };
    assert.deepEqual(step(watching(), { kind: 'event', event: e410 }, ctx()).endStream, { kind: 'expired' });
    const e500: WatchEvent = {
      type: 'ERROR',
      object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code: 500, message: 'x' },
    };
    const r = step(watching(), { kind: 'event', event: e500 }, ctx());
    assert.equal(r.endStream?.kind, 'failed');
    assert.deepEqual(r.events, []);
  });
});

describe('watcher step: how a stream ended', () => {
  it('resumes from the last resourceVersion at once after a clean server end', () => {
    const r = step(watching('42'), ended({ kind: 'ended' }), ctx());
    assert.deepEqual(r.state, watching('42'));
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'server_timeout', delayMs: 0 }]);
  });

  it('counts a clean end within a second of the request as a failure and backs off (immediate-end guard)', () => {
    const r = step(watching('42'), ended({ kind: 'ended' }, IMMEDIATE_END_MS - 1, true, IMMEDIATE_END_MS - 5), ctx());
    assert.equal(r.events[0]?.type, 'restart');
    assert.equal((r.events[0] as { reason: string }).reason, 'error');
    assert.equal(r.delayMs, 1000);
    assert.equal(r.state.failures, 1);
    const second = step(r.state, ended({ kind: 'ended' }, 3, true, 1), ctx());
    assert.equal(second.delayMs, 2000, 'a server that ends every watch at once is retried ever more slowly');
    assert.equal(step(watching('42'), ended({ kind: 'ended' }, IMMEDIATE_END_MS), ctx()).delayMs, 0);
  });

  it('resumes at once, with the backoff reset, after a short stream that moved the resourceVersion (kube-apiserver closing a watcher that fell behind)', () => {
    // Backed off twice already, then a watch that delivered events and was cut within a second.
    const behind: WatcherState = { ...watching('42'), failures: 2, acceptedDrops: 3 };
    const r = step(behind, ended({ kind: 'ended' }, IMMEDIATE_END_MS - 1, true, IMMEDIATE_END_MS - 5, true), ctx());
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'server_timeout', delayMs: 0 }]);
    assert.equal(r.state.failures, 0);
    assert.equal(r.state.acceptedDrops, 0);
    // The same stream without progress is the immediate-end guard's case.
    assert.ok(step(behind, ended({ kind: 'ended' }, IMMEDIATE_END_MS - 1, true, IMMEDIATE_END_MS - 5), ctx()).delayMs > 0);
    // A failed stream (a reset) after progress waits only the initial delay, not the grown backoff.
    const failed = step(behind, ended({ kind: 'failed', reason: 'error', error: new Error('reset') }, 200, true, 190, true), ctx());
    assert.equal(failed.delayMs, 1000);
  });

  it("logs the server's message with a 410 (which window the resourceVersion fell out of)", () => {
    const r = step(watching('42'), ended({ kind: 'expired', message: 'too old resource version: 42 (97)' }), ctx());
    assert.deepEqual(r.notes, [
      {
        msg: 'watch restarting',
        fields: { reason: 'expired', resourceVersion: '42', retryInMs: 0, message: 'too old resource version: 42 (97)' },
      },
    ]);
    const e410 = {
      type: 'ERROR',
      object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 42 (97)' },
    } as WatchEvent;
    assert.deepEqual(step(watching('42'), { kind: 'event', event: e410 }, ctx()).endStream, {
      kind: 'expired',
      message: 'too old resource version: 42 (97)',
    });
  });

  it('goes back to listing after 410 Expired', () => {
    const r = step(watching('42'), ended({ kind: 'expired' }), ctx());
    assert.deepEqual(r.state, { phase: 'empty', reason: 'expired', failures: 0, acceptedDrops: 0 });
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'expired', delayMs: 0 }]);
  });

  it('resumes from the last resourceVersion after a backoff on idle, ping and other failures', () => {
    for (const reason of ['idle', 'ping', 'error'] as const) {
      const r = step(watching('42'), ended({ kind: 'failed', reason, error: new Error('x') }, 500, false, 0), ctx());
      assert.deepEqual(r.state, watching('42', { failures: 1 }));
      assert.deepEqual(r.events, [{ type: 'restart', reason, delayMs: 1000, error: 'x' }]);
    }
  });

  it('starts the backoff over when the server accepts a watch, unless it accepted and dropped the one before too (ADR 0007)', () => {
    const deep = watching('42', { failures: 4 });
    const fail = { kind: 'failed', reason: 'error', error: new Error('reset') } as const;
    assert.equal(step(deep, ended(fail, 5000, true, 1000), ctx()).delayMs, 1000, 'stayed up a second');
    const cut = step(deep, ended(fail, 5000, true, 10), ctx());
    assert.equal(cut.delayMs, 1000, 'accepted after an outage, cut at once by a new fault');
    assert.equal(cut.state.acceptedDrops, 1);
    const again = step(watching('42', { failures: 4, acceptedDrops: 1 }), ended(fail, 5000, true, 999), ctx());
    assert.equal(again.delayMs, 16_000, 'accepted and dropped at once twice in a row');
    assert.equal(step(deep, ended(fail, 5000, false, 0), ctx()).delayMs, 16_000, 'never opened');
    const healthy = step(watching('42', { acceptedDrops: 3 }), ended(fail, 5000, true, 2000), ctx());
    assert.equal(healthy.state.acceptedDrops, 0, 'a healthy watch clears the count');
  });

  it("waits the server's Retry-After on 429, not a backoff grown by the outage before (kube-apiserver's watch cache re-initializing)", () => {
    // kube-apiserver, just restarted, answers watches and lists of a resource whose watch cache is
    // still filling with 429 "storage is (re)initializing" and retryAfterSeconds (1 s after a short
    // outage). The watcher comes back then, as client-go does, instead of after 8–16 s.
    const initializing = new ApiError(429, 'TooManyRequests', 'storage is (re)initializing', { retryAfterSeconds: 1 });
    const deep = watching('42', { failures: 4 });
    const r = step(deep, ended({ kind: 'failed', reason: 'error', error: initializing }, 20, false, 0), ctx());
    assert.equal(r.delayMs, 1000);
    assert.deepEqual(r.state, watching('42', { failures: 4 }), 'the same failure count: the server answered, it is not unreachable');
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'error', delayMs: 1000, error: 'storage is (re)initializing' }]);
    const listing = step(
      { phase: 'empty', reason: 'expired', failures: 4, acceptedDrops: 0 },
      { kind: 'list-failed', error: initializing },
      ctx(),
    );
    assert.equal(listing.delayMs, 1000, 'a list refused the same way');
    assert.equal(listing.state.failures, 4);
    const huge = new ApiError(429, 'TooManyRequests', 'slow down', { retryAfterSeconds: 3600 });
    assert.equal(
      step(deep, ended({ kind: 'failed', reason: 'error', error: huge }, 20, false, 0), ctx()).delayMs,
      16_000,
      'never later than the backoff would have waited',
    );
    const starting = new ApiError(503, 'ServiceUnavailable', 'the request has been made before all known HTTP paths have been installed', {
      retryAfterSeconds: 5,
    });
    assert.equal(
      step(deep, ended({ kind: 'failed', reason: 'error', error: starting }, 20, false, 0), ctx()).delayMs,
      5000,
      'a 503 that says 5 s',
    );
    assert.equal(
      step(watching('42'), ended({ kind: 'failed', reason: 'error', error: starting }, 20, false, 0), ctx()).delayMs,
      1000,
      'after a first failure the backoff is shorter than that',
    );
    const none = new ApiError(429, 'TooManyRequests', 'slow down');
    assert.equal(
      step(deep, ended({ kind: 'failed', reason: 'error', error: none }, 20, false, 0), ctx()).delayMs,
      16_000,
      'no Retry-After: the backoff',
    );
    const ev = step(watching('42'), { kind: 'event', event: { type: 'ERROR', object: initializing.toStatus() } as WatchEvent }, ctx());
    assert.ok(ev.endStream?.kind === 'failed');
    assert.deepEqual((ev.endStream.error as ApiError).details, { retryAfterSeconds: 1 }, 'an ERROR event keeps the Status details');
  });

  it('lists again when the periodic relist is due, without counting a restart', () => {
    const r = step(watching('42'), ended({ kind: 'relist-due' }), ctx());
    assert.deepEqual(r.state, { phase: 'empty', reason: 'periodic', failures: 0, acceptedDrops: 0 });
    assert.deepEqual(r.events, []);
  });
});

describe('watcher step: relist timer', () => {
  it('is due relistInterval after the last complete list, and never when disabled', () => {
    assert.equal(relistInMs(watching('1', { listedAt: 1000 }), 4000, { relistIntervalMs: 10_000 }), 7000);
    assert.equal(relistInMs(watching('1', { listedAt: 1000 }), 99_000, { relistIntervalMs: 10_000 }), 0);
    assert.equal(relistInMs(watching('1'), 4000, { relistIntervalMs: 0 }), undefined);
    assert.equal(relistInMs(INITIAL_WATCHER_STATE, 4000, { relistIntervalMs: 10_000 }), undefined);
  });

  it('lists instead of resuming when the relist falls due during the backoff wait', () => {
    const s = watching('42', { listedAt: 0, failures: 2, acceptedDrops: 0 });
    const fail = { kind: 'failed', reason: 'ping', error: new Error('dead') } as const;
    // backoff 4000 ms from now=7000 ends at 11000, after the relist at 10000
    const r = step(s, ended(fail, 5000, false, 0), ctx(7000, { relistIntervalMs: 10_000 }));
    assert.equal(r.delayMs, 4000);
    assert.deepEqual(r.events, [{ type: 'restart', reason: 'ping', delayMs: 4000, error: 'dead' }]);
    assert.deepEqual(r.state, { phase: 'empty', reason: 'periodic', failures: 3, acceptedDrops: 0 });
    // the same failure earlier resumes the watch
    const early = step(s, ended(fail, 5000, false, 0), ctx(1000, { relistIntervalMs: 10_000 }));
    assert.equal(early.state.phase, 'watching');
  });
});

describe('watcher step: properties', () => {
  type Ended = Extract<WatcherInput, { kind: 'stream-ended' }>;
  const outcomes: Ended['outcome'][] = [
    { kind: 'ended' },
    { kind: 'expired' },
    { kind: 'relist-due' },
    { kind: 'failed', reason: 'idle', error: new Error('quiet') },
  ];
  const errors: unknown[] = [new ApiError(410, 'Expired', 'gone'), new Error('refused'), new ConnectionLostError('ping', 'dead')];
  const eventTypes = ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK'] as const;
  /** A legal input for the phase, chosen by the drawn numbers. */
  const inputFor = (
    phase: WatcherState['phase'],
    d: { pick: number; n: number; ms: number; opened: boolean; progressed: boolean },
  ): WatcherInput => {
    if (phase !== 'watching') {
      if (d.pick % 3 === 2) return { kind: 'list-failed', error: errors[d.n % errors.length] };
      const items = Array.from({ length: d.n % 4 }, (_, i) => obj(`o${i}`, String(d.n + i)));
      return { kind: 'page', items, resourceVersion: String(d.n), continueToken: [undefined, 'c1', ''][d.pick % 3] };
    }
    if (d.pick % 2 === 0) return { kind: 'event', event: { type: eventTypes[d.n % 4]!, object: obj('x', String(d.n)) } };
    return {
      kind: 'stream-ended',
      outcome: outcomes[d.n % 4]!,
      opened: d.opened,
      lifetimeMs: d.ms,
      upForMs: d.ms,
      progressed: d.progressed,
    };
  };
  const draw = fc.record({
    dt: fc.nat(2000),
    jitter: fc.double({ min: 0, max: 1, noNaN: true }),
    pick: fc.nat(),
    n: fc.nat(1000),
    ms: fc.nat(5000),
    opened: fc.boolean(),
    progressed: fc.boolean(),
  });

  it('never waits beyond the cap, frames every list with a true count, never resumes at once after an immediate end, and follows the last resourceVersion', () => {
    fc.assert(
      fc.property(fc.array(draw, { maxLength: 60 }), (draws) => {
        let s: WatcherState = INITIAL_WATCHER_STATE;
        let framed = 0;
        let now = 0;
        for (const d of draws) {
          now += d.dt;
          const input = inputFor(s.phase, d);
          const r = step(s, input, ctx(now, { relistIntervalMs: 3000 }, d.jitter));
          assert.ok(r.delayMs >= 0 && r.delayMs <= timing.backoffMaxMs, `delay ${r.delayMs}`);
          for (const e of r.events) {
            if (e.type === 'init') framed = 0;
            if (e.type === 'initApply') framed++;
            if (e.type === 'initDone') assert.equal(e.count, framed);
          }
          if (input.kind === 'stream-ended' && input.outcome.kind === 'ended' && input.lifetimeMs < IMMEDIATE_END_MS && !input.progressed)
            assert.ok(r.delayMs > 0, 'an immediate end that delivered nothing waits');
          if (input.kind === 'stream-ended' && input.outcome.kind === 'ended' && input.progressed && r.state.phase === 'watching')
            assert.equal(r.delayMs, 0, 'a stream that moved the resourceVersion resumes at once');
          if (input.kind === 'event' && r.state.phase === 'watching')
            assert.equal(r.state.resourceVersion, (input.event.object as KubeObject).metadata.resourceVersion);
          s = r.state;
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('failure classification', () => {
  it('classifies 410, idle, ping and other failures', () => {
    assert.deepEqual(classifyFailure(new ApiError(410, 'Expired', 'too old')), { kind: 'expired', message: 'too old' });
    assert.equal((classifyFailure(new ConnectionLostError('idle', 'quiet')) as { reason: string }).reason, 'idle');
    assert.equal((classifyFailure(new ConnectionLostError('ping', 'dead')) as { reason: string }).reason, 'ping');
    assert.equal((classifyFailure(new ConnectionLostError('reset', 'rst')) as { reason: string }).reason, 'error');
    assert.equal((classifyFailure(new Error('boom')) as { reason: string }).reason, 'error');
  });
});

describe('reconnect backoff', () => {
  it('starts between half and all of the initial delay, doubles, caps, and resets', () => {
    const lo = new Backoff(1000, 30_000, () => 0);
    const hi = new Backoff(1000, 30_000, () => 1);
    assert.equal(lo.next(), 500);
    assert.equal(hi.next(), 1000);
    assert.equal(hi.next(), 2000);
    for (let i = 0; i < 10; i++) hi.next();
    assert.equal(hi.next(), 30_000, 'never above the cap');
    hi.reset();
    assert.equal(hi.next(), 1000);
    assert.equal(backoffDelayMs(1000, 30_000, 1e9, 1), 30_000, 'a huge failure count stays finite');
  });
});
