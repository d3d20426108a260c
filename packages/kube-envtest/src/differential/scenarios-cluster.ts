import type { RequestStep, Scenario, Step } from './types.js';

const CM = '/api/v1/namespaces/{{ns}}/configmaps';
const MERGE = 'application/merge-patch+json';
const RBAC = '/apis/rbac.authorization.k8s.io/v1';

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
  add('openapi-v3-kars', [{ path: '/openapi/v3/apis/kars.azure.com/v1alpha1' }]);
  add('openapi-v3-diff', [{ path: '/openapi/v3/apis/diff.example.com/v1' }]);
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

const sa = (name: string): RequestStep => ({
  method: 'POST',
  path: '/api/v1/namespaces/{{ns}}/serviceaccounts',
  body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } },
  setup: true,
});
const role = (name: string, rules: unknown[]): RequestStep => ({
  method: 'POST',
  path: `${RBAC}/namespaces/{{ns}}/roles`,
  body: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name }, rules },
  setup: true,
});
const bind = (name: string, roleKind: 'Role' | 'ClusterRole', roleName: string, subject: string): RequestStep => ({
  method: 'POST',
  path: `${RBAC}/namespaces/{{ns}}/rolebindings`,
  body: {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name: roleName },
    subjects: [{ kind: 'ServiceAccount', name: subject, namespace: '{{ns}}' }],
  },
  setup: true,
});
const ssar = (attrs: Record<string, unknown>, as: NonNullable<RequestStep['as']>): RequestStep => ({
  method: 'POST',
  path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
  body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: attrs },
  as,
});

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
    ['create', { method: 'POST', path: CM, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'new' } } }],
    ['patch-a', { method: 'PATCH', path: `${CM}/a`, body: { data: { z: '1' } }, contentType: MERGE }],
    ['delete-b', { method: 'DELETE', path: `${CM}/b` }],
    ['deletecollection', { method: 'DELETE', path: CM }],
    ['gadget-status', { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g/status' }],
    ['gadget', { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g' }],
  ];
  for (const [name, rules] of Object.entries(rulesets)) {
    for (const [probe, step] of probes) {
      add(`rbac/${name}/${probe}`, [
        sa('me'),
        role('r', rules),
        bind('rb', 'Role', 'r', 'me'),
        { method: 'POST', path: CM, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } }, setup: true },
        { method: 'POST', path: CM, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b' } }, setup: true },
        {
          method: 'POST',
          path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets',
          body: { apiVersion: 'diff.example.com/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { size: 1 } },
          setup: true,
        },
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
    {
      method: 'POST',
      path: `${RBAC}/clusterroles`,
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'diff-agg-{{ns}}' },
        aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'diff-agg': '{{ns}}' } }] },
      },
      setup: true,
    },
    {
      method: 'POST',
      path: `${RBAC}/clusterroles`,
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'diff-part-{{ns}}', labels: { 'diff-agg': '{{ns}}' } },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
      },
      setup: true,
    },
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
    {
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      as: me,
    },
  ]);
  add('selfsubjectrulesreview', [
    sa('me'),
    role('r', rulesets['named-get-update']!),
    bind('rb', 'Role', 'r', 'me'),
    {
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews',
      body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectRulesReview', spec: { namespace: '{{ns}}' } },
      as: me,
      pick: 'status.resourceRules',
    },
  ]);
  const tokenPath = '/api/v1/namespaces/{{ns}}/serviceaccounts/me/token';
  const tr = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec,
  });
  add('tokenrequest/create', [sa('me'), { method: 'POST', path: tokenPath, body: tr({ expirationSeconds: 3600 }) }]);
  add('tokenrequest/audiences', [
    sa('me'),
    { method: 'POST', path: tokenPath, body: tr({ audiences: ['a', 'b'], expirationSeconds: 3600 }) },
  ]);
  add('tokenrequest/too-short', [sa('me'), { method: 'POST', path: tokenPath, body: tr({ expirationSeconds: 60 }) }]);
  add('tokenrequest/missing-sa', [{ method: 'POST', path: '/api/v1/namespaces/{{ns}}/serviceaccounts/ghost/token', body: tr({}) }]);
  add('tokenrequest/revoked-by-delete', [
    sa('me'),
    { path: CM, as: me, compare: 'status' },
    { method: 'DELETE', path: '/api/v1/namespaces/{{ns}}/serviceaccounts/me', setup: true },
    { path: CM, as: me, compare: 'status' },
  ]);
  return s;
}

/** Namespaces, garbage collection by ownerReferences, deletion propagation. */
export function lifecycleScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `lifecycle/${id}`, steps });
  const owner: RequestStep = {
    method: 'POST',
    path: CM,
    body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner' } },
    save: { uid: 'metadata.uid' },
    setup: true,
  };
  const dependent: RequestStep = {
    method: 'POST',
    path: CM,
    body: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'dep', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: '{{uid}}' }] },
    },
  };
  add('namespace-get', [{ path: '/api/v1/namespaces/{{ns}}' }]);
  add('namespace-delete', [{ method: 'DELETE', path: '/api/v1/namespaces/{{ns}}' }]);
  add('namespace-terminating-get', [
    {
      method: 'POST',
      path: CM,
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'held', finalizers: ['diff.example.com/hold'] } },
      setup: true,
    },
    { method: 'DELETE', path: '/api/v1/namespaces/{{ns}}', setup: true },
    { path: '/api/v1/namespaces/{{ns}}', pick: 'status.phase' },
    { path: `${CM}/held`, pick: 'metadata.deletionTimestamp', compare: 'status' },
  ]);
  add('namespace-finalized', [
    { method: 'POST', path: CM, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } }, setup: true },
    { method: 'DELETE', path: '/api/v1/namespaces/{{ns}}', setup: true },
    { path: '/api/v1/namespaces/{{ns}}', until: { status: 404, timeoutMs: 60_000 } },
  ]);
  add('namespace-invalid-name', [
    { method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'Bad_Name' } } },
  ]);
  add('namespace-update-spec-finalizers', [
    { method: 'PATCH', path: '/api/v1/namespaces/{{ns}}', body: { spec: { finalizers: [] } }, contentType: MERGE, pick: 'spec' },
  ]);
  add('owner-reference-accepted', [owner, dependent]);
  add('owner-reference-invalid', [
    {
      method: 'POST',
      path: CM,
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'dep', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner' }] },
      },
    },
  ]);
  add('gc-background', [
    owner,
    { ...dependent, setup: true },
    { method: 'DELETE', path: `${CM}/owner`, body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' } },
    { path: `${CM}/dep`, until: { status: 404 }, compare: 'status' },
  ]);
  add('gc-orphan', [
    owner,
    { ...dependent, setup: true },
    { method: 'DELETE', path: `${CM}/owner?propagationPolicy=Orphan`, compare: 'status' },
    { path: `${CM}/owner`, until: { status: 404 }, compare: 'status' },
    { path: `${CM}/dep`, pick: 'metadata.ownerReferences' },
  ]);
  add('gc-foreground', [
    owner,
    { ...dependent, setup: true },
    {
      method: 'DELETE',
      path: `${CM}/owner`,
      body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' },
      pick: 'metadata.finalizers',
    },
    { path: `${CM}/owner`, until: { status: 404 }, compare: 'status' },
    { path: `${CM}/dep`, compare: 'status' },
  ]);
  add('propagation-invalid', [owner, { method: 'DELETE', path: `${CM}/owner?propagationPolicy=Sometimes` }]);
  add('delete-grace-period', [owner, { method: 'DELETE', path: `${CM}/owner?gracePeriodSeconds=0` }]);
  add('crd-delete-removes-resources', [
    {
      method: 'POST',
      path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      body: {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'temps.{{ns}}.example.com' },
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
      setup: true,
    },
    { path: '/apis/{{ns}}.example.com/v1/namespaces/{{ns}}/temps', until: { status: 200 }, compare: 'status' },
    {
      method: 'POST',
      path: '/apis/{{ns}}.example.com/v1/namespaces/{{ns}}/temps',
      body: { apiVersion: '{{ns}}.example.com/v1', kind: 'Temp', metadata: { name: 't' }, x: 1 },
    },
    { method: 'DELETE', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/temps.{{ns}}.example.com', compare: 'status' },
    { path: '/apis/{{ns}}.example.com/v1/namespaces/{{ns}}/temps', until: { status: 404, timeoutMs: 60_000 }, compare: 'status' },
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
