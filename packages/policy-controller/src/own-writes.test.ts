import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '@kars/kube-core';
import type { KubeObject, WatchEvent } from '@kars/kube-core';
import type { KubeClient, ResourceRef, WatchParams } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { fastWatchConfig, until } from '@kars/kube-runtime/testing';
import { INFERENCE_POLICY_KIND } from '@kars/policy-compiler';
import type { TestServer } from '@kars/apiserver/testing';
import { startControllerStack } from './testing/controller-stack.js';
import type { ControllerStack } from './testing/controller-stack.js';

const NS = 'team-lag';
const IP = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/inferencepolicies`;
const CM = `/api/v1/namespaces/${NS}/configmaps`;
/** How far the controller's InferencePolicy watch runs behind the apiserver (its ConfigMap watch does not). */
const LAG_MS = 1000;
const POLICIES = 40;
const CONCURRENCY = 128;

/**
 * Holds a lagging watch's events back on demand: while `paused`, an event passes only on a credit
 * (bookmarks pass freely), so a test decides exactly which of them the controller has seen.
 */
class Valve {
  paused = false;
  credits = 0;
  /** Events (not bookmarks) due but held; the valve holds none but the first in line of each stream. */
  held = 0;
  private wakers: Array<() => void> = [];

  /** Let `n` more events through while paused. */
  allow(n: number): void {
    this.credits += n;
    this.kick();
  }

  open(): void {
    this.paused = false;
    this.kick();
  }

  /** Resolves when an event may pass (at once for a bookmark or the end of the stream). */
  async pass(free: boolean): Promise<void> {
    if (free) return;
    this.held++;
    while (this.paused && this.credits === 0) await new Promise<void>((r) => this.wakers.push(r));
    this.held--;
    if (this.paused) this.credits--;
  }

  private kick(): void {
    for (const w of this.wakers.splice(0)) w();
  }
}

/** The events of a batched watch, one by one. */
async function* flatten<T>(b: AsyncGenerator<T[], void, undefined>): AsyncGenerator<T, void, undefined> {
  for await (const batch of b) yield* batch;
}

/** A watch of single events as batches of one. */
async function* oneEach<T>(g: AsyncGenerator<T, void, undefined>): AsyncGenerator<T[], void, undefined> {
  for await (const e of g) yield [e];
}

/**
 * The events of `inner`, each handed on `lagMs` after it arrived and once `valve` lets it, in
 * order: a watch that runs behind, as the controller's InferencePolicy watch did behind its
 * ConfigMap watch under load.
 */
function lagging<T extends { type: string }>(
  inner: AsyncGenerator<T, void, undefined>,
  lagMs: number,
  valve: Valve,
): AsyncGenerator<T, void, undefined> {
  type Entry = { at: number } & ({ item: T } | { end: true } | { err: unknown });
  const queue: Entry[] = [];
  let wake: (() => void) | undefined;
  const push = (e: Entry): void => {
    queue.push(e);
    wake?.();
  };
  void (async () => {
    try {
      for await (const item of inner) push({ at: Date.now() + lagMs, item });
      push({ at: Date.now() + lagMs, end: true });
    } catch (err) {
      push({ at: Date.now() + lagMs, err });
    }
  })();
  return (async function* () {
    try {
      for (;;) {
        while (queue.length === 0) await new Promise<void>((r) => (wake = r));
        const e = queue.shift() as Entry;
        const wait = e.at - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await valve.pass(!('item' in e) || e.item.type === 'BOOKMARK');
        if ('err' in e) throw e.err;
        if ('end' in e) return;
        yield e.item;
      }
    } finally {
      void inner.return(undefined).catch(() => undefined);
    }
  })();
}

/**
 * Read-your-writes: a reconcile triggered by the ConfigMap it just wrote, while the policy's own
 * watch has not yet delivered the finalizer and status the same reconcile wrote, must not act on
 * the older cached copy. Before the fix it sent the finalizer patch again with that copy's
 * resourceVersion and met a 409 on every retry until the watch caught up (the 128-worker cold start
 * stalled in tens of thousands of them).
 */
describe('controller whose policy watch lags behind its own writes', () => {
  let ts: TestServer;
  let stack: ControllerStack;
  const metrics = new RuntimeMetrics();
  /** Every finalizer patch the controller sent, by policy name, and every 409 it got. */
  const finalizerPatches = new Map<string, number>();
  const conflicts: string[] = [];
  const valve = new Valve();

  before(async () => {
    stack = await startControllerStack({
      namespace: NS,
      // Liveness is not the subject here: 128 workers on a loaded machine can hold the event loop past a
      // 500 ms PING answer, and the reconnect that follows (ConnectionLostError) is a repair this test
      // does not measure. PING and the idle deadline are kept but slack.
      config: fastWatchConfig({ pingMs: 5000, idleMs: 30_000 }),
      metrics,
      concurrency: CONCURRENCY,
      instrument: (c: KubeClient) => {
        // The watcher reads batches (`watchBatches`, which `watch` is built on too): the lag and the
        // valve go there, one event per batch, so that every path to the InferencePolicy watch runs behind.
        // Without `watchEach` (the callback read the watcher prefers) the watcher reads `watchBatches`.
        Object.defineProperty(c, 'watchEach', { value: undefined });
        const batches = c.watchBatches.bind(c);
        c.watchBatches = <T extends KubeObject = KubeObject>(
          ref: ResourceRef,
          p: WatchParams,
        ): AsyncGenerator<WatchEvent<T>[], void, undefined> =>
          ref.resource === 'inferencepolicies' ? oneEach(lagging(flatten(batches<T>(ref, p)), LAG_MS, valve)) : batches<T>(ref, p);
        const patch = c.patch.bind(c);
        c.patch = async <T extends KubeObject = KubeObject>(...args: Parameters<KubeClient['patch']>): Promise<T> => {
          const [ref, , name, body] = args;
          if (ref.resource === 'inferencepolicies' && JSON.stringify(body).includes('"finalizers"'))
            finalizerPatches.set(name, (finalizerPatches.get(name) ?? 0) + 1);
          try {
            return await patch<T>(...args);
          } catch (err) {
            if (err instanceof ApiError && err.code === 409) conflicts.push(`${ref.resource}/${name}: ${err.message}`);
            throw err;
          }
        };
      },
    });
    ({ ts } = stack);
  });
  after(() => stack.close());

  /** Reconciles of InferencePolicies finished so far, whatever their result. */
  const reconciles = async (): Promise<number> => {
    const text = await metrics.registry.metrics();
    return [...text.matchAll(/kars_controller_reconcile_total\{controller="inferencepolicy",result="\w+"\} (\d+)/g)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
  };
  const reconcileErrors = async (): Promise<number> => {
    const text = await metrics.registry.metrics();
    return Number(text.match(/kars_controller_reconcile_total\{controller="inferencepolicy",result="error"\} (\d+)/)?.[1] ?? 'NaN');
  };

  it(`${POLICIES} policies at ${CONCURRENCY} workers converge without a single 409, each finalizer patched once`, async () => {
    const names = Array.from({ length: POLICIES }, (_, i) => `p-${i}`);
    await Promise.all(
      names.map(async (name, i) => {
        const r = await ts.client.post(IP, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'InferencePolicy',
          metadata: { name },
          spec: { appliesTo: { sandboxName: `sb-${i}` }, tokenBudget: { dailyTokens: 1000 + i } },
        });
        assert.equal(r.status, 201, r.text);
      }),
    );
    await until(
      `all ${POLICIES} policies compiled (finalizer, ConfigMap, status)`,
      async () => {
        const list = (await ts.client.get(IP)).body.items as Array<KubeObject & { status?: Record<string, unknown> }>;
        const cms = new Set(((await ts.client.get(CM)).body.items as KubeObject[]).map((c) => c.metadata.name));
        return (
          list.length === POLICIES &&
          list.every(
            (p) =>
              p.metadata.finalizers?.includes(INFERENCE_POLICY_KIND.finalizer) &&
              p.status?.['observedGeneration'] === p.metadata.generation &&
              typeof p.status?.['compiledDigest'] === 'string' &&
              cms.has(INFERENCE_POLICY_KIND.configMap.name(p.metadata.name ?? '')),
          )
        );
      },
      30_000,
    );
    // Let the watch deliver the writes and every follow-up reconcile (ConfigMap echoes, status echoes) run.
    await new Promise((r) => setTimeout(r, 3 * LAG_MS));
    assert.deepEqual(conflicts, [], 'no write met a 409');
    assert.equal(await reconcileErrors(), 0, 'no reconcile failed');
    const repeated = names.filter((n) => finalizerPatches.get(n) !== 1).map((n) => `${n}: ${finalizerPatches.get(n) ?? 0}`);
    assert.deepEqual(repeated, [], 'each policy got exactly one finalizer patch');
  });

  /**
   * Create `name` and edit it at once, let the controller see only the create (a genuine 409 on
   * its finalizer patch), then trigger another reconcile through a sandbox while the edit is held.
   */
  const conflictWithSomeoneElse = async (name: string): Promise<void> => {
    const r = await ts.client.post(IP, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'InferencePolicy',
      metadata: { name },
      spec: { appliesTo: { sandboxName: 'sb-ext' }, tokenBudget: { dailyTokens: 7 } },
    });
    assert.equal(r.status, 201, r.text);
    assert.equal((await ts.client.patch(`${IP}/${name}`, { metadata: { labels: { team: 'x' } } }, 'merge')).status, 200);
    await until('the create held', () => valve.held >= 1, 10_000);
    valve.allow(1);
    await until('the genuine 409', () => conflicts.length > 0, 10_000);
    // Another watch (sandboxes, not held) enqueues the policy again while its cached copy is still
    // the one the 409 proved outdated: that reconcile must not patch from it again.
    const before = await reconciles();
    const sb = await ts.client.post(`/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name: 'sb-ext' },
      spec: { inferenceRef: { name } },
    });
    assert.equal(sb.status, 201, sb.text);
    await until('the sandbox-triggered reconcile ran', async () => (await reconciles()) > before, 10_000);
    assert.equal(conflicts.length, 1, `no second patch from the outdated copy: ${JSON.stringify(conflicts)}`);
  };

  it('a 409 from a write by someone else waits for the watch: one conflict, no failed reconcile, then converges', async () => {
    const name = 'p-ext';
    // The controller sees the create, but not yet the edit someone else makes right after it, so its
    // finalizer patch (made from the created version) meets a genuine 409.
    valve.paused = true;
    try {
      await conflictWithSomeoneElse(name);
    } finally {
      valve.open();
    }
    await until(
      `${name} compiled`,
      async () => {
        const p = (await ts.client.get(`${IP}/${name}`)).body;
        return p.metadata.finalizers?.includes(INFERENCE_POLICY_KIND.finalizer) && p.status?.observedGeneration === p.metadata.generation;
      },
      30_000,
    );
    await new Promise((res) => setTimeout(res, 2 * LAG_MS));
    assert.equal(conflicts.length, 1, `exactly the one genuine conflict: ${JSON.stringify(conflicts)}`);
    assert.match(conflicts[0] ?? '', /p-ext/);
    assert.equal(finalizerPatches.get(name), 2, 'the patch that met the 409, then one from the newer copy');
    assert.equal(await reconcileErrors(), 0, 'a conflict is not a failed reconcile');
  });

  it('deleted policies are still finalized (ConfigMap removed, object gone) without a 409', async () => {
    const names = Array.from({ length: POLICIES / 2 }, (_, i) => `p-${i}`);
    const conflictsBefore = conflicts.length;
    const errorsBefore = await reconcileErrors();
    await Promise.all(names.map(async (name) => assert.equal((await ts.client.delete(`${IP}/${name}`)).status, 200)));
    await until(
      'deleted policies and their ConfigMaps gone',
      async () => {
        const left = new Set(((await ts.client.get(IP)).body.items as KubeObject[]).map((p) => p.metadata.name));
        const cms = new Set(((await ts.client.get(CM)).body.items as KubeObject[]).map((c) => c.metadata.name));
        return (
          names.every((n) => !left.has(n) && !cms.has(INFERENCE_POLICY_KIND.configMap.name(n))) && left.size === POLICIES + 1 - names.length
        );
      },
      30_000,
    );
    await new Promise((r) => setTimeout(r, 2 * LAG_MS));
    assert.deepEqual(conflicts.slice(conflictsBefore), [], 'no write met a 409');
    assert.equal(await reconcileErrors(), errorsBefore, 'no reconcile failed');
  });
});
