/**
 * The watcher loop on virtual time against a scripted API: the exact list and watch requests it
 * makes, and when (kube-rs' "least powerful test that proves it"). Real-network behaviour (PING,
 * idle deadlines on real streams, resets, restarts, 410 after compaction) is tested against
 * `kars apiserver` in reflector.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import type { KubeList, KubeObject, WatchEvent } from '@kars/kube-core';
import { ConnectionLostError, Resources } from '@kars/kube-client';
import type { ListParams, WatchParams } from '@kars/kube-client';
import { DEFAULT_WATCH_CONFIG } from './watch-config.js';
import type { WatchConfig } from './watch-config.js';
import { MIN_HEALTHY_WATCH_MS, watcher } from './watcher.js';
import type { WatchClient, WatcherEvent } from './watcher.js';

type Call = { op: 'list'; p: ListParams; at: number } | { op: 'watch'; p: WatchParams; at: number };
type ListStep = () => Promise<KubeList>;
type WatchStep = (p: WatchParams) => AsyncGenerator<WatchEvent>;

const obj = (name: string, rv: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'd', resourceVersion: rv },
});
const page = (rv: string, items: KubeObject[], cont?: string): ListStep => {
  return async () => ({
    apiVersion: 'v1',
    kind: 'ConfigMapList',
    metadata: { resourceVersion: rv, ...(cont ? { continue: cont } : {}) },
    items,
  });
};

/** Wait for the abort of `signal`, then fail like a destroyed stream. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = (): void => reject(Object.assign(new Error('The operation was aborted'), { name: 'AbortError' }));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

/** A watch that opens and then stays quiet until aborted. */
const quietWatch: WatchStep = async function* (p) {
  p.onOpen?.();
  yield* [];
  await untilAborted(p.signal);
};

/** A scripted API: each list and watch takes the next scripted answer; with none left it hangs until aborted. */
class ScriptedApi {
  readonly calls: Call[] = [];
  readonly lists: ListStep[] = [];
  readonly watches: WatchStep[] = [];
  constructor(private readonly clock: FakeClock) {}

  readonly client: WatchClient = {
    list: ((_ref: unknown, p: ListParams = {}, signal?: AbortSignal) => {
      this.calls.push({ op: 'list', p, at: this.clock.now() });
      const next = this.lists.shift();
      return next ? next() : untilAborted(signal ?? new AbortController().signal);
    }) as WatchClient['list'],
    watch: ((_ref: unknown, p: WatchParams) => {
      this.calls.push({ op: 'watch', p, at: this.clock.now() });
      return (this.watches.shift() ?? quietWatch)(p);
    }) as WatchClient['watch'],
  };

  ops(): string[] {
    return this.calls.map((c) => (c.op === 'list' ? `list(${c.p.continueToken ?? ''})` : `watch(${c.p.resourceVersion})`));
  }
}

const cfg = (over: Partial<WatchConfig> = {}): WatchConfig => ({
  ...DEFAULT_WATCH_CONFIG,
  backoffInitialMs: 1000,
  backoffMaxMs: 30_000,
  relistIntervalMs: 0,
  pageSize: 2,
  ...over,
});

function run(api: ScriptedApi, clock: FakeClock, config: WatchConfig): { events: WatcherEvent[]; stop(): Promise<void> } {
  const ac = new AbortController();
  const events: WatcherEvent[] = [];
  const done = (async () => {
    for await (const ev of watcher(
      { client: api.client, resource: Resources.configmaps, namespace: 'd', config, clock, random: () => 1 },
      ac.signal,
    ))
      events.push(ev);
  })();
  return {
    events,
    stop: async () => {
      ac.abort();
      await clock.advanceAsync(0);
      await done;
    },
  };
}

describe('watcher loop on virtual time (scripted API)', () => {
  it('lists page by page with the continue token and the page size, then watches from the list resourceVersion with bookmarks', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('10', [obj('a', '3'), obj('b', '4')], 'c1'), page('11', [obj('c', '5')]));
    const w = run(api, clock, cfg());
    try {
      await clock.advanceAsync(0);
      assert.deepEqual(api.ops(), ['list()', 'list(c1)', 'watch(10)']);
      const [l1, l2, w1] = api.calls;
      assert.equal(l1?.op === 'list' && l1.p.limit, 2);
      assert.equal(l2?.op === 'list' && l2.p.namespace, 'd');
      assert.ok(w1?.op === 'watch' && w1.p.allowWatchBookmarks && w1.p.idleTimeoutMs === DEFAULT_WATCH_CONFIG.idleTimeoutMs);
      assert.deepEqual(
        w.events.map((e) => e.type),
        ['init', 'initApply', 'initApply', 'initApply', 'initDone'],
      );
    } finally {
      await w.stop();
    }
  });

  it('waits each backoff delay on the clock before the next request, doubling while lists fail', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    const refuse: ListStep = async () => {
      throw new ConnectionLostError('connect', 'refused');
    };
    api.lists.push(refuse, refuse, page('7', []));
    const w = run(api, clock, cfg());
    try {
      await clock.advanceAsync(0);
      assert.deepEqual(api.ops(), ['list()']);
      await clock.advanceAsync(999);
      assert.deepEqual(api.ops(), ['list()'], 'no request before the first delay ends');
      await clock.advanceAsync(1);
      assert.deepEqual(api.ops(), ['list()', 'list()']);
      await clock.advanceAsync(1999);
      assert.equal(api.calls.length, 2, 'the second delay is twice the first');
      await clock.advanceAsync(1);
      assert.deepEqual(api.ops(), ['list()', 'list()', 'list()', 'watch(7)']);
      assert.deepEqual(
        api.calls.map((c) => c.at),
        [0, 1000, 3000, 3000],
      );
    } finally {
      await w.stop();
    }
  });

  it('ends a quiet watch and lists again when the periodic relist falls due, relistInterval after the last list', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('10', [obj('a', '3')]), page('20', [obj('a', '9')]));
    const w = run(api, clock, cfg({ relistIntervalMs: 600_000 }));
    try {
      await clock.advanceAsync(599_999);
      assert.deepEqual(api.ops(), ['list()', 'watch(10)']);
      await clock.advanceAsync(1);
      assert.deepEqual(api.ops(), ['list()', 'watch(10)', 'list()', 'watch(20)']);
      const inits = w.events.filter((e) => e.type === 'init');
      assert.deepEqual(inits, [
        { type: 'init', reason: 'initial' },
        { type: 'init', reason: 'periodic' },
      ]);
      assert.equal(
        w.events.some((e) => e.type === 'restart'),
        false,
        'a due relist is not a restart',
      );
    } finally {
      await w.stop();
    }
  });

  it('after each of several faults that follow a recovery, waits only the initial delay (ADR 0007)', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('1', []));
    // Each watch opens, stays up a little longer than the healthy minimum, then its connection is reset.
    const healthyThenReset: WatchStep = async function* (p) {
      p.onOpen?.();
      await new Promise<void>((resolve) => clock.setTimeout(resolve, MIN_HEALTHY_WATCH_MS + 200));
      yield* [];
      throw new ConnectionLostError('reset', 'connection reset');
    };
    for (let i = 0; i < 4; i++) api.watches.push(healthyThenReset);
    const w = run(api, clock, cfg({ backoffInitialMs: 300 }));
    try {
      await clock.advanceAsync(4 * (MIN_HEALTHY_WATCH_MS + 200 + 300));
      const delays = w.events.flatMap((e) => (e.type === 'restart' ? [e.delayMs] : []));
      assert.deepEqual(delays, [300, 300, 300, 300]);
    } finally {
      await w.stop();
    }
  });

  it('after an outage grew the backoff, a fault right after the server came back waits the initial delay; a second drop at once grows again (ADR 0007)', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('1', []));
    const healthyThenCut: WatchStep = async function* (p) {
      p.onOpen?.();
      await new Promise<void>((resolve) => clock.setTimeout(resolve, MIN_HEALTHY_WATCH_MS + 200));
      yield* [];
      throw new ConnectionLostError('reset', 'connection reset');
    };
    // The outage: every reconnect is refused before a watch opens.
    const refused: WatchStep = async function* () {
      yield* [];
      throw new ConnectionLostError('connect', 'connect ECONNREFUSED');
    };
    // Back: the server accepts the watch, and a new fault cuts it at once.
    const acceptedThenCut: WatchStep = async function* (p) {
      p.onOpen?.();
      yield* [];
      throw new ConnectionLostError('reset', 'connection reset');
    };
    api.watches.push(healthyThenCut, refused, refused, refused, acceptedThenCut, acceptedThenCut);
    const w = run(api, clock, cfg({ backoffInitialMs: 200 }));
    try {
      await clock.advanceAsync(MIN_HEALTHY_WATCH_MS + 200 + 200 + 400 + 800 + 1600 + 200 + 400);
      const delays = w.events.flatMap((e) => (e.type === 'restart' ? [e.delayMs] : []));
      assert.deepEqual(
        delays,
        [200, 400, 800, 1600, 200, 400],
        'outage grows; the first fault after the recovery waits the initial delay; a second drop grows',
      );
      assert.deepEqual(api.ops(), ['list()', 'watch(1)', 'watch(1)', 'watch(1)', 'watch(1)', 'watch(1)', 'watch(1)', 'watch(1)']);
    } finally {
      await w.stop();
    }
  });

  it('keeps the backoff growing for a server that accepts each watch and drops it at once', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('1', []));
    const dropAtOnce: WatchStep = async function* (p) {
      p.onOpen?.();
      yield* [];
      throw new ConnectionLostError('reset', 'connection reset');
    };
    for (let i = 0; i < 4; i++) api.watches.push(dropAtOnce);
    const w = run(api, clock, cfg({ backoffInitialMs: 300 }));
    try {
      await clock.advanceAsync(300 + 600 + 1200 + 2400);
      const delays = w.events.flatMap((e) => (e.type === 'restart' ? [e.delayMs] : []));
      assert.deepEqual(delays, [300, 600, 1200, 2400]);
    } finally {
      await w.stop();
    }
  });

  it('does not loop when the server ends every watch cleanly at once (immediate-end guard)', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('5', []));
    const endAtOnce: WatchStep = async function* (p) {
      p.onOpen?.();
      yield* [];
    };
    for (let i = 0; i < 50; i++) api.watches.push(endAtOnce);
    const w = run(api, clock, cfg());
    try {
      await clock.advanceAsync(0);
      assert.deepEqual(api.ops(), ['list()', 'watch(5)'], 'one watch, then a wait');
      await clock.advanceAsync(1000);
      assert.deepEqual(api.ops(), ['list()', 'watch(5)', 'watch(5)']);
      const r = w.events.find((e) => e.type === 'restart');
      assert.deepEqual(r, { type: 'restart', reason: 'error', delayMs: 1000, error: 'the server ended the watch immediately' });
    } finally {
      await w.stop();
    }
  });

  it('resumes at once, never backing off, when the server cuts each watch right after a burst of new events (a watcher that fell behind)', async () => {
    // kube-apiserver's cacher closes a watcher whose buffer stays full: the stream ends cleanly, well
    // within a second, after the events it could deliver. The client is up to date to there.
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('5', []));
    for (let i = 0; i < 6; i++)
      api.watches.push(async function* (p) {
        p.onOpen?.();
        yield { type: 'MODIFIED', object: obj('a', String(6 + 2 * i)) };
        yield { type: 'MODIFIED', object: obj('b', String(7 + 2 * i)) };
      });
    api.watches.push(quietWatch);
    const w = run(api, clock, cfg());
    try {
      await clock.advanceAsync(0);
      assert.deepEqual(api.ops(), ['list()', 'watch(5)', 'watch(7)', 'watch(9)', 'watch(11)', 'watch(13)', 'watch(15)', 'watch(17)']);
      const delays = w.events.flatMap((e) => (e.type === 'restart' ? [e.delayMs] : []));
      assert.deepEqual(delays, [0, 0, 0, 0, 0, 0]);
    } finally {
      await w.stop();
    }
  });

  it('resumes a watch at once from the last resourceVersion it saw when the server ends it after a while', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi(clock);
    api.lists.push(page('5', []));
    api.watches.push(async function* (p) {
      p.onOpen?.();
      yield { type: 'ADDED', object: obj('a', '6') };
      await new Promise<void>((resolve) => clock.setTimeout(resolve, 5000));
      yield { type: 'BOOKMARK', object: obj('', '8') };
    });
    const w = run(api, clock, cfg());
    try {
      await clock.advanceAsync(5000);
      assert.deepEqual(api.ops(), ['list()', 'watch(5)', 'watch(8)']);
      assert.equal(api.calls[2]?.at, 5000, 'no wait after a clean end');
    } finally {
      await w.stop();
    }
  });
});
