/**
 * The echo ledger's load semantics (`echo-ledger.ts`): a load replaces, an error keeps the last good
 * digest and names what it refused, none clears; a profile kind's outcome sets each of its
 * descriptor's echo kinds.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EchoLedger, MAX_ERROR_LENGTH } from './echo-ledger.js';
import { INFERENCE_POLICY_KIND } from './kinds/inference-policy.js';
import { TOOL_POLICY_KIND } from './kinds/tool-policy.js';

describe('EchoLedger', () => {
  const loaded = (digest: string, warning?: string) =>
    ({ kind: 'loaded', value: {}, digest, source: 'src', ...(warning === undefined ? {} : { warning }) }) as const;
  const error = (message: string, rejectedDigest: string | null) =>
    ({ kind: 'error', error: message, source: 'src', rejectedDigest }) as const;

  it('a load replaces, an error keeps the last good digest and records the error and the refused digest, none clears', () => {
    let t = 1_000;
    const l = new EchoLedger(() => t);
    assert.equal(l.apply('InferencePolicy', loaded('sha256:a')), true);
    assert.deepEqual(l.echo(), { digests: { InferencePolicy: 'sha256:a' }, errors: {}, rejected: {} });
    t = 2_000;
    assert.equal(l.apply('InferencePolicy', error('tokenBudget.x: unknown field', 'sha256:b')), true);
    assert.deepEqual(l.echo(), {
      digests: { InferencePolicy: 'sha256:a' },
      errors: { InferencePolicy: 'tokenBudget.x: unknown field' },
      rejected: { InferencePolicy: 'sha256:b' },
    });
    assert.equal(l.apply('InferencePolicy', error('tokenBudget.x: unknown field', 'sha256:b')), false, 'the same refusal changes nothing');
    assert.equal(l.statusEntries()[0]?.loaded_at, '1970-01-01T00:00:01Z', 'the refusal keeps the time of the good load');
    assert.equal(l.apply('InferencePolicy', loaded('sha256:c')), true);
    assert.deepEqual(l.echo(), { digests: { InferencePolicy: 'sha256:c' }, errors: {}, rejected: {} });
    assert.equal(l.apply('InferencePolicy', { kind: 'none' }), true);
    assert.deepEqual(l.echo(), { digests: { InferencePolicy: null }, errors: {}, rejected: {} });
  });

  it('a reload of the same digest keeps its load time and reports no change; a warning is echoed as the error', () => {
    let t = 5_000;
    const l = new EchoLedger(() => t);
    l.apply('EgressApproval', loaded('sha256:e'));
    t = 9_000;
    assert.equal(l.apply('EgressApproval', loaded('sha256:e')), false);
    assert.equal(l.statusEntries()[0]?.loaded_at, '1970-01-01T00:00:05Z');
    assert.equal(l.apply('EgressApproval', loaded('sha256:e', 'approval-x.json: not JSON')), true);
    assert.deepEqual(l.echo().errors, { EgressApproval: 'approval-x.json: not JSON' });
  });

  it('truncates an error to the contract length', () => {
    const l = new EchoLedger(() => 0);
    l.apply('InferencePolicy', error('x'.repeat(MAX_ERROR_LENGTH * 2), null));
    assert.equal(l.echo().errors.InferencePolicy?.length, MAX_ERROR_LENGTH);
    assert.deepEqual(l.echo().rejected, {}, 'no refused digest when none is known');
  });

  it('a ToolPolicy outcome sets ToolPolicy and AgtProfile; a refusal refuses both', () => {
    const l = new EchoLedger(() => 0);
    l.applyProfile(TOOL_POLICY_KIND, {
      kind: 'loaded',
      value: { rules: {} as never, digests: { profile: 'sha256:p', agt: null } },
      digest: 'sha256:p',
      source: 's',
    });
    assert.deepEqual(l.echo().digests, { ToolPolicy: 'sha256:p', AgtProfile: null });
    l.applyProfile(TOOL_POLICY_KIND, {
      kind: 'error',
      error: 'commerce: no',
      source: 's',
      rejectedDigest: 'sha256:q',
      digests: { profile: 'sha256:q', agt: 'sha256:g' },
    });
    assert.deepEqual(l.echo(), {
      digests: { ToolPolicy: 'sha256:p', AgtProfile: null },
      errors: { ToolPolicy: 'commerce: no', AgtProfile: 'commerce: no' },
      rejected: { ToolPolicy: 'sha256:q', AgtProfile: 'sha256:g' },
    });
    assert.deepEqual(
      l.statusEntries().map((e) => e.kind),
      ['AgtProfile', 'ToolPolicy'],
      'status entries are sorted by kind',
    );
  });
});

describe('EchoLedger and the descriptors', () => {
  it("an InferencePolicy outcome sets exactly its descriptor's echo kinds", () => {
    const l = new EchoLedger(() => 0);
    l.applyProfile(INFERENCE_POLICY_KIND, { kind: 'loaded', value: {} as never, digest: 'sha256:i', source: 's' });
    assert.deepEqual(Object.keys(l.echo().digests), [...INFERENCE_POLICY_KIND.echoKinds]);
  });

  it("a ToolPolicy outcome sets exactly its descriptor's echo kinds, none clears them all", () => {
    const l = new EchoLedger(() => 0);
    l.applyProfile(TOOL_POLICY_KIND, {
      kind: 'loaded',
      value: { rules: {} as never, digests: { profile: 'sha256:p', agt: 'sha256:a' } },
      digest: 'sha256:p',
      source: 's',
    });
    assert.deepEqual(Object.keys(l.echo().digests).sort(), [...TOOL_POLICY_KIND.echoKinds].sort());
    assert.deepEqual(l.echo().digests, { AgtProfile: 'sha256:a', ToolPolicy: 'sha256:p' });
    l.applyProfile(TOOL_POLICY_KIND, { kind: 'none' });
    assert.deepEqual(l.echo().digests, { AgtProfile: null, ToolPolicy: null });
  });
});
