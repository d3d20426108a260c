// deploy/helm/kars with the real helm (v3, built by `npm run kube:build`): it lints; with default values it renders
// exactly the objects of `kubectl kustomize deploy/base` (CRDs included, through --include-crds), and with one
// sandbox exactly those of deploy/examples/sandbox-router, so the chart and the kustomize manifests cannot drift;
// non-default values reach the objects they name; bad values are refused before anything renders. Then, against
// the real kube-apiserver of every pinned version: install, upgrade (a changed value visible in the live objects,
// a refused upgrade changing nothing) and uninstall (everything it installed goes; the CRDs stay, ADR 0030).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { until } from '@kars/kube-core/testing';
import { findKubeBinaries, findKubectlBinary, kubectl, processesMentioning, readPins, startControlPlane } from '@kars/kube-envtest';
import type { ControlPlane } from '@kars/kube-envtest';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
const CHART = join(ROOT, 'deploy/helm/kars');
const PINS = readPins().kubernetes;
const HELM = PINS.map((p) => findKubeBinaries(p.minor).binaries?.helm).find((h) => h !== undefined);
const HELM_SKIP = HELM ? false : (findKubeBinaries(PINS[0]?.minor).reason ?? 'npm run kube:build');
const KUBECTL = findKubectlBinary();

/**
 * The labels the chart adds to deploy/base's objects, the Helm conventions (templates/_helpers.tpl,
 * "kars.helmLabels"); the drift test removes exactly these and nothing else before comparing.
 */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by'] as const;

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}
interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

// Helm keeps its cache, config and data (repositories, plugins, registry logins) under these; a temp dir keeps
// the tests off the user's own and each run from the last.
const helmHome = mkdtempSync(join(tmpdir(), 'kars-helm-home-'));
after(() => rmSync(helmHome, { recursive: true, force: true }));

function helm(args: readonly string[], kubeconfig?: string): Promise<Run> {
  return new Promise((res, rej) => {
    execFile(
      HELM ?? 'helm',
      kubeconfig === undefined ? args : [...args, '--kubeconfig', kubeconfig],
      {
        env: {
          PATH: process.env['PATH'] ?? '',
          HOME: helmHome,
          HELM_CACHE_HOME: join(helmHome, 'cache'),
          HELM_CONFIG_HOME: join(helmHome, 'config'),
          HELM_DATA_HOME: join(helmHome, 'data'),
        },
        timeout: 180_000,
        maxBuffer: 32 << 20,
      },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return rej(err);
        res({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

function parse(yaml: string): Obj[] {
  return parseAllDocuments(yaml)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && typeof o === 'object');
}

const keyOf = (o: Obj): string => `${o.apiVersion} ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** Objects keyed and sorted, the Helm labels removed (and an emptied labels map with them). */
function normalised(objs: Obj[]): Map<string, Obj> {
  const out = new Map<string, Obj>();
  for (const o of objs) {
    const copy = structuredClone(o);
    const labels = copy.metadata.labels;
    if (labels) {
      for (const l of HELM_LABELS) delete labels[l];
      if (Object.keys(labels).length === 0) delete copy.metadata.labels;
    }
    assert.ok(!out.has(keyOf(copy)), `${keyOf(copy)} rendered twice`);
    out.set(keyOf(copy), copy);
  }
  return new Map([...out].sort(([a], [b]) => a.localeCompare(b)));
}

function assertSameObjects(chart: Obj[], kustomize: Obj[], what: string): void {
  const c = normalised(chart);
  const k = normalised(kustomize);
  assert.deepEqual([...c.keys()], [...k.keys()], `${what}: the chart and kustomize render different objects`);
  for (const [key, obj] of k) assert.deepEqual(c.get(key), obj, `${what}: ${key} differs`);
}

async function render(args: readonly string[]): Promise<Obj[]> {
  const r = await helm(['template', 'kars', CHART, ...args]);
  assert.equal(r.code, 0, r.stderr);
  return parse(r.stdout);
}

async function kustomize(path: string): Promise<Obj[]> {
  const r = await kubectl(KUBECTL!, '/dev/null', ['kustomize', join(ROOT, path)]);
  assert.equal(r.code, 0, r.stderr);
  return parse(r.stdout);
}

const find = (objs: Obj[], kind: string, name: string): Obj => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `no ${kind} ${name} in ${objs.map(keyOf).join(', ')}`);
  return o;
};
type Container = {
  name: string;
  image: string;
  imagePullPolicy?: string;
  args: string[];
  env: { name: string; value?: string }[];
  resources?: unknown;
};
const containers = (dep: Obj): Container[] => (dep.spec as { template: { spec: { containers: Container[] } } }).template.spec.containers;

/** The sandbox of deploy/examples/sandbox-router, as chart values. */
const EXAMPLE_SANDBOX = {
  name: 'research-agent',
  upstream: 'https://YOUR-RESOURCE.openai.azure.com',
  agent: { image: 'registry.example.com/research-agent:1.0' },
  spec: { inferenceRef: { name: 'research-budget' }, networkPolicy: { allowedEndpoints: [{ host: 'api.github.com' }] } },
};

const work = mkdtempSync(join(tmpdir(), 'kars-helm-values-'));
after(() => rmSync(work, { recursive: true, force: true }));
let files = 0;
function valuesFile(values: unknown): string {
  const f = join(work, `values-${files++}.yaml`);
  writeFileSync(f, stringify(values));
  return f;
}

void describe('deploy/helm/kars: helm lint and helm template', { skip: HELM_SKIP || (KUBECTL ? false : 'no kubectl on PATH') }, () => {
  it('helm lint --strict passes, with default values and with every option on', async () => {
    const on = valuesFile({
      sandboxes: [EXAMPLE_SANDBOX],
      networkPolicy: { enabled: true },
      monitoring: { serviceMonitor: { enabled: true } },
      maxApprovalTtl: 3600,
    });
    for (const extra of [[], ['-f', on]]) {
      const r = await helm(['lint', '--strict', CHART, ...extra]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    }
  });

  it('default values, --include-crds: the same objects as kubectl kustomize deploy/base (only the Helm labels added)', async () => {
    const chart = await render(['--include-crds']);
    assertSameObjects(chart, await kustomize('deploy/base'), 'deploy/base');
    // Every templated object carries both Helm labels (the CRDs come verbatim from crds/, so they do not).
    for (const o of chart.filter((x) => x.kind !== 'CustomResourceDefinition')) {
      assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm', keyOf(o));
      assert.equal(o.metadata.labels?.['helm.sh/chart'], 'kars-0.1.0', keyOf(o));
    }
  });

  it('the CRDs ship in crds/: helm template leaves them out unless --include-crds', async () => {
    const plain = await render([]);
    assert.deepEqual(
      plain.filter((o) => o.kind === 'CustomResourceDefinition'),
      [],
    );
    const withCrds = await render(['--include-crds']);
    assert.deepEqual(
      withCrds
        .filter((o) => o.kind === 'CustomResourceDefinition')
        .map((o) => o.metadata.name)
        .sort(),
      ['egressapprovals.kars.azure.com', 'inferencepolicies.kars.azure.com', 'karssandboxes.kars.azure.com', 'toolpolicies.kars.azure.com'],
    );
  });

  it('one sandbox renders the same objects as kubectl kustomize deploy/examples/sandbox-router', async () => {
    const chart = await render(['-f', valuesFile({ sandboxes: [EXAMPLE_SANDBOX] }), '-s', 'templates/sandboxes.yaml']);
    assertSameObjects(chart, await kustomize('deploy/examples/sandbox-router'), 'deploy/examples/sandbox-router');
  });

  it('non-default values reach the objects they name, and change nothing else', async () => {
    const base = normalised(await render([]));
    const objs = await render([
      '-f',
      valuesFile({
        namespace: { name: 'kars-prod' },
        controller: {
          image: { repository: 'registry.example.com/kars', tag: '0.2.0', pullPolicy: 'Always' },
          replicas: 3,
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
          logLevel: 'debug',
          extraEnv: [{ name: 'KARS_RELIST_INTERVAL_SECS_EXTRA', value: 'x' }],
        },
        maxApprovalTtl: 172800,
        router: {
          image: { repository: 'registry.example.com/kars', digest: `sha256:${'ab'.repeat(32)}` },
          resources: { requests: null, limits: { memory: '128Mi' } },
        },
        sandboxes: [{ ...EXAMPLE_SANDBOX, name: 'b', namespace: 'team-b', replicas: 2 }],
        networkPolicy: {
          enabled: true,
          apiServer: { cidrs: ['10.0.0.1/32'] },
          metricsFrom: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }],
        },
        monitoring: { serviceMonitor: { enabled: true, interval: '15s', labels: { release: 'prometheus' } } },
      }),
    ]);
    const dep = find(objs, 'Deployment', 'kars-controller');
    assert.equal(dep.metadata.namespace, 'kars-prod');
    assert.equal(dep.spec?.['replicas'], 3);
    const [c] = containers(dep);
    assert.equal(c?.image, 'registry.example.com/kars:0.2.0');
    assert.equal(c?.imagePullPolicy, 'Always');
    assert.deepEqual(c?.resources, { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } });
    const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env['KARS_LOG_LEVEL'], 'debug');
    assert.equal(env['EGRESS_APPROVAL_MAX_TTL_SECONDS'], '172800');
    assert.equal(env['KARS_RELIST_INTERVAL_SECS_EXTRA'], 'x');
    assert.equal(find(objs, 'Namespace', 'kars-prod').metadata.labels?.['pod-security.kubernetes.io/enforce'], 'restricted');
    const crb = find(objs, 'ClusterRoleBinding', 'kars-controller') as Obj & { subjects: { namespace: string }[] };
    assert.equal(crb.subjects[0]?.namespace, 'kars-prod');

    const np = find(objs, 'NetworkPolicy', 'kars-controller');
    assert.deepEqual(np.spec, {
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kars-controller' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: [{ port: 8080, protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }] }],
      egress: [
        {
          ports: [
            { port: 53, protocol: 'UDP' },
            { port: 53, protocol: 'TCP' },
          ],
        },
        {
          ports: [
            { port: 443, protocol: 'TCP' },
            { port: 6443, protocol: 'TCP' },
          ],
          to: [{ ipBlock: { cidr: '10.0.0.1/32' } }],
        },
      ],
    });
    const sm = find(objs, 'ServiceMonitor', 'kars-controller');
    assert.equal(sm.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(sm.metadata.labels?.['release'], 'prometheus');
    assert.deepEqual(sm.spec, {
      selector: { matchLabels: { 'app.kubernetes.io/name': 'kars-controller' } },
      namespaceSelector: { matchNames: ['kars-prod'] },
      endpoints: [{ port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s' }],
    });
    // The ServiceMonitor selects the metrics Service, whose port is named metrics.
    const svc = find(objs, 'Service', 'kars-controller-metrics') as Obj & { spec: { ports: { name: string }[] } };
    assert.equal(svc.metadata.labels?.['app.kubernetes.io/name'], 'kars-controller');
    assert.equal(svc.spec.ports[0]?.name, 'metrics');

    const sb = find(objs, 'Deployment', 'b');
    assert.equal(sb.metadata.namespace, 'team-b');
    assert.equal(sb.spec?.['replicas'], 2);
    const router = containers(sb).find((x) => x.name === 'router');
    assert.equal(router?.image, `registry.example.com/kars@sha256:${'ab'.repeat(32)}`);
    assert.equal(router?.imagePullPolicy, undefined);
    assert.deepEqual(router?.resources, { limits: { memory: '128Mi' } });
    assert.ok(router?.args.includes('--sandbox=b'));
    const role = find(objs, 'Role', 'kars-router') as Obj & { rules: { resourceNames?: string[] }[] };
    assert.equal(role.metadata.namespace, 'team-b');
    assert.deepEqual(role.rules[0]?.resourceNames, ['b']);

    // Apart from what those values name, the controller's objects are deploy/base's, moved to kars-prod.
    const moved = normalised(objs.filter((o) => o.kind !== 'NetworkPolicy' && o.kind !== 'ServiceMonitor'));
    for (const [key, o] of base) {
      if (key.endsWith(' Deployment kars-system/kars-controller')) continue;
      const want = JSON.parse(JSON.stringify(o).replaceAll('"kars-system"', '"kars-prod"')) as Obj;
      assert.deepEqual(moved.get(keyOf(want)), want, key);
    }
  });

  it('namespace.create=false renders no Namespace and changes nothing else', async () => {
    const all = normalised(await render([]));
    const without = normalised(await render(['--set', 'namespace.create=false']));
    all.delete('v1 Namespace /kars-system');
    assert.deepEqual([...without.keys()], [...all.keys()]);
    assert.deepEqual(without, all);
  });

  it('refuses bad values with the field named, before rendering anything', async () => {
    for (const [values, error] of [
      [{ controller: { replicas: -1 } }, /\/controller\/replicas': minimum: got -1, want 0/],
      [{ controller: { replicas: '3' } }, /\/controller\/replicas': got string, want integer/],
      [{ controller: { replica: 3 } }, /additional properties 'replica' not allowed/],
      [{ maxApprovalTtl: '24h' }, /\/maxApprovalTtl': got string, want null or integer/],
      [{ maxApprovalTtl: 604801 }, /\/maxApprovalTtl': maximum/],
      [{ controller: { image: { repository: 'kars', tag: '1.0\n  evil: true' } } }, /\/controller\/image\/tag'/],
      [{ sandboxes: [{ ...EXAMPLE_SANDBOX, name: 'a\nkind: ClusterRole' }] }, /\/sandboxes\/0\/name'/],
      [{ sandboxes: [{ ...EXAMPLE_SANDBOX, upstream: 'https://x\n- --listen=0.0.0.0:8088' }] }, /\/sandboxes\/0\/upstream'/],
      [{ sandboxes: [{ name: 'x', agent: { image: 'a' } }] }, /missing property 'upstream'/],
      [{ networkPolicy: { apiServer: { ports: [0] } } }, /\/networkPolicy\/apiServer\/ports\/0'/],
      [{ monitoring: { serviceMonitor: { interval: '30 seconds' } } }, /\/monitoring\/serviceMonitor\/interval'/],
    ] as const) {
      const r = await helm(['template', 'kars', CHART, '-f', valuesFile(values)]);
      assert.notEqual(r.code, 0, `${JSON.stringify(values)} rendered:\n${r.stdout}`);
      assert.equal(r.stdout, '', JSON.stringify(values));
      assert.match(r.stderr, /values don't meet the specifications of the schema/, JSON.stringify(values));
      assert.match(r.stderr, error, JSON.stringify(values));
    }
  });

  it('a quote or a YAML-looking upstream stays one router argument', async () => {
    const upstream = 'https://x.example/"a":{b:c}#d,--listen=0.0.0.0:8088\'"';
    const objs = await render(['-f', valuesFile({ sandboxes: [{ ...EXAMPLE_SANDBOX, upstream }] }), '-s', 'templates/sandboxes.yaml']);
    const router = containers(find(objs, 'Deployment', 'research-agent')).find((x) => x.name === 'router');
    assert.deepEqual(
      router?.args.filter((a) => a.startsWith('--upstream')),
      [`--upstream=${upstream}`],
    );
    assert.equal(router?.args.length, 6);
  });
});

for (const pin of PINS) {
  const found = findKubeBinaries(pin.minor);
  describe(
    `deploy/helm/kars: helm install, upgrade and uninstall on kube-apiserver ${pin.version}`,
    { skip: found.binaries ? false : found.reason },
    () => {
      let cp: ControlPlane;
      const WAIT = { timeoutMs: 120_000, everyMs: 250 };
      const get = async (path: string): Promise<{ status: number; obj: Obj }> => {
        const r = await cp.request(path);
        return { status: r.status, obj: (r.status === 200 ? JSON.parse(r.body) : {}) as Obj };
      };
      const live = async (path: string): Promise<Obj> => {
        const r = await get(path);
        assert.equal(r.status, 200, path);
        return r.obj;
      };
      const DEP = '/apis/apps/v1/namespaces/kars-system/deployments/kars-controller';
      const SANDBOX_DEP = '/apis/apps/v1/namespaces/sandbox-research-agent/deployments/research-agent';
      const SANDBOX = '/apis/kars.azure.com/v1alpha1/namespaces/sandbox-research-agent/karssandboxes/research-agent';
      const CRDS = ['inferencepolicies', 'toolpolicies', 'egressapprovals', 'karssandboxes'].map(
        (p) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${p}.kars.azure.com`,
      );
      // What the install creates (the chart's templates with one sandbox), by API path.
      const INSTALLED = [
        '/api/v1/namespaces/kars-system',
        '/api/v1/namespaces/kars-system/serviceaccounts/kars-controller',
        '/apis/rbac.authorization.k8s.io/v1/clusterroles/kars-controller',
        '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kars-controller',
        '/apis/rbac.authorization.k8s.io/v1/namespaces/kars-system/roles/kars-controller-leader-election',
        '/apis/rbac.authorization.k8s.io/v1/namespaces/kars-system/rolebindings/kars-controller-leader-election',
        DEP,
        '/apis/policy/v1/namespaces/kars-system/poddisruptionbudgets/kars-controller',
        '/api/v1/namespaces/kars-system/services/kars-controller-metrics',
        '/api/v1/namespaces/sandbox-research-agent',
        '/api/v1/namespaces/sandbox-research-agent/serviceaccounts/kars-router',
        '/apis/rbac.authorization.k8s.io/v1/namespaces/sandbox-research-agent/roles/kars-router',
        '/apis/rbac.authorization.k8s.io/v1/namespaces/sandbox-research-agent/rolebindings/kars-router',
        SANDBOX,
        SANDBOX_DEP,
      ];
      const NP = '/apis/networking.k8s.io/v1/namespaces/kars-system/networkpolicies/kars-controller';
      const SM = '/apis/monitoring.coreos.com/v1/namespaces/kars-system/servicemonitors/kars-controller';
      const h = (args: string[]): Promise<Run> => helm(args, cp.kubeconfig);
      const installValues = (): string => valuesFile({ sandboxes: [EXAMPLE_SANDBOX] });

      before(async () => {
        cp = await startControlPlane({ binaries: found.binaries! });
        // The Prometheus Operator's ServiceMonitor kind, as a schemaless stand-in, so monitoring can be turned on.
        const crd = {
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'servicemonitors.monitoring.coreos.com' },
          spec: {
            group: 'monitoring.coreos.com',
            scope: 'Namespaced',
            names: { plural: 'servicemonitors', singular: 'servicemonitor', kind: 'ServiceMonitor', listKind: 'ServiceMonitorList' },
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            ],
          },
        };
        const r = await cp.request('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
          method: 'POST',
          body: JSON.stringify(crd),
        });
        assert.equal(r.status, 201, r.body);
      });
      after(async () => {
        const dir = cp?.dir;
        await cp?.stop();
        if (dir) assert.deepEqual(processesMentioning(dir), [], 'a control-plane process outlived stop()');
      });

      it('helm install creates the CRDs first, then every templated object, labelled as Helm-managed', async () => {
        const r = await h(['install', 'kars', CHART, '--namespace', 'default', '-f', installValues()]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        for (const path of CRDS) await live(path);
        for (const path of INSTALLED) {
          const o = await live(path);
          assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm', path);
          assert.equal(o.metadata.annotations?.['meta.helm.sh/release-name'], 'kars', path);
        }
        const dep = await live(DEP);
        assert.equal(dep.spec?.['replicas'], 2);
        assert.equal(containers(dep)[0]?.image, 'kars:0.1.0');
        assert.equal((await get(NP)).status, 404);
        assert.equal((await get(SM)).status, 404);
        // The ClusterRole on the server is deploy/base's rule for rule.
        const base = find(parse(readFileSync(join(ROOT, 'deploy/base/rbac.yaml'), 'utf8')), 'ClusterRole', 'kars-controller') as Obj & {
          rules: unknown;
        };
        assert.deepEqual(
          ((await live('/apis/rbac.authorization.k8s.io/v1/clusterroles/kars-controller')) as Obj & { rules: unknown }).rules,
          base.rules,
        );
        const ls = await h(['list', '--namespace', 'default', '-o', 'json']);
        assert.deepEqual(
          (JSON.parse(ls.stdout) as { name: string; revision: string; status: string }[]).map((x) => [x.name, x.revision, x.status]),
          [['kars', '1', 'deployed']],
        );
      });

      it('helm upgrade with changed values changes the live objects (replicas, image, network policy, ServiceMonitor)', async () => {
        const before = await live(DEP);
        const r = await h([
          'upgrade',
          'kars',
          CHART,
          '--namespace',
          'default',
          '-f',
          valuesFile({
            controller: { replicas: 3, image: { tag: '0.2.0' } },
            router: { image: { tag: '0.2.0' } },
            sandboxes: [EXAMPLE_SANDBOX],
            networkPolicy: { enabled: true },
            monitoring: { serviceMonitor: { enabled: true } },
          }),
        ]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const dep = await live(DEP);
        assert.equal(dep.spec?.['replicas'], 3);
        assert.equal(containers(dep)[0]?.image, 'kars:0.2.0');
        assert.ok(
          Number((dep.metadata as { generation?: number }).generation) > Number((before.metadata as { generation?: number }).generation),
        );
        assert.equal(containers(await live(SANDBOX_DEP)).find((c) => c.name === 'router')?.image, 'kars:0.2.0');
        assert.equal((await live(NP)).metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
        assert.equal((await live(SM)).metadata.labels?.['app.kubernetes.io/name'], 'kars-controller');
        const ls = await h(['list', '--namespace', 'default', '-o', 'json']);
        assert.equal((JSON.parse(ls.stdout) as { revision: string }[])[0]?.revision, '2');
      });

      it('a helm upgrade with a bad value is refused and changes nothing', async () => {
        const before = await live(DEP);
        const r = await h(['upgrade', 'kars', CHART, '--namespace', 'default', '--reuse-values', '--set', 'controller.replicas=-3']);
        assert.notEqual(r.code, 0, r.stdout);
        assert.match(r.stderr, /\/controller\/replicas': minimum: got -3, want 0/);
        const dep = await live(DEP);
        assert.equal(dep.spec?.['replicas'], 3);
        assert.equal(
          (dep.metadata as { resourceVersion?: string }).resourceVersion,
          (before.metadata as { resourceVersion?: string }).resourceVersion,
        );
        const ls = await h(['list', '--namespace', 'default', '-o', 'json']);
        assert.deepEqual(
          (JSON.parse(ls.stdout) as { revision: string; status: string }[]).map((x) => [x.revision, x.status]),
          [['2', 'deployed']],
        );
      });

      it('helm uninstall removes every object it installed (namespaces included) and leaves the CRDs', async () => {
        const r = await h(['uninstall', 'kars', '--namespace', 'default']);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        for (const path of [...INSTALLED, NP, SM]) {
          await until(`${path} is gone`, async () => ((await get(path)).status === 404 ? true : undefined), WAIT);
        }
        for (const path of CRDS) await live(path);
        const ls = await h(['list', '--namespace', 'default', '--all', '-o', 'json']);
        assert.deepEqual(JSON.parse(ls.stdout), []);
        const secrets = await live('/api/v1/namespaces/default/secrets?labelSelector=owner%3Dhelm');
        assert.deepEqual((secrets as unknown as { items: unknown[] }).items, [], 'the release history is gone');
      });
    },
  );
}
