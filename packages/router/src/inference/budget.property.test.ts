/**
 * Property (issue 9 item 8): concurrent spend never exceeds the budget by more than one request.
 *
 * Model: any interleaving of requests that reserve their maximum and later settle at most that
 * maximum (the route reserves prompt estimate + n × max_tokens and the upstream cannot produce
 * more completion tokens than max_tokens). Invariant: at every step, and in particular once all
 * have settled, `used <= cap + max reservation`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FakeClock } from '@kars/kube-core';
import { TokenBudgetTracker, type Reservation } from './budget.js';

type Op = { kind: 'reserve'; amount: number } | { kind: 'settle'; pick: number; fraction: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('reserve' as const), amount: fc.integer({ min: 0, max: 500 }) }),
  fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }),
);

describe('TokenBudgetTracker reserve/settle (property)', () => {
  it('concurrent spend never exceeds the budget by more than one request', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2000 }), fc.boolean(), fc.array(op, { maxLength: 300 }), (cap, daily, ops) => {
        const t = new TokenBudgetTracker({ clock: new FakeClock(0, Date.parse('2026-01-10T12:00:00Z')) });
        const caps = daily ? { dailyTokens: cap, monthlyTokens: null } : { dailyTokens: null, monthlyTokens: cap };
        const open: Reservation[] = [];
        let largest = 0;
        const check = (): void => {
          const u = t.usage('sb');
          const used = daily ? u.dailyUsed : u.monthlyUsed;
          assert.ok(
            used + u.reserved <= cap + largest,
            `used ${used} + reserved ${u.reserved} > cap ${cap} + largest reservation ${largest}`,
          );
        };
        for (const o of ops) {
          if (o.kind === 'reserve') {
            const r = t.reserve('sb', caps, o.amount);
            if (r.ok) {
              open.push(r.reservation);
              largest = Math.max(largest, o.amount);
            }
          } else if (open.length > 0) {
            const [r] = open.splice(o.pick % open.length, 1);
            r!.settle(Math.floor(r!.amount * o.fraction));
          }
          check();
        }
        for (const r of open.splice(0)) r.settle(r.amount);
        check();
        assert.equal(t.usage('sb').reserved, 0, 'every reservation was released');
      }),
      { numRuns: 500 },
    );
  });

  it('refuses everything at cap 0 and holds nothing for a refused request', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 100 }), { maxLength: 20 }), (amounts) => {
        const t = new TokenBudgetTracker();
        for (const a of amounts) assert.equal(t.reserve('sb', { dailyTokens: 0, monthlyTokens: null }, a).ok, false);
        assert.equal(t.usage('sb').reserved, 0);
      }),
    );
  });

  it('settling twice charges once', () => {
    const t = new TokenBudgetTracker();
    const r = t.reserve('sb', { dailyTokens: 100, monthlyTokens: null }, 50);
    assert.ok(r.ok);
    r.reservation.settle(20);
    r.reservation.settle(20);
    assert.equal(t.usage('sb').dailyUsed, 20);
    assert.equal(t.usage('sb').reserved, 0);
  });
});
