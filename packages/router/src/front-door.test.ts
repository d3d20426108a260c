/**
 * The front door's decision (front-door.ts), as a property over every input: the order of the
 * contract's refusals, each surface refused only for its own policy, and the staleness bound
 * exact at its edge. The same door through a real router, over HTTP: `staleness.test.ts` and
 * `router.test.ts`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decideAtDoor, type DoorInput } from './front-door.js';
import { EMPTY_SNAPSHOT, type PolicySnapshot } from './snapshot.js';

const refusedArb = fc.record(
  {
    inference: fc.constantFrom('guardrails[0].provider: no backend', 'tokenBudget: bad'),
    tools: fc.constant('appliesTo.mcpServer: unknown'),
  },
  { requiredKeys: [] },
);
const input: fc.Arbitrary<DoorInput> = fc.record({
  loaded: fc.boolean(),
  snapshot: refusedArb.map((refused): PolicySnapshot => ({ ...EMPTY_SNAPSHOT, refused })),
  mcp: fc.boolean(),
  viewAgeMs: fc.oneof(fc.nat(20_000), fc.constant(Infinity)).map((ms) => () => ms),
  maxStalenessMs: fc.option(fc.nat(20_000), { nil: undefined }),
  onStale: fc.constantFrom('closed' as const, 'open' as const),
});

const codeOf = (d: ReturnType<typeof decideAtDoor>): string | undefined =>
  d.kind === 'refuse' ? (d.refusal.body.error.code ?? d.refusal.body.error.type) : undefined;

describe('the front door (property)', () => {
  it('refuses in the contract’s order, per surface, and holds the staleness bound exactly', () => {
    fc.assert(
      fc.property(input, (i) => {
        const d = decideAtDoor(i);
        const own = i.mcp ? i.snapshot.refused.tools : i.snapshot.refused.inference;
        const age = i.viewAgeMs();
        const overBound = i.maxStalenessMs !== undefined && age > i.maxStalenessMs;
        if (!i.loaded) return assert.equal(codeOf(d), 'policy_not_loaded');
        if (own !== undefined) {
          const want = !i.mcp && own.startsWith('guardrails[') ? 'guardrail_misconfigured' : 'policy_rejected';
          assert.equal(codeOf(d), want);
          assert.equal(d.kind === 'refuse' ? d.refusal.status : 0, 503);
          assert.match(d.kind === 'refuse' ? d.refusal.body.error.message : '', new RegExp(own.replace(/[[\].]/g, '\\$&')));
          return;
        }
        if (overBound && i.onStale === 'closed') {
          assert.equal(codeOf(d), 'policy_stale');
          assert.deepEqual(d.stale, { mode: 'closed', ageMs: age });
          return;
        }
        assert.equal(d.kind, 'pass', JSON.stringify(d));
        assert.deepEqual(d.stale, overBound ? { mode: 'open', ageMs: age } : undefined);
      }),
      { numRuns: 1000 },
    );
  });

  it('at exactly the bound the view is fresh; one millisecond over, stale', () => {
    const base: DoorInput = {
      loaded: true,
      snapshot: EMPTY_SNAPSHOT,
      mcp: false,
      viewAgeMs: () => 5000,
      maxStalenessMs: 5000,
      onStale: 'closed',
    };
    assert.deepEqual(decideAtDoor(base), { kind: 'pass' });
    assert.equal(codeOf(decideAtDoor({ ...base, viewAgeMs: () => 5001 })), 'policy_stale');
    assert.equal(
      codeOf(decideAtDoor({ ...base, viewAgeMs: () => Infinity, maxStalenessMs: undefined })),
      undefined,
      'no bound: never stale',
    );
  });

  it('without a bound the view age is never read', () => {
    const d = decideAtDoor({
      loaded: true,
      snapshot: EMPTY_SNAPSHOT,
      mcp: false,
      viewAgeMs: () => assert.fail('read the view age with no --max-staleness'),
      maxStalenessMs: undefined,
      onStale: 'closed',
    });
    assert.deepEqual(d, { kind: 'pass' });
  });

  it('a refused ToolPolicy does not close the inference surface, nor the reverse', () => {
    const tools = { ...EMPTY_SNAPSHOT, refused: { tools: 'x' } };
    const base: DoorInput = { loaded: true, snapshot: tools, mcp: false, viewAgeMs: () => 0, maxStalenessMs: undefined, onStale: 'closed' };
    assert.equal(decideAtDoor(base).kind, 'pass');
    assert.equal(codeOf(decideAtDoor({ ...base, mcp: true })), 'policy_rejected');
    assert.equal(decideAtDoor({ ...base, snapshot: { ...EMPTY_SNAPSHOT, refused: { inference: 'y' } }, mcp: true }).kind, 'pass');
  });
});
