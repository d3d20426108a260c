import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { FakeClock } from '@kars/kube-core';
import { PropagationTracker } from './propagation.js';

describe('propagation tracker', () => {
  it('measures edit → ConfigMap and edit → echo once per generation', async () => {
    const clock = new FakeClock(1000);
    const t = new PropagationTracker(new Registry(), clock);
    const v1 = { apiVersion: 'x/v1', kind: 'InferencePolicy', metadata: { uid: 'u1', generation: 1 } };
    t.observe(v1);
    clock.advance(12);
    assert.equal(t.compiled('InferencePolicy', v1), 12);
    assert.equal(t.compiled('InferencePolicy', v1), undefined, 'once per generation');
    clock.advance(38);
    assert.equal(t.enforced('InferencePolicy', v1), 50);
    assert.equal(t.enforced('InferencePolicy', v1), undefined);
    const v2 = { ...v1, metadata: { uid: 'u1', generation: 2 } };
    t.observe(v2);
    clock.advance(10);
    assert.equal(t.compiled('InferencePolicy', v2), 10, 'a new generation starts a new clock');
    const v3 = { ...v1, metadata: { uid: 'u1', generation: 3 } };
    t.observe(v3);
    clock.advance(0.6); // a monotonic clock has fractions; the status fields written from these are integers
    assert.equal(t.compiled('InferencePolicy', v3), 1);
  });

  it('keeps one entry per policy however many times it is edited, and none after deletion', () => {
    const t = new PropagationTracker(new Registry(), new FakeClock());
    for (let g = 1; g <= 5000; g++) t.observe({ apiVersion: 'x/v1', kind: 'InferencePolicy', metadata: { uid: 'same', generation: g } });
    assert.equal(t.trackedObjects(), 1);
    t.forget('InferencePolicy', 'ns/p', { apiVersion: 'x/v1', kind: 'InferencePolicy', metadata: { uid: 'same' } });
    assert.equal(t.trackedObjects(), 0);
  });
});
