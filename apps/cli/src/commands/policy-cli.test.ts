import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateInferencePolicySpec } from '@kars/policy-api';
import { chat, runKars, startTestStack, until } from '../testing/stack.js';
import type { TestStack } from '../testing/stack.js';

const IP = '/apis/kars.azure.com/v1alpha1/namespaces/default/inferencepolicies';

describe('kars ip / tp / egress / sandbox as processes against kars apiserver + controller + router', () => {
  let stack: TestStack;
  let kc: string[];
  let routerUrl: string;

  before(async () => {
    stack = await startTestStack({ namespaces: ['team-b'] });
    kc = ['--kubeconfig', stack.kubeconfig];
    const sb = await runKars(['sandbox', 'create', '-f', 'examples/sandbox.yaml', ...kc]);
    assert.equal(sb.code, 0, sb.stderr);
    assert.equal(sb.stdout, 'karssandbox.kars.azure.com/demo-agent created\n');
    routerUrl = (await stack.router('demo-agent')).url;
  });
  after(() => stack.close());

  it('ip apply -f … --wait returns once the router enforces the policy and prints edit → enforced', async () => {
    const r = await runKars(['ip', 'apply', '-f', 'examples/inference-policy.yaml', '--wait', '--timeout', '30', ...kc]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^inferencepolicy\.kars\.azure\.com\/demo-budget created\n/);
    assert.match(
      r.stdout,
      /inferencepolicy\.kars\.azure\.com\/demo-budget enforced: generation 1, digest sha256:[0-9a-f]{64}, edit → enforced \d+ ms; controller: edit → every router \d+ ms\n$/,
    );
    // Enforced means enforced: no polling needed, the very next request sees the policy.
    assert.equal((await chat(routerUrl, 2000)).status, 429);
    assert.equal((await chat(routerUrl, 500)).status, 200);
  });

  it('an edit with flags keeps the other fields, and --wait sees the new digest enforced', async () => {
    const before = await stack.ts.client.get(`${IP}/demo-budget`);
    const r = await runKars(['ip', 'apply', 'demo-budget', '--per-request-tokens', '3000', '--wait', ...kc]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /demo-budget configured\n.*enforced: generation 2, digest (sha256:[0-9a-f]{64})/s);
    const digest = /digest (sha256:[0-9a-f]{64})/.exec(r.stdout)?.[1];
    const after = await stack.ts.client.get(`${IP}/demo-budget`);
    assert.notEqual(digest, before.body.status.compiledDigest);
    assert.equal(after.body.status.loadedDigest, digest);
    assert.deepEqual(after.body.spec.tokenBudget, { perRequestTokens: 3000, dailyTokens: 200000, monthlyTokens: 5000000 });
    assert.equal(after.body.spec.appliesTo.sandboxName, 'demo-agent');
    assert.equal((await chat(routerUrl, 2000)).status, 200);
  });

  it("refuses an invalid policy client-side with the controller's message, exit 1, nothing written", async () => {
    const r = await runKars([
      'ip',
      'apply',
      'bad-budget',
      '--sandbox',
      'demo-agent',
      '--token-budget',
      '10',
      '--monthly-tokens',
      '5',
      ...kc,
    ]);
    assert.equal(r.code, 1);
    const causes = validateInferencePolicySpec({
      appliesTo: { sandboxName: 'demo-agent' },
      tokenBudget: { dailyTokens: 10, monthlyTokens: 5 },
    });
    const head = causes.map((c) => `${c.field}: ${c.message}`).join('; ');
    assert.equal(r.stderr, `error: InferencePolicy default/bad-budget is invalid: ${head}\n`);
    assert.equal((await stack.ts.client.get(`${IP}/bad-budget`)).status, 404);
    // A rule the CRD schema cannot check (AGT YAML that does not parse): the CLI refuses it with the very message the
    // controller puts in the Degraded condition when the same spec is written around the CLI.
    const agt = join(mkdtempSync(join(tmpdir(), 'kars-agt-')), 'bad.yaml');
    writeFileSync(agt, 'rules: [\n');
    const t = await runKars(['tp', 'apply', 'bad-tools', '--tool', 'x', '--agt-file', agt, ...kc]);
    assert.equal(t.code, 1);
    const m = /^error: ToolPolicy default\/bad-tools is invalid: (.*)\n$/.exec(t.stderr);
    assert.ok(m, t.stderr);
    const TP = '/apis/kars.azure.com/v1alpha1/namespaces/default/toolpolicies';
    assert.equal((await stack.ts.client.get(`${TP}/bad-tools`)).status, 404);
    assert.equal(
      (
        await stack.ts.client.post(TP, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'ToolPolicy',
          metadata: { name: 'bad-tools' },
          spec: { appliesTo: { tool: 'x' }, agtProfile: { inline: 'rules: [\n' } },
        })
      ).status,
      201,
    );
    const degraded = await until('Degraded', async () => {
      const o = await stack.ts.client.get(`${TP}/bad-tools`);
      return o.body.status?.conditions?.find((c: any) => c.type === 'Degraded' && c.status === 'True');
    });
    assert.equal(degraded.message, m[1]);
    assert.equal((await runKars(['tp', 'delete', 'bad-tools', ...kc])).code, 0);
    const g = await runKars(['ip', 'apply', 'demo-budget', '--per-request-tokens', 'lots', ...kc]);
    assert.equal(g.code, 1);
    assert.match(g.stderr, /spec\.tokenBudget\.perRequestTokens: must be a non-negative integer, got lots/);
  });

  it('get, list and delete; a missing object is a clear error with exit 1', async () => {
    const list = await runKars(['ip', 'list', ...kc]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^NAME\s+SANDBOX\s+MODEL\s+DAILY\s+AGE\s+STATUS\n/);
    assert.match(list.stdout, /\ndemo-budget\s+demo-agent\s+azure-openai\/gpt-4o\s+200000\s+\S+\s+Ready\n/);
    const json = await runKars(['ip', 'get', 'demo-budget', '-o', 'json', ...kc]);
    assert.equal(JSON.parse(json.stdout).spec.tokenBudget.perRequestTokens, 3000);
    const pretty = await runKars(['ip', 'get', 'demo-budget', ...kc]);
    assert.match(pretty.stdout, /Token budget:\s+per request 3000, daily 200000, monthly 5000000/);
    const missing = await runKars(['ip', 'get', 'nope', ...kc]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'error: inferencepolicies.kars.azure.com "nope" not found in namespace "default"\n');
    const badOut = await runKars(['ip', 'list', '-o', 'xml', ...kc]);
    assert.equal(badOut.code, 1);
    assert.match(badOut.stderr, /-o must be one of table, yaml, json, got "xml"/);
  });

  it('honours KUBECONFIG and -n, and --kubeconfig wins over KUBECONFIG', async () => {
    const viaEnv = await runKars(['ip', 'list'], { env: { KUBECONFIG: stack.kubeconfig } });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    assert.match(viaEnv.stdout, /demo-budget/);
    const other = await runKars(['ip', 'apply', 'b-budget', '-n', 'team-b', '--sandbox', 'x', '--token-budget', '100', ...kc]);
    assert.equal(other.code, 0, other.stderr);
    assert.equal((await stack.ts.client.get('/apis/kars.azure.com/v1alpha1/namespaces/team-b/inferencepolicies/b-budget')).status, 200);
    const inB = await runKars(['ip', 'list', '-n', 'team-b'], { env: { KUBECONFIG: stack.kubeconfig } });
    assert.match(inB.stdout, /b-budget/);
    assert.doesNotMatch(inB.stdout, /demo-budget/);
    const broken = join(mkdtempSync(join(tmpdir(), 'kars-kc-')), 'missing');
    const wins = await runKars(['ip', 'list', ...kc], { env: { KUBECONFIG: broken } });
    assert.equal(wins.code, 0, wins.stderr);
    const none = await runKars(['ip', 'list', '--kubeconfig', broken]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /cannot load kubeconfig from .*missing/);
  });

  it('tp apply from the example, flag edits, validation; egress allow-extra / approvals / revoke; sandbox get / list', async () => {
    const tp = await runKars(['tp', 'apply', '-f', 'examples/tool-policy.yaml', '--wait', ...kc]);
    assert.equal(tp.code, 0, tp.stderr);
    assert.match(tp.stdout, /toolpolicy\.kars\.azure\.com\/demo-tools enforced: generation 1, digest sha256:/);
    const noSel = await runKars(['tp', 'apply', 'empty', '--rps', '1', ...kc]);
    assert.equal(noSel.code, 1);
    assert.match(noSel.stderr, /spec\.appliesTo: must set at least one of tool, mcpServer or sandboxMatchLabels/);
    const caps = await runKars(['tp', 'apply', 'pay', '--tool', 'pay', '--daily-cap', 'USD 10', '--monthly-cap', 'USD 5', ...kc]);
    assert.equal(caps.code, 1);
    assert.match(caps.stderr, /spec\.commerce\.monthlyCap: must be greater than or equal to dailyCap/);
    const tlist = await runKars(['tp', 'list', ...kc]);
    assert.match(tlist.stdout, /^NAME\s+TOOL\s+DAILYCAP\s+AGE\s+STATUS\ndemo-tools\s+\*\s+-\s+\S+\s+Ready\n$/);

    const url = await runKars([
      'egress',
      'allow-extra',
      'demo-agent',
      '--host',
      'https://example.com/x',
      '--ttl',
      'PT1H',
      '--reason',
      'r',
      ...kc,
    ]);
    assert.equal(url.code, 1);
    assert.match(url.stderr, /host must be a host name, not a URL/);
    const ttl = await runKars(['egress', 'allow-extra', 'demo-agent', '--host', 'example.com', '--ttl', 'P30D', '--reason', 'r', ...kc]);
    assert.equal(ttl.code, 1);
    assert.match(ttl.stderr, /spec\.ttl: P30D exceeds the ceiling of P1D \(86400s\)/);
    const ok = await runKars([
      'egress',
      'allow-extra',
      'demo-agent',
      '--host',
      'example.com',
      '--host',
      'api.example.org:8443',
      '--ttl',
      'PT1H',
      '--reason',
      'docs',
      '--name',
      'demo-docs',
      '--wait',
      ...kc,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /egressapproval\.kars\.azure\.com\/demo-docs created\n.*demo-docs enforced: generation 1, digest sha256:/s);
    const approvals = await runKars(['egress', 'approvals', 'demo-agent', ...kc]);
    assert.match(
      approvals.stdout,
      /^NAME\s+HOSTS\s+TTL\s+EXPIRES\s+PHASE\s+AGE\ndemo-docs\s+example\.com:443,api\.example\.org:8443\s+PT1H\s+\S+\s+Active\s+\S+\n$/,
    );
    const revoke = await runKars(['egress', 'revoke', 'demo-docs', ...kc]);
    assert.equal(revoke.code, 0, revoke.stderr);
    assert.equal(revoke.stdout, 'egressapproval.kars.azure.com/demo-docs deleted\n');
    const none = await runKars(['egress', 'approvals', 'demo-agent', ...kc]);
    assert.equal(none.stdout, '');

    // IPv6 literals (ADR 0045): in brackets on the command line, bare in the object, bracketed in the table.
    const bare = await runKars([
      'egress',
      'allow-extra',
      'demo-agent',
      '--host',
      '2606:4700::1111',
      '--ttl',
      'PT1H',
      '--reason',
      'r',
      ...kc,
    ]);
    assert.equal(bare.code, 1);
    assert.match(bare.stderr, /write an IPv6 address in brackets, as in \[2001:db8::1\]:443/);
    const v6 = await runKars([
      'egress',
      'allow-extra',
      'demo-agent',
      '--host',
      '[2606:4700::1111]:8443',
      '--ttl',
      'PT1H',
      '--reason',
      'v6',
      '--name',
      'demo-v6',
      '--wait',
      ...kc,
    ]);
    assert.equal(v6.code, 0, v6.stderr);
    assert.match(v6.stdout, /demo-v6 enforced: generation 1, digest sha256:/);
    const v6obj = await stack.ts.client.get(`/apis/kars.azure.com/v1alpha1/namespaces/default/egressapprovals/demo-v6`);
    assert.deepEqual(v6obj.body.spec.hosts, [{ host: '2606:4700::1111', port: 8443 }]);
    assert.match(
      (await runKars(['egress', 'approvals', 'demo-agent', ...kc])).stdout,
      /\ndemo-v6\s+\[2606:4700::1111\]:8443\s+PT1H\s+\S+\s+Active\s/,
    );
    assert.equal((await runKars(['egress', 'revoke', 'demo-v6', ...kc])).code, 0);

    const sblist = await runKars(['sandbox', 'list', ...kc]);
    assert.match(
      sblist.stdout,
      /^NAME\s+PHASE\s+INFERENCE\s+TOOLPOLICY\s+ROUTERS\s+AGE\ndemo-agent\s+Running\s+demo-budget\s+demo-tools\s+1\s+\S+\n$/,
    );
    const file = join(mkdtempSync(join(tmpdir(), 'kars-sb-')), 'sb.json');
    writeFileSync(
      file,
      JSON.stringify({ apiVersion: 'kars.azure.com/v1alpha1', kind: 'KarsSandbox', metadata: { name: 'scratch' }, spec: {} }),
    );
    assert.equal((await runKars(['sandbox', 'create', '-f', file, '--inference', 'demo-budget', '--allow', 'pypi.org', ...kc])).code, 0);
    const sbget = await runKars(['sandbox', 'get', 'scratch', '-o', 'yaml', ...kc]);
    assert.match(sbget.stdout, /inferenceRef:\n\s+name: demo-budget/);
    assert.match(sbget.stdout, /- host: pypi\.org/);
    const del = await runKars(['sandbox', 'delete', 'scratch', '--no-prompt', ...kc]);
    assert.equal(del.stdout, 'karssandbox.kars.azure.com/scratch deleted\n');
  });
});
