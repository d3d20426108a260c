/**
 * Least privilege, proven: the body of the test, shared by kars apiserver (least-privilege.test.ts)
 * and real kube-apiserver (least-privilege.kube.test.ts). A {@link LeastPrivilegeTarget} is the
 * apiserver under test: an admin kubeconfig and client, ServiceAccount token minting, and the calls
 * it recorded (kars apiserver's audit hook, or kube-apiserver's own audit log). The rendered deploy/
 * manifests go in through the real `kubectl apply --server-side`; the controller and a real router
 * run the end-to-end pipeline with ServiceAccount tokens minted by TokenRequest; then:
 *   - no call was refused (any 403 fails the test);
 *   - the rules in deploy/ cover exactly the recorded calls: every call allowed, every rule element used,
 *     and dropping any single element leaves some call uncovered (checked element by element);
 *   - dropping a rule for real (kubectl apply of the edited Role/ClusterRole, as admin) breaks the live
 *     pipeline (router echo; controller ConfigMap cleanup), and restoring it mends it;
 *   - a router cannot read another sandbox's ConfigMaps and cannot write policies.
 */
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { parseAllDocuments, stringify } from 'yaml';
import { TestClient } from '@kars/apiserver/testing';
import { runKubectl } from '@kars/kube-core/testing';
import type { KubectlRun } from '@kars/kube-core/testing';
import { writeTokenKubeconfig } from '@kars/kube-envtest';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { PolicyController } from '@kars/policy-controller';
import { startRouter } from '@kars/router';
import { INFERENCE_POLICY_KIND } from '@kars/policy-compiler';
import type { RunningRouter } from '@kars/router';
import { coverage, describeCall, describeElement, elementAllows, grantedElements } from './rbac-coverage.js';
import type { Call, Element, Manifest } from './rbac-coverage.js';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';

/** A ServiceAccount. */
export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

/** One call the apiserver recorded: who, what (as authorization sees it), and whether it was allowed. */
export interface RecordedCall {
  user: string;
  call: Call;
  allowed: boolean;
}

/** An answer of {@link AdminApi}: the status, the parsed JSON body (undefined if not JSON), the text. */
export interface ApiAnswer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

/** Requests as the cluster admin. */
export interface AdminApi {
  get(path: string): Promise<ApiAnswer>;
  post(path: string, body: unknown): Promise<ApiAnswer>;
  patch(path: string, body: unknown, type: 'merge'): Promise<ApiAnswer>;
  delete(path: string): Promise<ApiAnswer>;
}

/** The apiserver the suite runs against. */
export interface LeastPrivilegeTarget {
  url: string;
  /** The CA (PEM) its serving certificate chains to. */
  caPem: string;
  /** An admin kubeconfig, for kubectl. */
  kubeconfig: string;
  /** The kubectl binary to run. */
  kubectl: string;
  api: AdminApi;
  /** A TokenRequest token for the ServiceAccount. */
  token(sa: ServiceAccountRef): Promise<string>;
  /**
   * Every resource request recorded so far, in order, each once. `settle`: first make sure every call
   * answered before this one was asked is in (an audit log is written after the answer).
   */
  records(opts?: { settle?: boolean }): Promise<RecordedCall[]>;
  /**
   * The apiserver's authorizer asked as admin whether `user` may make `call` (SubjectAccessReview);
   * absent where the server has none (kars apiserver).
   */
  subjectAccessReview?(user: { username: string; groups: string[] }, call: Call): Promise<boolean>;
  /** Stop the apiserver (and everything it started). */
  close(): Promise<void>;
}

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
const NS = 'sandbox-research-agent';
const CONTROLLER: ServiceAccountRef = { namespace: 'kars-system', name: 'kars-controller' };
const ROUTER: ServiceAccountRef = { namespace: NS, name: 'kars-router' };
const CRDS = ['inferencepolicies', 'toolpolicies', 'egressapprovals', 'karssandboxes'].map((n) => `crd/${n}.kars.azure.com`);
const user = (sa: ServiceAccountRef): string => `system:serviceaccount:${sa.namespace}:${sa.name}`;
const KARS = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
/** The ConfigMap the research-budget InferencePolicy compiles to (its descriptor names it). */
const BUDGET_CM = INFERENCE_POLICY_KIND.configMap.name('research-budget');
/** A kars.azure.com/v1alpha1 object of `kind`, as a request body. */
const karsObject = (kind: string, name: string, spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'kars.azure.com/v1alpha1',
  kind,
  metadata: { name },
  spec,
});
const cfg = fastWatchConfig({ pingMs: 1000, idleMs: 5000 });
/** Bounds for the polls: a real apiserver on a loaded 2-core machine. */
const WAIT = { timeoutMs: 60_000, everyMs: 100 };

/** The suite, for a test file to register (so node's runner reports its tests under that file). */
export interface LeastPrivilegeSuite {
  /** For `before`: start the target, apply deploy/, run the pipeline with the components' tokens, record. */
  before: () => Promise<void>;
  /** For `after`: stop everything started, also after a failure. */
  after: () => Promise<void>;
  /** For `it`: name and body of each test. */
  tests: Array<[string, (t: TestContext) => void | Promise<void>]>;
}

/**
 * The least-privilege suite against the target `startTarget` starts. Register it in a describe:
 * `before(s.before); after(s.after); for (const [name, fn] of s.tests) it(name, fn);`.
 */
export function leastPrivilegeSuite(
  startTarget: () => Promise<LeastPrivilegeTarget>,
  /** `subjectAccessReview`: the target has one; add the test that asks it about every dropped element. */
  opts: { subjectAccessReview?: boolean } = {},
): LeastPrivilegeSuite {
  const suite: LeastPrivilegeSuite = { before: async () => {}, after: async () => {}, tests: [] };
  const before = (fn: () => Promise<void>): void => void (suite.before = fn);
  const after = (fn: () => Promise<void>): void => void (suite.after = fn);
  const it = (name: string, fn: (t: TestContext) => void | Promise<void>): void => void suite.tests.push([name, fn]);
  let target: LeastPrivilegeTarget | undefined;
  let dir: string | undefined;
  let manifests: Manifest[] = [];
  let baseText = '';
  let sandboxText = '';
  const closers: Array<() => Promise<void> | void> = [];
  let recorded: RecordedCall[] = [];
  let routerClient: KubeClient;

  const t = (): LeastPrivilegeTarget => {
    if (!target) throw new Error('the target did not start');
    return target;
  };
  /** Create a kars object in the sandbox namespace as the admin (`plural` is its resource), and check it was created. */
  const createKars = async (plural: string, kind: string, name: string, spec: Record<string, unknown>): Promise<void> =>
    assert.equal((await t().api.post(`${KARS}/${plural}`, karsObject(kind, name, spec))).status, 201);
  const kubectl = (args: string[], input?: string): Promise<KubectlRun> =>
    runKubectl(t().kubectl, t().kubeconfig, args, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
  const apply = async (text: string): Promise<void> => {
    const r = await kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], text);
    assert.equal(r.code, 0, `kubectl apply --server-side failed: ${r.stderr}`);
  };
  const render = async (path: string): Promise<string> => {
    const r = await kubectl(['kustomize', join(ROOT, path)]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const kubeconfigFor = async (sa: ServiceAccountRef): Promise<string> =>
    writeTokenKubeconfig(t(), join(dir ?? '.', `${sa.name}.kubeconfig`), { token: await t().token(sa), user: sa.name });
  const callsOf = (who: string, records: RecordedCall[]): Call[] => records.filter((a) => a.user === who).map((a) => a.call);
  const refusedSince = async (mark: number, who: string): Promise<RecordedCall | undefined> =>
    (await t().records()).slice(mark).find((a) => a.user === who && !a.allowed);
  /** Ask the apiserver's own authorizer (SelfSubjectAccessReview with the ServiceAccount's token). */
  const canI = async (token: string, attrs: Record<string, string>): Promise<boolean> => {
    const c = new TestClient(t().url, t().caPem, token);
    try {
      const r = await c.post('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: { resourceAttributes: attrs },
      });
      assert.equal(r.status, 201, r.text);
      return r.body.status.allowed === true;
    } finally {
      c.close();
    }
  };

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
    const stop = async (): Promise<void> => {
      ac.abort();
      await router.done;
    };
    // Stopped by after() too when a test fails before it stops it itself (else the process never exits).
    closers.push(stop);
    return { router, stop };
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kars-lp-'));
    target = await startTarget();
    const api = target.api;
    baseText = await render('deploy/base');
    sandboxText = await render('deploy/examples/sandbox-router');
    manifests = [...parseAllDocuments(baseText), ...parseAllDocuments(sandboxText)]
      .map((d) => d.toJS() as Manifest)
      .filter((m) => m !== null);
    await apply(baseText);
    const established = await kubectl(['wait', '--for=condition=Established', '--timeout=90s', ...CRDS]);
    assert.equal(established.code, 0, established.stderr);
    // kube-apiserver: the OpenAPI of a just-Established CRD can lag a moment; retry until the apply is taken.
    await until(
      'applying deploy/examples/sandbox-router',
      async () => {
        const r = await kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], sandboxText);
        if (r.code !== 0) throw new Error(r.stderr);
        return true;
      },
      WAIT,
    );
    const controllerKubeconfig = await kubeconfigFor(CONTROLLER);
    const routerKubeconfig = await kubeconfigFor(ROUTER);

    // The pipeline, with the components' own credentials.
    const controllerClient = clientFor(controllerKubeconfig, cfg);
    routerClient = clientFor(routerKubeconfig, cfg);
    closers.push(() => {
      controllerClient.close();
      routerClient.close();
    });
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
    });
    const refusedSoFar = async (): Promise<string> =>
      JSON.stringify([...new Set((await t().records()).filter((x) => !x.allowed).map((x) => `${x.user} ${describeCall(x.call)}`))]);
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
    await createKars('inferencepolicies', 'InferencePolicy', 'research-budget', {
      appliesTo: { sandboxName: 'research-agent' },
      tokenBudget: { perRequestTokens: 4000, dailyTokens: 200000, monthlyTokens: 5000000 },
    });
    await createKars('toolpolicies', 'ToolPolicy', 'research-tools', { appliesTo: { tool: '*' }, rateLimit: { rps: 5, burst: 10 } });
    await until(
      'the PolicyNotEnforced event',
      async () =>
        (await api.get(`/api/v1/namespaces/${NS}/events`)).body?.items?.some((e: { reason?: string }) => e.reason === 'PolicyNotEnforced'),
      WAIT,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; refused so far: ${await refusedSoFar()}`);
    });
    const r1 = await startOneRouter('r1');
    await createKars('egressapprovals', 'EgressApproval', 'pypi', {
      sandbox: 'research-agent',
      hosts: [{ host: 'pypi.org' }],
      reason: 'install deps',
      ttl: 'PT1H',
    });
    const phase = (kind: string, name: string) => async () =>
      (await api.get(`${KARS}/${kind}/${name}`)).body?.status?.phase as string | undefined;
    const untilPhase = (what: string, kind: string, name: string, want: string): Promise<unknown> =>
      until(what, async () => (await phase(kind, name)()) === want, WAIT).catch(async (err: unknown) => {
        throw new Error(`${String(err)}; refused so far: ${await refusedSoFar()}`);
      });
    await untilPhase('InferencePolicy Ready', 'inferencepolicies', 'research-budget', 'Ready');
    await untilPhase('ToolPolicy Ready', 'toolpolicies', 'research-tools', 'Ready');
    await untilPhase('EgressApproval Active', 'egressapprovals', 'pypi', 'Active');
    await untilPhase('KarsSandbox Running', 'karssandboxes', 'research-agent', 'Running');
    // An edit propagates to Ready again; a deleted approval and a deleted policy are cleaned up.
    await api.patch(`${KARS}/inferencepolicies/research-budget`, { spec: { tokenBudget: { perRequestTokens: 8000 } } }, 'merge');
    await until(
      'edit enforced',
      async () => {
        const b = (await api.get(`${KARS}/inferencepolicies/research-budget`)).body;
        return b?.status?.phase === 'Ready' && b.status.observedGeneration === b.metadata.generation;
      },
      WAIT,
    );
    assert.equal((await api.delete(`${KARS}/egressapprovals/pypi`)).status, 200);
    await until('approval finalized and gone', async () => (await api.get(`${KARS}/egressapprovals/pypi`)).status === 404, WAIT);
    assert.equal((await api.delete(`${KARS}/toolpolicies/research-tools`)).status, 200);
    await until(
      'compiled ToolPolicy ConfigMap removed',
      async () => {
        const cms = (await api.get(`/api/v1/namespaces/${NS}/configmaps?labelSelector=kars.azure.com%2Ftoolpolicy%3Dresearch-tools`)).body;
        return cms?.items?.length === 0;
      },
      WAIT,
    );
    await r1.stop(); // withdraws its echo Lease
    recorded = await t().records({ settle: true });
  });

  after(async () => {
    for (const c of closers.reverse()) await c();
    await target?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('no call by the controller or the router was refused', () => {
    const denied = recorded.filter((a) => (a.user === user(CONTROLLER) || a.user === user(ROUTER)) && !a.allowed);
    assert.deepEqual(
      denied.map((a) => `${a.user}: ${describeCall(a.call)}`),
      [],
    );
    assert.ok(callsOf(user(CONTROLLER), recorded).length > 10 && callsOf(user(ROUTER), recorded).length > 3, 'both components made calls');
  });

  for (const [label, sa] of [
    ['controller', CONTROLLER],
    ['router', ROUTER],
  ] as const) {
    it(`the ${label}'s rules cover exactly its recorded calls, and dropping any one element breaks that`, (tc) => {
      const calls = callsOf(user(sa), recorded);
      const distinct = [...new Set(calls.map(describeCall))].sort();
      tc.diagnostic(`${label} made ${calls.length} calls, ${distinct.length} distinct:`);
      for (const d of distinct) tc.diagnostic(`  ${d}`);
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
      for (const l of lines) tc.diagnostic(l);
    });
  }

  for (const [label, sa] of opts.subjectAccessReview
    ? ([
        ['controller', CONTROLLER],
        ['router', ROUTER],
      ] as const)
    : []) {
    it(`the real authorizer agrees: without any one of the ${label}'s elements, exactly the calls rbac-coverage names are refused`, async (tc) => {
      const review = t().subjectAccessReview?.bind(t());
      assert.ok(review, 'the target has no SubjectAccessReview');
      const elements = grantedElements(manifests, sa);
      const calls = [...new Map(callsOf(user(sa), recorded).map((c) => [describeCall(c), c])).values()];
      // One stand-in ServiceAccount per dropped element (index -1: none dropped), bound to rules
      // granting every element but that one, each in its binding's scope.
      const subject = (i: number): ServiceAccountRef => ({ namespace: sa.namespace, name: `lp-${label}-without-${i < 0 ? 'none' : i}` });
      const docs: string[] = [];
      for (let i = -1; i < elements.length; i++) {
        const keep = elements.filter((_, j) => j !== i);
        const sub = subject(i);
        for (const scope of [...new Set(elements.map((e) => e.scope))]) {
          const rules = keep
            .filter((e: Element) => e.scope === scope)
            .map((e) => ({
              apiGroups: [e.apiGroup],
              resources: [e.resource],
              verbs: [e.verb],
              ...(e.resourceNames.length ? { resourceNames: e.resourceNames } : {}),
            }));
          const name = `${sub.name}${scope ? '' : '-cluster'}`;
          const meta = scope ? { name, namespace: scope } : { name };
          const role = scope ? 'Role' : 'ClusterRole';
          docs.push(stringify({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: role, metadata: meta, rules }));
          docs.push(
            stringify({
              apiVersion: 'rbac.authorization.k8s.io/v1',
              kind: scope ? 'RoleBinding' : 'ClusterRoleBinding',
              metadata: meta,
              roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: role, name },
              subjects: [{ kind: 'ServiceAccount', name: sub.name, namespace: sub.namespace }],
            }),
          );
        }
      }
      await apply(docs.join('---\n'));
      const ask = (i: number, c: Call): Promise<boolean> =>
        review(
          {
            username: user(subject(i)),
            groups: ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`, 'system:authenticated'],
          },
          c,
        );
      // RBAC follows its informers: poll until the authorizer's answers stop changing to match.
      const disagreements = async (): Promise<string[]> => {
        const drops = [-1, ...elements.keys()];
        const real = await Promise.all(drops.map((i) => Promise.all(calls.map((c) => ask(i, c)))));
        const out: string[] = [];
        drops.forEach((i, d) => {
          const keep = elements.filter((_, j) => j !== i);
          calls.forEach((c, k) => {
            const ours = keep.some((e) => elementAllows(e, c));
            if (real[d]![k] !== ours)
              out.push(
                `${i < 0 ? 'all elements' : `without ${describeElement(elements[i]!)}`}: ${describeCall(c)}: the authorizer says ${real[d]![k] ? 'allowed' : 'refused'}, rbac-coverage ${ours ? 'allowed' : 'refused'}`,
              );
          });
        });
        return out;
      };
      let last: string[] = [];
      await until(
        'the authorizer and rbac-coverage agree on every recorded call, for every dropped element',
        async () => (last = await disagreements()).length === 0,
        WAIT,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}:\n${last.join('\n')}`);
      });
      tc.diagnostic(
        `${(elements.length + 1) * calls.length} SubjectAccessReviews (${elements.length} elements dropped one at a time, ${calls.length} distinct calls) agree`,
      );
    });
  }

  it('a router cannot read another sandbox namespace, its controller namespace, or write policies', async () => {
    const api = t().api;
    const router = new TestClient(t().url, t().caPem, await t().token(ROUTER));
    /** Check the router's request is refused (403; `why` says what that shows), with RBAC's own `message` when given. */
    const refused = async (request: Promise<ApiAnswer>, opts: { message?: string; why?: string } = {}): Promise<void> => {
      const r = await request;
      assert.equal(r.status, 403, opts.why);
      if (opts.message !== undefined) assert.equal(r.body.message, opts.message);
    };
    try {
      assert.equal((await api.post('/api/v1/namespaces', { metadata: { name: 'sandbox-other' } })).status, 201);
      assert.equal(
        (
          await api.post('/api/v1/namespaces/sandbox-other/configmaps', {
            metadata: {
              name: INFERENCE_POLICY_KIND.configMap.name('secret'),
              labels: { 'app.kubernetes.io/managed-by': 'kars-controller' },
            },
            data: { x: 'y' },
          })
        ).status,
        201,
      );
      await refused(
        router.get('/api/v1/namespaces/sandbox-other/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkars-controller'),
        {
          message:
            'configmaps is forbidden: User "system:serviceaccount:sandbox-research-agent:kars-router" cannot list resource "configmaps" in API group "" in the namespace "sandbox-other"',
        },
      );
      await refused(
        router.get('/api/v1/namespaces/sandbox-other/configmaps?watch=true&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkars-controller'),
      );
      await refused(router.get(`/api/v1/namespaces/sandbox-other/configmaps/${INFERENCE_POLICY_KIND.configMap.name('secret')}`));
      await refused(router.get('/api/v1/configmaps'), { why: 'no list across namespaces' });
      await refused(router.get('/api/v1/namespaces/kars-system/configmaps'));
      await refused(router.get(`/api/v1/namespaces/${NS}/configmaps/${BUDGET_CM}`), { why: 'list/watch only, no get' });
      await refused(
        router.patch(`${KARS}/inferencepolicies/research-budget`, { spec: { tokenBudget: { perRequestTokens: 999999 } } }, 'merge'),
        {
          message:
            'inferencepolicies.kars.azure.com "research-budget" is forbidden: User "system:serviceaccount:sandbox-research-agent:kars-router" cannot patch resource "inferencepolicies" in API group "kars.azure.com" in the namespace "sandbox-research-agent"',
        },
      );
      await refused(
        router.post(`${KARS}/inferencepolicies`, karsObject('InferencePolicy', 'evil', { appliesTo: { sandboxName: 'research-agent' } })),
      );
      await refused(router.get(`${KARS}/inferencepolicies`));
      await refused(router.get(`${KARS}/karssandboxes?fieldSelector=metadata.name%3Dsomeone-else`));
      await refused(router.get(`${KARS}/karssandboxes`), { why: 'only its own sandbox, by name' });
      await refused(router.patch(`${KARS}/karssandboxes/research-agent`, { spec: {} }, 'merge'));
      // The apiserver's own authorizer agrees (SelfSubjectAccessReview with the router's token).
      assert.equal(await canI(router.token ?? '', { verb: 'list', resource: 'configmaps', namespace: 'sandbox-other' }), false);
      assert.equal(
        await canI(router.token ?? '', { verb: 'create', group: 'kars.azure.com', resource: 'inferencepolicies', namespace: NS }),
        false,
      );
      assert.equal(await canI(router.token ?? '', { verb: 'list', resource: 'configmaps', namespace: NS }), true, 'its own namespace');
    } finally {
      router.close();
    }
  });

  it('removing a rule for real breaks the live pipeline: the router cannot echo, the controller cannot clean up; restoring it mends both', async () => {
    const api = t().api;
    const edit = (text: string, kind: string, name: string, f: (m: Manifest) => void): string =>
      parseAllDocuments(text)
        .map((d) => {
          const m = d.toJS() as Manifest;
          if (m.kind === kind && m.metadata?.name === name) f(m);
          return stringify(m);
        })
        .join('---\n');
    const withoutVerb = (resource: string, verb: string) => (m: Manifest) =>
      (m.rules = (m.rules ?? []).map((r) =>
        r.resources?.includes(resource) ? { ...r, verbs: (r.verbs ?? []).filter((v) => v !== verb) } : r,
      ));
    const policy = async (): Promise<ApiAnswer['body']> => (await api.get(`${KARS}/inferencepolicies/research-budget`)).body;
    const routerToken = await t().token(ROUTER);
    const controllerToken = await t().token(CONTROLLER);
    const leaseCreate = { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: NS };
    const cmDelete = { verb: 'delete', resource: 'configmaps', namespace: NS, name: BUDGET_CM };

    // Router: drop "create leases" from its Role (as admin, with kubectl), and start a router with a new instance name.
    await apply(edit(sandboxText, 'Role', 'kars-router', withoutVerb('leases', 'create')));
    // kube-apiserver's RBAC follows its informers: wait until its authorizer has the change.
    await until('the authorizer refuses the router creating a Lease', async () => !(await canI(routerToken, leaseCreate)), WAIT);
    let mark = (await t().records({ settle: true })).length;
    const r2 = await startOneRouter('r2');
    try {
      const denied = await until('the router refused publishing its echo', () => refusedSince(mark, user(ROUTER)), WAIT);
      assert.equal(describeCall(denied.call), `create coordination.k8s.io/leases ns=${NS}`);
      await api.patch(`${KARS}/inferencepolicies/research-budget`, { spec: { tokenBudget: { perRequestTokens: 6000 } } }, 'merge');
      // The controller has reconciled the edit (its conditions name this generation), and it is not Ready.
      const st = await until(
        'the controller reconciled the edit',
        async () => {
          const b = await policy();
          const ready = b?.status?.conditions?.find((c: { type: string; observedGeneration?: number }) => c.type === 'Ready');
          return ready && ready.observedGeneration === b.metadata.generation ? b.status : undefined;
        },
        WAIT,
      );
      assert.notEqual(st.phase, 'Ready', 'no router can confirm the edit');
      assert.equal(st.loadedDigest ?? null, null);
    } finally {
      await r2.stop();
    }
    // Restored, a router echoes again and the edit goes Ready.
    await apply(sandboxText);
    await until('the authorizer allows the router creating a Lease again', () => canI(routerToken, leaseCreate), WAIT);
    const r3 = await startOneRouter('r3');
    try {
      await until(
        'the edit Ready once the rule is back',
        async () => {
          const b = await policy();
          return b?.status?.phase === 'Ready' && b.status.observedGeneration === b.metadata.generation;
        },
        WAIT,
      );
    } finally {
      await r3.stop();
    }

    // Controller: drop "delete configmaps" from its ClusterRole; a deleted policy's ConfigMap stays behind.
    await apply(edit(baseText, 'ClusterRole', 'kars-controller', withoutVerb('configmaps', 'delete')));
    await until('the authorizer refuses the controller deleting a ConfigMap', async () => !(await canI(controllerToken, cmDelete)), WAIT);
    mark = (await t().records({ settle: true })).length;
    assert.equal((await api.delete(`${KARS}/inferencepolicies/research-budget`)).status, 200);
    const refused = await until('the controller refused deleting the ConfigMap', () => refusedSince(mark, user(CONTROLLER)), WAIT);
    assert.equal(describeCall(refused.call), `delete core/configmaps ns=${NS} name=${BUDGET_CM}`);
    assert.equal((await api.get(`/api/v1/namespaces/${NS}/configmaps/${BUDGET_CM}`)).status, 200, 'the compiled ConfigMap is left behind');
    const held = await policy();
    assert.ok(held?.metadata?.deletionTimestamp, 'the policy is being deleted');
    assert.ok(held.metadata.finalizers?.length > 0, 'and its finalizer holds it until the ConfigMap is gone');
    // Restored, the controller's retry removes the ConfigMap and lets the policy go.
    await apply(baseText);
    await until(
      'ConfigMap and policy gone once the rule is back',
      async () =>
        (await api.get(`/api/v1/namespaces/${NS}/configmaps/${BUDGET_CM}`)).status === 404 &&
        (await api.get(`${KARS}/inferencepolicies/research-budget`)).status === 404,
      WAIT,
    );
  });
  return suite;
}
