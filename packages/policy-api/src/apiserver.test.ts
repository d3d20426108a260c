/**
 * The CRDs against a real `kars apiserver` (envtest's role): the server must accept every CRD, serve the kinds,
 * admit valid objects with defaults applied, and reject invalid ones with 422 naming the field.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { accessSync, constants, realpathSync } from 'node:fs';
import { eventually, findKubectl, runKubectl, startTestServer, type TestServer } from '@kars/apiserver/testing';
import { allCrds } from './crds.js';
import { KARS_RESOURCES, type KarsObject } from './types.js';
import { samples } from './testing/samples.js';

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const path = (kind: KarsObject['kind'], ns = 'default'): string => {
  const r = KARS_RESOURCES.find((x) => x.kind === kind)!;
  return `/apis/${r.group}/${r.version}/namespaces/${ns}/${r.resource}`;
};

function causeFields(body: any): string[] {
  return ((body?.details?.causes ?? []) as { field?: string }[]).map((c) => c.field ?? '');
}

describe('kars CRDs on a real kars apiserver', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds()) {
      const r = await ts.client.post(CRDS, crd);
      assert.equal(r.status, 201, `${crd.metadata.name}: ${r.text}`);
    }
    for (const r of KARS_RESOURCES) {
      await eventually(async () => (await ts.client.get(`/apis/${r.group}/${r.version}/namespaces/default/${r.resource}`)).status === 200);
    }
  });
  after(async () => ts.close());

  it('creates a sample of each kind with 201', async () => {
    for (const obj of Object.values(samples).map((make) => make())) {
      const r = await ts.client.post(path(obj.kind), obj);
      assert.equal(r.status, 201, `${obj.kind}/${obj.metadata.name}: ${r.text}`);
      assert.equal(r.body.metadata.generation, 1);
    }
  });

  it('stores server defaults: sandboxMatchLabels {} and action "*"', async () => {
    const ip = samples.bundleInferencePolicy('defaults');
    ip.spec.appliesTo = {};
    const r = await ts.client.post(path('InferencePolicy'), ip);
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.body.spec.appliesTo, { sandboxMatchLabels: {}, action: '*' });
  });

  it('lists the kinds in discovery with their short names and the kars category', async () => {
    const r = await ts.client.get('/apis/kars.azure.com/v1alpha1');
    assert.equal(r.status, 200, r.text);
    for (const k of KARS_RESOURCES) {
      const res = (r.body.resources as any[]).find((x) => x.name === k.resource);
      assert.ok(res, k.resource);
      assert.equal(res.kind, k.kind);
      assert.equal(res.namespaced, true);
      assert.deepEqual(res.shortNames, [...k.shortNames]);
      assert.deepEqual(res.categories, ['kars']);
    }
  });

  it('rejects bundleRef with tokenBudget with 422 naming spec.bundleRef', async () => {
    const ip = samples.bundleInferencePolicy('bad-bundle');
    ip.spec.tokenBudget = { dailyTokens: 1 };
    const r = await ts.client.post(path('InferencePolicy'), ip);
    assert.equal(r.status, 422, r.text);
    assert.ok(causeFields(r.body).includes('spec.bundleRef'), r.text);
  });

  it('rejects an invalid ToolPolicy, EgressApproval and KarsSandbox with 422 naming the field', async () => {
    const tp = samples.toolPolicy('bad-tp');
    tp.spec.commerce = { dailyCap: 'USD 10', monthlyCap: 'USD 9' };
    const ea = samples.egressApproval('bad-ea');
    ea.spec.hosts = Array.from({ length: 17 }, (_, i) => ({ host: `h${i}.example.com` }));
    const sb = samples.karsSandbox('bad-sb');
    sb.spec.networkPolicy = { allowedEndpoints: [{ host: 'example.com', port: 70000 }] };
    const cases: [KarsObject, string][] = [
      [tp, 'spec.commerce.monthlyCap'],
      [ea, 'spec.hosts'],
      [sb, 'spec.networkPolicy.allowedEndpoints[0].port'],
    ];
    for (const [obj, field] of cases) {
      const r = await ts.client.post(path(obj.kind), obj);
      assert.equal(r.status, 422, `${obj.kind}: ${r.text}`);
      assert.ok(causeFields(r.body).includes(field), `${obj.kind} should name ${field}: ${r.text}`);
    }
  });

  it('admits toolPins and unpinnedTools as written (no default added), and rejects a malformed pin with 422 naming the field', async () => {
    const digest = `sha256:${'0'.repeat(64)}`;
    const ok = samples.toolPolicy('pinned');
    ok.spec.toolPins = [{ name: 'read_file', server: 'fs', digest }];
    ok.spec.unpinnedTools = 'Deny';
    const created = await ts.client.post(path('ToolPolicy'), ok);
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.spec.toolPins, [{ name: 'read_file', server: 'fs', digest }]);
    const plain = await ts.client.post(path('ToolPolicy'), samples.toolPolicy('unpinned'));
    assert.equal(plain.status, 201, plain.text);
    assert.ok(!('unpinnedTools' in plain.body.spec) && !('toolPins' in plain.body.spec), 'an existing shape is stored unchanged');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ toolPins: [{ name: 'read_file', digest: 'sha256:XYZ' }] }, 'spec.toolPins[0].digest'],
      [{ toolPins: [{ name: 'read file', digest }] }, 'spec.toolPins[0].name'],
      [{ toolPins: [{ name: 'x', server: 'FS', digest }] }, 'spec.toolPins[0].server'],
      [{ toolPins: [{ digest }] }, 'spec.toolPins[0].name'],
      [{ unpinnedTools: 'Block' }, 'spec.unpinnedTools'],
    ];
    for (const [i, [over, field]] of cases.entries()) {
      const tp = samples.toolPolicy(`bad-pin-${i}`);
      Object.assign(tp.spec, over);
      const r = await ts.client.post(path('ToolPolicy'), tp);
      assert.equal(r.status, 422, `${field}: ${r.text}`);
      assert.ok(causeFields(r.body).includes(field), `should name ${field}: ${r.text}`);
    }
  });

  // Kubernetes drops `status` on create when the status subresource is enabled (apiextensions strategy
  // PrepareForCreate). kars apiserver keeps it today; this runs as a TODO so it turns green when that is fixed.
  it('drops status sent on create, as kube-apiserver does for a status subresource', async () => {
    const ea = samples.egressApproval('status-on-create');
    ea.status = { phase: 'Active' };
    const c = await ts.client.post(path('EgressApproval'), ea);
    assert.equal(c.status, 201, c.text);
    assert.equal(c.body.status, undefined);
  });

  it('validates status written through the status subresource', async () => {
    const c = await ts.client.post(path('EgressApproval'), samples.egressApproval('with-status'));
    assert.equal(c.status, 201, c.text);
    const status = {
      phase: 'Pending',
      observedGeneration: 1,
      hostCount: 2,
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'BlockedOnSandbox',
          message: 'sandbox alice is not Running',
          lastTransitionTime: '2025-01-01T00:00:00Z',
          observedGeneration: 1,
        },
      ],
    };
    const u = await ts.client.patch(`${path('EgressApproval')}/with-status/status`, { status }, 'merge');
    assert.equal(u.status, 200, u.text);
    assert.equal(u.body.status.phase, 'Pending');
    assert.equal(u.body.metadata.generation, 1, 'a status write does not bump generation');
    const bad = await ts.client.patch(`${path('EgressApproval')}/with-status/status`, { status: { phase: 'Ready' } }, 'merge');
    assert.equal(bad.status, 422, bad.text);
    assert.ok(causeFields(bad.body).includes('status.phase'), bad.text);
  });
});

describe('operator signals at admission, through kubectl (issue 9 item 7)', () => {
  let ts: TestServer;
  let dir: string;
  const kubectl = findKubectl();
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds()) assert.equal((await ts.client.post(CRDS, crd)).status, 201);
    for (const r of KARS_RESOURCES) await eventually(async () => (await ts.client.get(path(r.kind))).status === 200);
    dir = mkdtempSync(join(tmpdir(), 'kars-signals-'));
  });
  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await ts.close();
  });

  /** Run kubectl asynchronously: the apiserver lives in this process, so a synchronous spawn would starve it. */
  function run(args: string[], yaml: string): Promise<{ code: number; out: string }> {
    const file = join(dir, `obj-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, yaml);
    return new Promise((resolve) => {
      execFile(
        kubectl!,
        ['--kubeconfig', ts.server.kubeconfigPath, ...args, '-f', file],
        { encoding: 'utf8', timeout: 60_000 },
        (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, out: `${stdout}${stderr}` });
        },
      );
    });
  }

  it(
    'kubectl create and apply refuse a KarsSandbox typo (inferenceREF), naming the field; nothing is stored',
    { skip: kubectl ? false : 'no kubectl binary found' },
    async () => {
      const yaml =
        'apiVersion: kars.azure.com/v1alpha1\nkind: KarsSandbox\nmetadata:\n  name: typo\n  namespace: default\nspec:\n  inferenceREF:\n    name: budget\n';
      for (const verb of [['create'], ['apply'], ['apply', '--server-side']]) {
        const r = await run(verb, yaml);
        assert.notEqual(r.code, 0, `kubectl ${verb.join(' ')} must fail: ${r.out}`);
        assert.match(r.out, /inferenceREF/, `kubectl ${verb.join(' ')} names the field: ${r.out}`);
      }
      assert.equal((await ts.client.get(`${path('KarsSandbox')}/typo`)).status, 404);
    },
  );

  it(
    'kubectl apply refuses an EgressApproval whose TTL is past the 7 d hard cap, instead of leaving it Pending',
    { skip: kubectl ? false : 'no kubectl binary found' },
    async () => {
      const approval = (name: string, ttl: string): string =>
        `apiVersion: kars.azure.com/v1alpha1\nkind: EgressApproval\nmetadata:\n  name: ${name}\n  namespace: default\nspec:\n  sandbox: alice\n  hosts: [{host: example.com}]\n  reason: incident\n  ttl: ${ttl}\n`;
      const bad = await run(['apply'], approval('too-long', 'P8D'));
      assert.notEqual(bad.code, 0, bad.out);
      assert.match(bad.out, /spec\.ttl.*at most P7D/s);
      assert.equal((await ts.client.get(`${path('EgressApproval')}/too-long`)).status, 404);
      const ok = await run(['apply'], approval('a-week', 'P7D'));
      assert.equal(ok.code, 0, ok.out);
    },
  );
});

/** kubectl 1.33 when it is installed beside the one findKubectl picks (its explain reads OpenAPI v3), else that one. */
function explainKubectl(): string | undefined {
  const base = findKubectl();
  if (base === undefined) return undefined;
  const k133 = join(dirname(realpathSync(base)), 'kubectl.1.33');
  try {
    accessSync(k133, constants.X_OK);
    return k133;
  } catch {
    return base;
  }
}

describe('kubectl explain documents the kars kinds (issue 24 item 6)', () => {
  let ts: TestServer;
  const kubectl = explainKubectl();
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds()) assert.equal((await ts.client.post(CRDS, crd)).status, 201);
    for (const r of KARS_RESOURCES) await eventually(async () => (await ts.client.get(path(r.kind))).status === 200);
  });
  after(async () => ts.close());

  it(
    'explains inferencepolicy.spec.tokenBudget field by field: meaning, unit, default, what the router does',
    { skip: kubectl ? false : 'no kubectl binary found' },
    async () => {
      const r = await runKubectl(kubectl!, ts.server.kubeconfigPath, ['explain', 'inferencepolicy.spec.tokenBudget']);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, /<no description>/, r.stdout);
      assert.match(r.stdout, /perRequestTokens\s+<integer>\s+Tokens\. Most completion tokens one request may ask for/);
      assert.match(r.stdout, /429\s+per_request_tokens_exceeded/);
      assert.match(r.stdout, /dailyTokens\s+<integer>\s+Tokens \(input \+ output/);
      assert.match(r.stdout, /monthlyTokens\s+<integer>/);
    },
  );

  for (const field of [
    'inferencepolicy.spec',
    'toolpolicy.spec.rateLimit',
    'toolpolicy.spec.commerce',
    'egressapproval.spec',
    'karssandbox.spec.networkPolicy',
    'karssandbox.status.routers',
  ]) {
    it(`explains ${field} with no field left undocumented`, { skip: kubectl ? false : 'no kubectl binary found' }, async () => {
      const r = await runKubectl(kubectl!, ts.server.kubeconfigPath, ['explain', field]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /FIELDS:/);
      assert.doesNotMatch(r.stdout, /<no description>/, r.stdout);
    });
  }
});

describe('READY and REASON printer columns (issue 9 item 7)', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    for (const crd of allCrds()) assert.equal((await ts.client.post(CRDS, crd)).status, 201);
    for (const r of KARS_RESOURCES) await eventually(async () => (await ts.client.get(path(r.kind))).status === 200);
  });
  after(async () => ts.close());

  it('shows a router-rejected policy as Ready=False/RouterRejected in the Table kubectl get renders', async () => {
    assert.equal((await ts.client.post(path('InferencePolicy'), samples.inferencePolicy('refused'))).status, 201);
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const cond = (type: string, status: string, reason: string): Record<string, unknown> => ({
      type,
      status,
      reason,
      message: 'router r1 of sandbox alice refused InferencePolicy',
      lastTransitionTime: now,
      observedGeneration: 1,
    });
    const st = await ts.client.request(
      'PATCH',
      `${path('InferencePolicy')}/refused/status`,
      {
        status: {
          phase: 'Degraded',
          conditions: [
            cond('Ready', 'False', 'RouterRejected'),
            cond('Progressing', 'False', 'RouterRejected'),
            cond('Degraded', 'True', 'RouterRejected'),
          ],
        },
      },
      { 'content-type': 'application/merge-patch+json' },
    );
    assert.equal(st.status, 200, st.text);
    const table = await ts.client.request('GET', path('InferencePolicy'), undefined, {
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });
    assert.equal(table.status, 200, table.text);
    const names = (table.body.columnDefinitions as Array<{ name: string }>).map((c) => c.name);
    const row = (table.body.rows as Array<{ cells: unknown[] }>)[0]!.cells;
    assert.equal(row[names.indexOf('Ready')], 'False');
    assert.equal(row[names.indexOf('Reason')], 'RouterRejected');
    assert.equal(row[names.indexOf('Phase')], 'Degraded');
  });
});
