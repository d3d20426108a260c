/**
 * Unknown fields are refused everywhere the CLI writes objects (issue 24, item 1), and file errors are complete
 * (item 5): the real `kars` binary against kars apiserver. Each refusal names every unknown field by its full path
 * with the nearest known field, exits 1, and writes nothing: the test reads the object back through the API.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { runKars } from '../testing/stack.js';
import { inferencePolicyCrdWithoutDisplayName } from '../testing/crds.js';

const V = 'kars.azure.com/v1alpha1';
const API = '/apis/kars.azure.com/v1alpha1/namespaces/default';
const dir = mkdtempSync(join(tmpdir(), 'kars-strict-'));
let n = 0;
/** Write documents (objects, or raw text) to a fresh file and return its path. */
function file(...docs: Array<Record<string, unknown> | string>): string {
  const p = join(dir, `f${++n}.yaml`);
  writeFileSync(p, docs.map((d) => (typeof d === 'string' ? d : stringify(d))).join('---\n'));
  return p;
}
const ip = (name: string, spec: Record<string, unknown>, meta: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  apiVersion: V,
  kind: 'InferencePolicy',
  metadata: { name, ...meta },
  spec,
  ...extra,
});
const BUDGET = { perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000 };
const GOOD = { appliesTo: { sandboxName: 'demo-agent' }, tokenBudget: BUDGET, displayName: 'Demo budget' };

describe('kars writes refuse unknown fields (client-side admission + fieldValidation=Strict)', () => {
  let ts: TestServer;
  let kc: string[];
  before(async () => {
    ts = await startTestServer({});
    await createCrds(ts.client, ...allCrds());
    kc = ['--kubeconfig', ts.server.kubeconfigPath];
  });
  after(() => ts.close());

  /** Run kars expecting a refusal: exit 1, nothing on stdout, and `stderr` exactly. */
  async function refused(args: string[], stderr: string): Promise<void> {
    const r = await runKars([...args, ...kc]);
    assert.equal(r.stderr, stderr);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
  }
  const body = async (path: string) => (await ts.client.get(path)).body;

  it('ip apply -f with a misspelt top-level spec field: refused with the path and a suggestion; the stored budget is intact', async () => {
    const ok = await runKars(['ip', 'apply', '-f', file(ip('demo-budget', GOOD)), ...kc]);
    assert.equal(ok.stdout, 'inferencepolicy.kars.azure.com/demo-budget created\n', ok.stderr);
    const stored = await body(`${API}/inferencepolicies/demo-budget`);
    const typo = file(ip('demo-budget', { appliesTo: { sandboxName: 'demo-agent' }, tokenBuget: BUDGET, displayName: 'Demo budget' }));
    await refused(
      ['ip', 'apply', '-f', typo],
      `error: ${typo} doc 1: InferencePolicy default/demo-budget: unknown field "spec.tokenBuget" (did you mean spec.tokenBudget?)\nnothing was written\n`,
    );
    const now = await body(`${API}/inferencepolicies/demo-budget`);
    assert.equal(now.metadata.resourceVersion, stored.metadata.resourceVersion);
    assert.deepEqual(now.spec.tokenBudget, BUDGET);
  });

  it('nested, list-item, metadata and root-level unknown fields are all named, in document order', async () => {
    const nested = file(ip('demo-budget', { ...GOOD, tokenBudget: { ...BUDGET, dailyToken: 5 } }));
    await refused(
      ['ip', 'apply', '-f', nested],
      `error: ${nested} doc 1: InferencePolicy default/demo-budget: unknown field "spec.tokenBudget.dailyToken" (did you mean spec.tokenBudget.dailyTokens?)\nnothing was written\n`,
    );
    const many = file(
      ip(
        'demo-budget',
        {
          ...GOOD,
          modelPreference: {
            primary: { provider: 'azure-openai', deployment: 'a' },
            fallback: [
              { provider: 'azure-openai', deployment: 'b' },
              { provider: 'azure-openai', deploymnt: 'c', deployment: 'c' },
            ],
          },
        },
        { labelz: { team: 'a' } },
        { extra: true },
      ),
    );
    const at = `error: ${many} doc 1: InferencePolicy default/demo-budget: unknown field`;
    await refused(
      ['ip', 'apply', '-f', many],
      [
        `${at} "metadata.labelz" (did you mean metadata.labels?)`,
        `${at} "spec.modelPreference.fallback[1].deploymnt" (did you mean spec.modelPreference.fallback[1].deployment?)`,
        `${at} "extra"`,
        'nothing was written\n',
      ].join('\n'),
    );
    const now = await body(`${API}/inferencepolicies/demo-budget`);
    assert.equal(now.spec.modelPreference, undefined);
    assert.deepEqual(now.spec.tokenBudget, BUDGET);
  });

  it('a create (no object yet) with a typo writes nothing; flags on top of a bad file do not help', async () => {
    const typo = file(ip('new-budget', { appliesTo: {}, tokenBuget: { dailyTokens: 1 } }));
    const r = await runKars(['ip', 'apply', '-f', typo, '--per-request-tokens', '10', ...kc]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unknown field "spec\.tokenBuget" \(did you mean spec\.tokenBudget\?\)/);
    assert.equal((await ts.client.get(`${API}/inferencepolicies/new-budget`)).status, 404);
  });

  it('tp apply, sandbox create and egress allow-extra refuse them too', async () => {
    const tp = file({ apiVersion: V, kind: 'ToolPolicy', metadata: { name: 't' }, spec: { appliesTo: { tol: 'x' } } });
    await refused(
      ['tp', 'apply', '-f', tp],
      `error: ${tp} doc 1: ToolPolicy default/t: unknown field "spec.appliesTo.tol" (did you mean spec.appliesTo.tool?)\nnothing was written\n`,
    );
    assert.equal((await ts.client.get(`${API}/toolpolicies/t`)).status, 404);
    const sb = file({ apiVersion: V, kind: 'KarsSandbox', metadata: { name: 's' }, spec: { inferenceREF: { name: 'demo-budget' } } });
    await refused(
      ['sandbox', 'create', '-f', sb],
      `error: ${sb} doc 1: KarsSandbox default/s: unknown field "spec.inferenceREF" (did you mean spec.inferenceRef?)\nnothing was written\n`,
    );
    assert.equal((await ts.client.get(`${API}/karssandboxes/s`)).status, 404);
    const ea = file({
      apiVersion: V,
      kind: 'EgressApproval',
      metadata: { name: 'e' },
      spec: { sandbox: 's', hosts: [{ host: 'example.com', prot: 443 }], ttl: 'PT1H', reason: 'r' },
    });
    await refused(
      ['egress', 'allow-extra', 's', '-f', ea],
      `error: ${ea} doc 1: EgressApproval default/e: unknown field "spec.hosts[0].prot" (did you mean spec.hosts[0].port?)\nnothing was written\n`,
    );
    assert.equal((await ts.client.get(`${API}/egressapprovals/e`)).status, 404);
  });

  it('a multi-document file with one bad document writes nothing from any of them', async () => {
    const multi = file(
      ip('multi-ok', GOOD),
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ignored' } },
      { apiVersion: V, kind: 'KarsSandbox', metadata: { name: 'multi-sb' }, spec: { networkPolicy: { allowedEndpoint: [] } } },
    );
    const msg = `error: ${multi} doc 3: KarsSandbox default/multi-sb: unknown field "spec.networkPolicy.allowedEndpoint" (did you mean spec.networkPolicy.allowedEndpoints?)\nnothing was written\n`;
    await refused(['ip', 'apply', '-f', multi], msg);
    await refused(['sandbox', 'create', '-f', multi], msg);
    assert.equal((await ts.client.get(`${API}/inferencepolicies/multi-ok`)).status, 404);
    assert.equal((await ts.client.get(`${API}/karssandboxes/multi-sb`)).status, 404);
  });

  it('-f, --filename and the deprecated --from-file read the same file; both at once is an error', async () => {
    const f = file(ip('alias', GOOD));
    const long = await runKars(['ip', 'apply', '--filename', f, ...kc]);
    assert.equal(long.stdout, 'inferencepolicy.kars.azure.com/alias created\n', long.stderr);
    assert.equal(long.stderr, '');
    const old = await runKars(['ip', 'apply', '--from-file', f, ...kc]);
    assert.equal(old.code, 0, old.stderr);
    assert.equal(old.stdout, 'inferencepolicy.kars.azure.com/alias unchanged\n');
    assert.equal(old.stderr, 'warning: --from-file is deprecated; use -f, --filename\n');
    await refused(
      ['ip', 'apply', '-f', f, '--from-file', f],
      'error: pass the file once: -f/--filename and --from-file are the same flag\n',
    );
    const sb = file({ apiVersion: V, kind: 'KarsSandbox', metadata: { name: 'alias-sb' }, spec: {} });
    assert.equal((await runKars(['sandbox', 'create', '--from-file', sb, ...kc])).code, 0);
    assert.equal((await runKars(['sandbox', 'create', '--filename', sb, ...kc])).stdout, 'karssandbox.kars.azure.com/alias-sb unchanged\n');
    const help = await runKars(['ip', 'apply', '--help']);
    assert.match(help.stdout, /-f, --filename <file>/);
    assert.doesNotMatch(help.stdout, /--from-file/);
  });

  it('malformed YAML: the reason, the line and column, and the offending line with a caret', async () => {
    const head = 'apiVersion: kars.azure.com/v1alpha1\nkind: InferencePolicy\nmetadata:\n  name: y\nspec:\n';
    const unclosed = file(`${head}  appliesTo: {sandboxName: demo-agent\n  displayName: x\n`);
    await refused(
      ['ip', 'apply', '-f', unclosed],
      `error: ${unclosed} is not valid YAML or JSON at line 7, column 3: Flow map in block collection must be sufficiently indented and end with a }\n` +
        '    appliesTo: {sandboxName: demo-agent\n    displayName: x\n    ^\n',
    );
    const cases: Array<[string, string, RegExp]> = [
      [
        `${head}  appliesTo:\n    sandboxName: a\n   displayName: x\n`,
        'line 8, column 1',
        /All mapping items must start at the same column/,
      ],
      [`${head}\tappliesTo: {}\n`, 'line 6, column 1', /Tabs are not allowed as indentation/],
      [`${head}  appliesTo: {}\n  appliesTo: {}\n`, 'line 7, column 3', /Map keys must be unique/],
    ];
    for (const [text, at, reason] of cases) {
      const p = file(text);
      const r = await runKars(['ip', 'apply', '-f', p, ...kc]);
      assert.equal(r.code, 1);
      const [first = '', ...frame] = r.stderr.trimEnd().split('\n');
      assert.ok(first.startsWith(`error: ${p} is not valid YAML or JSON at ${at}: `), r.stderr);
      assert.match(first, reason);
      assert.doesNotMatch(first, /:$/, 'the first line does not end mid-sentence');
      const offending = text.split('\n')[Number(/line (\d+)/.exec(at)?.[1]) - 1] ?? '';
      assert.ok(frame.includes(`  ${offending}`), `the offending line is shown: ${r.stderr}`);
      const col = Number(/column (\d+)/.exec(at)?.[1]);
      assert.equal(frame.at(-1), `${' '.repeat(col + 1)}^`, `a caret under column ${col}: ${r.stderr}`);
    }
    // kars compile shows the same.
    const c = await runKars(['compile', '-f', unclosed]);
    assert.equal(c.code, 1);
    assert.match(c.stderr, /doc 1: invalid YAML at line 7, column 3: Flow map .* end with a }\n {4}appliesTo: \{sandboxName: demo-agent\n/);
    assert.equal((await ts.client.get(`${API}/inferencepolicies/y`)).status, 404);
  });
});

describe('the server refuses too: kars writes with fieldValidation=Strict', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({});
    // A cluster whose InferencePolicy CRD is older than this CLI: it lacks spec.displayName. The client-side check
    // (this CLI's schema) passes; only fieldValidation=Strict keeps the server from dropping the field silently.
    await createCrds(ts.client, inferencePolicyCrdWithoutDisplayName());
  });
  after(() => ts.close());

  it('a field the server does not know is refused by the server (400), and the stored policy is intact', async () => {
    const kc = ['--kubeconfig', ts.server.kubeconfigPath];
    const made = await runKars(['ip', 'apply', 'p', '--sandbox', 'a', '--token-budget', '100', ...kc]);
    assert.equal(made.code, 0, made.stderr);
    const before = (await ts.client.get(`${API}/inferencepolicies/p`)).body;
    const r = await runKars(['ip', 'apply', 'p', '--display-name', 'x', '--token-budget', '5', ...kc]);
    assert.equal(
      r.stderr,
      'Error from server (BadRequest): InferencePolicy in version "v1alpha1" cannot be handled as a InferencePolicy: strict decoding error: unknown field "spec.displayName"\n',
    );
    assert.equal(r.code, 1);
    const after = (await ts.client.get(`${API}/inferencepolicies/p`)).body;
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
    assert.equal(after.spec.tokenBudget.dailyTokens, 100);
  });
});
