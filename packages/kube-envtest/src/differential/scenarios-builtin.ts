import type { RequestStep, Scenario, Step } from './types.js';

/** A kind the matrix covers: where it lives, a sample object, and a change to its content. */
interface KindCase {
  name: string;
  /** The collection path; `{{ns}}` for namespaced kinds. */
  base: string;
  apiVersion: string;
  kind: string;
  sample: (name: string) => Record<string, unknown>;
  /** A merge patch that changes the object's content. */
  change: Record<string, unknown>;
  /** A strategic-merge patch (built-ins only). */
  strategic: Record<string, unknown>;
  /** A JSON patch. */
  jsonPatch: unknown[];
  cluster?: boolean;
}

const L = { suite: 'diff' };

export const BUILTIN_KINDS: KindCase[] = [
  {
    name: 'configmaps',
    base: '/api/v1/namespaces/{{ns}}/configmaps',
    apiVersion: 'v1',
    kind: 'ConfigMap',
    sample: (n) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n, labels: L }, data: { a: '1' } }),
    change: { data: { b: '2' } },
    strategic: { data: { c: '3' } },
    jsonPatch: [{ op: 'add', path: '/data/j', value: 'x' }],
  },
  {
    name: 'secrets',
    base: '/api/v1/namespaces/{{ns}}/secrets',
    apiVersion: 'v1',
    kind: 'Secret',
    sample: (n) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: n, labels: L },
      stringData: { pw: 'hunter2' },
      data: { b: 'YmluYXJ5' },
    }),
    change: { data: { c: 'Yw==' } },
    strategic: { stringData: { d: 'dee' } },
    jsonPatch: [{ op: 'replace', path: '/type', value: 'Opaque' }],
  },
  {
    name: 'serviceaccounts',
    base: '/api/v1/namespaces/{{ns}}/serviceaccounts',
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    sample: (n) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: n, labels: L } }),
    change: { automountServiceAccountToken: false },
    strategic: { imagePullSecrets: [{ name: 'pull' }] },
    jsonPatch: [{ op: 'add', path: '/metadata/annotations', value: { x: 'y' } }],
  },
  {
    name: 'roles',
    base: '/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/roles',
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    sample: (n) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: n, labels: L },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
    }),
    change: { rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }] },
    strategic: { metadata: { labels: { extra: 'yes' } } },
    jsonPatch: [{ op: 'add', path: '/rules/0/verbs/-', value: 'watch' }],
  },
  {
    name: 'rolebindings',
    base: '/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings',
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    sample: (n) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: n, labels: L },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: '{{ns}}' }],
    }),
    change: { subjects: [{ kind: 'User', name: 'alice', apiGroup: 'rbac.authorization.k8s.io' }] },
    strategic: { metadata: { annotations: { a: 'b' } } },
    jsonPatch: [{ op: 'replace', path: '/subjects/0/name', value: 'sa2' }],
  },
  {
    name: 'leases',
    base: '/apis/coordination.k8s.io/v1/namespaces/{{ns}}/leases',
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    sample: (n) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: n, labels: L },
      spec: { holderIdentity: 'me', leaseDurationSeconds: 15 },
    }),
    change: { spec: { holderIdentity: 'you' } },
    strategic: { spec: { leaseDurationSeconds: 30 } },
    jsonPatch: [{ op: 'replace', path: '/spec/holderIdentity', value: 'them' }],
  },
  {
    name: 'events',
    base: '/api/v1/namespaces/{{ns}}/events',
    apiVersion: 'v1',
    kind: 'Event',
    sample: (n) => ({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: n, labels: L },
      involvedObject: { kind: 'ConfigMap', name: 'x', namespace: '{{ns}}', apiVersion: 'v1' },
      reason: 'Tested',
      message: 'a test event',
      type: 'Normal',
      source: { component: 'diff' },
    }),
    change: { message: 'changed' },
    strategic: { count: 2 },
    jsonPatch: [{ op: 'replace', path: '/reason', value: 'Retested' }],
  },
  {
    name: 'services',
    base: '/api/v1/namespaces/{{ns}}/services',
    apiVersion: 'v1',
    kind: 'Service',
    sample: (n) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: n, labels: L },
      spec: { ports: [{ port: 80 }], selector: { app: 'x' } },
    }),
    change: { spec: { selector: { app: 'y' } } },
    strategic: { spec: { ports: [{ port: 81 }] } },
    jsonPatch: [{ op: 'add', path: '/metadata/labels/j', value: 'k' }],
  },
  {
    name: 'deployments',
    base: '/apis/apps/v1/namespaces/{{ns}}/deployments',
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    sample: (n) => ({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: n, labels: L },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: n } },
        template: { metadata: { labels: { app: n } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      },
    }),
    change: { spec: { replicas: 2 } },
    strategic: { spec: { template: { spec: { containers: [{ name: 'c', image: 'nginx' }] } } } },
    jsonPatch: [{ op: 'replace', path: '/spec/replicas', value: 3 }],
  },
  {
    name: 'clusterroles',
    base: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    cluster: true,
    sample: (n) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: n, labels: L },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }],
    }),
    change: { rules: [{ nonResourceURLs: ['/healthz'], verbs: ['get'] }] },
    strategic: { metadata: { labels: { extra: 'yes' } } },
    jsonPatch: [{ op: 'add', path: '/rules/0/verbs/-', value: 'list' }],
  },
  {
    name: 'clusterrolebindings',
    base: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    cluster: true,
    sample: (n) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: n, labels: L },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'Group', name: 'g', apiGroup: 'rbac.authorization.k8s.io' }],
    }),
    change: { subjects: [{ kind: 'User', name: 'bob', apiGroup: 'rbac.authorization.k8s.io' }] },
    strategic: { metadata: { annotations: { a: 'b' } } },
    jsonPatch: [{ op: 'replace', path: '/subjects/0/name', value: 'g2' }],
  },
];

const req = (s: RequestStep): RequestStep => s;

/** A cluster-scoped object's name must be unique in the whole run: derive it from the scenario. */
function objName(k: KindCase, verb: string): string {
  return k.cluster ? `diff-${k.name}-${verb}`.slice(0, 60) : 'obj';
}

/** Every verb on every built-in kind: the kinds × verbs matrix. */
export function builtinScenarios(): Scenario[] {
  const out: Scenario[] = [];
  for (const k of BUILTIN_KINDS) {
    const sc = (verb: string, steps: (n: string, item: string) => Step[]): void => {
      const n = objName(k, verb);
      out.push({ id: `builtin/${k.name}/${verb}`, steps: steps(n, `${k.base}/${n}`) });
    };
    const create = (n: string, extra: Partial<RequestStep> = {}): RequestStep =>
      req({ method: 'POST', path: k.base, body: k.sample(n), ...extra });
    sc('create', (n) => [create(n)]);
    sc('create-yaml', (n) => [create(n, { contentType: 'application/yaml' })]);
    sc('create-accept-yaml', (n) => [create(n, { accept: 'application/yaml' })]);
    sc('create-dry-run', (n, item) => [create(n, { path: `${k.base}?dryRun=All` }), { path: item }]);
    sc('create-duplicate', (n) => [create(n), create(n)]);
    sc('create-generate-name', () => [
      {
        method: 'POST',
        path: k.base,
        body: { ...k.sample('x'), metadata: { generateName: 'gen-', labels: L } },
        save: { gen: 'metadata.name' },
      },
      ...(k.cluster ? [{ method: 'DELETE', path: `${k.base}/{{gen}}`, setup: true } as RequestStep] : []),
    ]);
    sc('create-name-mismatch-path', (n) => [{ method: 'POST', path: `${k.base}/${n}`, body: k.sample(n) }]);
    sc('create-invalid-name', () => [create('Not_A_Valid_Name')]);
    sc('create-wrong-kind', (n) => [{ method: 'POST', path: k.base, body: { ...k.sample(n), kind: 'Nonsense' } }]);
    sc('get', (n, item) => [create(n, { setup: true }), { path: item }]);
    sc('get-missing', (_n, item) => [{ path: item }]);
    sc('get-yaml', (n, item) => [create(n, { setup: true }), { path: item, accept: 'application/yaml' }]);
    sc('list', (n) => [create(n, { setup: true }), { path: `${k.base}?labelSelector=suite%3Ddiff` }]);
    sc('update', (n, item) => [
      create(n, { save: { rv: 'metadata.resourceVersion' } }),
      { method: 'PUT', path: item, body: { ...k.sample(n), ...k.change, metadata: { name: n, labels: L, resourceVersion: '{{rv}}' } } },
    ]);
    sc('update-stale', (n, item) => [
      create(n, { setup: true, save: { rv: 'metadata.resourceVersion' } }),
      { method: 'PATCH', path: item, body: k.change, contentType: 'application/merge-patch+json', setup: true },
      { method: 'PUT', path: item, body: { ...k.sample(n), metadata: { name: n, labels: L, resourceVersion: '{{rv}}' } } },
    ]);
    sc('update-unconditional', (n, item) => [
      create(n, { setup: true }),
      { method: 'PUT', path: item, body: { ...k.sample(n), ...k.change } },
    ]);
    sc('update-missing', (n, item) => [{ method: 'PUT', path: item, body: k.sample(n) }]);
    sc('update-name-mismatch', (n, item) => [create(n, { setup: true }), { method: 'PUT', path: item, body: k.sample('other') }]);
    sc('patch-merge', (n, item) => [
      create(n, { setup: true }),
      { method: 'PATCH', path: item, body: k.change, contentType: 'application/merge-patch+json' },
    ]);
    sc('patch-json', (n, item) => [
      create(n, { setup: true }),
      { method: 'PATCH', path: item, body: k.jsonPatch, contentType: 'application/json-patch+json' },
    ]);
    sc('patch-json-test-fails', (n, item) => [
      create(n, { setup: true }),
      {
        method: 'PATCH',
        path: item,
        body: [{ op: 'test', path: '/metadata/name', value: 'nope' }],
        contentType: 'application/json-patch+json',
      },
    ]);
    sc('patch-strategic', (n, item) => [
      create(n, { setup: true }),
      { method: 'PATCH', path: item, body: k.strategic, contentType: 'application/strategic-merge-patch+json' },
    ]);
    sc('patch-missing', (_n, item) => [{ method: 'PATCH', path: item, body: k.change, contentType: 'application/merge-patch+json' }]);
    sc('patch-bad-content-type', (n, item) => [
      create(n, { setup: true }),
      { method: 'PATCH', path: item, body: k.change, contentType: 'text/plain' },
    ]);
    sc('patch-dry-run', (n, item) => [
      create(n, { setup: true }),
      { method: 'PATCH', path: `${item}?dryRun=All`, body: k.change, contentType: 'application/merge-patch+json' },
      { path: item },
    ]);
    sc('apply-create', (n, item) => [
      { method: 'PATCH', path: `${item}?fieldManager=diff`, body: k.sample(n), contentType: 'application/apply-patch+yaml' },
    ]);
    sc('apply-no-manager', (n, item) => [{ method: 'PATCH', path: item, body: k.sample(n), contentType: 'application/apply-patch+yaml' }]);
    sc('apply-update-same-manager', (n, item) => [
      { method: 'PATCH', path: `${item}?fieldManager=diff`, body: k.sample(n), contentType: 'application/apply-patch+yaml', setup: true },
      {
        method: 'PATCH',
        path: `${item}?fieldManager=diff`,
        body: { ...k.sample(n), ...k.change },
        contentType: 'application/apply-patch+yaml',
      },
    ]);
    sc('delete', (n, item) => [create(n, { setup: true }), { method: 'DELETE', path: item }, { path: item }]);
    sc('delete-missing', (_n, item) => [{ method: 'DELETE', path: item }]);
    sc('delete-dry-run', (n, item) => [
      create(n, { setup: true }),
      { method: 'DELETE', path: `${item}?dryRun=All` },
      { path: item, compare: 'status' },
    ]);
    sc('delete-precondition-uid', (n, item) => [
      create(n, { setup: true }),
      {
        method: 'DELETE',
        path: item,
        body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: '00000000-0000-0000-0000-000000000000' } },
      },
    ]);
    if (!k.cluster) {
      sc('deletecollection', (n) => [
        create(n, { setup: true }),
        create(`${n}2`, { setup: true }),
        { method: 'DELETE', path: `${k.base}?labelSelector=suite%3Ddiff` },
        { path: `${k.base}?labelSelector=suite%3Ddiff` },
      ]);
    }
  }
  return out;
}
