import { del, manifest, MERGE, patch, post } from './steps.js';
import type { Content } from './steps.js';
import type { RequestStep, Scenario, Step } from './types.js';

const CM = '/api/v1/namespaces/{{ns}}/configmaps';
const RBAC_V1 = 'rbac.authorization.k8s.io/v1';
const RBAC = `/apis/${RBAC_V1}`;
const NS = '/api/v1/namespaces/{{ns}}';
const SETUP = { setup: true };

/** A ConfigMap named `name` (more metadata: `meta`), without labels or data. */
const configMap = (name: string, meta: Content = {}): Content => manifest('v1', 'ConfigMap', { name, ...meta });

/** Discovery and OpenAPI for the suite's and kars's CRDs (built-in groups differ by design: kars serves fewer kinds). */
export function discoveryScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `discovery/${id}`, steps, noNamespace: true });
  add('group-diff', [{ path: '/apis/diff.example.com' }]);
  add('group-version-diff-v1', [{ path: '/apis/diff.example.com/v1' }]);
  add('group-version-diff-v2', [{ path: '/apis/diff.example.com/v2' }]);
  add('group-kars', [{ path: '/apis/kars.azure.com' }]);
  add('group-version-kars', [{ path: '/apis/kars.azure.com/v1alpha1' }]);
  add('group-version-missing', [{ path: '/apis/diff.example.com/v9' }]);
  add('api-versions', [{ path: '/api' }]);
  add('version-fields', [{ path: '/version', compare: 'status' }]);
  // kube-apiserver's aggregator publishes a new group-version's v3 document up to a second after its
  // CRD is served (it re-reads local discovery once a second), so the request waits for it.
  const served = { until: { status: 200, timeoutMs: 10_000 } };
  add('openapi-v3-kars', [{ path: '/openapi/v3/apis/kars.azure.com/v1alpha1', ...served }]);
  add('openapi-v3-diff', [{ path: '/openapi/v3/apis/diff.example.com/v1', ...served }]);
  add('openapi-v3-missing', [{ path: '/openapi/v3/apis/nope.example.com/v1', compare: 'status' }]);
  for (const kind of ['InferencePolicy', 'ToolPolicy', 'EgressApproval', 'KarsSandbox']) {
    add(`openapi-v2-${kind}`, [{ path: '/openapi/v2', pick: `definitions.com.azure.kars.v1alpha1.${kind}` }]);
  }
  add('openapi-v2-gadget', [{ path: '/openapi/v2', pick: 'definitions.com.example.diff.v1.Gadget' }]);
  add('healthz', [{ path: '/healthz' }]);
  add('livez', [{ path: '/livez', compare: 'status' }]);
  add('readyz', [{ path: '/readyz', compare: 'status' }]);
  return s;
}

/** Setup: the ServiceAccount `name`. */
const sa = (name: string): RequestStep => post(`${NS}/serviceaccounts`, manifest('v1', 'ServiceAccount', { name }), SETUP);
/** Setup: the Role `name` with `rules`. */
const role = (name: string, rules: unknown[]): RequestStep =>
  post(`${RBAC}/namespaces/{{ns}}/roles`, manifest(RBAC_V1, 'Role', { name }, { rules }), SETUP);
/** Setup: the RoleBinding `name` of a Role or ClusterRole to the ServiceAccount `subject`. */
const bind = (name: string, roleKind: 'Role' | 'ClusterRole', roleName: string, subject: string): RequestStep =>
  post(
    `${RBAC}/namespaces/{{ns}}/rolebindings`,
    manifest(
      RBAC_V1,
      'RoleBinding',
      { name },
      {
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name: roleName },
        subjects: [{ kind: 'ServiceAccount', name: subject, namespace: '{{ns}}' }],
      },
    ),
    SETUP,
  );
/** Setup: the ClusterRole `metadata.name` (its other fields: `rest`). */
const clusterRole = (metadata: Content, rest: Content): RequestStep =>
  post(`${RBAC}/clusterroles`, manifest(RBAC_V1, 'ClusterRole', metadata, rest), SETUP);
/** A review (SelfSubjectAccessReview, …: `kind`) of the group `authorization.k8s.io`, sent as `as`. */
const review = (kind: string, spec: Content, extra: Partial<RequestStep>): RequestStep =>
  post(`/apis/authorization.k8s.io/v1/${kind.toLowerCase()}s`, { apiVersion: 'authorization.k8s.io/v1', kind, spec }, extra);
const ssar = (attrs: Content, as: NonNullable<RequestStep['as']>): RequestStep => review('SelfSubjectAccessReview', attrs, { as });

/** RBAC evaluation (roles × verbs × resourceNames, aggregation), SelfSubjectAccessReview, TokenRequest. */
export function authScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `auth/${id}`, steps });
  const me = { serviceAccount: 'me' };
  const rulesets: Record<string, unknown[]> = {
    'get-only': [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
    'list-watch': [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] }],
    'named-get-update': [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['a'], verbs: ['get', 'update', 'patch', 'delete'] }],
    'create-only': [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create'] }],
    wildcard: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }],
    'wrong-group': [{ apiGroups: ['apps'], resources: ['configmaps'], verbs: ['*'] }],
    'status-only': [{ apiGroups: ['diff.example.com'], resources: ['gadgets/status'], verbs: ['get', 'patch'] }],
  };
  const probes: Array<[string, RequestStep]> = [
    ['get-a', { path: `${CM}/a` }],
    ['get-b', { path: `${CM}/b` }],
    ['list', { path: CM }],
    ['create', post(CM, configMap('new'))],
    ['patch-a', patch(`${CM}/a`, { data: { z: '1' } }, MERGE)],
    ['delete-b', del(`${CM}/b`)],
    ['deletecollection', del(CM)],
    ['gadget-status', { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g/status' }],
    ['gadget', { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g' }],
  ];
  for (const [name, rules] of Object.entries(rulesets)) {
    for (const [probe, step] of probes) {
      add(`rbac/${name}/${probe}`, [
        sa('me'),
        role('r', rules),
        bind('rb', 'Role', 'r', 'me'),
        post(CM, configMap('a'), SETUP),
        post(CM, configMap('b'), SETUP),
        post(
          '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets',
          manifest('diff.example.com/v1', 'Gadget', { name: 'g' }, { spec: { size: 1 } }),
          SETUP,
        ),
        { ...step, as: me, compare: 'status' },
        ssar(
          {
            resourceAttributes: {
              namespace: '{{ns}}',
              verb: (step.method ?? 'GET') === 'GET' ? 'get' : 'create',
              resource: 'configmaps',
              name: 'a',
            },
          },
          me,
        ),
      ]);
    }
  }
  add('rbac/full-forbidden-body', [
    sa('me'),
    role('r', rulesets['get-only']!),
    bind('rb', 'Role', 'r', 'me'),
    { path: CM, as: me },
    { method: 'DELETE', path: `${CM}/a`, as: me },
  ]);
  add('rbac/clusterrole-in-rolebinding', [
    sa('me'),
    bind('rb', 'ClusterRole', 'view', 'me'),
    { path: CM, as: me, compare: 'status' },
    { path: '/api/v1/namespaces/{{ns}}/secrets', as: me, compare: 'status' },
  ]);
  add('rbac/missing-role', [sa('me'), bind('rb', 'Role', 'ghost', 'me'), { path: CM, as: me, compare: 'status' }]);
  add('rbac/aggregation', [
    sa('me'),
    clusterRole({ name: 'diff-agg-{{ns}}' }, { aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'diff-agg': '{{ns}}' } }] } }),
    clusterRole(
      { name: 'diff-part-{{ns}}', labels: { 'diff-agg': '{{ns}}' } },
      { rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }] },
    ),
    bind('rb', 'ClusterRole', 'diff-agg-{{ns}}', 'me'),
    { path: CM, as: me, compare: 'status', until: { status: 200, timeoutMs: 30_000 } },
    { path: `${RBAC}/clusterroles/diff-agg-{{ns}}`, pick: 'rules' },
  ]);
  add('ssar/admin', [ssar({ resourceAttributes: { verb: 'delete', resource: 'namespaces' } }, 'admin')]);
  add('ssar/non-resource', [sa('me'), ssar({ nonResourceAttributes: { path: '/healthz', verb: 'get' } }, me)]);
  add('ssar/denied', [sa('me'), ssar({ resourceAttributes: { namespace: '{{ns}}', verb: 'list', resource: 'secrets' } }, me)]);
  add('ssar/invalid-empty', [sa('me'), ssar({}, me)]);
  add('ssar/anonymous', [ssar({ resourceAttributes: { verb: 'get', resource: 'pods' } }, 'none')]);
  add('selfsubjectreview', [
    sa('me'),
    post(
      '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      { as: me },
    ),
  ]);
  add('selfsubjectrulesreview', [
    sa('me'),
    role('r', rulesets['named-get-update']!),
    bind('rb', 'Role', 'r', 'me'),
    review('SelfSubjectRulesReview', { namespace: '{{ns}}' }, { as: me, pick: 'status.resourceRules' }),
  ]);
  /** A TokenRequest with `spec` for the ServiceAccount `name`. */
  const tokenRequest = (spec: Content, name = 'me'): RequestStep =>
    post(`${NS}/serviceaccounts/${name}/token`, { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec });
  add('tokenrequest/create', [sa('me'), tokenRequest({ expirationSeconds: 3600 })]);
  add('tokenrequest/audiences', [sa('me'), tokenRequest({ audiences: ['a', 'b'], expirationSeconds: 3600 })]);
  add('tokenrequest/too-short', [sa('me'), tokenRequest({ expirationSeconds: 60 })]);
  add('tokenrequest/missing-sa', [tokenRequest({}, 'ghost')]);
  const asMe: RequestStep = { path: CM, as: me, compare: 'status' };
  add('tokenrequest/revoked-by-delete', [sa('me'), asMe, del(`${NS}/serviceaccounts/me`, SETUP), asMe]);
  return s;
}

/** Namespaces, garbage collection by ownerReferences, deletion propagation. */
export function lifecycleScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `lifecycle/${id}`, steps });
  const owner = post(CM, configMap('owner'), { save: { uid: 'metadata.uid' }, setup: true });
  /** The ConfigMap `dep` owned by `owner` (a reference with `ref`'s fields). */
  const ownedBy = (ref: Content): Content =>
    configMap('dep', { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', ...ref }] });
  const dependent = post(CM, ownedBy({ uid: '{{uid}}' }));
  const dependentSetup = { ...dependent, setup: true };
  /** The owner's deletion with the propagation policy `policy` (in DeleteOptions). */
  const deleteOwner = (policy: string, extra: Partial<RequestStep> = {}): RequestStep =>
    del(`${CM}/owner`, { body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: policy }, ...extra });
  const ownerGone: RequestStep = { path: `${CM}/owner`, until: { status: 404 }, compare: 'status' };
  add('namespace-get', [{ path: NS }]);
  add('namespace-delete', [del(NS)]);
  add('namespace-terminating-get', [
    post(CM, configMap('held', { finalizers: ['diff.example.com/hold'] }), SETUP),
    del(NS, SETUP),
    { path: NS, pick: 'status.phase' },
    { path: `${CM}/held`, pick: 'metadata.deletionTimestamp', compare: 'status' },
  ]);
  add('namespace-finalized', [post(CM, configMap('x'), SETUP), del(NS, SETUP), { path: NS, until: { status: 404, timeoutMs: 60_000 } }]);
  add('namespace-invalid-name', [post('/api/v1/namespaces', manifest('v1', 'Namespace', { name: 'Bad_Name' }))]);
  add('namespace-update-spec-finalizers', [patch(NS, { spec: { finalizers: [] } }, MERGE, { pick: 'spec' })]);
  add('owner-reference-accepted', [owner, dependent]);
  add('owner-reference-invalid', [post(CM, ownedBy({}))]);
  add('gc-background', [
    owner,
    dependentSetup,
    deleteOwner('Background'),
    { path: `${CM}/dep`, until: { status: 404 }, compare: 'status' },
  ]);
  add('gc-orphan', [
    owner,
    dependentSetup,
    del(`${CM}/owner?propagationPolicy=Orphan`, { compare: 'status' }),
    ownerGone,
    { path: `${CM}/dep`, pick: 'metadata.ownerReferences' },
  ]);
  add('gc-foreground', [
    owner,
    dependentSetup,
    deleteOwner('Foreground', { pick: 'metadata.finalizers' }),
    ownerGone,
    { path: `${CM}/dep`, compare: 'status' },
  ]);
  add('propagation-invalid', [owner, del(`${CM}/owner?propagationPolicy=Sometimes`)]);
  add('delete-grace-period', [owner, del(`${CM}/owner?gracePeriodSeconds=0`)]);
  const crds = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  const temps = '/apis/{{ns}}.example.com/v1/namespaces/{{ns}}/temps';
  add('crd-delete-removes-resources', [
    post(
      crds,
      manifest(
        'apiextensions.k8s.io/v1',
        'CustomResourceDefinition',
        { name: 'temps.{{ns}}.example.com' },
        {
          spec: {
            group: '{{ns}}.example.com',
            scope: 'Namespaced',
            names: { plural: 'temps', kind: 'Temp' },
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            ],
          },
        },
      ),
      SETUP,
    ),
    { path: temps, until: { status: 200 }, compare: 'status' },
    post(temps, manifest('{{ns}}.example.com/v1', 'Temp', { name: 't' }, { x: 1 })),
    del(`${crds}/temps.{{ns}}.example.com`, { compare: 'status' }),
    { path: temps, until: { status: 404, timeoutMs: 60_000 }, compare: 'status' },
  ]);
  return s;
}

/** Hostile bodies: only the outcome (accepted or refused) counts, and that the server still answers. */
export function hostileScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const alive: RequestStep = { path: CM, compare: 'status' };
  const add = (id: string, body: string | Buffer, contentType = 'application/json'): void =>
    void s.push({ id: `hostile/${id}`, steps: [{ method: 'POST', path: CM, body, contentType, compare: 'outcome' }, alive] });
  const nest = (n: number): string =>
    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep","annotations":{}},"x":${'['.repeat(n)}${']'.repeat(n)}}`;
  add('deep-nesting-json-10k', nest(10_000));
  add('deep-nesting-json-100', nest(100));
  add(
    'deep-nesting-yaml',
    `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\nx: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`,
    'application/yaml',
  );
  const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
  for (let i = 1; i < 9; i++)
    bomb.push(
      `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9)
        .fill(`*${String.fromCharCode(96 + i)}`)
        .join(',')}]`,
    );
  add('yaml-alias-bomb', `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n${bomb.join('\n')}\ndata: {k: v}\n`, 'application/yaml');
  add(
    'yaml-alias-small',
    'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: alias, labels: &l {a: b}, annotations: *l}\n',
    'application/yaml',
  );
  add(
    'huge-string-value',
    JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'huge' }, data: { k: 'x'.repeat(2 * 1024 * 1024) } }),
  );
  add(
    'huge-annotation',
    JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'ann', annotations: { a: 'x'.repeat(300 * 1024) } } }),
  );
  add('duplicate-keys', '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"1","k":"2"}}');
  add('duplicate-keys-metadata', '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup1","name":"dup2"}}');
  add(
    'bad-utf8',
    Buffer.concat([
      Buffer.from('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"utf"},"data":{"k":"'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}}'),
    ]),
  );
  add('nul-in-value', '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"nul"},"data":{"k":"a\\u0000b"}}');
  add('wrong-content-type-xml', '<ConfigMap/>', 'application/xml');
  add('json-as-yaml-type', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'jy' } }), 'application/yaml');
  add('yaml-as-json-type', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yj}\n');
  add('empty-body', '');
  add('number-overflow', '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"num","generation":1e400}}');
  add(
    'many-keys',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'keys' },
      data: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 'v'])),
    }),
  );
  add(
    'proto-pollution',
    '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"proto"},"__proto__":{"x":1},"data":{"constructor":"y"}}',
  );
  return s;
}
