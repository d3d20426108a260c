import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { admit, compileSchema, type CompiledSchema, type SchemaCause } from '@kars/kube-schema';
import { isIPv6 } from 'node:net';
import {
  allCrds,
  HOST_PATTERN,
  egressApprovalCrd,
  inferencePolicyCrd,
  karsSandboxCrd,
  toolPolicyCrd,
  type CustomResourceDefinition,
} from './crds.js';
import { GROUP, KARS_RESOURCES, VERSION, type KarsObject } from './types.js';
import { parseTtl } from './validate.js';
import { SAMPLE_DIGEST, samples } from './testing/samples.js';

function schemaOf(crd: CustomResourceDefinition): CompiledSchema {
  return compileSchema(crd.spec.versions[0].schema.openAPIV3Schema);
}

const schemas = {
  InferencePolicy: schemaOf(inferencePolicyCrd()),
  ToolPolicy: schemaOf(toolPolicyCrd()),
  EgressApproval: schemaOf(egressApprovalCrd()),
  KarsSandbox: schemaOf(karsSandboxCrd()),
};

function admitObj(obj: KarsObject | Record<string, unknown>): { object: any; causes: SchemaCause[] } {
  const kind = (obj as { kind: keyof typeof schemas }).kind;
  return admit(schemas[kind], JSON.parse(JSON.stringify(obj)) as Record<string, unknown>);
}

/** Admit `obj` and return the causes that name `field` (ignoring kube's "rules not checked" footer). */
function causesAt(obj: unknown, field: string): SchemaCause[] {
  const { causes } = admitObj(obj as Record<string, unknown>);
  assert.ok(causes.length > 0, `expected ${field} to be rejected, but the object was admitted`);
  return causes.filter((c) => c.field === field);
}

describe('kars CRDs', () => {
  it('compiles every CRD schema as kube-apiserver would (structural, CEL compiles, defaults valid)', () => {
    for (const crd of allCrds()) assert.doesNotThrow(() => schemaOf(crd), crd.metadata.name);
  });

  it('declares four namespaced kinds with a status subresource, short names and the kars category', () => {
    const crds = allCrds();
    assert.deepEqual(
      crds.map((c) => [c.metadata.name, c.spec.names.shortNames]),
      [
        ['inferencepolicies.kars.azure.com', ['ip']],
        ['toolpolicies.kars.azure.com', ['tp']],
        ['egressapprovals.kars.azure.com', ['eappr']],
        ['karssandboxes.kars.azure.com', ['ksb']],
      ],
    );
    for (const [i, c] of crds.entries()) {
      const r = KARS_RESOURCES[i]!;
      assert.equal(c.spec.group, GROUP);
      assert.equal(c.spec.scope, 'Namespaced');
      assert.equal(c.spec.names.kind, r.kind);
      assert.equal(c.spec.names.plural, r.resource);
      assert.deepEqual(c.spec.names.categories, ['kars']);
      assert.equal(c.spec.versions.length, 1);
      assert.equal(c.spec.versions[0].name, VERSION);
      assert.deepEqual(c.spec.versions[0].subresources, { status: {} });
    }
  });

  it('shows the printer columns the contract lists, in order', () => {
    const cols = (c: CustomResourceDefinition): string[] =>
      c.spec.versions[0].additionalPrinterColumns.map((p) => `${p.name}=${p.jsonPath}`);
    const ready = ['Ready=.status.conditions[?(@.type=="Ready")].status', 'Reason=.status.conditions[?(@.type=="Ready")].reason'];
    assert.deepEqual(cols(inferencePolicyCrd()), [
      'Sandbox=.spec.appliesTo.sandboxName',
      'DailyTokens=.spec.tokenBudget.dailyTokens',
      'Phase=.status.phase',
      ...ready,
      'Age=.metadata.creationTimestamp',
    ]);
    assert.deepEqual(cols(toolPolicyCrd()), [
      'Tool=.spec.appliesTo.tool',
      'DailyCap=.spec.commerce.dailyCap',
      'Phase=.status.phase',
      ...ready,
      'Age=.metadata.creationTimestamp',
    ]);
    assert.deepEqual(cols(egressApprovalCrd()), [
      'Sandbox=.spec.sandbox',
      'Phase=.status.phase',
      ...ready,
      'Expires=.status.expiresAt',
      'Hosts=.status.hostCount',
      'Age=.metadata.creationTimestamp',
    ]);
    assert.deepEqual(cols(karsSandboxCrd()), [
      'Phase=.status.phase',
      'Inference=.spec.inferenceRef.name',
      'Age=.metadata.creationTimestamp',
    ]);
  });

  it('returns independent objects, so mutating one CRD never changes another', () => {
    const a = inferencePolicyCrd();
    (a.spec.versions[0].schema.openAPIV3Schema as any).properties.spec.properties.tokenBudget.properties.dailyTokens.minimum = 99;
    const b = inferencePolicyCrd();
    assert.equal(
      (b.spec.versions[0].schema.openAPIV3Schema as any).properties.spec.properties.tokenBudget.properties.dailyTokens.minimum,
      0,
    );
    assert.equal(
      (b.spec.versions[0].schema.openAPIV3Schema as any).properties.spec.properties.tokenBudget.properties.perRequestTokens.minimum,
      0,
    );
  });

  describe('admission of valid samples', () => {
    for (const make of Object.values(samples)) {
      it(`admits the ${make.name} sample unchanged apart from defaults`, () => {
        const { causes, object } = admitObj(make());
        assert.deepEqual(causes, []);
        assert.equal(object.metadata.name, make().metadata.name);
      });
    }

    it('defaults appliesTo.sandboxMatchLabels to {} and appliesTo.action to "*", but never provider', () => {
      const { object, causes } = admitObj({
        ...samples.bundleInferencePolicy(),
        spec: { appliesTo: {}, bundleRef: samples.bundleInferencePolicy().spec.bundleRef },
      });
      assert.deepEqual(causes, []);
      assert.deepEqual(object.spec.appliesTo, { sandboxMatchLabels: {}, action: '*' });
      assert.equal(object.spec.provider, undefined, 'a defaulted provider would make every bundleRef spec invalid');
    });

    it('defaults a ToolPolicy counterpartyAllowlist to [] (deny all)', () => {
      const tp = samples.toolPolicy();
      delete tp.spec.commerce!.counterpartyAllowlist;
      assert.deepEqual(admitObj(tp).object.spec.commerce.counterpartyAllowlist, []);
    });

    it('keeps no KarsSandbox spec field it does not model (a closed schema: strict clients are refused, see ADR 0013), and prunes unknown status fields', () => {
      const sb = { ...samples.karsSandbox(), status: { phase: 'Running', bogus: 1 } } as Record<string, unknown>;
      (sb['spec'] as Record<string, unknown>)['agent'] = { image: 'ghcr.io/x/agent:1' };
      const { object, causes } = admitObj(sb);
      assert.deepEqual(causes, []);
      assert.equal(object.spec.agent, undefined);
      assert.deepEqual(object.status, { phase: 'Running' });
    });

    it('prunes unknown fields in a policy spec', () => {
      const ip = samples.inferencePolicy() as unknown as { spec: Record<string, unknown> };
      ip.spec['typo'] = true;
      assert.equal(admitObj(ip as unknown as KarsObject).object.spec.typo, undefined);
    });

    it('admits a status with a null loadedDigest and full conditions', () => {
      const ip = samples.inferencePolicy();
      ip.status = {
        phase: 'Compiled',
        observedGeneration: 3,
        loadedDigest: null,
        compiledDigest: SAMPLE_DIGEST,
        lastCompiledAt: '2025-01-01T00:00:00Z',
        propagation: { lastMs: 1200, lastCompileMs: 4 },
        conditions: [
          {
            type: 'Ready',
            status: 'False',
            reason: 'AwaitingRouterEnforcement',
            message: '0/1 sandbox routers confirmed digest',
            lastTransitionTime: '2025-01-01T00:00:00Z',
            observedGeneration: 3,
          },
        ],
      };
      assert.deepEqual(admitObj(ip).causes, []);
    });
  });

  describe('admission of invalid objects names the field', () => {
    it('rejects bundleRef together with tokenBudget with the CEL message on spec.bundleRef', () => {
      const ip = samples.bundleInferencePolicy();
      ip.spec.tokenBudget = { dailyTokens: 10 };
      const [c] = causesAt(ip, 'spec.bundleRef');
      assert.match(c!.message, /bundleRef is mutually exclusive with tokenBudget/);
      assert.equal(c!.reason, 'FieldValueForbidden');
    });

    it('rejects monthlyTokens below dailyTokens on spec.tokenBudget.monthlyTokens', () => {
      const ip = samples.inferencePolicy();
      ip.spec.tokenBudget = { dailyTokens: 10, monthlyTokens: 9 };
      assert.match(
        causesAt(ip, 'spec.tokenBudget.monthlyTokens')[0]!.message,
        /monthlyTokens must be greater than or equal to dailyTokens/,
      );
    });

    it('admits monthlyTokens equal to dailyTokens', () => {
      const ip = samples.inferencePolicy();
      ip.spec.tokenBudget = { dailyTokens: 10, monthlyTokens: 10 };
      assert.deepEqual(admitObj(ip).causes, []);
    });

    it('rejects a severity outside Safe|Low|Medium|High', () => {
      const ip = samples.inferencePolicy() as any;
      ip.spec.contentSafety.hate = 'Extreme';
      assert.equal(causesAt(ip, 'spec.contentSafety.hate')[0]!.reason, 'FieldValueNotSupported');
    });

    it('rejects an unknown provider, action and guardrail applyTo', () => {
      const ip = samples.inferencePolicy() as any;
      ip.spec.provider = 'openai';
      ip.spec.appliesTo.action = 'speech';
      ip.spec.guardrails[0].applyTo = 'sideways';
      assert.equal(causesAt(ip, 'spec.provider').length, 1);
      assert.equal(causesAt(ip, 'spec.appliesTo.action').length, 1);
      assert.equal(causesAt(ip, 'spec.guardrails[0].applyTo').length, 1);
    });

    it('rejects negative token budgets', () => {
      const ip = samples.inferencePolicy() as any;
      ip.spec.tokenBudget.perRequestTokens = -1;
      assert.equal(causesAt(ip, 'spec.tokenBudget.perRequestTokens').length, 1);
    });

    it('rejects a bundleRef digest that is not sha256:<64 hex>', () => {
      const ip = samples.bundleInferencePolicy();
      ip.spec.bundleRef!.digest = 'latest';
      assert.equal(causesAt(ip, 'spec.bundleRef.digest').length, 1);
    });

    it('rejects an InferencePolicy without appliesTo', () => {
      const ip = samples.inferencePolicy() as any;
      delete ip.spec.appliesTo;
      assert.equal(causesAt(ip, 'spec.appliesTo')[0]!.reason, 'FieldValueRequired');
    });

    it('rejects an agtProfile with both inline and bundleRef, and one with neither', () => {
      const both = samples.toolPolicy();
      both.spec.agtProfile = { inline: 'a: 1', bundleRef: samples.bundleInferencePolicy().spec.bundleRef! };
      assert.match(causesAt(both, 'spec.agtProfile')[0]!.message, /exactly one of inline or bundleRef/);
      const neither = samples.toolPolicy();
      neither.spec.agtProfile = {};
      assert.match(causesAt(neither, 'spec.agtProfile')[0]!.message, /exactly one of inline or bundleRef/);
    });

    it('rejects monthlyCap below dailyCap, or in another currency, and admits an equal one written differently', () => {
      const low = samples.toolPolicy();
      low.spec.commerce = { dailyCap: 'USD 100.00', monthlyCap: 'USD 99.999' };
      assert.match(causesAt(low, 'spec.commerce.monthlyCap')[0]!.message, /monthlyCap must be in the same currency as dailyCap/);
      const other = samples.toolPolicy();
      other.spec.commerce = { dailyCap: 'USD 100', monthlyCap: 'EUR 5000' };
      assert.equal(causesAt(other, 'spec.commerce.monthlyCap').length, 1);
      const equal = samples.toolPolicy();
      equal.spec.commerce = { dailyCap: 'USD 100', monthlyCap: 'USD 100.000' };
      assert.deepEqual(admitObj(equal).causes, []);
    });

    it('rejects a malformed money amount with the pattern only (no CEL evaluation error)', () => {
      const tp = samples.toolPolicy();
      tp.spec.commerce = { dailyCap: '100 dollars', monthlyCap: 'USD 1' };
      const { causes } = admitObj(tp);
      assert.deepEqual(
        causes.map((c) => c.field),
        ['spec.commerce.dailyCap'],
      );
      assert.match(causes[0]!.message, /should match/);
    });

    it('rejects an approval mode outside never|always|aboveThreshold and a malformed rate window', () => {
      const tp = samples.toolPolicy() as any;
      tp.spec.approval.mode = 'sometimes';
      tp.spec.rateLimit.window = 'hourly';
      assert.equal(causesAt(tp, 'spec.approval.mode').length, 1);
      assert.equal(causesAt(tp, 'spec.rateLimit.window').length, 1);
    });

    it('rejects 17 hosts on spec.hosts and zero hosts too', () => {
      const many = samples.egressApproval();
      many.spec.hosts = Array.from({ length: 17 }, (_, i) => ({ host: `h${i}.example.com` }));
      assert.equal(causesAt(many, 'spec.hosts')[0]!.reason, 'FieldValueTooMany');
      const none = samples.egressApproval();
      none.spec.hosts = [];
      assert.equal(causesAt(none, 'spec.hosts').length, 1);
      const sixteen = samples.egressApproval();
      sixteen.spec.hosts = Array.from({ length: 16 }, (_, i) => ({ host: `h${i}.example.com` }));
      assert.deepEqual(admitObj(sixteen).causes, []);
    });

    it('rejects a 513-byte reason, and a 257-character reason that is 514 UTF-8 bytes', () => {
      const ascii = samples.egressApproval();
      ascii.spec.reason = 'x'.repeat(513);
      assert.equal(causesAt(ascii, 'spec.reason').length, 1);
      const wide = samples.egressApproval();
      wide.spec.reason = 'é'.repeat(257);
      assert.match(causesAt(wide, 'spec.reason')[0]!.message, /at most 512 bytes/);
      const exact = samples.egressApproval();
      exact.spec.reason = 'é'.repeat(256);
      assert.deepEqual(admitObj(exact).causes, []);
    });

    it('rejects an empty reason, an empty ticket and a 129-character ticket', () => {
      const ea = samples.egressApproval();
      ea.spec.reason = '';
      assert.equal(causesAt(ea, 'spec.reason').length, 1);
      const t0 = samples.egressApproval();
      t0.spec.ticket = '';
      assert.equal(causesAt(t0, 'spec.ticket').length, 1);
      const t129 = samples.egressApproval();
      t129.spec.ticket = 'T'.repeat(129);
      assert.equal(causesAt(t129, 'spec.ticket').length, 1);
    });

    it('rejects URLs, ports in the host, and ports outside 1..65535', () => {
      const ea = samples.egressApproval();
      ea.spec.hosts = [
        { host: 'https://example.com/x' },
        { host: 'example.com:443' },
        { host: 'ok.example.com', port: 65536 },
        { host: '' },
      ];
      assert.equal(causesAt(ea, 'spec.hosts[0].host').length, 1);
      assert.equal(causesAt(ea, 'spec.hosts[1].host').length, 1);
      assert.equal(causesAt(ea, 'spec.hosts[2].port').length, 1);
      assert.ok(causesAt(ea, 'spec.hosts[3].host').length > 0, 'empty host (minLength and pattern both report it)');
    });

    it('admits a bare IPv6 literal as a host, and refuses brackets, zone ids, ports and malformed ones (ADR 0045)', () => {
      const ok = [
        '::1',
        '2001:db8::1',
        '2001:DB8:0:0:0:0:0:1',
        '::ffff:127.0.0.1',
        'fe80::1',
        '::',
        '1:2:3:4:5:6:7:8',
        '1::',
        '64:ff9b::192.0.2.1',
      ];
      const bad = [
        '[::1]',
        '[::1]:443',
        'fe80::1%eth0',
        '1:2',
        ':::',
        '1:2:3:4:5:6:7:8:9',
        '::1::',
        '2001:db8::g',
        '::ffff:256.0.0.1',
        'example.com:443',
      ];
      for (const host of [...ok, ...bad]) {
        const ea = samples.egressApproval();
        ea.spec.hosts = [{ host, port: 443 }];
        const sb = samples.karsSandbox();
        sb.spec.networkPolicy = { allowedEndpoints: [{ host, port: 443 }] };
        if (ok.includes(host)) {
          assert.deepEqual(admitObj(ea).causes, [], host);
          assert.deepEqual(admitObj(sb).causes, [], host);
        } else {
          assert.equal(causesAt(ea, 'spec.hosts[0].host').length, 1, host);
          assert.equal(causesAt(sb, 'spec.networkPolicy.allowedEndpoints[0].host').length, 1, host);
        }
      }
    });

    it('property: a host with a colon passes the schema pattern exactly when it is an IPv6 address without a zone', () => {
      const re = new RegExp(HOST_PATTERN);
      const v6ish = fc.stringMatching(/^[0-9a-fA-F:.]{1,45}$/).filter((h) => h.includes(':'));
      fc.assert(
        fc.property(
          fc.oneof(
            fc.ipV6(),
            v6ish,
            fc.ipV6().map((h) => h.toUpperCase()),
          ),
          (h) => {
            assert.equal(re.test(h), isIPv6(h), h);
          },
        ),
        { numRuns: 2000 },
      );
    });

    it('rejects a TTL outside the grammar at admission (the hard cap is checked too; the lower ceiling is the controller’s)', () => {
      for (const ttl of ['1h', 'P1W', 'PT', 'P', 'P1DT', 'pt1h', 'PT1.5H']) {
        const ea = samples.egressApproval();
        ea.spec.ttl = ttl;
        assert.equal(causesAt(ea, 'spec.ttl').length, 1, ttl);
      }
      const long = samples.egressApproval();
      long.spec.ttl = 'P2D';
      assert.deepEqual(admitObj(long).causes, [], 'P2D is under the 7 d hard cap; only the controller knows its (lower) ceiling');
    });

    it('rejects a missing sandbox, hosts, reason or ttl as required', () => {
      for (const f of ['sandbox', 'hosts', 'reason', 'ttl']) {
        const ea = samples.egressApproval() as any;
        delete ea.spec[f];
        assert.equal(causesAt(ea, `spec.${f}`)[0]!.reason, 'FieldValueRequired', f);
      }
    });

    it('rejects a KarsSandbox with an empty inferenceRef name, a bad phase and a bad baseline endpoint', () => {
      const sb = samples.karsSandbox() as any;
      sb.spec.inferenceRef.name = '';
      sb.spec.networkPolicy.allowedEndpoints[0].host = 'http://x';
      sb.status = { phase: 'Done' };
      assert.equal(causesAt(sb, 'spec.inferenceRef.name').length, 1);
      assert.equal(causesAt(sb, 'spec.networkPolicy.allowedEndpoints[0].host').length, 1);
      assert.equal(causesAt(sb, 'status.phase').length, 1);
    });

    it('rejects an EgressApproval status phase outside Pending|Active|Expired and a condition without a reason', () => {
      const ea = samples.egressApproval() as any;
      ea.status = {
        phase: 'Ready',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2025-01-01T00:00:00Z', message: '' }],
      };
      assert.equal(causesAt(ea, 'status.phase').length, 1);
      assert.equal(causesAt(ea, 'status.conditions[0].reason').length, 1);
    });
  });
});

describe('EgressApproval TTL at admission (CEL): grammar, > 0 and the 7 d hard cap', () => {
  const admitTtl = (ttl: string): string[] => {
    const a = samples.egressApproval();
    a.spec.ttl = ttl;
    return admitObj(a)
      .causes.filter((c) => c.field === 'spec.ttl')
      .map((c) => c.message);
  };

  it('admits P7D and everything shorter, refuses anything longer with a message naming the cap', () => {
    for (const ok of ['PT1H', 'P7D', 'PT168H', 'PT604800S', 'P6DT23H59M60S', 'PT10080M', 'P00000000007D'])
      assert.deepEqual(admitTtl(ok), [], ok);
    for (const bad of ['P7DT1S', 'PT604801S', 'P8D', 'PT169H', 'P99999999D', 'PT99999999999999999999S'])
      assert.match(admitTtl(bad).join('; '), /at most P7D \(7 days, the hard cap\)/, bad);
    assert.match(admitTtl('PT0S').join('; '), /greater than zero/);
  });

  it('agrees with the controller parser on every TTL of the grammar (property)', () => {
    const num = fc.oneof(fc.nat({ max: 10 }), fc.nat({ max: 700_000 }), fc.bigInt({ min: 0n, max: 10n ** 25n })).map((n) => String(n));
    const ttl = fc.tuple(fc.option(num), fc.option(num), fc.option(num), fc.option(num)).map(([d, h, m, s]) => {
      const time = `${h === null ? '' : `${h}H`}${m === null ? '' : `${m}M`}${s === null ? '' : `${s}S`}`;
      return `P${d === null ? '' : `${d}D`}${time === '' ? '' : `T${time}`}`;
    });
    fc.assert(
      fc.property(ttl, (t) => {
        const seconds = parseTtl(t);
        const controllerOk = seconds !== undefined && seconds > 0 && seconds <= 7 * 24 * 3600;
        assert.equal(admitTtl(t).length === 0, controllerOk, `${t}: controller parses ${String(seconds)} s`);
      }),
      { numRuns: 300 },
    );
  });
});

describe('KarsSandbox refuses unknown fields', () => {
  it('drops nothing silently: a typo like inferenceREF is an unknown field the strict path names', () => {
    const sb = samples.karsSandbox() as unknown as { spec: Record<string, unknown> };
    sb.spec['inferenceREF'] = { name: 'x' };
    const pruned = admitObj(sb as unknown as Record<string, unknown>).object as { spec: Record<string, unknown> };
    assert.equal(pruned.spec['inferenceREF'], undefined, 'the closed schema does not keep it (kubectl strict validation reports it)');
    assert.deepEqual(
      karsSandboxCrd().spec.versions[0].schema.openAPIV3Schema.properties?.['spec']?.['x-kubernetes-preserve-unknown-fields'],
      undefined,
    );
  });
});
