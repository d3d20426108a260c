/**
 * Dry-run policies in the router view (ADR 0050): how they reach a sandbox, how a referenced one is
 * refused, how the ledger echoes them, and (a property) that no set of dry-run policies changes
 * what a router enforces.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { InferencePolicySpec, KarsSandbox, ToolPolicySpec } from '@kars/policy-api';
import { compileInferencePolicy, INFERENCE_POLICY_FILENAME } from './kinds/inference-policy.js';
import { compileToolPolicy } from './kinds/tool-policy.js';
import type { RouterCapabilities } from './router-view.js';
import { EchoLedger } from './echo-ledger.js';
import { routerView } from './view.js';
import { POLICY_GENERATION_ANNOTATION, policyGenerationOf } from './configmaps.js';

const CAPS: RouterCapabilities = { mcpServers: ['github'], guardrailProviders: [] };
const NOW = Date.parse('2026-03-01T00:00:00Z');

function inferenceCm(name: string, spec: InferencePolicySpec): [string, Record<string, string>] {
  const c = compileInferencePolicy({ metadata: { name, namespace: 'n' }, spec });
  assert.ok(c.ok, c.ok ? '' : c.message);
  return [c.configMap.metadata.name, c.configMap.data];
}

function toolCm(name: string, spec: ToolPolicySpec): [string, Record<string, string>] {
  const c = compileToolPolicy({ metadata: { name, namespace: 'n' }, spec });
  assert.ok(c.ok, c.ok ? '' : c.message);
  return [c.configMap.metadata.name, c.configMap.data];
}

function sandbox(labels: Record<string, string> = { team: 'a' }): KarsSandbox {
  return {
    apiVersion: 'kars.azure.com/v1alpha1',
    kind: 'KarsSandbox',
    metadata: { name: 'sb', namespace: 'n', labels },
    spec: { inferenceRef: { name: 'enforced' }, governance: { enabled: true, toolPolicyRef: { name: 'tools' } } },
  } as KarsSandbox;
}

function view(cms: ReadonlyArray<[string, Record<string, string>]>, sb = sandbox(), listed = true) {
  const data = new Map(cms);
  return routerView(sb, (n) => data.get(n), { nowMs: NOW, capabilities: CAPS, ...(listed ? { list: () => data.keys() } : {}) });
}

const ENFORCED = inferenceCm('enforced', { appliesTo: {}, tokenBudget: { dailyTokens: 1000 } });
const TOOLS = toolCm('tools', { appliesTo: { tool: '*' }, rateLimit: { rps: 5 } });

describe('dry-run policies: compiled form', () => {
  it('writes enforcement only for DryRun: Enforce and absent compile to the same bytes and digest', () => {
    const spec: InferencePolicySpec = { appliesTo: { sandboxName: 'sb' }, tokenBudget: { dailyTokens: 5 } };
    const a = compileInferencePolicy({ metadata: { name: 'p' }, spec });
    const b = compileInferencePolicy({ metadata: { name: 'p' }, spec: { ...spec, enforcement: 'Enforce' } });
    const d = compileInferencePolicy({ metadata: { name: 'p' }, spec: { ...spec, enforcement: 'DryRun' } });
    assert.ok(a.ok && b.ok && d.ok);
    assert.equal(a.body, b.body);
    assert.equal(a.compiledDigest, b.compiledDigest);
    assert.ok(d.body.endsWith(',"enforcement":"DryRun"}'), d.body);
    assert.notEqual(d.compiledDigest, a.compiledDigest);
    const t = compileToolPolicy({ metadata: { name: 't' }, spec: { appliesTo: { tool: '*' }, enforcement: 'DryRun' } });
    assert.ok(t.ok);
    assert.equal((JSON.parse(t.profileJson) as Record<string, unknown>)['enforcement'], 'DryRun');
  });

  it('refuses any other spelling instead of compiling it as enforced', () => {
    for (const bad of ['dryrun', 'DRYRUN', 'Dry-Run', '', 'Audit', 1, null]) {
      const c = compileInferencePolicy({
        metadata: { name: 'p' },
        spec: { appliesTo: {}, enforcement: bad as never } as InferencePolicySpec,
      });
      assert.equal(c.ok, false, String(bad));
      assert.equal(c.ok ? '' : c.field, 'spec.enforcement');
      const t = compileToolPolicy({ metadata: { name: 't' }, spec: { appliesTo: { tool: '*' }, enforcement: bad as never } });
      assert.equal(t.ok, false, String(bad));
    }
  });

  it('stamps the policy generation on the ConfigMap, outside the digest', () => {
    const a = compileInferencePolicy({ metadata: { name: 'p', generation: 7 }, spec: { appliesTo: {} } });
    const b = compileInferencePolicy({ metadata: { name: 'p', generation: 8 }, spec: { appliesTo: {} } });
    assert.ok(a.ok && b.ok);
    assert.equal(a.compiledDigest, b.compiledDigest);
    assert.equal(a.configMap.metadata.annotations[POLICY_GENERATION_ANNOTATION], '7');
    assert.equal(policyGenerationOf(a.configMap), 7);
    for (const bad of ['0', '-1', '1.5', 'x', '', '99999999999999999999'])
      assert.equal(policyGenerationOf({ metadata: { annotations: { [POLICY_GENERATION_ANNOTATION]: bad } } }), undefined, bad);
  });
});

describe('dry-run policies: which reach a sandbox', () => {
  it('records every DryRun policy of the namespace that appliesTo selects, beside the enforced ones', () => {
    const v = view([
      ENFORCED,
      TOOLS,
      inferenceCm('by-label', { appliesTo: { sandboxMatchLabels: { team: 'a' } }, tokenBudget: { dailyTokens: 1 }, enforcement: 'DryRun' }),
      inferenceCm('by-name', { appliesTo: { sandboxName: 'sb' }, enforcement: 'DryRun' }),
      inferenceCm('any', { appliesTo: {}, enforcement: 'DryRun' }),
      inferenceCm('other-label', { appliesTo: { sandboxMatchLabels: { team: 'b' } }, enforcement: 'DryRun' }),
      inferenceCm('other-name', { appliesTo: { sandboxName: 'sb2' }, enforcement: 'DryRun' }),
      inferenceCm('enforced-elsewhere', { appliesTo: {} }),
      toolCm('strict', { appliesTo: { tool: 'rm', sandboxMatchLabels: { team: 'a' } }, enforcement: 'DryRun' }),
      toolCm('strict-b', { appliesTo: { tool: 'rm', sandboxMatchLabels: { team: 'b' } }, enforcement: 'DryRun' }),
    ]);
    assert.deepEqual(
      v.dryRun.inference.map((d) => d.name),
      ['any', 'by-label', 'by-name'],
    );
    assert.ok(v.dryRun.inference.every((d) => d.outcome.kind === 'loaded' && d.outcome.value.enforcement === 'DryRun'));
    assert.deepEqual(
      v.dryRun.tools.map((d) => d.name),
      ['strict'],
    );
    // The enforced kinds are the referenced ones, untouched.
    assert.equal(v.inference.kind === 'loaded' ? v.inference.name : '', 'enforced');
    assert.equal(v.tools.kind === 'loaded' ? v.tools.value.rules.name : '', 'tools');
  });

  it('records nothing without a listing (a mounted directory)', () => {
    const v = view([ENFORCED, inferenceCm('any', { appliesTo: {}, enforcement: 'DryRun' })], sandbox(), false);
    assert.deepEqual(v.dryRun.inference, []);
  });

  it('refuses a referenced DryRun policy (a NACK naming the reference), and records it as dry-run where it selects', () => {
    const dry = inferenceCm('enforced', { appliesTo: {}, tokenBudget: { dailyTokens: 1 }, enforcement: 'DryRun' });
    const v = view([dry]);
    assert.equal(v.inference.kind, 'error');
    if (v.inference.kind !== 'error') return;
    assert.match(v.inference.error, /spec\.inferenceRef names InferencePolicy enforced, which is DryRun/);
    assert.ok(v.inference.rejectedDigest?.startsWith('sha256:'));
    assert.deepEqual(
      v.dryRun.inference.map((d) => d.name),
      ['enforced'],
    );
    const t = view([toolCm('tools', { appliesTo: { tool: '*' }, enforcement: 'DryRun' })]);
    assert.equal(t.tools.kind, 'error');
    assert.match(t.tools.kind === 'error' ? t.tools.error : '', /toolPolicyRef names ToolPolicy tools, which is DryRun/);
  });

  it('a DryRun body this router cannot enforce is refused in its own slot, not dropped', () => {
    const v = view([
      ENFORCED,
      inferenceCm('guarded', { appliesTo: {}, guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }], enforcement: 'DryRun' }),
    ]);
    const g = v.dryRun.inference[0];
    assert.equal(g?.outcome.kind, 'error');
    const ledger = new EchoLedger(() => NOW);
    ledger.applyView(v);
    const e = ledger.echo();
    assert.match(e.dryRun?.errors['InferencePolicy/guarded'] ?? '', /no backend configured/);
    assert.ok(e.dryRun?.rejected['InferencePolicy/guarded']?.startsWith('sha256:'));
    assert.equal(e.digests.InferencePolicy, v.inference.kind === 'loaded' ? v.inference.digest : 'x');
  });
});

describe('dry-run policies: the echo', () => {
  it('echoes each in its slot, keeps the last good digest on a refusal, and drops a slot whose policy left', () => {
    const ledger = new EchoLedger(() => NOW);
    const good = inferenceCm('dry', { appliesTo: {}, tokenBudget: { dailyTokens: 1 }, enforcement: 'DryRun' });
    const tool = toolCm('tdry', { appliesTo: { tool: '*' }, enforcement: 'DryRun' });
    assert.equal(ledger.applyView(view([ENFORCED, good, tool])), true);
    const first = ledger.echo().dryRun;
    assert.ok(first?.digests['InferencePolicy/dry']?.startsWith('sha256:'));
    assert.ok(first?.digests['ToolPolicy/tdry']?.startsWith('sha256:'));
    assert.equal(first?.digests['AgtProfile/tdry'], null);
    // An edit this router refuses: the slot keeps the last good digest, with the error.
    const bad = inferenceCm('dry', {
      appliesTo: {},
      guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }],
      enforcement: 'DryRun',
    });
    assert.equal(ledger.applyView(view([ENFORCED, bad, tool])), true);
    assert.equal(ledger.echo().dryRun?.digests['InferencePolicy/dry'], first?.digests['InferencePolicy/dry']);
    assert.ok(ledger.echo().dryRun?.errors['InferencePolicy/dry']);
    // Unchanged view: nothing changed.
    assert.equal(ledger.applyView(view([ENFORCED, bad, tool])), false);
    // The policies leave (deleted, or flipped to Enforce): their slots go.
    assert.equal(ledger.applyView(view([ENFORCED])), true);
    assert.equal(ledger.echo().dryRun, undefined);
  });
});

describe('dry-run policies: only what a router records', () => {
  const severity = fc.constantFrom(undefined, 'Safe' as const, 'Low' as const, 'Medium' as const, 'High' as const);
  const spec = fc.record(
    {
      contentSafety: fc.record(
        {
          hate: severity,
          selfHarm: severity,
          sexual: severity,
          violence: severity,
          requirePromptShields: fc.option(fc.boolean(), { nil: undefined }),
        },
        { requiredKeys: [] },
      ),
      guardrails: fc.array(
        fc.record(
          {
            provider: fc.constant('openai-moderation' as const),
            applyTo: fc.constantFrom(undefined, 'input' as const, 'output' as const, 'both' as const),
          },
          { requiredKeys: ['provider'] },
        ),
        { maxLength: 3 },
      ),
      tokenBudget: fc.record({ dailyTokens: fc.nat(10) }),
    },
    { requiredKeys: [] },
  );

  it('the compiler refuses a DryRun policy exactly when it holds an answer-side field, and compiles the same spec enforced (property)', () => {
    fc.assert(
      fc.property(spec, (s) => {
        const cs = s.contentSafety;
        // The oracle, written out: a ceiling or Prompt Shields, or a stage that is not input-only.
        const floor = cs !== undefined && (['hate', 'selfHarm', 'sexual', 'violence'] as const).some((k) => cs[k] !== undefined);
        const shields = cs?.requirePromptShields === true;
        const outputStage = (s.guardrails ?? []).some((g) => g.applyTo !== 'input');
        const dry = compileInferencePolicy({
          metadata: { name: 'p' },
          spec: { appliesTo: {}, ...s, enforcement: 'DryRun' } as InferencePolicySpec,
        });
        const enforced = compileInferencePolicy({ metadata: { name: 'p' }, spec: { appliesTo: {}, ...s } as InferencePolicySpec });
        assert.ok(enforced.ok, enforced.ok ? '' : enforced.message);
        assert.equal(dry.ok, !(floor || shields || outputStage));
        if (!dry.ok) {
          assert.equal(dry.reason, 'InvalidSpec');
          if (floor || shields) assert.equal(dry.field, 'spec.contentSafety');
          else assert.match(dry.field, /^spec\.guardrails\[\d\]\.applyTo$/);
          assert.match(dry.message, /^a DryRun policy.* records a dry-run policy on the request only/);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a router refuses, in its slot, a DryRun body with an answer-side field that reached it another way', () => {
    // The compiler refuses this spec; the body is written by hand, as an older compiler or a person could.
    const [cm, data] = inferenceCm('floor', { appliesTo: {}, tokenBudget: { dailyTokens: 5 }, enforcement: 'DryRun' });
    const body = JSON.parse(data[INFERENCE_POLICY_FILENAME] ?? '{}') as Record<string, unknown>;
    body['contentSafety'] = { hate: 'Low', selfHarm: null, sexual: null, violence: null, requirePromptShields: null };
    const v = view([ENFORCED, [cm, { [INFERENCE_POLICY_FILENAME]: JSON.stringify(body) }]]);
    const slot = v.dryRun.inference[0];
    assert.equal(slot?.name, 'floor');
    assert.equal(slot?.outcome.kind, 'error');
    const ledger = new EchoLedger(() => NOW);
    ledger.applyView(v);
    const e = ledger.echo();
    assert.match(
      e.dryRun?.errors['InferencePolicy/floor'] ?? '',
      /^spec\.contentSafety: a DryRun policy cannot hold a content-safety floor/,
    );
    assert.ok(e.dryRun?.rejected['InferencePolicy/floor']?.startsWith('sha256:'));
    assert.equal(e.dryRun?.digests['InferencePolicy/floor'] ?? null, null, 'nothing is echoed as recorded');
  });
});

describe('dry-run policies never change what a router enforces (property)', () => {
  const labels = fc.dictionary(fc.constantFrom('team', 'env'), fc.constantFrom('a', 'b'), { maxKeys: 2 });
  const appliesTo = fc.record({ sandboxName: fc.option(fc.constantFrom('sb', 'other'), { nil: undefined }), sandboxMatchLabels: labels });
  const tokenBudget = fc.option(fc.record({ dailyTokens: fc.nat(10), perRequestTokens: fc.nat(10) }), { nil: undefined });
  const inferenceSpec = fc.record({
    appliesTo,
    tokenBudget,
    guardrails: fc.option(fc.constant([{ provider: 'openai-moderation' as const }]), { nil: undefined }),
    contentSafety: fc.option(fc.record({ hate: fc.constantFrom('Safe' as const, 'High' as const) }), { nil: undefined }),
  });
  // What a DryRun policy may hold: request-side fields only (the compiler refuses the answer side).
  const dryInferenceSpec = fc.record({
    appliesTo,
    tokenBudget,
    guardrails: fc.option(fc.constant([{ provider: 'openai-moderation' as const, applyTo: 'input' as const }]), { nil: undefined }),
  });
  const toolSpec = fc.record({
    appliesTo: fc.record({ tool: fc.constantFrom('*', 'rm', 'read'), sandboxMatchLabels: labels }),
    rateLimit: fc.option(fc.record({ rps: fc.nat(3) }), { nil: undefined }),
    agtProfile: fc.option(fc.constant({ inline: 'rules:\n  - effect: deny\n    pattern: "*"\n' }), { nil: undefined }),
    unpinnedTools: fc.option(fc.constantFrom('Allow' as const, 'Deny' as const), { nil: undefined }),
  });
  const dryNames = fc.uniqueArray(fc.constantFrom('d1', 'd2', 'd3', 'd4', 'enforced', 'tools'), { maxLength: 4 });

  it('the enforced outcomes and echoed digests are the same with any dry-run policies added', () => {
    fc.assert(
      fc.property(
        inferenceSpec,
        toolSpec,
        dryNames,
        fc.array(dryInferenceSpec, { minLength: 4, maxLength: 4 }),
        fc.array(toolSpec, { minLength: 4, maxLength: 4 }),
        labels,
        (ip, tp, names, dryIps, dryTps, sbLabels) => {
          const base: Array<[string, Record<string, string>]> = [
            inferenceCm('enforced', ip as unknown as InferencePolicySpec),
            toolCm('tools', tp as unknown as ToolPolicySpec),
          ];
          // Dry-run policies under other names (a policy named like the enforced one would be that policy).
          const extra = names
            .filter((n) => n !== 'enforced' && n !== 'tools')
            .flatMap((n, i): Array<[string, Record<string, string>]> => [
              inferenceCm(n, { ...(dryIps[i] as unknown as InferencePolicySpec), enforcement: 'DryRun' }),
              toolCm(n, { ...(dryTps[i] as unknown as ToolPolicySpec), enforcement: 'DryRun' }),
            ]);
          const sb = sandbox(sbLabels);
          const without = view(base, sb);
          const withDry = view([...base, ...extra], sb);
          assert.deepEqual(withDry.inference, without.inference);
          assert.deepEqual(withDry.tools, without.tools);
          assert.deepEqual(withDry.egress, without.egress);
          const a = new EchoLedger(() => NOW);
          const b = new EchoLedger(() => NOW);
          a.applyView(without);
          b.applyView(withDry);
          const { dryRun: _ignored, ...enforcedEcho } = b.echo();
          assert.deepEqual(enforcedEcho, a.echo());
          assert.ok(withDry.dryRun.inference.every((d) => d.outcome.kind !== 'loaded' || d.outcome.value.enforcement === 'DryRun'));
        },
      ),
      { numRuns: 300 },
    );
  });
});
