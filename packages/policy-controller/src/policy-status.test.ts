import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { RouterEcho } from '@kars/policy-api';
import { REQUEUE, decidePolicyStatus, enforcementOf, isReadyState } from './policy-status.js';
import type { CompileOutcome, PolicyStatusInput } from './policy-status.js';

const NOW = Date.parse('2026-12-02T06:00:00Z');
const D1 = `sha256:${'1'.repeat(64)}`;
const D2 = `sha256:${'2'.repeat(64)}`;

const router = (digest: string | null, renewedAgoMs = 1000, o: Partial<RouterEcho> = {}): RouterEcho => ({
  sandbox: 'sb',
  instance: 'r1',
  digests: { InferencePolicy: digest },
  errors: {},
  renewedAtMs: NOW - renewedAgoMs,
  leaseDurationSeconds: 30,
  ...o,
});
const compiled = (routers: RouterEcho[], digest = D2): CompileOutcome => ({
  ok: true,
  digest,
  expect: [{ kind: 'InferencePolicy', digest }],
  extra: { versionHash: 'v' },
  echoes: [{ sandbox: 'sb', routers }],
});
const input = (outcome: CompileOutcome, o: Partial<PolicyStatusInput> = {}): PolicyStatusInput => ({
  prev: { compiledDigest: D1, loadedDigest: D1, lastCompiledAt: '2026-12-01T00:00:00Z', propagation: { lastMs: 10, maxMs: 900 } },
  generation: 2,
  nowMs: NOW,
  outcome,
  state: enforcementOf(outcome, NOW),
  compileMs: undefined,
  enforcedMs: undefined,
  noReferrersRequeueMs: 300_000,
  ...o,
});

describe('decidePolicyStatus', () => {
  it('an invalid spec: Degraded, loadedDigest null, the last good compiledDigest kept, requeued in a minute', () => {
    const outcome: CompileOutcome = { ok: false, reason: 'InvalidSpec', message: 'spec.tokenBudget: bad' };
    const i = input(outcome);
    assert.deepEqual(i.state, { kind: 'Degraded', reason: 'InvalidSpec', message: 'spec.tokenBudget: bad' });
    const d = decidePolicyStatus(i);
    assert.equal(d.status.loadedDigest, null);
    assert.equal(d.status.compiledDigest, D1);
    assert.equal(d.status.observedGeneration, 2);
    assert.equal(d.requeueMs, REQUEUE.degraded);
  });

  it('every router echoes the new digest: Confirmed, loadedDigest = compiledDigest, lastCompiledAt moved, propagation recorded', () => {
    const i = input(compiled([router(D2)]), { compileMs: 4, enforcedMs: 120 });
    assert.equal(i.state.kind, 'Confirmed');
    const d = decidePolicyStatus(i);
    assert.equal(d.status.compiledDigest, D2);
    assert.equal(d.status.loadedDigest, D2);
    assert.equal(d.status.lastCompiledAt, '2026-12-02T06:00:00Z');
    assert.equal(d.status['versionHash'], 'v');
    assert.deepEqual(d.status.propagation, { lastMs: 120, maxMs: 900, lastCompileMs: 4 });
    // Brought forward to just after the router lease expires (29 s from now).
    assert.equal(d.requeueMs, 29_050);
  });

  it('a router still on the old digest: Awaiting, loadedDigest null, no propagation figure, requeued in 15 s', () => {
    const i = input(compiled([router(D1)]), { enforcedMs: 50 });
    assert.equal(i.state.kind, 'Awaiting');
    const d = decidePolicyStatus(i);
    assert.equal(d.status.loadedDigest, null);
    assert.deepEqual(d.status.propagation, { lastMs: 10, maxMs: 900 });
    assert.equal(d.requeueMs, REQUEUE.awaiting);
  });

  it('an unchanged digest keeps lastCompiledAt; absent and null digests are the same', () => {
    const same = decidePolicyStatus(input(compiled([router(D1)], D1)));
    assert.equal(same.status.lastCompiledAt, '2026-12-01T00:00:00Z');
    const none: CompileOutcome = { ok: true, digest: undefined, expect: [], extra: {}, echoes: [] };
    const d = decidePolicyStatus(input(none, { prev: { compiledDigest: null, lastCompiledAt: '2026-12-01T00:00:00Z' } }));
    assert.equal(d.status.lastCompiledAt, '2026-12-01T00:00:00Z');
    assert.equal(d.status.compiledDigest, null);
    assert.equal(enforcementOf(none, NOW).kind, 'NotApplicable');
  });

  it("no referencing sandbox: the kind's own requeue period", () => {
    const o: CompileOutcome = { ok: true, digest: D2, expect: [{ kind: 'InferencePolicy', digest: D2 }], extra: {}, echoes: [] };
    const i = input(o, { noReferrersRequeueMs: 15_000 });
    assert.equal(i.state.kind, 'NoSandboxesReferencing');
    assert.equal(decidePolicyStatus(i).requeueMs, 15_000);
  });

  it('Ready means enforced, and the status never claims more (property)', () => {
    const digest = fc.constantFrom(D1, D2, null);
    const echo = fc.record({ digest, agoMs: fc.integer({ min: 0, max: 60_000 }), rejected: fc.boolean() });
    fc.assert(
      fc.property(fc.array(echo, { maxLength: 4 }), fc.integer({ min: 0, max: 5000 }), (echoes, maxMs) => {
        // A router that refused D2 keeps what it had loaded before (never D2).
        const routers = echoes.map((e, n) =>
          router(e.rejected && e.digest === D2 ? D1 : e.digest, e.agoMs, {
            instance: `r${n}`,
            ...(e.rejected ? { rejected: { InferencePolicy: D2 }, errors: { InferencePolicy: 'no' } } : {}),
          }),
        );
        const i = input(compiled(routers), { enforcedMs: 7, prev: { compiledDigest: D1, propagation: { maxMs } } });
        const d = decidePolicyStatus(i);
        const live = routers.filter((r) => r.renewedAtMs + 30_000 > NOW);
        const allEcho = live.length > 0 && live.every((r) => r.digests.InferencePolicy === D2 && r.rejected === undefined);
        assert.equal(d.status.loadedDigest === D2, allEcho, JSON.stringify({ state: i.state, routers }));
        assert.equal(isReadyState(i.state), allEcho);
        assert.ok((d.status.propagation?.maxMs ?? 0) >= maxMs, 'maxMs never decreases');
        assert.ok(d.requeueMs >= 50 && d.requeueMs <= REQUEUE.confirmed);
      }),
    );
  });
});
