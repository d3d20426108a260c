import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RouterEcho } from '@kars/policy-api';
import {
  awaitingMessage,
  conditionsFor,
  decideEnforcement,
  decideEnforcementOf,
  phaseFor,
  shouldWarn,
  withTransitions,
} from './enforcement.js';

const NOW = 1_000_000;
const D = 'sha256:' + 'a'.repeat(64);
const OLD = 'sha256:' + 'b'.repeat(64);

function router(sandbox: string, digest: string | null | undefined, opts: { renewedAgoMs?: number; error?: string } = {}): RouterEcho {
  return {
    sandbox,
    instance: `${sandbox}-r`,
    digests: digest === undefined ? {} : { InferencePolicy: digest },
    errors: opts.error ? { InferencePolicy: opts.error } : {},
    renewedAtMs: NOW - (opts.renewedAgoMs ?? 1000),
    leaseDurationSeconds: 15,
  };
}

describe('enforcement decision', () => {
  it('is NoSandboxesReferencing with no referrers', () => {
    assert.deepEqual(decideEnforcement(D, 'InferencePolicy', [], NOW), { kind: 'NoSandboxesReferencing' });
  });

  it('is Confirmed only when every live router of every sandbox echoes the digest', () => {
    const s = decideEnforcement(
      D,
      'InferencePolicy',
      [
        { sandbox: 'a', routers: [router('a', D), router('a', D)] },
        { sandbox: 'b', routers: [router('b', D)] },
      ],
      NOW,
    );
    assert.deepEqual(s, { kind: 'Confirmed', total: 3 });
  });

  it('is Awaiting with a mismatch, a not-loaded router, an error, and a sandbox with no live router', () => {
    const s = decideEnforcement(
      D,
      'InferencePolicy',
      [
        { sandbox: 'a', routers: [router('a', D), router('a', OLD, { error: 'parse error' })] },
        { sandbox: 'b', routers: [router('b', undefined)] },
        { sandbox: 'c', routers: [router('c', D, { renewedAgoMs: 16_000 })] },
      ],
      NOW,
    );
    assert.equal(s.kind, 'Awaiting');
    if (s.kind !== 'Awaiting') return;
    assert.equal(s.confirmed, 1);
    assert.equal(s.total, 4);
    assert.match(s.details[0]!, /a: router echoed digest mismatch .* \(last_error: parse error\)/);
    assert.match(s.details[1]!, /b: router has not yet loaded InferencePolicy/);
    assert.match(s.details[2]!, /c: router unreachable/);
    assert.match(awaitingMessage(s), /^1\/4 sandbox routers confirmed digest; /);
  });

  it('stops counting a router whose lease was not renewed', () => {
    const stale = decideEnforcement(D, 'InferencePolicy', [{ sandbox: 'a', routers: [router('a', D, { renewedAgoMs: 15_001 })] }], NOW);
    assert.equal(stale.kind, 'Awaiting');
  });

  it('is Rejected, naming router, kind and error, when a live router refused exactly the compiled digest', () => {
    const refusing: RouterEcho = {
      ...router('a', OLD),
      rejected: { InferencePolicy: D },
      errors: { InferencePolicy: 'guardrails[0].provider: no backend' },
    };
    const s = decideEnforcement(D, 'InferencePolicy', [{ sandbox: 'a', routers: [refusing, router('a', D)] }], NOW);
    assert.deepEqual(s, {
      kind: 'Rejected',
      details: ['router a-r of sandbox a refused InferencePolicy ' + D + ': guardrails[0].provider: no backend'],
    });
  });

  it('is not Rejected by a refusal of an older digest: that router is merely behind', () => {
    const behind: RouterEcho = {
      ...router('a', OLD),
      rejected: { InferencePolicy: 'sha256:' + 'c'.repeat(64) },
      errors: { InferencePolicy: 'old refusal' },
    };
    assert.equal(decideEnforcement(D, 'InferencePolicy', [{ sandbox: 'a', routers: [behind] }], NOW).kind, 'Awaiting');
  });

  it('needs every expected kind echoed: a ToolPolicy with an AGT profile waits for both ToolPolicy and AgtProfile', () => {
    const P = 'sha256:' + 'd'.repeat(64);
    const both: RouterEcho = { ...router('a', undefined), digests: { ToolPolicy: P, AgtProfile: D } };
    const one: RouterEcho = { ...router('a', undefined), digests: { ToolPolicy: P } };
    const expect = [
      { kind: 'ToolPolicy' as const, digest: P },
      { kind: 'AgtProfile' as const, digest: D },
    ];
    assert.equal(decideEnforcementOf(expect, [{ sandbox: 'a', routers: [both] }], NOW).kind, 'Confirmed');
    assert.equal(decideEnforcementOf(expect, [{ sandbox: 'a', routers: [one] }], NOW).kind, 'Awaiting');
  });

  it('lists at most three details and counts the rest', () => {
    const routers = Array.from({ length: 5 }, (_, i) => router(`s${i}`, OLD));
    const s = decideEnforcement(
      D,
      'InferencePolicy',
      routers.map((r) => ({ sandbox: r.sandbox, routers: [r] })),
      NOW,
    );
    assert.equal(s.kind, 'Awaiting');
    if (s.kind === 'Awaiting') assert.match(awaitingMessage(s), /\(\+2 more\)$/);
  });
});

describe('condition truth table', () => {
  const table: Array<[Parameters<typeof conditionsFor>[0], [string, string][], string, boolean]> = [
    [
      { kind: 'Degraded', reason: 'InvalidSpec', message: 'spec.x: bad' },
      [
        ['False', 'InvalidSpec'],
        ['False', 'Failed'],
        ['True', 'InvalidSpec'],
      ],
      'Degraded',
      false,
    ],
    [
      { kind: 'NotApplicable' },
      [
        ['True', 'Reconciled'],
        ['False', 'Reconciled'],
        ['False', 'Reconciled'],
      ],
      'Ready',
      false,
    ],
    [
      { kind: 'Confirmed', total: 2 },
      [
        ['True', 'RouterEnforcing'],
        ['False', 'Reconciled'],
        ['False', 'Reconciled'],
      ],
      'Ready',
      false,
    ],
    [
      { kind: 'NoSandboxesReferencing' },
      [
        ['False', 'NoSandboxesReferencing'],
        ['True', 'NoSandboxesReferencing'],
        ['False', 'Reconciled'],
      ],
      'Compiled',
      false,
    ],
    [
      { kind: 'Awaiting', confirmed: 0, total: 1, details: [] },
      [
        ['False', 'AwaitingRouterEnforcement'],
        ['True', 'AwaitingRouterEnforcement'],
        ['False', 'Reconciled'],
      ],
      'Compiled',
      true,
    ],
    [
      { kind: 'Rejected', details: ['router r1 of sandbox sb refused InferencePolicy sha256:x: guardrails[0].provider: no backend'] },
      [
        ['False', 'RouterRejected'],
        ['False', 'RouterRejected'],
        ['True', 'RouterRejected'],
      ],
      'Degraded',
      false,
    ],
  ];
  for (const [state, expected, phase, warn] of table) {
    it(`maps ${state.kind} to Ready/Progressing/Degraded = ${expected.map((e) => e.join(':')).join(', ')}`, () => {
      const conds = conditionsFor(state);
      assert.deepEqual(
        conds.map((c) => c.type),
        ['Ready', 'Progressing', 'Degraded'],
      );
      assert.deepEqual(
        conds.map((c) => [c.status, c.reason]),
        expected,
      );
      assert.equal(phaseFor(state), phase);
      assert.equal(shouldWarn(state), warn);
    });
  }

  it('keeps lastTransitionTime unless the status flips, and stamps observedGeneration', () => {
    const first = withTransitions(conditionsFor({ kind: 'NoSandboxesReferencing' }), undefined, 1, 'T1');
    const second = withTransitions(conditionsFor({ kind: 'Awaiting', confirmed: 0, total: 1, details: [] }), first, 2, 'T2');
    assert.equal(second.find((c) => c.type === 'Ready')!.lastTransitionTime, 'T1', 'Ready stayed False');
    assert.equal(second.find((c) => c.type === 'Progressing')!.lastTransitionTime, 'T1', 'Progressing stayed True');
    const third = withTransitions(conditionsFor({ kind: 'Confirmed', total: 1 }), second, 2, 'T3');
    assert.equal(third.find((c) => c.type === 'Ready')!.lastTransitionTime, 'T3', 'Ready flipped');
    assert.ok(third.every((c) => c.observedGeneration === 2));
  });
});

describe('enforcement decision: DryRun policies (ADR 0050)', () => {
  const slot = 'InferencePolicy/trial';
  const expect = [{ kind: 'InferencePolicy' as const, digest: D, dryRunSlot: slot }];
  const withSlot = (digests: Record<string, string | null>, extra: Partial<NonNullable<RouterEcho['dryRun']>> = {}): RouterEcho => ({
    ...router('a', OLD),
    dryRun: { digests, errors: {}, rejected: {}, ...extra },
  });

  it('is Confirmed as recorded (RouterRecording) only from the dry-run slot, never from the enforced kind', () => {
    // The router enforces the same bytes under the kind, but has not recorded the DryRun policy: not confirmed.
    const enforcedOnly = decideEnforcementOf(expect, [{ sandbox: 'a', routers: [router('a', D)] }], NOW);
    assert.equal(enforcedOnly.kind, 'Awaiting');
    assert.match(
      awaitingMessage(enforcedOnly as Extract<typeof enforcedOnly, { kind: 'Awaiting' }>),
      /has not yet loaded DryRun InferencePolicy\/trial/,
    );
    const recorded = decideEnforcementOf(expect, [{ sandbox: 'a', routers: [withSlot({ [slot]: D })] }], NOW);
    assert.deepEqual(recorded, { kind: 'Confirmed', total: 1, dryRun: true });
    const ready = conditionsFor(recorded)[0];
    assert.equal(ready?.reason, 'RouterRecording');
    assert.match(ready?.message ?? '', /DryRun: recorded, not enforced/);
    assert.equal(conditionsFor({ kind: 'Confirmed', total: 1 })[0]?.reason, 'RouterEnforcing');
  });

  it('is Rejected when the router refused exactly that digest in the slot, and says which slot', () => {
    const s = decideEnforcementOf(
      expect,
      [{ sandbox: 'a', routers: [withSlot({ [slot]: null }, { errors: { [slot]: 'no backend' }, rejected: { [slot]: D } })] }],
      NOW,
    );
    assert.equal(s.kind, 'Rejected');
    assert.match(s.kind === 'Rejected' ? (s.details[0] ?? '') : '', /refused DryRun InferencePolicy\/trial .*no backend/);
  });

  it('names the selector, not a reference, when no sandbox is selected', () => {
    const s = decideEnforcementOf(expect, [], NOW);
    assert.deepEqual(s, { kind: 'NoSandboxesReferencing', dryRun: true });
    assert.equal(conditionsFor(s)[0]?.message, 'appliesTo selects no sandbox (DryRun)');
  });
});
