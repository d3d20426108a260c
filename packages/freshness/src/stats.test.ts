import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatReport } from './format.js';
import { report } from './probe.js';
import type { EditResult } from './probe.js';
import { percentile, summarize } from './stats.js';

describe('probe statistics', () => {
  it('uses nearest-rank percentiles: p50 of 1..20 is 10, p99 is 20', () => {
    const xs = Array.from({ length: 20 }, (_, i) => i + 1);
    assert.equal(percentile(xs, 50), 10);
    assert.equal(percentile(xs, 99), 20);
    assert.equal(percentile([], 50), null);
  });

  it('skips missing measurements and keeps p50 ≤ p99 ≤ max, all taken from the data', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.constant(null)), { maxLength: 200 }), (values) => {
        const s = summarize(values);
        const xs = values.filter((v): v is number => v !== null);
        assert.equal(s.count, xs.length);
        if (xs.length === 0) return assert.deepEqual([s.p50, s.p99, s.max], [null, null, null]);
        assert.ok((s.p50 ?? NaN) <= (s.p99 ?? NaN) && (s.p99 ?? NaN) <= (s.max ?? NaN));
        assert.equal(s.max, Math.max(...xs));
        assert.ok(xs.includes(s.p50 as number) && xs.includes(s.p99 as number));
      }),
    );
  });

  it('fails the report when an edit is slower than the SLO or was never echoed', () => {
    const edit = (n: number, echo: number | null): EditResult => ({
      edit: n,
      generation: n + 1,
      observedGeneration: n + 1,
      compiledDigest: 'sha256:' + 'a'.repeat(64),
      configMapResourceVersion: '7',
      toConfigMapMs: 5,
      toEchoMs: echo,
      toReadyMs: echo === null ? null : echo + 1,
      routers: 1,
    });
    const s = { sandbox: 'kars-probe', policy: 'kars-probe-x' };
    assert.equal(report(s, 'default', [edit(1, 10), edit(2, 99)], 100).pass, true);
    const slow = report(s, 'default', [edit(1, 10), edit(2, 101)], 100);
    assert.equal(slow.pass, false);
    assert.equal(slow.breaches, 1);
    const lost = report(s, 'default', [edit(1, null)], 100);
    assert.equal(lost.pass, false);
    assert.match(formatReport(lost), /^FAIL: 0\/1 edits/m);
    assert.equal(report(s, 'default', [], 100).pass, false, 'no edit is no evidence');
  });
});
