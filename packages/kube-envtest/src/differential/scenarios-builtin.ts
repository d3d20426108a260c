import { APPLY, del, JSON_PATCH, manifest, MERGE, patch, post, put } from './steps.js';
import type { Content } from './steps.js';
import type { RequestStep, Scenario, Step } from './types.js';

/** A kind the matrix covers: where it lives, a sample object, and a change to its content. */
interface KindCase {
  /** The resource (plural) name. */
  name: string;
  apiVersion: string;
  kind: string;
  cluster?: boolean;
  /** The collection path; `{{ns}}` for namespaced kinds. */
  base: string;
  sample: (name: string) => Content;
  /** A merge patch that changes the object's content. */
  change: Content;
  /** A strategic-merge patch (built-ins only). */
  strategic: Content;
  /** A JSON patch. */
  jsonPatch: unknown[];
}

/** What the table gives of a kind; its collection path and the sample's envelope are derived. */
type KindRow = Omit<KindCase, 'name' | 'base' | 'sample'> & {
  /** The sample's fields after apiVersion, kind and metadata (a function when they use the object's name). */
  content?: Content | ((name: string) => Content);
};

const L = { suite: 'diff' };

/**
 * A row's {@link KindCase}. The resource name is the lowercased kind's plural (an `s` for every kind
 * here); the collection is under `/api/v1` or `/apis/<group>/<version>`, in `namespaces/{{ns}}` unless
 * cluster-scoped.
 */
function kindCase({ content = {}, ...row }: KindRow): KindCase {
  const plural = `${row.kind.toLowerCase()}s`;
  const root = row.apiVersion.includes('/') ? `/apis/${row.apiVersion}` : `/api/${row.apiVersion}`;
  return {
    ...row,
    name: plural,
    base: `${root}${row.cluster ? '' : '/namespaces/{{ns}}'}/${plural}`,
    sample: (name) => manifest(row.apiVersion, row.kind, { name, labels: L }, typeof content === 'function' ? content(name) : content),
  };
}

const RBAC = 'rbac.authorization.k8s.io';
const RBAC_V1 = `${RBAC}/v1`;

/** The kinds, one row each. */
const ROWS: KindRow[] = [
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    content: { data: { a: '1' } },
    change: { data: { b: '2' } },
    strategic: { data: { c: '3' } },
    jsonPatch: [{ op: 'add', path: '/data/j', value: 'x' }],
  },
  {
    apiVersion: 'v1',
    kind: 'Secret',
    content: { stringData: { pw: 'hunter2' }, data: { b: 'YmluYXJ5' } },
    change: { data: { c: 'Yw==' } },
    strategic: { stringData: { d: 'dee' } },
    jsonPatch: [{ op: 'replace', path: '/type', value: 'Opaque' }],
  },
  {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    change: { automountServiceAccountToken: false },
    strategic: { imagePullSecrets: [{ name: 'pull' }] },
    jsonPatch: [{ op: 'add', path: '/metadata/annotations', value: { x: 'y' } }],
  },
  {
    apiVersion: RBAC_V1,
    kind: 'Role',
    content: { rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }] },
    change: { rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }] },
    strategic: { metadata: { labels: { extra: 'yes' } } },
    jsonPatch: [{ op: 'add', path: '/rules/0/verbs/-', value: 'watch' }],
  },
  {
    apiVersion: RBAC_V1,
    kind: 'RoleBinding',
    content: {
      roleRef: { apiGroup: RBAC, kind: 'Role', name: 'r' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: '{{ns}}' }],
    },
    change: { subjects: [{ kind: 'User', name: 'alice', apiGroup: RBAC }] },
    strategic: { metadata: { annotations: { a: 'b' } } },
    jsonPatch: [{ op: 'replace', path: '/subjects/0/name', value: 'sa2' }],
  },
  {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    content: { spec: { holderIdentity: 'me', leaseDurationSeconds: 15 } },
    change: { spec: { holderIdentity: 'you' } },
    strategic: { spec: { leaseDurationSeconds: 30 } },
    jsonPatch: [{ op: 'replace', path: '/spec/holderIdentity', value: 'them' }],
  },
  {
    apiVersion: 'v1',
    kind: 'Event',
    content: {
      involvedObject: { kind: 'ConfigMap', name: 'x', namespace: '{{ns}}', apiVersion: 'v1' },
      reason: 'Tested',
      message: 'a test event',
      type: 'Normal',
      source: { component: 'diff' },
    },
    change: { message: 'changed' },
    strategic: { count: 2 },
    jsonPatch: [{ op: 'replace', path: '/reason', value: 'Retested' }],
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    content: { spec: { ports: [{ port: 80 }], selector: { app: 'x' } } },
    change: { spec: { selector: { app: 'y' } } },
    strategic: { spec: { ports: [{ port: 81 }] } },
    jsonPatch: [{ op: 'add', path: '/metadata/labels/j', value: 'k' }],
  },
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    content: (n) => ({
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
    apiVersion: RBAC_V1,
    kind: 'ClusterRole',
    cluster: true,
    content: { rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }] },
    change: { rules: [{ nonResourceURLs: ['/healthz'], verbs: ['get'] }] },
    strategic: { metadata: { labels: { extra: 'yes' } } },
    jsonPatch: [{ op: 'add', path: '/rules/0/verbs/-', value: 'list' }],
  },
  {
    apiVersion: RBAC_V1,
    kind: 'ClusterRoleBinding',
    cluster: true,
    content: {
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'Group', name: 'g', apiGroup: RBAC }],
    },
    change: { subjects: [{ kind: 'User', name: 'bob', apiGroup: RBAC }] },
    strategic: { metadata: { annotations: { a: 'b' } } },
    jsonPatch: [{ op: 'replace', path: '/subjects/0/name', value: 'g2' }],
  },
];

export const BUILTIN_KINDS: KindCase[] = ROWS.map(kindCase);

const SELECTED = '?labelSelector=suite%3Ddiff';

/** A cluster-scoped object's name must be unique in the whole run: derive it from the scenario. */
function objName(k: KindCase, verb: string): string {
  return k.cluster ? `diff-${k.name}-${verb}`.slice(0, 60) : 'obj';
}

/** Every verb on every built-in kind: the kinds × verbs matrix. */
export function builtinScenarios(): Scenario[] {
  const out: Scenario[] = [];
  for (const k of BUILTIN_KINDS) {
    /** A scenario on the object `n` at `item`. */
    const sc = (verb: string, steps: (n: string, item: string) => Step[]): void => {
      const n = objName(k, verb);
      out.push({ id: `builtin/${k.name}/${verb}`, steps: steps(n, `${k.base}/${n}`) });
    };
    const create = (n: string, extra: Partial<RequestStep> = {}): RequestStep => post(k.base, k.sample(n), extra);
    /** A scenario whose object exists first (created as setup). */
    const onExisting = (verb: string, steps: (n: string, item: string) => Step[]): void =>
      sc(verb, (n, item) => [create(n, { setup: true }), ...steps(n, item)]);
    /** The sample (with `change` merged in) as a PUT body, conditional on the saved `{{rv}}`. */
    const atRv = (n: string, change: Content = {}): Content => ({
      ...k.sample(n),
      ...change,
      metadata: { name: n, labels: L, resourceVersion: '{{rv}}' },
    });
    const apply = (item: string, body: unknown, extra: Partial<RequestStep> = {}): RequestStep =>
      patch(`${item}?fieldManager=diff`, body, APPLY, extra);

    sc('create', (n) => [create(n)]);
    sc('create-yaml', (n) => [create(n, { contentType: 'application/yaml' })]);
    sc('create-accept-yaml', (n) => [create(n, { accept: 'application/yaml' })]);
    sc('create-dry-run', (n, item) => [create(n, { path: `${k.base}?dryRun=All` }), { path: item }]);
    sc('create-duplicate', (n) => [create(n), create(n)]);
    sc('create-generate-name', () => [
      create('x', { body: { ...k.sample('x'), metadata: { generateName: 'gen-', labels: L } }, save: { gen: 'metadata.name' } }),
      ...(k.cluster ? [del(`${k.base}/{{gen}}`, { setup: true })] : []),
    ]);
    sc('create-name-mismatch-path', (n, item) => [create(n, { path: item })]);
    sc('create-invalid-name', () => [create('Not_A_Valid_Name')]);
    sc('create-wrong-kind', (n) => [create(n, { body: { ...k.sample(n), kind: 'Nonsense' } })]);
    onExisting('get', (_n, item) => [{ path: item }]);
    sc('get-missing', (_n, item) => [{ path: item }]);
    onExisting('get-yaml', (_n, item) => [{ path: item, accept: 'application/yaml' }]);
    onExisting('list', () => [{ path: `${k.base}${SELECTED}` }]);
    sc('update', (n, item) => [create(n, { save: { rv: 'metadata.resourceVersion' } }), put(item, atRv(n, k.change))]);
    sc('update-stale', (n, item) => [
      create(n, { setup: true, save: { rv: 'metadata.resourceVersion' } }),
      patch(item, k.change, MERGE, { setup: true }),
      put(item, atRv(n)),
    ]);
    onExisting('update-unconditional', (n, item) => [put(item, { ...k.sample(n), ...k.change })]);
    sc('update-missing', (n, item) => [put(item, k.sample(n))]);
    onExisting('update-name-mismatch', (_n, item) => [put(item, k.sample('other'))]);
    onExisting('patch-merge', (_n, item) => [patch(item, k.change, MERGE)]);
    onExisting('patch-json', (_n, item) => [patch(item, k.jsonPatch, JSON_PATCH)]);
    onExisting('patch-json-test-fails', (_n, item) => [patch(item, [{ op: 'test', path: '/metadata/name', value: 'nope' }], JSON_PATCH)]);
    onExisting('patch-strategic', (_n, item) => [patch(item, k.strategic, 'application/strategic-merge-patch+json')]);
    sc('patch-missing', (_n, item) => [patch(item, k.change, MERGE)]);
    onExisting('patch-bad-content-type', (_n, item) => [patch(item, k.change, 'text/plain')]);
    onExisting('patch-dry-run', (_n, item) => [patch(`${item}?dryRun=All`, k.change, MERGE), { path: item }]);
    sc('apply-create', (n, item) => [apply(item, k.sample(n))]);
    sc('apply-no-manager', (n, item) => [patch(item, k.sample(n), APPLY)]);
    sc('apply-update-same-manager', (n, item) => [apply(item, k.sample(n), { setup: true }), apply(item, { ...k.sample(n), ...k.change })]);
    onExisting('delete', (_n, item) => [del(item), { path: item }]);
    sc('delete-missing', (_n, item) => [del(item)]);
    onExisting('delete-dry-run', (_n, item) => [del(`${item}?dryRun=All`), { path: item, compare: 'status' }]);
    onExisting('delete-precondition-uid', (_n, item) => [
      del(item, { body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: '00000000-0000-0000-0000-000000000000' } } }),
    ]);
    if (!k.cluster) {
      onExisting('deletecollection', (n) => [
        create(`${n}2`, { setup: true }),
        del(`${k.base}${SELECTED}`),
        { path: `${k.base}${SELECTED}` },
      ]);
    }
  }
  return out;
}
