/**
 * The whole policy contract per kind, without an API server (issue 22 item 2): a random valid spec
 * → the compiler's ConfigMap bytes → the router's view (`routerView`) → its echo ledger → the echo
 * Lease, written and read back → the kind descriptor's expectation (as the controller awaits it, `expectations.ts`) → the enforcement
 * state. A spec the router can enforce always reaches Ready (RouterRecording for a DryRun policy);
 * one it cannot enforce (a guardrail with no backend, an MCP server it does not front, AP2 commerce)
 * never does: it is Rejected, naming the router.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { echoLease, readEcho } from '@kars/policy-api';
import type { InferencePolicySpec, KarsSandbox, ToolPolicySpec } from '@kars/policy-api';
import { EchoLedger, INFERENCE_POLICY_KIND, routerView, TOOL_POLICY_KIND } from '@kars/policy-compiler';
import type { RouterCapabilities } from '@kars/policy-compiler';
import { conditionsFor, decideEnforcementOf, type ExpectedEcho } from './enforcement.js';
import { forMode } from './expectations.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const NS = 'team';

const labels = fc.dictionary(fc.constantFrom('team', 'tier'), fc.constantFrom('a', 'b'), { maxKeys: 2 });
const mode = fc.constantFrom(undefined, 'Enforce' as const, 'DryRun' as const);
const caps = fc.record({
  mcpServers: fc.subarray(['github', 'gitlab']),
  guardrailProviders: fc.subarray(['openai-moderation']),
}) as fc.Arbitrary<RouterCapabilities>;

const inferenceSpec: fc.Arbitrary<InferencePolicySpec> = fc.record(
  {
    appliesTo: fc.record({ sandboxMatchLabels: labels, action: fc.constantFrom('chat' as const, '*' as const) }, { requiredKeys: [] }),
    tokenBudget: fc.record({ perRequestTokens: fc.nat(5000), dailyTokens: fc.nat(100_000) }, { requiredKeys: [] }),
    contentSafety: fc.record(
      { hate: fc.constantFrom('Safe' as const, 'Low' as const, 'High' as const), requirePromptShields: fc.boolean() },
      { requiredKeys: [] },
    ),
    modelPreference: fc.record({
      primary: fc.record({
        provider: fc.constantFrom('azure-openai' as const, 'anthropic' as const),
        deployment: fc.constantFrom('gpt-4o', 'small'),
      }),
    }),
    guardrails: fc.constantFrom(
      [{ provider: 'openai-moderation' as const, applyTo: 'input' as const }],
      [{ provider: 'openai-moderation' as const }],
      [{ provider: 'openai-moderation' as const, applyTo: 'output' as const }],
    ),
    displayName: fc.string({ maxLength: 8 }),
    enforcement: mode,
  },
  { requiredKeys: ['appliesTo'] },
) as fc.Arbitrary<InferencePolicySpec>;

const toolSpec: fc.Arbitrary<ToolPolicySpec> = fc.record(
  {
    appliesTo: fc.record(
      { tool: fc.constantFrom('*', 'read_file'), mcpServer: fc.constantFrom('github', 'gitlab', '*'), sandboxMatchLabels: labels },
      { requiredKeys: [] },
    ),
    rateLimit: fc.record({ rps: fc.nat(10), burst: fc.nat(10) }, { requiredKeys: [] }),
    approval: fc.record({ mode: fc.constantFrom('never' as const, 'always' as const) }),
    commerce: fc.constant({ dailyCap: 'USD 10.00' }),
    agtProfile: fc.constant({ inline: 'default: allow\nrules:\n  - deny: "*delete*"\n' }),
    unpinnedTools: fc.constantFrom('Allow' as const, 'Deny' as const),
    enforcement: mode,
  },
  { requiredKeys: ['appliesTo'] },
) as fc.Arbitrary<ToolPolicySpec>;

/** The sandbox: it references the policy when the policy is enforced; a DryRun policy reaches it through appliesTo. */
function sandboxFor(kind: 'InferencePolicy' | 'ToolPolicy', name: string, sandboxLabels: Record<string, string>): KarsSandbox {
  return {
    apiVersion: 'kars.azure.com/v1alpha1',
    kind: 'KarsSandbox',
    metadata: { name: 'sb', namespace: NS, labels: sandboxLabels },
    spec: kind === 'InferencePolicy' ? { inferenceRef: { name } } : { governance: { enabled: true, toolPolicyRef: { name } } },
  } as KarsSandbox;
}

/** Compile → router → Lease → controller, for one compiled policy and one router of a sandbox it should reach. */
function throughTheContract(
  kind: 'InferencePolicy' | 'ToolPolicy',
  name: string,
  spec: { enforcement?: unknown; appliesTo: { sandboxMatchLabels?: Record<string, string> } },
  compiled: { data: Record<string, string>; configMap: string; expect: ExpectedEcho[] },
  sbLabels: Record<string, string>,
  capabilities: RouterCapabilities,
) {
  const dryRun = spec.enforcement === 'DryRun';
  // An enforced policy is referenced; a DryRun one reaches the sandbox through a selector that picks it.
  const sandbox = sandboxFor(kind, dryRun ? 'enforced' : name, dryRun ? { ...sbLabels, ...spec.appliesTo.sandboxMatchLabels } : sbLabels);
  const cms = new Map([[compiled.configMap, compiled.data]]);
  const view = routerView(sandbox, (n) => cms.get(n), { nowMs: NOW, capabilities, list: () => cms.keys() });
  const ledger = new EchoLedger(() => NOW);
  ledger.applyView(view);
  const e = ledger.echo();
  const lease = echoLease(NS, {
    sandbox: 'sb',
    instance: 'r1',
    digests: e.digests,
    errors: e.errors,
    rejected: e.rejected,
    ...(e.dryRun !== undefined ? { dryRun: e.dryRun } : {}),
    renewedAtMs: NOW,
    leaseDurationSeconds: 90,
  });
  // The Lease as the API returns it: JSON, read back by the controller.
  const echo = readEcho(JSON.parse(JSON.stringify(lease)) as typeof lease);
  assert.ok(echo, 'a router lease reads back');
  return decideEnforcementOf(forMode(compiled.expect, name, spec), [{ sandbox: 'sb', routers: [echo] }], NOW);
}

/** Ready (as recorded, for DryRun) exactly when the oracle says the router can enforce the spec; else Rejected, naming it. */
function assertReadyIff(state: ReturnType<typeof decideEnforcementOf>, enforceable: boolean, dryRun: boolean, refused: RegExp): void {
  if (enforceable) {
    assert.deepEqual(state, dryRun ? { kind: 'Confirmed', total: 1, dryRun: true } : { kind: 'Confirmed', total: 1 });
    assert.equal(conditionsFor(state)[0]?.reason, dryRun ? 'RouterRecording' : 'RouterEnforcing');
  } else {
    assert.equal(state.kind, 'Rejected', JSON.stringify(state));
    assert.match(state.kind === 'Rejected' ? (state.details[0] ?? '') : '', refused);
  }
}

describe('the policy contract, compile → router → Lease → controller (property)', () => {
  it('InferencePolicy: Ready exactly when the router can enforce it; DryRun ones as recorded', () => {
    fc.assert(
      fc.property(inferenceSpec, caps, labels, (spec, capabilities, sbLabels) => {
        const c = INFERENCE_POLICY_KIND.compile({ metadata: { name: 'p', namespace: NS, generation: 2 }, spec });
        // A DryRun policy is recorded on the request only: an answer-side field is refused at compile
        // time, so no status can say RouterRecording for a verdict the router never reaches.
        const cs = spec.contentSafety;
        const answerSide =
          (cs !== undefined && (cs.hate !== undefined || cs.requirePromptShields === true)) ||
          (spec.guardrails ?? []).some((g) => g.applyTo !== 'input');
        if (spec.enforcement === 'DryRun' && answerSide) {
          assert.equal(c.ok, false, 'a DryRun policy with an answer-side field compiles');
          assert.match(c.ok ? '' : c.message, /a DryRun policy/);
          return;
        }
        assert.ok(c.ok, c.ok ? '' : c.message);
        const compiled = { data: c.configMap.data, configMap: c.configMap.metadata.name, expect: INFERENCE_POLICY_KIND.status(c).expect };
        const state = throughTheContract('InferencePolicy', 'p', spec, compiled, sbLabels, capabilities);
        // The oracle, from the spec alone: a guardrail stage needs its backend on the router.
        const enforceable = spec.guardrails === undefined || capabilities.guardrailProviders.includes('openai-moderation');
        assertReadyIff(state, enforceable, spec.enforcement === 'DryRun', /router r1 of sandbox sb refused .*guardrail/);
      }),
      { numRuns: 300 },
    );
  });

  it('ToolPolicy: Ready exactly when the router can enforce it; DryRun ones as recorded', () => {
    fc.assert(
      fc.property(toolSpec, caps, labels, (spec, capabilities, sbLabels) => {
        const c = TOOL_POLICY_KIND.compile({ metadata: { name: 'tp', namespace: NS, generation: 2 }, spec });
        assert.ok(c.ok, c.ok ? '' : c.message);
        const compiled = { data: c.configMap.data, configMap: c.configMap.metadata.name, expect: TOOL_POLICY_KIND.status(c).expect };
        const state = throughTheContract('ToolPolicy', 'tp', spec, compiled, sbLabels, capabilities);
        // The oracle: AP2 commerce is never enforceable here, and a named MCP server must be one the router fronts.
        const server = spec.appliesTo.mcpServer;
        const enforceable =
          spec.commerce === undefined && (server === undefined || server === '*' || capabilities.mcpServers.includes(server));
        assertReadyIff(state, enforceable, spec.enforcement === 'DryRun', /router r1 of sandbox sb refused /);
      }),
      { numRuns: 300 },
    );
  });
});
