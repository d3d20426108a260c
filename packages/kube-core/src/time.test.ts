import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { kubeMicroTime, kubeTime } from './time.js';

describe('Kubernetes time formats', () => {
  it('Time is whole seconds, rounded down; MicroTime has six fractional digits', () => {
    const ms = Date.parse('2026-12-02T06:00:00.999Z');
    assert.equal(kubeTime(ms), '2026-12-02T06:00:00Z');
    assert.equal(kubeMicroTime(ms), '2026-12-02T06:00:00.999000Z');
    assert.equal(kubeMicroTime(Date.parse('2026-12-02T06:00:00Z')), '2026-12-02T06:00:00.000000Z');
  });
  it('both read back as the instant they were made from, to their precision (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), (ms) => {
        const t = kubeTime(ms);
        const m = kubeMicroTime(ms);
        assert.match(t, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
        assert.match(m, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}000Z$/);
        assert.equal(Date.parse(t), Math.floor(ms / 1000) * 1000);
        assert.equal(Date.parse(m), ms);
      }),
    );
  });
});
