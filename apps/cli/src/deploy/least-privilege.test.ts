// Least privilege, proven. kars apiserver runs with --authorization-mode=RBAC; the rendered deploy/
// manifests go in through the real `kubectl apply --server-side`; the controller and a real router run
// the end-to-end pipeline with ServiceAccount tokens minted by TokenRequest; the apiserver's audit hook
// records every call they make. Then:
//   - no call was refused (any 403 fails the test);
//   - the rules in deploy/ cover exactly the recorded calls: every call allowed, every rule element used,
//     and dropping any single element leaves some call uncovered (checked element by element);
//   - dropping a rule for real breaks the live pipeline (router echo; controller ConfigMap cleanup);
//   - a router cannot read another sandbox's ConfigMaps and cannot write policies.
// Skipped when no kubectl binary is found.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { parseAllDocuments, stringify } from 'yaml';
import type { AuditRecord } from '@kars/apiserver';
import { TestClient, findKubectl, runKubectl, startTestServer } from '@kars/apiserver/testing';
import type { KubectlRun, TestServer } from '@kars/apiserver/testing';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';

import { PolicyController } from '@kars/policy-controller';
import { startRouter } from '@kars/router';
import type { RunningRouter } from '@kars/router';
import { coverage, describeCall, describeElement, grantedElements } from './rbac-coverage.js';
import type { Call, Manifest } from './rbac-coverage.js';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
const KUBECTL = findKubectl();
const NS = 'sandbox-research-agent';
const CONTROLLER = { namespace: 'kars-system', name: 'kars-controller' };
const ROUTER = { namespace: NS, name: 'kars-router' };
const user = (sa: { namespace: string; name: string }): string => `system:serviceaccount:${sa.namespace}:${sa.name}`;
const KARS = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const cfg = fastWatchConfig({ pingMs: 1000, idleMs: 5000 });

void describe(
  'least privilege: deploy/ RBAC against the recorded calls of the live pipeline',
  { skip: KUBECTL ? false : 'kubectl not found on PATH' },
  () => {
    let ts: TestServer;
    let dir: string;
    const audit: AuditRecord[] = [];
    let manifests: Manifest[] = [];
    let baseText = '';
    let sandboxText = '';
    const closers: Array<() => Promise<void> | void> = [];

    const kubectl = (args: string[], input?: string): Promise<KubectlRun> =>
      runKubectl(KUBECTL ?? 'kubectl', ts.server.kubeconfigPath, args, input === undefined ? {} : { input });
    const apply = async (text: string): Promise<void> => {
      const r = await kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], text);
      assert.equal(r.code, 0, `kubectl apply --server-side failed: ${r.stderr}`);
    };
    const render = async (path: string): Promise<string> => {
      const r = await kubectl(['kustomize', join(ROOT, path)]);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const kubeconfigFor = async (sa: { namespace: string; name: string }): Promise<string> => {
      const r = await ts.client.post(`/api/v1/namespaces/${sa.namespace}/serviceaccounts/${sa.name}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      });
      assert.equal(r.status, 201, r.text);
      const file = join(dir, `${sa.name}.kubeconfig`);
      writeFileSync(
        file,
        stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [
            {
              name: 'c',
              cluster: { server: ts.server.url, 'certificate-authority-data': Buffer.from(ts.server.caCert).toString('base64') },
            },
          ],
          users: [{ name: sa.name, user: { token: r.body.status.token } }],
          contexts: [{ name: 'c', context: { cluster: 'c', user: sa.name } }],
          'current-context': 'c',
        }),
      );
      return file;
    };
    const callsOf = (who: string, records: AuditRecord[] = audit): Call[] =>
      records
        .filter((a) => a.user.name === who && a.attributes.resourceRequest)
        .map(({ attributes: a }) => ({
          verb: a.verb,
          apiGroup: a.apiGroup,
          resource: a.resource,
          subresource: a.subresource,
          namespace: a.namespace,
          name: a.name,
        }));

    let routerClient: KubeClient;
    let controllerKubeconfig: string;
    let routerKubeconfig: string;
    const startOneRouter = async (instance: string): Promise<{ router: RunningRouter; stop: () => Promise<void> }> => {
      const ac = new AbortController();
      const router = await startRouter(
        {
          sandbox: 'research-agent',
          namespace: NS,
          listen: '127.0.0.1:0',
          upstream: new URL('http://127.0.0.1:9'),
          source: { kind: 'api', client: routerClient, config: cfg },
          instance,
          metrics: new RuntimeMetrics(),
          log: pino({ level: 'silent' }),
        },
        ac.signal,
      );
      return {
        router,
        stop: async () => {
          ac.abort();
          await router.done;
        },
      };
    };
    let recorded: AuditRecord[] = [];

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kars-lp-'));
      ts = await startTestServer({ authorizationMode: 'RBAC', audit: (r) => audit.push(r), bookmarkIntervalSeconds: 2 });
      baseText = await render('deploy/base');
      sandboxText = await render('deploy/examples/sandbox-router');
      manifests = [...parseAllDocuments(baseText), ...parseAllDocuments(sandboxText)]
        .map((d) => d.toJS() as Manifest)
        .filter((m) => m !== null);
      await apply(baseText);
      await apply(sandboxText);
      controllerKubeconfig = await kubeconfigFor(CONTROLLER);
      routerKubeconfig = await kubeconfigFor(ROUTER);

      // The pipeline, with the components' own credentials.
      const controllerClient = clientFor(controllerKubeconfig, cfg);
      routerClient = clientFor(routerKubeconfig, cfg);
      const cac = new AbortController();
      const controller = new PolicyController({
        client: controllerClient,
        config: cfg,
        metrics: new RuntimeMetrics(),
        log: pino({ level: 'silent' }),
        leaderElection: {
          enabled: true,
          namespace: CONTROLLER.namespace,
          name: 'kars-controller',
          identity: 'lp-test',
          leaseDurationMs: 3000,
          renewDeadlineMs: 2000,
          retryPeriodMs: 500,
        },
        env: {},
        notEnforcedGraceMs: 1000,
      });
      const run = controller.run(cac.signal);
      closers.push(async () => {
        cac.abort();
        await run;
        controllerClient.close();
        routerClient.close();
      });
      const api = ts.client;
      // A policy before any router runs: the controller warns (an Event) that nothing enforces it yet.
      assert.equal(
        (
          await api.patch(
            `${KARS}/karssandboxes/research-agent`,
            { spec: { governance: { enabled: true, toolPolicyRef: { name: 'research-tools' } } } },
            'merge',
          )
        ).status,
        200,
      );
      assert.equal(
        (
          await api.post(`${KARS}/inferencepolicies`, {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'InferencePolicy',
            metadata: { name: 'research-budget' },
            spec: {
              appliesTo: { sandboxName: 'research-agent' },
              tokenBudget: { perRequestTokens: 4000, dailyTokens: 200000, monthlyTokens: 5000000 },
            },
          })
        ).status,
        201,
      );
      assert.equal(
        (
          await api.post(`${KARS}/toolpolicies`, {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'ToolPolicy',
            metadata: { name: 'research-tools' },
            spec: { appliesTo: { tool: '*' }, rateLimit: { rps: 5, burst: 10 } },
          })
        ).status,
        201,
      );
      await until(
        'the PolicyNotEnforced event',
        async () => (await api.get(`/api/v1/namespaces/${NS}/events`)).body?.items?.some((e: any) => e.reason === 'PolicyNotEnforced'),
        30_000,
      ).catch((err: unknown) => {
        throw new Error(
          `${String(err)}; refused so far: ${JSON.stringify(audit.filter((x) => !x.allowed).map((x) => `${x.user.name} ${describeCall(x.attributes)}`))}`,
        );
      });
      const r1 = await startOneRouter('r1');
      assert.equal(
        (
          await api.post(`${KARS}/egressapprovals`, {
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'EgressApproval',
            metadata: { name: 'pypi' },
            spec: { sandbox: 'research-agent', hosts: [{ host: 'pypi.org' }], reason: 'install deps', ttl: 'PT1H' },
          })
        ).status,
        201,
      );
      const phase = (kind: string, name: string) => async () =>
        (await api.get(`${KARS}/${kind}/${name}`)).body?.status?.phase as string | undefined;
      await until('InferencePolicy Ready', async () => (await phase('inferencepolicies', 'research-budget')()) === 'Ready');
      await until('ToolPolicy Ready', async () => (await phase('toolpolicies', 'research-tools')()) === 'Ready');
      await until('EgressApproval Active', async () => (await phase('egressapprovals', 'pypi')()) === 'Active');
      await until('KarsSandbox Running', async () => (await phase('karssandboxes', 'research-agent')()) === 'Running');
      // An edit propagates to Ready again; a deleted approval and a deleted policy are cleaned up.
      await api.patch(`${KARS}/inferencepolicies/research-budget`, { spec: { tokenBudget: { perRequestTokens: 8000 } } }, 'merge');
      await until('edit enforced', async () => {
        const b = (await api.get(`${KARS}/inferencepolicies/research-budget`)).body;
        return b?.status?.phase === 'Ready' && b.status.observedGeneration === b.metadata.generation;
      });
      assert.equal((await api.delete(`${KARS}/egressapprovals/pypi`)).status, 200);
      await until('approval finalized and gone', async () => (await api.get(`${KARS}/egressapprovals/pypi`)).status === 404);
      assert.equal((await api.delete(`${KARS}/toolpolicies/research-tools`)).status, 200);
      await until('compiled ToolPolicy ConfigMap removed', async () => {
        const cms = (await api.get(`/api/v1/namespaces/${NS}/configmaps?labelSelector=kars.azure.com%2Ftoolpolicy%3Dresearch-tools`)).body;
        return cms?.items?.length === 0;
      });
      await r1.stop(); // withdraws its echo Lease
      recorded = [...audit];
    });

    after(async () => {
      for (const c of closers.reverse()) await c();
      await ts?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('no call by the controller or the router was refused', () => {
      const denied = recorded.filter((a) => (a.user.name === user(CONTROLLER) || a.user.name === user(ROUTER)) && !a.allowed);
      assert.deepEqual(
        denied.map((a) => `${a.user.name}: ${describeCall(a.attributes)}`),
        [],
      );
      assert.ok(
        callsOf(user(CONTROLLER), recorded).length > 10 && callsOf(user(ROUTER), recorded).length > 3,
        'both components made calls',
      );
    });

    for (const [label, sa] of [
      ['controller', CONTROLLER],
      ['router', ROUTER],
    ] as const) {
      it(`the ${label}'s rules cover exactly its recorded calls, and dropping any one element breaks that`, (t) => {
        const calls = callsOf(user(sa), recorded);
        const distinct = [...new Set(calls.map(describeCall))].sort();
        t.diagnostic(`${label} made ${calls.length} calls, ${distinct.length} distinct:`);
        for (const d of distinct) t.diagnostic(`  ${d}`);
        const elements = grantedElements(manifests, sa);
        assert.ok(elements.length > 0, `no rules bound to ${user(sa)} in deploy/`);
        const { uncovered, unused } = coverage(elements, calls);
        assert.deepEqual([...new Set(uncovered.map(describeCall))], [], 'calls that no rule in deploy/ allows');
        assert.deepEqual(unused.map(describeElement), [], 'rules in deploy/ that no recorded call uses (not least privilege)');
        const lines: string[] = [];
        for (let i = 0; i < elements.length; i++) {
          const without = elements.filter((_, j) => j !== i);
          const broken = coverage(without, calls).uncovered;
          lines.push(
            `drop ${describeElement(elements[i]!)} -> ${broken.length} call(s) refused, e.g. ${broken[0] ? describeCall(broken[0]) : 'NONE'}`,
          );
          assert.ok(broken.length > 0, `dropping ${describeElement(elements[i]!)} breaks nothing: the rule is redundant`);
        }
        for (const l of lines) t.diagnostic(l);
      });
    }

    it('a router cannot read another sandbox namespace, its controller namespace, or write policies', async () => {
      const token = (await ts.client.post(`/api/v1/namespaces/${NS}/serviceaccounts/kars-router/token`, { spec: {} })).body.status
        .token as string;
      const router = new TestClient(ts.server.url, ts.server.caCert, token);
      try {
        await ts.client.post('/api/v1/namespaces', { metadata: { name: 'sandbox-other' } });
        await ts.client.post('/api/v1/namespaces/sandbox-other/configmaps', {
          metadata: { name: 'inferencepolicy-secret-profile', labels: { 'app.kubernetes.io/managed-by': 'kars-controller' } },
          data: { x: 'y' },
        });
        const other = await router.get(
          '/api/v1/namespaces/sandbox-other/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkars-controller',
        );
        assert.equal(other.status, 403);
        assert.equal(
          other.body.message,
          'configmaps is forbidden: User "system:serviceaccount:sandbox-research-agent:kars-router" cannot list resource "configmaps" in API group "" in the namespace "sandbox-other"',
        );
        assert.equal((await router.get('/api/v1/namespaces/sandbox-other/configmaps/inferencepolicy-secret-profile')).status, 403);
        assert.equal((await router.get('/api/v1/namespaces/kars-system/configmaps')).status, 403);
        assert.equal(
          (await router.get(`/api/v1/namespaces/${NS}/configmaps/inferencepolicy-research-budget-profile`)).status,
          403,
          'list/watch only, no get',
        );
        const patch = await router.patch(
          `${KARS}/inferencepolicies/research-budget`,
          { spec: { tokenBudget: { perRequestTokens: 999999 } } },
          'merge',
        );
        assert.equal(patch.status, 403);
        assert.equal(
          patch.body.message,
          'inferencepolicies.kars.azure.com "research-budget" is forbidden: User "system:serviceaccount:sandbox-research-agent:kars-router" cannot patch resource "inferencepolicies" in API group "kars.azure.com" in the namespace "sandbox-research-agent"',
        );
        assert.equal(
          (
            await router.post(`${KARS}/inferencepolicies`, {
              apiVersion: 'kars.azure.com/v1alpha1',
              kind: 'InferencePolicy',
              metadata: { name: 'evil' },
              spec: { appliesTo: { sandboxName: 'research-agent' } },
            })
          ).status,
          403,
        );
        assert.equal((await router.get(`${KARS}/inferencepolicies`)).status, 403);
        assert.equal((await router.get(`${KARS}/karssandboxes?fieldSelector=metadata.name%3Dsomeone-else`)).status, 403);
        assert.equal((await router.patch(`${KARS}/karssandboxes/research-agent`, { spec: {} }, 'merge')).status, 403);
      } finally {
        router.close();
      }
    });

    it('removing a rule for real breaks the live pipeline: the router cannot echo, the controller cannot clean up', async () => {
      const api = ts.client;
      const edit = (text: string, kind: string, name: string, f: (m: Manifest) => void): string =>
        parseAllDocuments(text)
          .map((d) => {
            const m = d.toJS() as Manifest;
            if (m.kind === kind && m.metadata?.name === name) f(m);
            return stringify(m);
          })
          .join('---\n');
      // Router: drop "create leases" from its Role, re-apply deploy/, and start a router with a new instance name.
      await apply(
        edit(
          sandboxText,
          'Role',
          'kars-router',
          (m) =>
            (m.rules = (m.rules ?? []).map((r) =>
              r.resources?.includes('leases') ? { ...r, verbs: (r.verbs ?? []).filter((v) => v !== 'create') } : r,
            )),
        ),
      );
      const before = audit.length;
      const r2 = await startOneRouter('r2');
      try {
        const denied = await until('the router refused publishing its echo', async () =>
          audit.slice(before).find((a) => a.user.name === user(ROUTER) && !a.allowed),
        );
        assert.equal(describeCall(denied.attributes), `create coordination.k8s.io/leases ns=${NS}`);
        await api.patch(`${KARS}/inferencepolicies/research-budget`, { spec: { tokenBudget: { perRequestTokens: 6000 } } }, 'merge');
        await new Promise((r) => setTimeout(r, 3000));
        const st = (await api.get(`${KARS}/inferencepolicies/research-budget`)).body.status;
        assert.notEqual(st.phase, 'Ready', 'no router can confirm the edit');
        assert.equal(st.loadedDigest ?? null, null);
      } finally {
        await r2.stop();
      }
      // Controller: drop "delete configmaps" from its ClusterRole; a deleted policy's ConfigMap stays behind.
      await apply(
        edit(
          baseText,
          'ClusterRole',
          'kars-controller',
          (m) =>
            (m.rules = (m.rules ?? []).map((r) =>
              r.resources?.includes('configmaps') ? { ...r, verbs: (r.verbs ?? []).filter((v) => v !== 'delete') } : r,
            )),
        ),
      );
      const mark = audit.length;
      assert.equal((await api.delete(`${KARS}/inferencepolicies/research-budget`)).status, 200);
      const refused = await until('the controller refused deleting the ConfigMap', async () =>
        audit.slice(mark).find((a) => a.user.name === user(CONTROLLER) && !a.allowed),
      );
      assert.equal(describeCall(refused.attributes), `delete core/configmaps ns=${NS} name=inferencepolicy-research-budget-profile`);
      assert.equal(
        (await api.get(`/api/v1/namespaces/${NS}/configmaps/inferencepolicy-research-budget-profile`)).status,
        200,
        'the compiled ConfigMap is left behind',
      );
    });
  },
);
