/**
 * Unit tests of the router wire contract (`router-view.ts`, issue 22 item 7): the strict parsers
 * of the compiled bodies (every refusal path, named by its field), the approval-file reader, the
 * per-kind outcomes and `routerView`'s ConfigMap names (the echo ledger: `echo-ledger.test.ts`).
 * Properties: a random body in the compiled form is accepted and read back field for field; one
 * unknown field anywhere refuses it, naming the path; no input makes a parser throw.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { KarsSandbox } from '@kars/policy-api';
import { canonicalDigest } from './digest.js';
import { compileInferencePolicy } from './kinds/inference-policy.js';
import {
  capabilityNames,
  egressOutcome,
  expectedEgressDigest,
  inferenceOutcome,
  NO_CAPABILITIES,
  parseApprovalFiles,
  parseInferenceBody,
  parseToolProfile,
  toolOutcome,
} from './router-view.js';
import { routerView } from './view.js';
import type { RouterCapabilities } from './router-view.js';

const ALL: RouterCapabilities = { mcpServers: ['github'], guardrailProviders: ['openai-moderation'] };
const NOW = Date.parse('2026-03-01T00:00:00Z');

/** A compiled inference body in the contract's form (§2.2): every block present, inner scalars null. */
function fullBody(): Record<string, unknown> {
  return {
    appliesTo: { sandboxName: 'sb', sandboxMatchLabels: { team: 'a' }, action: 'chat' },
    tokenBudget: { perRequestTokens: 100, dailyTokens: 1000, monthlyTokens: null },
    contentSafety: { hate: 'Low', selfHarm: null, sexual: 'High', violence: 'Safe', requirePromptShields: true },
    modelPreference: { primary: { provider: 'azure-openai', deployment: 'gpt-4o' }, fallback: [{ provider: null, deployment: 'small' }] },
    provider: 'azure-openai',
    guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }],
    displayName: 'chat',
  };
}

/** `o` with `path` (dot/index path) set to `value`. */
function withAt(o: Record<string, unknown>, path: Array<string | number>, value: unknown): Record<string, unknown> {
  const copy = structuredClone(o);
  let cur: any = copy;
  for (const k of path.slice(0, -1)) cur = cur[k];
  const last = path.at(-1)!;
  if (value === undefined) delete cur[last];
  else cur[last] = value;
  return copy;
}

describe('parseInferenceBody', () => {
  it('accepts the full compiled form and reads every field', () => {
    const r = parseInferenceBody(JSON.stringify(fullBody()), ALL);
    assert.ok(r.ok, r.ok ? '' : r.error);
    assert.deepEqual(r.rules, {
      action: 'chat',
      tokenBudget: { perRequestTokens: 100, dailyTokens: 1000, monthlyTokens: null },
      contentSafety: { hate: 'Low', selfHarm: null, sexual: 'High', violence: 'Safe', requirePromptShields: true },
      modelPreference: {
        primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
        fallback: [{ provider: 'azure-openai', deployment: 'small' }],
      },
      provider: 'azure-openai',
      guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }],
      displayName: 'chat',
      enforcement: 'Enforce',
    });
  });

  it('accepts what the compiler writes, with every content block null for a selector-only policy', () => {
    const c = compileInferencePolicy({ metadata: { name: 'p', namespace: 'n' }, spec: { appliesTo: { sandboxName: 'sb' } } });
    assert.ok(c.ok);
    const r = parseInferenceBody(c.body, NO_CAPABILITIES);
    assert.ok(r.ok, r.ok ? '' : r.error);
    assert.deepEqual(
      { tb: r.rules.tokenBudget, cs: r.rules.contentSafety, mp: r.rules.modelPreference, g: r.rules.guardrails, a: r.rules.action },
      { tb: null, cs: null, mp: null, g: null, a: null },
    );
  });

  // Each refusal path, with the field its error must name.
  const refusals: Array<[string, string | ((b: Record<string, unknown>) => unknown), RegExp]> = [
    ['not JSON', '{"tokenBudget":', /^inference-policy\.json is not JSON: /],
    ['a list, not an object', '[]', /^: must be an object, got a list/],
    ['null', 'null', /^: must be an object, got null/],
    ['an unknown top-level field', (b) => ({ ...b, maxCost: 5 }), /^maxCost: unknown field/],
    ['bundleRef (resolved before compiling)', (b) => ({ ...b, bundleRef: {} }), /^bundleRef: unknown field/],
    ['appliesTo as a string', (b) => withAt(b, ['appliesTo'], 'sb'), /^appliesTo: must be an object, got string "sb"/],
    ['an unknown appliesTo field', (b) => withAt(b, ['appliesTo', 'namespace'], 'x'), /^appliesTo\.namespace: unknown field/],
    ['sandboxName as a number', (b) => withAt(b, ['appliesTo', 'sandboxName'], 1), /^appliesTo\.sandboxName: must be a string/],
    ['labels as a list', (b) => withAt(b, ['appliesTo', 'sandboxMatchLabels'], []), /^appliesTo\.sandboxMatchLabels: must be a map/],
    [
      'a label value that is no string',
      (b) => withAt(b, ['appliesTo', 'sandboxMatchLabels', 'team'], 1),
      /^appliesTo\.sandboxMatchLabels\.team: must be a string/,
    ],
    [
      'an unknown action',
      (b) => withAt(b, ['appliesTo', 'action'], 'audio'),
      /^appliesTo\.action: must be one of chat, responses, image, embeddings, \*/,
    ],
    ['an unknown tokenBudget field', (b) => withAt(b, ['tokenBudget', 'hourlyTokens'], 1), /^tokenBudget\.hourlyTokens: unknown field/],
    [
      'a negative budget',
      (b) => withAt(b, ['tokenBudget', 'dailyTokens'], -1),
      /^tokenBudget\.dailyTokens: must be a non-negative integer/,
    ],
    [
      'a fractional budget',
      (b) => withAt(b, ['tokenBudget', 'perRequestTokens'], 1.5),
      /^tokenBudget\.perRequestTokens: must be a non-negative integer/,
    ],
    [
      'a budget as a string',
      (b) => withAt(b, ['tokenBudget', 'monthlyTokens'], '100'),
      /^tokenBudget\.monthlyTokens: must be a non-negative integer, got string "100"/,
    ],
    [
      'an unsafe integer budget',
      (b) => withAt(b, ['tokenBudget', 'dailyTokens'], 2 ** 60),
      /^tokenBudget\.dailyTokens: must be a non-negative integer/,
    ],
    [
      'an unknown severity',
      (b) => withAt(b, ['contentSafety', 'hate'], 'Extreme'),
      /^contentSafety\.hate: must be one of Safe, Low, Medium, High/,
    ],
    [
      'requirePromptShields as a string',
      (b) => withAt(b, ['contentSafety', 'requirePromptShields'], 'yes'),
      /^contentSafety\.requirePromptShields: must be a boolean/,
    ],
    ['an unknown contentSafety field', (b) => withAt(b, ['contentSafety', 'jailbreak'], 'Low'), /^contentSafety\.jailbreak: unknown field/],
    [
      'an unknown modelPreference field',
      (b) => withAt(b, ['modelPreference', 'temperature'], 1),
      /^modelPreference\.temperature: unknown field/,
    ],
    [
      'a primary without a deployment',
      (b) => withAt(b, ['modelPreference', 'primary', 'deployment'], undefined),
      /^modelPreference\.primary\.deployment: is required/,
    ],
    [
      'an empty deployment',
      (b) => withAt(b, ['modelPreference', 'fallback', 0, 'deployment'], ''),
      /^modelPreference\.fallback\[0\]\.deployment: is required/,
    ],
    [
      'a fallback that is not a list',
      (b) => withAt(b, ['modelPreference', 'fallback'], {}),
      /^modelPreference\.fallback: must be a list, got an object/,
    ],
    [
      'an unknown model field',
      (b) => withAt(b, ['modelPreference', 'primary', 'region'], 'x'),
      /^modelPreference\.primary\.region: unknown field/,
    ],
    ['provider as a number', (b) => withAt(b, ['provider'], 1), /^provider: must be a string/],
    ['guardrails as an object', (b) => withAt(b, ['guardrails'], {}), /^guardrails: must be a list/],
    [
      'a guardrail without a provider',
      (b) => withAt(b, ['guardrails', 0, 'provider'], undefined),
      /^guardrails\[0\]\.provider: is required/,
    ],
    [
      'an unknown guardrail provider',
      (b) => withAt(b, ['guardrails', 0, 'provider'], 'prompt-shields'),
      /^guardrails\[0\]\.provider: unknown guardrail provider "prompt-shields"/,
    ],
    [
      'an unknown applyTo',
      (b) => withAt(b, ['guardrails', 0, 'applyTo'], 'never'),
      /^guardrails\[0\]\.applyTo: must be one of input, output, both/,
    ],
    ['an unknown guardrail field', (b) => withAt(b, ['guardrails', 0, 'threshold'], 1), /^guardrails\[0\]\.threshold: unknown field/],
    ['displayName as a list', (b) => withAt(b, ['displayName'], []), /^displayName: must be a string, got a list/],
  ];
  for (const [what, body, why] of refusals) {
    it(`refuses ${what}, naming the field`, () => {
      const text = typeof body === 'string' ? body : JSON.stringify(body(fullBody()));
      const r = parseInferenceBody(text, ALL);
      assert.equal(r.ok, false);
      if (!r.ok) assert.match(r.error, why);
    });
  }

  it('refuses a guardrail stage whose provider has no backend on this router, and accepts it with the backend', () => {
    const body = JSON.stringify(fullBody());
    const r = parseInferenceBody(body, NO_CAPABILITIES);
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.error, /^guardrails\[0\]\.provider: guardrail openai-moderation has no backend configured on this router/);
    assert.equal(parseInferenceBody(body, ALL).ok, true);
  });

  const severity = fc.constantFrom('Safe', 'Low', 'Medium', 'High', null);
  const maybe = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.option(a, { nil: null });
  const model = fc.record({ provider: maybe(fc.string({ maxLength: 12 })), deployment: fc.string({ minLength: 1, maxLength: 12 }) });
  const validBody = fc.record({
    appliesTo: maybe(
      fc.record({
        sandboxName: maybe(fc.string({ maxLength: 10 })),
        sandboxMatchLabels: maybe(fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 })),
        action: fc.constantFrom('chat', 'responses', 'image', 'embeddings', '*', null),
      }),
    ),
    tokenBudget: maybe(
      fc.record({ perRequestTokens: maybe(fc.nat()), dailyTokens: maybe(fc.nat()), monthlyTokens: maybe(fc.maxSafeNat()) }),
    ),
    contentSafety: maybe(
      fc.record({ hate: severity, selfHarm: severity, sexual: severity, violence: severity, requirePromptShields: maybe(fc.boolean()) }),
    ),
    modelPreference: maybe(fc.record({ primary: model, fallback: fc.array(model, { maxLength: 3 }) })),
    provider: maybe(fc.constantFrom('azure-openai', 'anthropic', 'ollama', 'bedrock')),
    guardrails: maybe(
      fc.array(fc.record({ provider: fc.constant('openai-moderation'), applyTo: fc.constantFrom('input', 'output', 'both', null) }), {
        maxLength: 3,
      }),
    ),
    displayName: maybe(fc.string({ maxLength: 20 })),
  });

  it('property: every body in the compiled form is accepted and read back field for field', () => {
    fc.assert(
      fc.property(validBody, (generated) => {
        const b = JSON.parse(JSON.stringify(generated)) as typeof generated; // plain objects, as JSON.parse makes them
        const r = parseInferenceBody(JSON.stringify(b), ALL);
        assert.ok(r.ok, r.ok ? '' : r.error);
        assert.equal(r.rules.action, b.appliesTo?.action ?? null);
        assert.deepEqual(r.rules.tokenBudget, b.tokenBudget);
        assert.deepEqual(r.rules.contentSafety, b.contentSafety);
        assert.deepEqual(
          r.rules.modelPreference,
          b.modelPreference && {
            primary: { ...b.modelPreference.primary, provider: b.modelPreference.primary.provider ?? 'azure-openai' },
            fallback: b.modelPreference.fallback.map((f) => ({ ...f, provider: f.provider ?? 'azure-openai' })),
          },
        );
        assert.deepEqual(r.rules.guardrails, b.guardrails && b.guardrails.map((g) => ({ ...g, applyTo: g.applyTo ?? 'both' })));
        assert.equal(r.rules.provider, b.provider);
        assert.equal(r.rules.displayName, b.displayName);
      }),
      { numRuns: 500 },
    );
  });

  it('property: one unknown field in any object of a valid body refuses it, naming that field', () => {
    fc.assert(
      fc.property(validBody, fc.nat(), fc.constantFrom('zz', 'budget', '__proto_x', 'Hate'), (b, pick, key) => {
        // Every object in the body, by path.
        const objects: Array<Array<string | number>> = [[]];
        const walk = (v: unknown, path: Array<string | number>): void => {
          if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
          else if (v && typeof v === 'object') {
            if (path.length > 0 && !(path.at(-1) === 'sandboxMatchLabels')) objects.push(path);
            for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
          }
        };
        walk(b, []);
        const path = objects[pick % objects.length]!;
        const mutated = withAt(b as unknown as Record<string, unknown>, [...path, key], 1);
        const r = parseInferenceBody(JSON.stringify(mutated), ALL);
        assert.equal(r.ok, false, `${path.join('.')}.${key}`);
        const named = path
          .map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`))
          .join('')
          .replace(/^\./, '');
        if (!r.ok) assert.ok(r.error.startsWith(`${named === '' ? '' : `${named}.`}${key}: unknown field`), r.error);
      }),
      { numRuns: 500 },
    );
  });

  it('property: no input makes the parsers throw', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        (text) => {
          assert.doesNotThrow(() => parseInferenceBody(text, ALL));
          assert.doesNotThrow(() => parseToolProfile('t', text, text, ALL));
          assert.doesNotThrow(() => parseApprovalFiles({ 'approval-a.json': text }));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('parseToolProfile', () => {
  const profile = (o: Record<string, unknown> = {}): string =>
    JSON.stringify({
      appliesTo: { tool: '*', mcpServer: null, sandboxMatchLabels: {} },
      commerce: null,
      rateLimit: { rps: 5, burst: 10, window: '1s' },
      approval: { mode: 'always', threshold: null, channel: 'slack' },
      displayName: 'tools',
      ...o,
    });

  it('accepts a compiled profile and an AGT profile in the subset', () => {
    const r = parseToolProfile('t', profile(), 'rules:\n  - deny: "*delete*"\n', NO_CAPABILITIES);
    assert.ok(r.ok, r.ok ? '' : r.error);
    assert.deepEqual(
      { name: r.rules.name, appliesTo: r.rules.appliesTo, rateLimit: r.rules.rateLimit, approval: r.rules.approval },
      { name: 't', appliesTo: { tool: '*', mcpServer: null }, rateLimit: { rps: 5, burst: 10 }, approval: { mode: 'always' } },
    );
    assert.ok(r.rules.agt !== null, 'the AGT rules are read');
    const none = parseToolProfile('t', profile(), undefined, NO_CAPABILITIES);
    assert.ok(none.ok && none.rules.agt === null, 'no AGT file: no AGT rules');
  });

  it('accepts a profile scoped to "*" or to a server the router fronts, and refuses one it does not front', () => {
    const scoped = (s: string): string => profile({ appliesTo: { tool: '*', mcpServer: s, sandboxMatchLabels: {} } });
    assert.equal(parseToolProfile('t', scoped('*'), undefined, NO_CAPABILITIES).ok, true);
    const fronted = parseToolProfile('t', scoped('github'), undefined, ALL);
    assert.ok(fronted.ok && fronted.rules.appliesTo.mcpServer === 'github');
    const r = parseToolProfile('t', scoped('github'), undefined, NO_CAPABILITIES);
    assert.equal(r.ok, false);
    if (!r.ok)
      assert.equal(
        r.error,
        'appliesTo.mcpServer: this router does not front MCP server "github" (it fronts no named MCP server; capability mcp-server:github missing)',
      );
  });

  const refusals: Array<[string, string, string | undefined, RegExp]> = [
    ['not JSON', 'nope', undefined, /^profile\.json is not JSON: /],
    ['an unknown field', profile({ budget: 3 }), undefined, /^budget: unknown field/],
    ['an unknown appliesTo field', profile({ appliesTo: { tool: '*', server: 'x' } }), undefined, /^appliesTo\.server: unknown field/],
    ['a tool as a number', profile({ appliesTo: { tool: 1 } }), undefined, /^appliesTo\.tool: must be a string/],
    [
      'labels that are no map',
      profile({ appliesTo: { sandboxMatchLabels: 'a=b' } }),
      undefined,
      /^appliesTo\.sandboxMatchLabels: must be a map/,
    ],
    [
      'commerce (AP2)',
      profile({ commerce: { dailyCap: 'USD 1.00' } }),
      undefined,
      /^commerce: AP2 spend caps are not enforced by this router/,
    ],
    ['an unknown commerce field', profile({ commerce: { limit: 1 } }), undefined, /^commerce\.limit: unknown field/],
    ['a negative rps', profile({ rateLimit: { rps: -1 } }), undefined, /^rateLimit\.rps: must be a non-negative integer/],
    ['a window as a number', profile({ rateLimit: { window: 1 } }), undefined, /^rateLimit\.window: must be a string/],
    ['an unknown rateLimit field', profile({ rateLimit: { perMinute: 1 } }), undefined, /^rateLimit\.perMinute: unknown field/],
    [
      'approval aboveThreshold',
      profile({ approval: { mode: 'aboveThreshold' } }),
      undefined,
      /^approval\.mode: aboveThreshold needs AP2 spend amounts/,
    ],
    [
      'an unknown approval mode',
      profile({ approval: { mode: 'sometimes' } }),
      undefined,
      /^approval\.mode: must be one of never, always, aboveThreshold/,
    ],
    [
      'a threshold as a number',
      profile({ approval: { mode: 'never', threshold: 5 } }),
      undefined,
      /^approval\.threshold: must be a string/,
    ],
    ['a channel as a list', profile({ approval: { channel: [] } }), undefined, /^approval\.channel: must be a string, got a list/],
    ['displayName as an object', profile({ displayName: {} }), undefined, /^displayName: must be a string, got an object/],
    ['an AGT profile that is not YAML', profile(), 'rules: [unclosed\n', /^agt-profile\.yaml: /],
    ['an AGT rule key outside the subset', profile(), 'rules:\n  - deny: "*delete*"\n    when: always\n', /^agt-profile\.yaml: .*when/],
  ];
  for (const [what, body, agt, why] of refusals) {
    it(`refuses ${what}, naming the field`, () => {
      const r = parseToolProfile('t', body, agt, ALL);
      assert.equal(r.ok, false);
      if (!r.ok) assert.match(r.error, why);
    });
  }
});

describe('parseApprovalFiles', () => {
  const file = (o: Record<string, unknown>): string => JSON.stringify({ approvalName: 'a', expiresAt: '2026-03-01T01:00:00Z', ...o });

  it('reads approval-*.json files sorted by key: hosts lowercased, port 443 by default, the approval named and its expiry', () => {
    const r = parseApprovalFiles({
      'approval-b.json': file({ approvalName: 'b', hosts: [{ host: 'B.Example', port: 8443 }] }),
      'approval-a.json': file({ hosts: [{ host: 'a.example' }, { host: '2001:DB8::1', port: 443 }] }),
      'other.json': file({ hosts: [{ host: 'ignored.example' }] }),
    });
    assert.deepEqual(r.errors, []);
    const exp = Date.parse('2026-03-01T01:00:00Z');
    assert.deepEqual(r.entries, [
      { host: 'a.example', port: 443, approval: 'a', expiresAtMs: exp },
      { host: '2001:db8::1', port: 443, approval: 'a', expiresAtMs: exp },
      { host: 'b.example', port: 8443, approval: 'b', expiresAtMs: exp },
    ]);
  });

  it('names the approval from its key when the file does not, and skips host entries that are not hosts', () => {
    const r = parseApprovalFiles({
      'approval-from-key.json': JSON.stringify({
        expiresAt: '2026-03-01T01:00:00Z',
        hosts: [1, null, { host: 2 }, { host: 'ok.example', port: 'x' }],
      }),
    });
    assert.deepEqual(r.entries, [{ host: 'ok.example', port: 443, approval: 'from-key', expiresAtMs: Date.parse('2026-03-01T01:00:00Z') }]);
  });

  it('skips and reports a file that does not parse, without expiresAt or without hosts; the others still load', () => {
    const r = parseApprovalFiles({
      'approval-bad.json': 'nope',
      'approval-noexp.json': JSON.stringify({ hosts: [{ host: 'x.example' }] }),
      'approval-nohosts.json': JSON.stringify({ expiresAt: '2026-03-01T01:00:00Z', hosts: 'x.example' }),
      'approval-ok.json': file({ hosts: [{ host: 'ok.example' }] }),
    });
    assert.deepEqual(
      r.errors.map((e) => e.split(':')[0]),
      ['approval-bad.json', 'approval-noexp.json', 'approval-nohosts.json'],
    );
    assert.match(r.errors[1] ?? '', /missing hosts or expiresAt/);
    assert.deepEqual(
      r.entries.map((e) => e.host),
      ['ok.example'],
    );
  });
});

describe('per-kind outcomes and routerView', () => {
  it('inferenceOutcome: none without a body; a refusal carries the digest of the refused bytes', () => {
    assert.deepEqual(inferenceOutcome(undefined, 'inference-policy.json', 's', ALL), { kind: 'none' });
    const ok = inferenceOutcome(JSON.stringify(fullBody()), 'inference-policy.json', 's', ALL);
    assert.equal(ok.kind, 'loaded');
    assert.equal(ok.kind === 'loaded' && ok.digest, canonicalDigest('inference-policy.json', JSON.stringify(fullBody())));
    const bad = inferenceOutcome('{}x', 'inference-policy.json', 's', ALL);
    assert.deepEqual(bad.kind === 'error' && { d: bad.rejectedDigest, s: bad.source }, {
      d: canonicalDigest('inference-policy.json', '{}x'),
      s: 's',
    });
  });

  it('toolOutcome: both digests on a load and on a refusal; none without profile.json', () => {
    const p = JSON.stringify({ appliesTo: null, commerce: { dailyCap: 'USD 1.00' } });
    assert.deepEqual(toolOutcome('t', undefined, undefined, { profile: '', agt: null }, 's', ALL), { kind: 'none' });
    const bad = toolOutcome('t', p, 'rules: []\n', { profile: canonicalDigest('profile.json', p), agt: 'sha256:agt' }, 's', ALL);
    assert.equal(bad.kind, 'error');
    if (bad.kind === 'error') {
      assert.deepEqual(bad.digests, { profile: canonicalDigest('profile.json', p), agt: 'sha256:agt' });
      assert.equal(bad.rejectedDigest, canonicalDigest('profile.json', p));
    }
  });

  it('egressOutcome: always loaded (also empty), expired approvals left out, the digest the controller expects, the next expiry', () => {
    const files = {
      'approval-live.json': JSON.stringify({ expiresAt: new Date(NOW + 60_000).toISOString(), hosts: [{ host: 'live.example' }] }),
      'approval-later.json': JSON.stringify({ expiresAt: new Date(NOW + 120_000).toISOString(), hosts: [{ host: '::1', port: 8443 }] }),
      'approval-gone.json': JSON.stringify({ expiresAt: new Date(NOW - 1).toISOString(), hosts: [{ host: 'gone.example' }] }),
    };
    const baseline = [{ host: 'Base.Example' }];
    const { outcome, nextExpiryMs } = egressOutcome(baseline, files, NOW, 's');
    assert.equal(outcome.kind, 'loaded');
    if (outcome.kind !== 'loaded') return;
    assert.deepEqual(outcome.value.baseline, [{ host: 'base.example', port: 443 }]);
    assert.deepEqual(outcome.value.approvals.map((e) => e.host).sort(), ['::1', 'live.example']);
    assert.equal(nextExpiryMs, NOW + 60_000);
    const sandbox = { spec: { networkPolicy: { allowedEndpoints: baseline } } } as Pick<KarsSandbox, 'spec'>;
    const approvals = [
      { hosts: [{ host: 'live.example' }], expiresAtMs: NOW + 60_000 },
      { hosts: [{ host: '::1', port: 8443 }], expiresAtMs: NOW + 120_000 },
      { hosts: [{ host: 'gone.example' }], expiresAtMs: NOW - 1 },
    ];
    assert.equal(outcome.digest, expectedEgressDigest(sandbox, approvals, NOW));
    const empty = egressOutcome([], {}, NOW, 's');
    assert.equal(empty.outcome.kind, 'loaded');
    assert.equal(empty.nextExpiryMs, undefined);
  });

  it('routerView reads the ConfigMaps the contract names for the sandbox, and nothing without a sandbox', () => {
    const asked: string[] = [];
    const read = (name: string): Record<string, string> | undefined => {
      asked.push(name);
      return undefined;
    };
    const none = routerView(undefined, read, { nowMs: NOW, capabilities: ALL });
    assert.deepEqual([none.inference.kind, none.tools.kind, none.egress.kind, asked], ['none', 'none', 'none', []]);
    const sb = {
      metadata: { name: 'sb' },
      spec: { inferenceRef: { name: 'ip' }, governance: { enabled: true, toolPolicyRef: { name: 'tp' } } },
    } as KarsSandbox;
    const v = routerView(sb, read, { nowMs: NOW, capabilities: ALL, sourcePrefix: 'api:' });
    assert.deepEqual(asked.sort(), ['inferencepolicy-ip-profile', 'kars-sb-egress-approvals', 'toolpolicy-tp-profile']);
    assert.deepEqual([v.inference.kind, v.tools.kind, v.egress.kind], ['none', 'none', 'loaded']);
    assert.equal(v.egress.kind === 'loaded' && v.egress.source, 'api:kars-sb-egress-approvals');
  });

  it('capabilityNames are sorted mcp-server: and guardrail: names', () => {
    assert.deepEqual(capabilityNames({ mcpServers: ['z', 'a'], guardrailProviders: ['openai-moderation'] }), [
      'guardrail:openai-moderation',
      'mcp-server:a',
      'mcp-server:z',
    ]);
  });
});
