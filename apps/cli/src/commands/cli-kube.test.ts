/**
 * Every `kars` operator command on a real kube-apiserver (issue 18 item 3, "CLI"), for each pinned
 * Kubernetes version: one control plane per version (etcd, kube-apiserver, kube-controller-manager
 * from @kars/kube-envtest), the kars CRDs created through its API, the real `kars controller`,
 * `kars router` and `kars stub openai|mcp` as child processes on the admin kubeconfig, and the CLI
 * under test run as a process with that kubeconfig, as an operator would. Each command's output is
 * asserted, and so is the object read back through kube-apiserver. Skips (naming `npm run
 * kube:build`) without the binaries.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { until } from '@kars/kube-core/testing';
import { findKubeBinaries, processesMentioning, readPins, startControlPlane, startKars, stopKars } from '@kars/kube-envtest';
import type { ControlPlane, KarsChild } from '@kars/kube-envtest';
import { allCrds, inferencePolicyCrd } from '@kars/policy-api';
import { inferencePolicyCrdWithoutDisplayName } from '../testing/crds.js';
import { callTool, chat, runKars } from '../testing/run-kars.js';
import type { RunResult } from '../testing/run-kars.js';

const WAIT = { timeoutMs: 90_000, everyMs: 250 };
const KARS = '/apis/kars.azure.com/v1alpha1/namespaces/default';
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const DIGEST = /sha256:[0-9a-f]{64}/;
const dir = mkdtempSync(join(tmpdir(), 'kars-cli-kube-'));
let files = 0;
/** Write an object as YAML to a fresh file; returns its path. */
function file(obj: Record<string, unknown>): string {
  const p = join(dir, `f${++files}.yaml`);
  writeFileSync(p, stringify(obj));
  return p;
}

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  describe(`kars operator commands on kube-apiserver ${pin.version}`, { skip: found.binaries ? false : found.reason }, () => {
    let cp: ControlPlane;
    let kc: string[];
    let routerUrl = '';
    const children: KarsChild[] = [];
    const logs = (): string => children.map((c) => `--- kars ${c.name}:\n${c.output.join('').slice(-2000)}`).join('\n');
    /** `kars ARGS --kubeconfig ADMIN`, as an operator runs it. */
    const kars = (args: string[]): Promise<RunResult> => runKars([...args, ...kc], { timeoutMs: 120_000 });
    /** kars ARGS, which must exit 0. */
    const ok = async (args: string[]): Promise<RunResult> => {
      const r = await kars(args);
      assert.equal(r.code, 0, `kars ${args.join(' ')}: ${r.stderr}\n${logs()}`);
      return r;
    };
    /** GET a path from kube-apiserver as admin: the parsed body, or undefined on 404. */
    const api = async (path: string): Promise<any> => {
      const r = await cp.request(path);
      if (r.status === 404) return undefined;
      assert.equal(r.status, 200, r.body);
      return JSON.parse(r.body);
    };
    const gone = (what: string, path: string): Promise<boolean> =>
      until(`${what} is gone`, async () => (await api(path)) === undefined, WAIT);
    const router = async (name: string, sandbox: string, upstream: string, mcp: string): Promise<KarsChild> => {
      const r = startKars(name, [
        'router',
        '--sandbox',
        sandbox,
        '--instance',
        `${sandbox}-0`,
        '--listen',
        '127.0.0.1:0',
        '--egress-listen',
        '127.0.0.1:0',
        '--upstream',
        upstream,
        '--mcp-upstream',
        mcp,
        '--kubeconfig',
        cp.kubeconfig,
      ]);
      children.push(r);
      await r.url;
      return r;
    };
    let upstream = '';
    let mcpUrl = '';

    before(async () => {
      cp = await startControlPlane({ binaries: found.binaries! });
      kc = ['--kubeconfig', cp.kubeconfig];
      for (const crd of allCrds()) {
        const r = await cp.request(CRDS, { method: 'POST', body: crd });
        assert.equal(r.status, 201, r.body);
      }
      await until(
        'the kars CRDs are Established',
        async () => {
          const list = await api(CRDS);
          const established = (list.items as any[]).filter((c) =>
            c.status?.conditions?.some((x: any) => x.type === 'Established' && x.status === 'True'),
          );
          return established.length === allCrds().length;
        },
        WAIT,
      );
      const stub = startKars('stub openai', ['stub', 'openai', '--listen', '127.0.0.1:0']);
      const mcp = startKars('stub mcp', ['stub', 'mcp', '--listen', '127.0.0.1:0', '--tool', 'echo', '--tool', 'delete_file']);
      children.push(stub, mcp);
      [upstream, mcpUrl] = await Promise.all([stub.url, mcp.url]);
      children.push(startKars('controller', ['controller', '--kubeconfig', cp.kubeconfig, '--metrics-addr', 'disabled']));
    });
    after(async () => {
      await Promise.all(children.map((c) => stopKars(c)));
      await cp?.stop();
      if (cp) assert.deepEqual(processesMentioning(cp.dir), [], 'no process of this control plane (or a kars child) is left running');
    });

    it('sandbox create -f: created, then unchanged; the stored spec is the file’s', async () => {
      const r = await ok(['sandbox', 'create', '-f', 'examples/sandbox.yaml']);
      routerUrl = (await (await router('router', 'demo-agent', upstream, mcpUrl)).url).replace(/\/$/, '');
      assert.equal(r.stdout, 'karssandbox.kars.azure.com/demo-agent created\n');
      const sb = await api(`${KARS}/karssandboxes/demo-agent`);
      assert.deepEqual(sb.spec, {
        inferenceRef: { name: 'demo-budget' },
        governance: { enabled: true, toolPolicyRef: { name: 'demo-tools' } },
        networkPolicy: { allowedEndpoints: [{ host: 'api.github.com' }] },
      });
      // "unchanged" is the CLI's reading of kube-apiserver's no-op update (the resourceVersion it returns is the one sent).
      const again = await ok(['sandbox', 'create', '-f', 'examples/sandbox.yaml']);
      assert.equal(again.stdout, 'karssandbox.kars.azure.com/demo-agent unchanged\n');
      assert.equal((await api(`${KARS}/karssandboxes/demo-agent`)).metadata.generation, sb.metadata.generation);
    });

    it('ip apply -f … --wait returns once the router enforces it; the status read back carries the printed digest', async () => {
      const r = await ok(['ip', 'apply', '-f', 'examples/inference-policy.yaml', '--wait', '--timeout', '90']);
      const m =
        /^inferencepolicy\.kars\.azure\.com\/demo-budget created\ninferencepolicy\.kars\.azure\.com\/demo-budget enforced: generation 1, digest (sha256:[0-9a-f]{64}), edit → enforced \d+ ms; controller: edit → every router \d+ ms\n$/.exec(
          r.stdout,
        );
      assert.ok(m, r.stdout);
      const ip = await api(`${KARS}/inferencepolicies/demo-budget`);
      assert.equal(ip.status.compiledDigest, m[1]);
      assert.equal(ip.status.loadedDigest, m[1]);
      assert.equal(ip.status.observedGeneration, 1);
      assert.deepEqual(ip.spec.tokenBudget, { perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000 });
      assert.equal((await chat(routerUrl, 2000)).status, 429);
      assert.equal((await chat(routerUrl, 500)).status, 200);
    });

    it('ip apply NAME --flag … --wait keeps the other fields; the same edit again is unchanged (same generation)', async () => {
      const r = await ok(['ip', 'apply', 'demo-budget', '--per-request-tokens', '3000', '--wait', '--timeout', '90']);
      const digest =
        /^inferencepolicy\.kars\.azure\.com\/demo-budget configured\n.*enforced: generation 2, digest (sha256:[0-9a-f]{64})/s.exec(
          r.stdout,
        )?.[1];
      assert.ok(digest, r.stdout);
      const ip = await api(`${KARS}/inferencepolicies/demo-budget`);
      assert.equal(ip.metadata.generation, 2);
      assert.equal(ip.status.loadedDigest, digest);
      assert.deepEqual(ip.spec.tokenBudget, { perRequestTokens: 3000, dailyTokens: 200000, monthlyTokens: 5000000 });
      assert.equal(ip.spec.appliesTo.sandboxName, 'demo-agent');
      assert.equal(ip.spec.displayName, 'Demo budget');
      assert.equal((await chat(routerUrl, 2000)).status, 200, 'enforced means the very next request sees the new cap');
      const same = await ok(['ip', 'apply', 'demo-budget', '--per-request-tokens', '3000']);
      assert.equal(same.stdout, 'inferencepolicy.kars.azure.com/demo-budget unchanged\n');
      assert.equal((await api(`${KARS}/inferencepolicies/demo-budget`)).metadata.generation, 2);
    });

    it('ip get (pretty, json, yaml) and list (table, json) show what the API holds; a missing or invalid one is exit 1, nothing written', async () => {
      const ip = await api(`${KARS}/inferencepolicies/demo-budget`);
      const typo = file({
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'InferencePolicy',
        metadata: { name: 'demo-budget' },
        spec: { appliesTo: {}, tokenBuget: {} },
      });
      // Independent invocations (reads, and refusals that write nothing) run side by side: the file's wall time.
      const [pretty, jsonRun, yamlRun, list, listJson, missing, bad, t] = await Promise.all([
        ok(['ip', 'get', 'demo-budget']),
        ok(['ip', 'get', 'demo-budget', '-o', 'json']),
        ok(['ip', 'get', 'demo-budget', '-o', 'yaml']),
        ok(['ip', 'list']),
        ok(['ip', 'list', '-o', 'json']),
        kars(['ip', 'get', 'nope']),
        kars(['ip', 'apply', 'bad-budget', '--sandbox', 'demo-agent', '--token-budget', '10', '--monthly-tokens', '5']),
        kars(['ip', 'apply', '-f', typo]),
      ]);
      assert.match(pretty.stdout, /^Name:\s+demo-budget\nNamespace:\s+default\n/);
      assert.match(pretty.stdout, /\nToken budget:\s+per request 3000, daily 200000, monthly 5000000\n/);
      assert.match(pretty.stdout, /\nStatus:\s+Ready, generation 2, observedGeneration 2\n/);
      assert.match(pretty.stdout, new RegExp(`\\nCompiled digest:\\s+${ip.status.compiledDigest as string}\\n`));
      assert.match(pretty.stdout, /\nReady:\s+True \(RouterEnforcing\)/);
      const json = JSON.parse(jsonRun.stdout);
      assert.equal(json.metadata.uid, ip.metadata.uid);
      assert.deepEqual(json.spec, ip.spec);
      // kube-apiserver serves a custom resource's keys sorted (kars apiserver keeps their written order): match either.
      assert.match(yamlRun.stdout, /\n {2}tokenBudget:\n(?: {4}\w+: \d+\n)* {4}perRequestTokens: 3000\n/);
      assert.match(
        list.stdout,
        /^NAME\s+SANDBOX\s+MODEL\s+DAILY\s+AGE\s+STATUS\ndemo-budget\s+demo-agent\s+azure-openai\/gpt-4o\s+200000\s+\S+\s+Ready\n$/,
      );
      const items = JSON.parse(listJson.stdout).items as any[];
      assert.deepEqual(
        items.map((i) => i.metadata.name),
        (await api(`${KARS}/inferencepolicies`)).items.map((i: any) => i.metadata.name),
      );
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr, 'error: inferencepolicies.kars.azure.com "nope" not found in namespace "default"\n');
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /^error: InferencePolicy default\/bad-budget is invalid: spec\.tokenBudget\.monthlyTokens: /);
      assert.equal(await api(`${KARS}/inferencepolicies/bad-budget`), undefined);
      assert.equal(t.code, 1);
      assert.match(t.stderr, /unknown field "spec\.tokenBuget" \(did you mean spec\.tokenBudget\?\)\nnothing was written\n$/);
      const kept = await api(`${KARS}/inferencepolicies/demo-budget`);
      assert.equal(kept.metadata.generation, ip.metadata.generation);
      assert.deepEqual(kept.spec, ip.spec);
    });

    it('tp apply -f … --wait, get, list; the router enforces the AGT profile (a delete tool is denied)', async () => {
      const r = await ok(['tp', 'apply', '-f', 'examples/tool-policy.yaml', '--wait', '--timeout', '90']);
      const digest =
        /^toolpolicy\.kars\.azure\.com\/demo-tools created\n.*demo-tools enforced: generation 1, digest (sha256:[0-9a-f]{64})/s.exec(
          r.stdout,
        )?.[1];
      assert.ok(digest, r.stdout);
      const tp = await api(`${KARS}/toolpolicies/demo-tools`);
      assert.equal(tp.status.compiledDigest, digest);
      assert.equal(tp.status.loadedDigest, digest);
      assert.deepEqual(tp.spec.rateLimit, { rps: 5, burst: 10 });
      const list = await ok(['tp', 'list']);
      assert.match(list.stdout, /^NAME\s+TOOL\s+DAILYCAP\s+AGE\s+STATUS\ndemo-tools\s+\*\s+-\s+\S+\s+Ready\n$/);
      const get = await ok(['tp', 'get', 'demo-tools', '-o', 'json']);
      assert.equal(JSON.parse(get.stdout).status.compiledDigest, digest);
      const denied = await callTool(routerUrl, 'delete_file');
      assert.ok(denied.error ?? denied.result?.isError, JSON.stringify(denied));
      assert.match(JSON.stringify(denied), /deleting is not allowed/);
      const allowed = await callTool(routerUrl, 'echo');
      assert.equal(allowed.error, undefined, JSON.stringify(allowed));
    });

    it('egress allow-extra --wait, approvals, revoke: the approval read back is Active with the router’s digest, then gone', async () => {
      const r = await ok([
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
        '--timeout',
        '90',
      ]);
      assert.match(r.stdout, /^egressapproval\.kars\.azure\.com\/demo-docs created\n.*demo-docs enforced: generation 1, digest sha256:/s);
      const ea = await api(`${KARS}/egressapprovals/demo-docs`);
      assert.equal(ea.status.phase, 'Active');
      assert.match(ea.status.mergedDigest, DIGEST);
      assert.equal(ea.status.loadedDigest, ea.status.mergedDigest);
      // No port is stored for the default (443 is the compiled form's, not a schema default).
      assert.deepEqual(ea.spec.hosts, [{ host: 'example.com' }, { host: 'api.example.org', port: 8443 }]);
      const approvals = await ok(['egress', 'approvals', 'demo-agent']);
      assert.match(
        approvals.stdout,
        new RegExp(
          `^NAME\\s+HOSTS\\s+TTL\\s+EXPIRES\\s+PHASE\\s+AGE\\ndemo-docs\\s+example\\.com:443,api\\.example\\.org:8443\\s+PT1H\\s+${ea.status.expiresAt as string}\\s+Active\\s+\\S+\\n$`,
        ),
      );
      const url = await kars(['egress', 'allow-extra', 'demo-agent', '--host', 'https://x.example', '--ttl', 'PT1H', '--reason', 'r']);
      assert.equal(url.code, 1);
      assert.match(url.stderr, /host must be a host name, not a URL/);
      const revoke = await ok(['egress', 'revoke', 'demo-docs', '--no-prompt']);
      assert.equal(revoke.stdout, 'egressapproval.kars.azure.com/demo-docs deleted\n');
      await gone('the revoked approval', `${KARS}/egressapprovals/demo-docs`);
      const none = await ok(['egress', 'approvals', 'demo-agent']);
      assert.equal(none.stdout, '');
      assert.equal(none.stderr, 'No EgressApprovals for sandbox demo-agent found in default namespace.\n');
    });

    it('policy status: SYNCED per policy and router, digests and generations as the API holds them', async () => {
      const ip = await api(`${KARS}/inferencepolicies/demo-budget`);
      const tp = await api(`${KARS}/toolpolicies/demo-tools`);
      const r = await ok(['policy', 'status']);
      assert.match(
        r.stdout,
        /^POLICY\s+MODE\s+SANDBOX\s+ROUTER\s+STATUS\s+COMPILED\s+LOADED\s+GEN\s+OBSERVED\s+LAST\s+MAX\s+STALENESS\s+DETAIL\n/,
      );
      const short = (d: string): string => d.slice(0, 'sha256:'.length + 12);
      assert.match(
        r.stdout,
        new RegExp(
          `\\nip/demo-budget\\s+Enforce\\s+demo-agent\\s+demo-agent-0\\s+SYNCED\\s+${short(ip.status.compiledDigest)}\\s+${short(ip.status.compiledDigest)}\\s+2\\s+2\\s`,
        ),
      );
      assert.match(
        r.stdout,
        new RegExp(`\\ntp/demo-tools\\s+Enforce\\s+demo-agent\\s+demo-agent-0\\s+SYNCED\\s+${short(tp.status.compiledDigest)}\\s`),
      );
      const json = JSON.parse((await ok(['policy', 'status', 'demo-budget', '-o', 'json'])).stdout);
      assert.equal(json.length, 1);
      assert.equal(json[0].compiledDigest, ip.status.compiledDigest);
      assert.equal(json[0].generation, ip.metadata.generation);
      assert.equal(json[0].lastMs, ip.status.propagation.lastMs);
      assert.equal(json[0].routers.length, 1);
      assert.equal(json[0].routers[0].state, 'SYNCED');
      assert.equal(json[0].routers[0].loadedDigest, ip.status.compiledDigest);
      const none = await kars(['policy', 'status', 'nope']);
      assert.equal(none.code, 1);
      assert.match(none.stderr, /no InferencePolicy or ToolPolicy named "nope" in namespace "default"/);
    });

    it('sandbox get / list show the live router; create with flags, get -o yaml, delete (read back: gone)', async () => {
      const sb = await until('the sandbox status lists its router', async () => {
        const o = await api(`${KARS}/karssandboxes/demo-agent`);
        return o.status?.routers?.length === 1 ? o : undefined;
      });
      const [get, list] = await Promise.all([ok(['sandbox', 'get', 'demo-agent']), ok(['ksb', 'list'])]);
      assert.match(get.stdout, /\nInferencePolicy:\s+demo-budget\nToolPolicy:\s+demo-tools\nBaseline egress:\s+api\.github\.com:443\n/);
      assert.match(get.stdout, new RegExp(`\\nPhase:\\s+${sb.status.phase as string}\\n`));
      assert.match(get.stdout, /\n {2}demo-agent-0 {2}last seen \S+ {2}.*InferencePolicy sha256:[0-9a-f]{12}/);
      assert.match(
        list.stdout,
        /^NAME\s+PHASE\s+INFERENCE\s+TOOLPOLICY\s+ROUTERS\s+AGE\ndemo-agent\s+\S+\s+demo-budget\s+demo-tools\s+1\s+\S+\n$/,
      );
      const made = await ok([
        'sandbox',
        'create',
        'scratch',
        '--inference',
        'demo-budget',
        '--allow',
        'pypi.org',
        '--allow',
        'files.example:8443',
      ]);
      assert.equal(made.stdout, 'karssandbox.kars.azure.com/scratch created\n');
      assert.deepEqual((await api(`${KARS}/karssandboxes/scratch`)).spec, {
        inferenceRef: { name: 'demo-budget' },
        networkPolicy: {
          allowedEndpoints: [{ host: 'pypi.org' }, { host: 'files.example', port: 8443 }],
        },
      });
      const yaml = await ok(['sandbox', 'get', 'scratch', '-o', 'yaml']);
      assert.match(yaml.stdout, /inferenceRef:\n\s+name: demo-budget/);
      const del = await ok(['sandbox', 'delete', 'scratch', '--no-prompt']);
      assert.equal(del.stdout, 'karssandbox.kars.azure.com/scratch deleted\n');
      await gone('the deleted sandbox', `${KARS}/karssandboxes/scratch`);
      const again = await kars(['sandbox', 'delete', 'scratch', '--no-prompt']);
      assert.equal(again.code, 1);
      assert.equal(again.stderr, 'error: karssandboxes.kars.azure.com "scratch" not found in namespace "default"\n');
    });

    it('--wait: Degraded fails with the controller’s reason (exit 1); no router within --timeout is exit 2; delete finalizes', async () => {
      const bundle = file({
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'InferencePolicy',
        metadata: { name: 'bundled' },
        spec: {
          appliesTo: { sandboxName: 'demo-agent' },
          bundleRef: { registry: 'registry.invalid', repository: 'policies/x', digest: `sha256:${'a'.repeat(64)}` },
        },
      });
      const d = await kars(['ip', 'apply', '-f', bundle, '--wait', '--timeout', '90']);
      assert.equal(d.code, 1, d.stdout + d.stderr);
      assert.equal(d.stdout, 'inferencepolicy.kars.azure.com/bundled created\n');
      assert.match(d.stderr, /^error: inferencepolicy\.kars\.azure\.com\/bundled generation 1 is not enforced: Degraded \(InvalidRef\): /);
      const degraded = (await api(`${KARS}/inferencepolicies/bundled`)).status.conditions.find((c: any) => c.type === 'Degraded');
      assert.equal(degraded.status, 'True');
      assert.equal(degraded.reason, 'InvalidRef');

      // A sandbox no router serves: the policy compiles but is never echoed, so --wait gives up with exit 2.
      await ok(['sandbox', 'create', 'unserved', '--inference', 'lonely']);
      const t = await kars(['ip', 'apply', 'lonely', '--sandbox', 'unserved', '--token-budget', '100', '--wait', '--timeout', '1']);
      assert.equal(t.code, 2, t.stdout + t.stderr);
      assert.equal(t.stdout, 'inferencepolicy.kars.azure.com/lonely created\n');
      assert.match(
        t.stderr,
        /^error: timed out after 1s waiting for inferencepolicy\.kars\.azure\.com\/lonely generation 1 to be enforced: /,
      );

      for (const name of ['bundled', 'lonely']) {
        const del = await ok(['ip', 'delete', name, '--no-prompt']);
        assert.equal(del.stdout, `inferencepolicy.kars.azure.com/${name} deleted\n`);
      }
      await ok(['sandbox', 'delete', 'unserved', '--no-prompt']);
      for (const name of ['bundled', 'lonely']) await gone(`InferencePolicy ${name} (finalized)`, `${KARS}/inferencepolicies/${name}`);
    });

    describe('kars freshness probe', () => {
      let probeRouter: KarsChild;
      const probePolicies = async (): Promise<string[]> =>
        ((await api(`${KARS}/inferencepolicies`)).items as any[])
          .map((p) => p.metadata.name)
          .filter((n: string) => n.startsWith('kars-probe-'));
      /** After a probe: no probe policy is left (the controller finalizes it) and the probe sandbox is gone. */
      const cleanedUp = async (sandbox: string): Promise<void> => {
        await until('the probe policies are finalized and gone', async () => (await probePolicies()).length === 0, WAIT);
        assert.equal(await api(`${KARS}/karssandboxes/${sandbox}`), undefined, 'the probe sandbox is deleted');
      };

      it('passes its SLO with a router serving the probe sandbox: edits compiled, echoed and Ready in order; cleans up', async (t) => {
        probeRouter = await router('probe router', 'kars-probe', upstream, mcpUrl);
        // A generous SLO: the test proves the pipeline meets one, not how fast this machine is.
        const r = await ok([
          'freshness',
          'probe',
          '--iterations',
          '5',
          '--slo',
          '60',
          '--timeout',
          '60',
          '--router-timeout',
          '60',
          '-o',
          'json',
        ]);
        const report = JSON.parse(r.stdout);
        assert.equal(report.pass, true);
        assert.equal(report.edits.length, 5);
        for (const e of report.edits) {
          assert.equal(e.observedGeneration, e.generation);
          assert.match(e.compiledDigest, DIGEST);
          assert.ok(e.toConfigMapMs > 0 && e.toConfigMapMs <= e.toEchoMs && e.toEchoMs <= e.toReadyMs, JSON.stringify(e));
          assert.equal(e.routers, 1);
        }
        assert.equal(new Set(report.edits.map((e: any) => e.compiledDigest)).size, 5);
        t.diagnostic(`edit → echo p50 ${Math.round(report.summary.echo.p50)} ms, max ${Math.round(report.summary.echo.max)} ms`);
        await cleanedUp('kars-probe');
      });

      it('exits 1 with its table when the SLO is missed', async () => {
        const r = await kars(['freshness', 'probe', '--iterations', '2', '--slo', '0.000001', '--router-timeout', '60']);
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stdout, /^EDIT\s+GENERATION\s+OBSERVED\s+DIGEST\s+CM-RV\s+TO-CONFIGMAP\s+TO-ECHO\s+TO-READY/m);
        assert.match(r.stdout, /^FAIL: 0\/2 edits echoed by every router within the SLO of 0 ms/m);
        await cleanedUp('kars-probe');
      });

      it('exits 2 naming the fix when no router serves the sandbox', async () => {
        const r = await kars(['freshness', 'probe', '--sandbox', 'nobody-routes-this', '--router-timeout', '3']);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /no router serves sandbox default\/nobody-routes-this .*kars router --sandbox nobody-routes-this/);
        await cleanedUp('nobody-routes-this');
      });

      it('exits 1 when the router stops during the run: the edits after it are not echoed', async () => {
        const probe = startKars('freshness probe', [
          'freshness',
          'probe',
          '--iterations',
          '4',
          '--slo',
          '60',
          '--timeout',
          '2',
          '--router-timeout',
          '60',
          ...kc,
        ]);
        children.push(probe);
        // 'close', not 'exit': every byte of its output has been read then.
        const closed = new Promise((resolve) => probe.proc.once('close', resolve));
        // Stop the router once the first edit is through (the probe's setup needs its echo); a stopped router deletes
        // its echo Lease, so every later edit has no router to echo it.
        await probe.line(/^edit 1: echoed in \d+ ms$/m);
        await stopKars(probeRouter);
        await closed;
        const out = probe.output.join('');
        assert.equal(probe.proc.exitCode, 1, out);
        assert.match(out, /^edit 4: no echo \(/m);
        assert.match(out, /^FAIL: [0-3]\/4 edits echoed by every router within the SLO of 60000 ms/m);
        await cleanedUp('kars-probe');
      });
    });

    it('the server half of strict field validation: a field an older CRD lacks is refused by kube-apiserver, the stored policy intact', async (t) => {
      // The cluster's InferencePolicy CRD loses spec.displayName (an older CRD than this CLI): the client-side check
      // passes, only fieldValidation=Strict keeps kube-apiserver from dropping the field silently.
      const path = `${CRDS}/inferencepolicies.kars.azure.com`;
      const crd = await api(path);
      const old = { ...crd, spec: inferencePolicyCrdWithoutDisplayName()['spec'] };
      const put = await cp.request(path, { method: 'PUT', body: old });
      assert.equal(put.status, 200, put.body);
      try {
        // The new schema reaches the CR handler a moment after the CRD write: probe it with a dry run (writes nothing).
        const probe = {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'InferencePolicy',
          metadata: { name: 'strict-probe' },
          spec: { appliesTo: {}, tokenBudget: { dailyTokens: 1 }, displayName: 'x' },
        };
        await until(
          'kube-apiserver serves the older schema',
          async () =>
            (await cp.request(`${KARS}/inferencepolicies?dryRun=All&fieldValidation=Strict`, { method: 'POST', body: probe })).status ===
            400,
          WAIT,
        );
        const before = await api(`${KARS}/inferencepolicies/demo-budget`);
        assert.equal(before.spec.displayName, undefined, 'served through the older schema');
        const r = await kars(['ip', 'apply', 'demo-budget', '--display-name', 'x', '--token-budget', '5']);
        assert.equal(r.code, 1);
        assert.equal(r.stdout, '');
        assert.match(r.stderr, /^Error from server \(BadRequest\): .*strict decoding error: unknown field "spec\.displayName"\n$/);
        t.diagnostic(r.stderr.trimEnd());
        const after = await api(`${KARS}/inferencepolicies/demo-budget`);
        assert.equal(after.metadata.generation, before.metadata.generation, 'nothing was written');
        assert.deepEqual(after.spec, before.spec);
      } finally {
        const fresh = await api(path);
        const restore = await cp.request(path, {
          method: 'PUT',
          body: { ...fresh, spec: (inferencePolicyCrd() as any).spec },
        });
        assert.equal(restore.status, 200, restore.body);
      }
    });
  });
}
