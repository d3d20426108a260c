import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  PolicyValidationError,
  assertValid,
  formatTtl,
  hostProblem,
  parseHostArg,
  parseMoney,
  parseTtl,
  reasonProblem,
  ttlCeilingSeconds,
  validateEgressApprovalSpec,
  validateInferencePolicySpec,
  validateKarsSandboxSpec,
  validateObject,
  validateToolPolicySpec,
  type ValidationCause,
} from './validate.js';
import { SAMPLE_DIGEST, samples } from './testing/samples.js';
import { MAX_TOOL_PINS, toolPolicySpecSchema } from './crds.js';
import { TOOL_DIGEST_PATTERN } from './tool-pin.js';
import type { InferencePolicySpec, ToolPolicySpec } from './types.js';

const fields = (cs: ValidationCause[]): string[] => cs.map((c) => c.field);

describe('parseTtl', () => {
  const table: [string, number | undefined][] = [
    ['PT1H', 3600],
    ['PT30M', 1800],
    ['PT45S', 45],
    ['P1D', 86400],
    ['P7D', 604800],
    ['P1DT2H3M4S', 86400 + 7200 + 180 + 4],
    ['PT1H30M', 5400],
    ['PT90M', 5400],
    ['P0D', 0],
    ['PT0S', 0],
    ['P01D', 86400],
    ['P', undefined],
    ['PT', undefined],
    ['P1DT', undefined],
    ['', undefined],
    ['1h', undefined],
    ['PT1h', undefined],
    ['pt1h', undefined],
    ['P1W', undefined],
    ['P1M', undefined],
    ['P1Y', undefined],
    ['PT1.5H', undefined],
    ['PT-1H', undefined],
    ['-PT1H', undefined],
    [' PT1H', undefined],
    ['PT1H ', undefined],
    ['PT1S1H', undefined],
    ['P1H', undefined],
    ['PT1D', undefined],
  ];
  for (const [input, want] of table) {
    it(`parses ${JSON.stringify(input)} as ${want === undefined ? 'invalid' : `${want} seconds`}`, () => {
      assert.equal(parseTtl(input), want);
    });
  }

  it('returns Infinity for a duration too large to represent exactly, so it is above any ceiling', () => {
    assert.equal(parseTtl(`P${'9'.repeat(30)}D`), Number.POSITIVE_INFINITY);
  });
});

describe('ttlCeilingSeconds', () => {
  it('defaults to 24h when the env var is unset, empty, zero or unparseable', () => {
    for (const v of [undefined, '', '0', '00', 'abc', '-5', '3600s', '1e3', '1.5']) {
      assert.equal(ttlCeilingSeconds(v === undefined ? {} : { EGRESS_APPROVAL_MAX_TTL_SECONDS: v }), 86400, String(v));
    }
  });

  it('uses the env value when it is below 7d, trimmed', () => {
    assert.equal(ttlCeilingSeconds({ EGRESS_APPROVAL_MAX_TTL_SECONDS: '3600' }), 3600);
    assert.equal(ttlCeilingSeconds({ EGRESS_APPROVAL_MAX_TTL_SECONDS: ' 7200\n' }), 7200);
    assert.equal(ttlCeilingSeconds({ EGRESS_APPROVAL_MAX_TTL_SECONDS: '172800' }), 172800);
  });

  it('never exceeds 7d whatever the env says', () => {
    assert.equal(ttlCeilingSeconds({ EGRESS_APPROVAL_MAX_TTL_SECONDS: '999999999' }), 604800);
    assert.equal(ttlCeilingSeconds({ EGRESS_APPROVAL_MAX_TTL_SECONDS: '99999999999999999999999' }), 604800);
  });

  it('formats seconds back into the TTL grammar', () => {
    assert.equal(formatTtl(86400), 'P1D');
    assert.equal(formatTtl(93784), 'P1DT2H3M4S');
    assert.equal(parseTtl(formatTtl(93784)), 93784);
  });
});

describe('validateEgressApprovalSpec', () => {
  it('accepts the sample (TAB and LF in the reason are allowed)', () => {
    assert.deepEqual(validateEgressApprovalSpec(samples.egressApproval().spec), []);
  });

  it('reports an unparseable TTL as TtlInvalid on spec.ttl', () => {
    const s = { ...samples.egressApproval().spec, ttl: 'P1W' };
    assert.deepEqual(
      validateEgressApprovalSpec(s).map((c) => [c.field, c.reason]),
      [['spec.ttl', 'TtlInvalid']],
    );
  });

  it('reports a zero TTL as TtlInvalid', () => {
    const [c] = validateEgressApprovalSpec({ ...samples.egressApproval().spec, ttl: 'PT0S' });
    assert.equal(c?.reason, 'TtlInvalid');
    assert.match(c?.message ?? '', /greater than zero/);
  });

  it('reports a TTL above the default 24h ceiling as TtlExceedsCeiling, and accepts exactly 24h', () => {
    const [c] = validateEgressApprovalSpec({ ...samples.egressApproval().spec, ttl: 'P1DT1S' });
    assert.equal(c?.reason, 'TtlExceedsCeiling');
    assert.match(c?.message ?? '', /P1D \(86400s\)/);
    assert.deepEqual(validateEgressApprovalSpec({ ...samples.egressApproval().spec, ttl: 'PT24H' }), []);
  });

  it('reads the ceiling from the env it is given, capped at 7d', () => {
    const spec = { ...samples.egressApproval().spec, ttl: 'P3D' };
    assert.deepEqual(validateEgressApprovalSpec(spec, { env: { EGRESS_APPROVAL_MAX_TTL_SECONDS: '345600' } }), []);
    assert.equal(validateEgressApprovalSpec(spec, { env: { EGRESS_APPROVAL_MAX_TTL_SECONDS: '3600' } })[0]?.reason, 'TtlExceedsCeiling');
    const eightDays = { ...spec, ttl: 'P8D' };
    assert.equal(
      validateEgressApprovalSpec(eightDays, { env: { EGRESS_APPROVAL_MAX_TTL_SECONDS: '9999999' } })[0]?.reason,
      'TtlExceedsCeiling',
    );
  });

  it('reports reason problems as ReasonInvalid: empty, over 512 bytes, control bytes, DEL', () => {
    const cases: [string, RegExp][] = [
      ['', /1 to 512 bytes/],
      ['x'.repeat(513), /at most 512 bytes.*513/],
      ['é'.repeat(257), /at most 512 bytes.*514/],
      ['bell\u0007', /0x07 at index 4/],
      ['nul\u0000', /0x00/],
      ['esc\u001b[31m', /0x1b/],
      ['del\u007f', /0x7f/],
      ['vt\u000b', /0x0b/],
    ];
    for (const [reason, msg] of cases) {
      const cs = validateEgressApprovalSpec({ ...samples.egressApproval().spec, reason });
      assert.deepEqual(
        cs.map((c) => [c.field, c.reason]),
        [['spec.reason', 'ReasonInvalid']],
        JSON.stringify(reason),
      );
      assert.match(cs[0]!.message, msg);
    }
    assert.equal(reasonProblem('tab\there\r\nand newline'), undefined);
    assert.equal(reasonProblem('é'.repeat(256)), undefined);
  });

  it('checks ticket length in characters: 1..128 when set', () => {
    const spec = samples.egressApproval().spec;
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...spec, ticket: '' })), ['spec.ticket']);
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...spec, ticket: 'T'.repeat(129) })), ['spec.ticket']);
    assert.deepEqual(validateEgressApprovalSpec({ ...spec, ticket: 'T'.repeat(128) }), []);
  });

  it('checks host count 1..16, each host a bare name and each port 1..65535', () => {
    const spec = samples.egressApproval().spec;
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...spec, hosts: [] })), ['spec.hosts']);
    const seventeen = Array.from({ length: 17 }, (_, i) => ({ host: `h${i}.example.com` }));
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...spec, hosts: seventeen })), ['spec.hosts']);
    const bad = [
      { host: 'https://example.com' },
      { host: 'example.com/path' },
      { host: '' },
      { host: 'a.com', port: 0 },
      { host: 'b.com', port: 65536 },
      { host: 'c.com', port: 1.5 },
      { host: 'd.com:443' },
    ];
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...spec, hosts: bad })), [
      'spec.hosts[0].host',
      'spec.hosts[1].host',
      'spec.hosts[2].host',
      'spec.hosts[3].port',
      'spec.hosts[4].port',
      'spec.hosts[5].port',
      'spec.hosts[6].host',
    ]);
  });

  it('says how to fix a URL given as host', () => {
    assert.match(hostProblem('https://example.com/x') ?? '', /not a URL: remove "https:\/\/"/);
    assert.match(hostProblem('example.com/x') ?? '', /remove the path/);
    assert.match(hostProblem('example.com:8443') ?? '', /set port instead/);
    assert.equal(hostProblem('*.example.com'), undefined);
    assert.equal(hostProblem('2001:db8::1'), undefined, 'a bare IPv6 literal (ADR 0045)');
    assert.match(hostProblem('[2001:db8::1]') ?? '', /without brackets/);
    assert.match(hostProblem('fe80::1%eth0') ?? '', /zone id/);
    assert.match(hostProblem('1:2') ?? '', /set port instead/);
  });

  it('requires a sandbox name', () => {
    assert.deepEqual(fields(validateEgressApprovalSpec({ ...samples.egressApproval().spec, sandbox: '' })), ['spec.sandbox']);
  });
});

describe('parseHostArg', () => {
  it('splits host[:port] and rejects URLs instead of guessing', () => {
    assert.deepEqual(parseHostArg('example.com'), { ok: true, endpoint: { host: 'example.com' } });
    assert.deepEqual(parseHostArg('example.com:8443'), { ok: true, endpoint: { host: 'example.com', port: 8443 } });
    assert.deepEqual(parseHostArg('[2001:db8::1]:443'), { ok: true, endpoint: { host: '2001:db8::1', port: 443 } });
    assert.deepEqual(parseHostArg('[::1]'), { ok: true, endpoint: { host: '::1' } });
    for (const bad of ['::1', '2001:db8::1:443', '[::1]:0', '[::1%eth0]:443', '[example.com]:443', '[::1]x'])
      assert.equal(parseHostArg(bad).ok, false, bad);
    for (const bad of ['https://example.com', 'example.com/x', 'example.com:0', 'example.com:70000', 'example.com:http', ':443', '']) {
      const r = parseHostArg(bad);
      assert.equal(r.ok, false, bad);
    }
  });
});

describe('validateInferencePolicySpec', () => {
  it('accepts the content sample and the bundle sample', () => {
    assert.deepEqual(validateInferencePolicySpec(samples.inferencePolicy().spec), []);
    assert.deepEqual(validateInferencePolicySpec(samples.bundleInferencePolicy().spec), []);
  });

  it('reports bundleRef with content fields as InvalidSpec on spec.bundleRef, naming each field set', () => {
    const spec = { ...samples.inferencePolicy().spec, bundleRef: { registry: 'r.io', repository: 'p', digest: SAMPLE_DIGEST } };
    const cs = validateInferencePolicySpec(spec);
    assert.deepEqual(
      cs.map((c) => [c.field, c.reason]),
      [['spec.bundleRef', 'InvalidSpec']],
    );
    assert.match(cs[0]!.message, /tokenBudget, contentSafety, modelPreference, provider, guardrails, displayName/);
  });

  it('reports monthlyTokens below dailyTokens on spec.tokenBudget.monthlyTokens', () => {
    const spec = { ...samples.inferencePolicy().spec, tokenBudget: { dailyTokens: 100, monthlyTokens: 99 } };
    assert.deepEqual(fields(validateInferencePolicySpec(spec)), ['spec.tokenBudget.monthlyTokens']);
    assert.deepEqual(validateInferencePolicySpec({ ...spec, tokenBudget: { dailyTokens: 100, monthlyTokens: 100 } }), []);
    assert.deepEqual(validateInferencePolicySpec({ ...spec, tokenBudget: { monthlyTokens: 1 } }), []);
  });

  it('reports a negative or fractional budget and an unknown severity', () => {
    const spec = samples.inferencePolicy().spec;
    const bad = { ...spec, tokenBudget: { perRequestTokens: -1, dailyTokens: 1.5 }, contentSafety: { hate: 'Extreme' as 'High' } };
    assert.deepEqual(fields(validateInferencePolicySpec(bad)), [
      'spec.tokenBudget.perRequestTokens',
      'spec.tokenBudget.dailyTokens',
      'spec.contentSafety.hate',
    ]);
  });

  it('refuses a DryRun policy with an answer-side field (a content-safety floor, a stage not input-only), and accepts it enforced', () => {
    const base = { appliesTo: {}, tokenBudget: { dailyTokens: 10 } };
    const dry = (extra: Partial<InferencePolicySpec>): string[] =>
      fields(validateInferencePolicySpec({ ...base, ...extra, enforcement: 'DryRun' } as InferencePolicySpec));
    assert.deepEqual(dry({}), []);
    assert.deepEqual(dry({ contentSafety: { violence: 'Low' } }), ['spec.contentSafety']);
    assert.deepEqual(dry({ contentSafety: { requirePromptShields: true } }), ['spec.contentSafety']);
    assert.deepEqual(dry({ contentSafety: { requirePromptShields: false } }), [], 'an inactive floor judges nothing');
    assert.deepEqual(dry({ guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] }), []);
    assert.deepEqual(dry({ guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }, { provider: 'openai-moderation' }] }), [
      'spec.guardrails[1].applyTo',
    ]);
    assert.deepEqual(dry({ guardrails: [{ provider: 'openai-moderation', applyTo: 'both' }] }), ['spec.guardrails[0].applyTo']);
    const msg = validateInferencePolicySpec({ ...base, contentSafety: { hate: 'Safe' }, enforcement: 'DryRun' } as InferencePolicySpec)[0];
    assert.match(msg?.message ?? '', /records a dry-run policy on the request only/);
    assert.deepEqual(
      fields(validateInferencePolicySpec({ ...base, contentSafety: { hate: 'Safe' }, guardrails: [{ provider: 'openai-moderation' }] })),
      [],
    );
  });
});

describe('validateToolPolicySpec', () => {
  it('accepts the sample', () => {
    assert.deepEqual(validateToolPolicySpec(samples.toolPolicy().spec, { clientSide: true }), []);
  });

  it('reports agtProfile with both inline and bundleRef, or neither, as InvalidSpec on spec.agtProfile', () => {
    const spec = samples.toolPolicy().spec;
    const both = validateToolPolicySpec({
      ...spec,
      agtProfile: { inline: 'a: 1', bundleRef: { registry: 'r', repository: 'p', digest: SAMPLE_DIGEST } },
    });
    assert.deepEqual(
      both.map((c) => [c.field, c.reason]),
      [['spec.agtProfile', 'InvalidSpec']],
    );
    assert.deepEqual(fields(validateToolPolicySpec({ ...spec, agtProfile: {} })), ['spec.agtProfile']);
    const { agtProfile: _drop, ...noAgt } = spec;
    assert.deepEqual(validateToolPolicySpec(noAgt), [], 'no agtProfile at all is the back-compat path');
  });

  it('reports inline AGT text that is not YAML on spec.agtProfile.inline', () => {
    const cs = validateToolPolicySpec({ ...samples.toolPolicy().spec, agtProfile: { inline: 'rules: [unclosed\n  - a: {' } });
    assert.deepEqual(fields(cs), ['spec.agtProfile.inline']);
    assert.match(cs[0]!.message, /not valid YAML/);
    assert.deepEqual(validateToolPolicySpec({ ...samples.toolPolicy().spec, agtProfile: { inline: 'a: 1\n---\nb: 2\n' } }), []);
  });

  it('requires a selector only client side', () => {
    const spec = { ...samples.toolPolicy().spec, appliesTo: { sandboxMatchLabels: {} } };
    assert.deepEqual(validateToolPolicySpec(spec), []);
    assert.deepEqual(fields(validateToolPolicySpec(spec, { clientSide: true })), ['spec.appliesTo']);
    assert.deepEqual(validateToolPolicySpec({ ...spec, appliesTo: { sandboxMatchLabels: { a: 'b' } } }, { clientSide: true }), []);
    assert.deepEqual(validateToolPolicySpec({ ...spec, appliesTo: { mcpServer: 'm' } }, { clientSide: true }), []);
  });

  it('compares caps exactly as decimals and by currency', () => {
    const spec = samples.toolPolicy().spec;
    const at = (dailyCap: string, monthlyCap: string): string[] =>
      fields(validateToolPolicySpec({ ...spec, commerce: { dailyCap, monthlyCap } }));
    assert.deepEqual(at('USD 100.00', 'USD 100'), []);
    assert.deepEqual(at('USD 100.001', 'USD 100'), ['spec.commerce.monthlyCap']);
    assert.deepEqual(at('USD 999999999999.999', 'USD 999999999999.998'), ['spec.commerce.monthlyCap']);
    assert.deepEqual(at('USD 1', 'EUR 100'), ['spec.commerce.monthlyCap']);
    assert.deepEqual(at('100', 'USD 100'), ['spec.commerce.dailyCap']);
    assert.deepEqual(parseMoney('EUR 1.5'), { currency: 'EUR', milli: 1500n });
    assert.equal(parseMoney('usd 1'), undefined);
    assert.equal(parseMoney('USD 01'), undefined);
  });
});

describe('validateToolPolicySpec: toolPins and unpinnedTools (ADR 0043)', () => {
  const D = `sha256:${'a'.repeat(64)}`;
  const spec = (over: Partial<ToolPolicySpec>): ToolPolicySpec => ({ ...samples.toolPolicy().spec, ...over });

  it('accepts pins with and without a server, and both unpinnedTools values', () => {
    const pins = [
      { name: 'read_file', digest: D },
      { name: 'read_file', server: 'fs', digest: D },
      { name: 'github/create_issue', server: 'gh', digest: D },
    ];
    assert.deepEqual(validateToolPolicySpec(spec({ toolPins: pins, unpinnedTools: 'Deny' })), []);
    assert.deepEqual(validateToolPolicySpec(spec({ toolPins: [], unpinnedTools: 'Allow' })), []);
  });

  it('refuses a malformed digest, name or server, naming the field', () => {
    const at = (pin: unknown): string[] => fields(validateToolPolicySpec(spec({ toolPins: [pin as never] })));
    assert.deepEqual(at({ name: 'x', digest: 'sha256:' + 'A'.repeat(64) }), ['spec.toolPins[0].digest']);
    assert.deepEqual(at({ name: 'x', digest: 'sha512:' + 'a'.repeat(64) }), ['spec.toolPins[0].digest']);
    assert.deepEqual(at({ name: 'x' }), ['spec.toolPins[0].digest']);
    assert.deepEqual(at({ digest: D }), ['spec.toolPins[0].name']);
    assert.deepEqual(at({ name: 'ｒead_file', digest: D }), ['spec.toolPins[0].name'], 'a fullwidth letter');
    assert.deepEqual(at({ name: 'read file', digest: D }), ['spec.toolPins[0].name']);
    assert.deepEqual(at({ name: 'x'.repeat(129), digest: D }), ['spec.toolPins[0].name']);
    assert.deepEqual(at({ name: 'x', server: 'FS', digest: D }), ['spec.toolPins[0].server']);
    assert.deepEqual(at({ name: 'x', digest: D, tool: 'y' }), ['spec.toolPins[0].tool']);
    assert.deepEqual(at('x'), ['spec.toolPins[0]']);
    assert.deepEqual(fields(validateToolPolicySpec(spec({ toolPins: 'x' as never }))), ['spec.toolPins']);
    assert.deepEqual(fields(validateToolPolicySpec(spec({ unpinnedTools: 'deny' as never }))), ['spec.unpinnedTools']);
  });

  it('refuses two pins for one tool on one server, names compared ignoring case', () => {
    const cs = validateToolPolicySpec(
      spec({
        toolPins: [
          { name: 'read_file', digest: D },
          { name: 'READ_FILE', digest: D },
          { name: 'read_file', server: 'fs', digest: D },
        ],
      }),
    );
    assert.deepEqual(fields(cs), ['spec.toolPins[1].name']);
    assert.match(cs[0]!.message, /spec\.toolPins\[0\]/);
  });

  it('client side only: a pin for a server the policy does not apply to', () => {
    const s = spec({ appliesTo: { mcpServer: 'fs' }, toolPins: [{ name: 'x', server: 'gh', digest: D }] });
    assert.deepEqual(validateToolPolicySpec(s), []);
    assert.deepEqual(fields(validateToolPolicySpec(s, { clientSide: true })), ['spec.toolPins[0].server']);
  });

  it('the CRD schema holds the same limits', () => {
    const props = toolPolicySpecSchema.properties;
    assert.equal(props.toolPins.maxItems, MAX_TOOL_PINS);
    assert.deepEqual(props.unpinnedTools.enum, ['Allow', 'Deny']);
    assert.ok(!('default' in props.unpinnedTools), 'no schema default: an existing policy is not rewritten');
    assert.equal(props.toolPins.items.properties.digest.pattern, TOOL_DIGEST_PATTERN);
  });
});

describe('validateKarsSandboxSpec and validateObject', () => {
  it('checks reference names and baseline endpoints', () => {
    assert.deepEqual(validateKarsSandboxSpec(samples.karsSandbox().spec), []);
    const spec = { inferenceRef: { name: '' }, networkPolicy: { allowedEndpoints: [{ host: 'https://x' }] } };
    assert.deepEqual(fields(validateKarsSandboxSpec(spec)), ['spec.inferenceRef.name', 'spec.networkPolicy.allowedEndpoints[0].host']);
  });

  it('dispatches by kind and throws a PolicyValidationError with a stable code listing every cause', () => {
    const ea = samples.egressApproval();
    ea.spec.ttl = 'P8D';
    ea.spec.reason = '';
    assert.deepEqual(fields(validateObject(ea)), ['spec.reason', 'spec.ttl']);
    assert.throws(
      () => assertValid(ea),
      (e: unknown) =>
        e instanceof PolicyValidationError &&
        e.code === 'KARS_POLICY_INVALID' &&
        e.causes.length === 2 &&
        /EgressApproval default\/alice-extra is invalid: spec\.reason/.test(e.message),
    );
    const ip = samples.inferencePolicy();
    assert.equal(assertValid(ip), ip);
  });
});
