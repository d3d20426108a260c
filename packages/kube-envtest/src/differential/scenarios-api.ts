import type { RequestStep, Scenario, Step } from './types.js';

const CM = '/api/v1/namespaces/{{ns}}/configmaps';
const MERGE = 'application/merge-patch+json';
const SEL = 'labelSelector=suite%3Ddiff';

const cm = (
  name: string,
  labels: Record<string, string> = { suite: 'diff' },
  data: Record<string, string> = { k: 'v' },
): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, labels },
  data,
});
const mk = (name: string, labels?: Record<string, string>, extra: Partial<RequestStep> = {}): RequestStep => ({
  method: 'POST',
  path: CM,
  body: cm(name, labels),
  setup: true,
  ...extra,
});

/** list: limit/continue, selectors, resourceVersion and resourceVersionMatch. */
export function listScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `list/${id}`, steps });
  const five = ['a', 'b', 'c', 'd', 'e'].map((n) => mk(n, { suite: 'diff', tier: n < 'c' ? 'front' : 'back' }));
  add('limit-continue', [
    ...five,
    { path: `${CM}?${SEL}&limit=2`, save: { c1: 'metadata.continue' } },
    { path: `${CM}?${SEL}&limit=2&continue={{c1}}`, save: { c2: 'metadata.continue' } },
    { path: `${CM}?${SEL}&limit=2&continue={{c2}}` },
  ]);
  add('limit-zero', [...five.slice(0, 2), { path: `${CM}?${SEL}&limit=0` }]);
  add('continue-garbage', [{ path: `${CM}?limit=2&continue=not-a-token` }]);
  add('continue-with-rv', [
    ...five.slice(0, 3),
    { path: `${CM}?${SEL}&limit=1`, save: { c1: 'metadata.continue' } },
    { path: `${CM}?${SEL}&limit=1&continue={{c1}}&resourceVersion=0` },
  ]);
  add('label-equality', [...five, { path: `${CM}?labelSelector=tier%3Dfront` }]);
  add('label-inequality', [...five, { path: `${CM}?labelSelector=suite%3Ddiff,tier!%3Dfront` }]);
  add('label-set', [...five, { path: `${CM}?labelSelector=tier%20in%20(back,other)` }]);
  add('label-exists', [mk('a', { suite: 'diff', x: '1' }), mk('b'), { path: `${CM}?labelSelector=x` }]);
  add('label-not-exists', [mk('a', { suite: 'diff', x: '1' }), mk('b'), { path: `${CM}?labelSelector=suite,!x` }]);
  add('label-invalid', [{ path: `${CM}?labelSelector=a%20%3D%3D%3D%20b` }]);
  add('field-name', [...five.slice(0, 3), { path: `${CM}?fieldSelector=metadata.name%3Db` }]);
  add('field-name-not', [...five.slice(0, 3), { path: `${CM}?${SEL}&fieldSelector=metadata.name!%3Db` }]);
  add('field-unsupported', [{ path: `${CM}?fieldSelector=data.k%3Dv` }]);
  add('field-secret-type', [
    {
      method: 'POST',
      path: '/api/v1/namespaces/{{ns}}/secrets',
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, type: 'kars/x' },
      setup: true,
    },
    { path: '/api/v1/namespaces/{{ns}}/secrets?fieldSelector=type%3Dkars%2Fx' },
  ]);
  add('field-custom-resource-name', [
    {
      method: 'POST',
      path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets',
      body: { apiVersion: 'diff.example.com/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { size: 1 } },
      setup: true,
    },
    { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets?fieldSelector=metadata.name%3Dg' },
    { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets?fieldSelector=spec.size%3D1' },
  ]);
  add('rv-0', [mk('a'), { path: `${CM}?${SEL}&resourceVersion=0` }]);
  add('rv-exact', [
    mk('a', undefined, { save: { rv: 'metadata.resourceVersion' } }),
    mk('b'),
    { path: `${CM}?${SEL}&resourceVersion={{rv}}&resourceVersionMatch=Exact` },
  ]);
  add('rv-not-older-than', [
    mk('a', undefined, { save: { rv: 'metadata.resourceVersion' } }),
    { path: `${CM}?${SEL}&resourceVersion={{rv}}&resourceVersionMatch=NotOlderThan` },
  ]);
  add('rv-match-without-rv', [{ path: `${CM}?resourceVersionMatch=NotOlderThan` }]);
  add('rv-match-invalid', [{ path: `${CM}?resourceVersion=1&resourceVersionMatch=Sometime` }]);
  add('rv-not-a-number', [{ path: `${CM}?resourceVersion=abc` }]);
  add('rv-future-exact', [{ path: `${CM}?resourceVersion=999999999&resourceVersionMatch=Exact`, compare: 'status' }]);
  add('list-yaml', [mk('a'), { path: `${CM}?${SEL}`, accept: 'application/yaml' }]);
  add('list-all-namespaces', [mk('a'), { path: `/api/v1/configmaps?${SEL}&fieldSelector=metadata.namespace%3D{{ns}}` }]);
  add('list-namespace-missing', [{ path: '/api/v1/namespaces/no-such-ns-diff/configmaps' }]);
  add('get-in-missing-namespace', [{ path: '/api/v1/namespaces/no-such-ns-diff/configmaps/x' }]);
  add('list-table', [mk('a'), { path: `${CM}?${SEL}`, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' }]);
  return s;
}

const W = (q: string): string => `${CM}?watch=true&${SEL}&${q}`;

/** watch from unset, 0, an exact resourceVersion; bookmarks, initial events, selector transitions, timeouts. */
export function watchScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `watch/${id}`, steps });
  add('from-unset', [mk('a'), mk('b'), { kind: 'watch', id: 'w', path: W('') }, { kind: 'read', id: 'w', events: 2 }]);
  add('from-0', [mk('a'), { kind: 'watch', id: 'w', path: W('resourceVersion=0') }, { kind: 'read', id: 'w', events: 1 }]);
  add('from-exact', [
    mk('a', undefined, { save: { rv: 'metadata.resourceVersion' } }),
    { kind: 'watch', id: 'w', path: W('resourceVersion={{rv}}') },
    { method: 'PATCH', path: `${CM}/a`, body: { data: { k: 'w' } }, contentType: MERGE, setup: true },
    { method: 'DELETE', path: `${CM}/a`, setup: true },
    { kind: 'read', id: 'w', events: 2 },
  ]);
  add('from-exact-before-create', [
    mk('z', { other: 'x' }, { save: { rv: 'metadata.resourceVersion' } }),
    mk('a'),
    mk('b'),
    { kind: 'watch', id: 'w', path: W('resourceVersion={{rv}}') },
    { kind: 'read', id: 'w', events: 2 },
  ]);
  add('label-transitions', [
    mk('a'),
    { kind: 'watch', id: 'w', path: `${CM}?watch=true&labelSelector=suite%3Ddiff,on%3Dyes&resourceVersion=0` },
    { method: 'PATCH', path: `${CM}/a`, body: { metadata: { labels: { on: 'yes' } } }, contentType: MERGE, setup: true },
    { method: 'PATCH', path: `${CM}/a`, body: { data: { k: 'v2' } }, contentType: MERGE, setup: true },
    { method: 'PATCH', path: `${CM}/a`, body: { metadata: { labels: { on: 'no' } } }, contentType: MERGE, setup: true },
    { kind: 'read', id: 'w', events: 3 },
  ]);
  add('field-selector', [
    mk('a'),
    mk('b'),
    { kind: 'watch', id: 'w', path: `${CM}?watch=true&fieldSelector=metadata.name%3Db` },
    { method: 'PATCH', path: `${CM}/b`, body: { data: { k: 'v2' } }, contentType: MERGE, setup: true },
    { kind: 'read', id: 'w', events: 2 },
  ]);
  add('timeout-seconds', [
    { kind: 'watch', id: 'w', path: W('timeoutSeconds=1') },
    { kind: 'read', id: 'w', timeoutMs: 30_000 },
  ]);
  add('send-initial-events', [
    mk('a'),
    mk('b'),
    { kind: 'watch', id: 'w', path: W('sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true') },
    { kind: 'read', id: 'w', events: 3 },
  ]);
  add('send-initial-events-without-bookmarks', [
    { kind: 'watch', id: 'w', path: W('sendInitialEvents=true&resourceVersionMatch=NotOlderThan') },
    { kind: 'read', id: 'w' },
  ]);
  add('send-initial-events-bad-match', [
    { kind: 'watch', id: 'w', path: W('sendInitialEvents=true&allowWatchBookmarks=true') },
    { kind: 'read', id: 'w' },
  ]);
  add('too-old-rv', [
    { kind: 'watch', id: 'w', path: W('resourceVersion=1') },
    { kind: 'read', id: 'w', events: 1 },
  ]);
  add('bad-rv', [
    { kind: 'watch', id: 'w', path: W('resourceVersion=abc') },
    { kind: 'read', id: 'w' },
  ]);
  add('custom-resource', [
    { kind: 'watch', id: 'w', path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets?watch=true&resourceVersion=0' },
    {
      method: 'POST',
      path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets',
      body: { apiVersion: 'diff.example.com/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { size: 1 } },
      setup: true,
    },
    {
      method: 'PATCH',
      path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g/status',
      body: { status: { phase: 'Up' } },
      contentType: MERGE,
      setup: true,
    },
    { method: 'DELETE', path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g', setup: true },
    { kind: 'read', id: 'w', events: 3 },
  ]);
  add('finalizer-delete-events', [
    { kind: 'watch', id: 'w', path: W('resourceVersion=0') },
    {
      method: 'POST',
      path: CM,
      body: { ...cm('f'), metadata: { name: 'f', labels: { suite: 'diff' }, finalizers: ['diff.example.com/hold'] } },
      setup: true,
    },
    { method: 'DELETE', path: `${CM}/f`, setup: true },
    { method: 'PATCH', path: `${CM}/f`, body: { metadata: { finalizers: null } }, contentType: MERGE, setup: true },
    { kind: 'read', id: 'w', events: 3 },
  ]);
  add('watch-named-object', [
    mk('a'),
    mk('b'),
    { kind: 'watch', id: 'w', path: `${CM}?watch=true&fieldSelector=metadata.name%3Da&resourceVersion=0` },
    { kind: 'read', id: 'w', events: 1 },
  ]);
  add('watch-forbidden', [
    { kind: 'watch', id: 'w', path: W(''), as: 'none' },
    { kind: 'read', id: 'w' },
  ]);
  return s;
}

/** The error codes and their Status bodies. */
export function errorScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[], noNamespace = false): void =>
    void s.push({ id: `errors/${id}`, steps, ...(noNamespace ? { noNamespace } : {}) });
  add('400-malformed-json', [{ method: 'POST', path: CM, body: '{"apiVersion":"v1","kind":"ConfigMap",' }]);
  add('400-not-an-object', [{ method: 'POST', path: CM, body: '[1,2,3]' }]);
  add('400-malformed-yaml', [{ method: 'POST', path: CM, body: 'apiVersion: v1\nkind: [', contentType: 'application/yaml' }]);
  add('400-missing-kind', [{ method: 'POST', path: CM, body: { apiVersion: 'v1', metadata: { name: 'x' } } }]);
  add('400-wrong-api-version', [{ method: 'POST', path: CM, body: { apiVersion: 'v2', kind: 'ConfigMap', metadata: { name: 'x' } } }]);
  add('400-bad-json-patch', [
    mk('a'),
    { method: 'PATCH', path: `${CM}/a`, body: '{"op":"add"}', contentType: 'application/json-patch+json' },
  ]);
  add('400-bad-dry-run', [{ method: 'POST', path: `${CM}?dryRun=Some`, body: cm('a') }]);
  add('400-field-manager-too-long', [{ method: 'POST', path: `${CM}?fieldManager=${'m'.repeat(200)}`, body: cm('a') }]);
  add('401-bad-token', [{ path: CM, as: 'badtoken' }]);
  add('401-bad-token-health', [{ path: '/healthz', as: 'badtoken', compare: 'status' }]);
  add('403-anonymous', [{ path: CM, as: 'none' }]);
  add('403-anonymous-version', [{ path: '/version', as: 'none', compare: 'status' }], true);
  add('403-no-role', [
    {
      method: 'POST',
      path: '/api/v1/namespaces/{{ns}}/serviceaccounts',
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'nobody' } },
      setup: true,
    },
    { path: CM, as: { serviceAccount: 'nobody' } },
    { path: `${CM}/x`, as: { serviceAccount: 'nobody' } },
    { method: 'POST', path: CM, body: cm('x'), as: { serviceAccount: 'nobody' } },
    { path: '/api/v1/namespaces', as: { serviceAccount: 'nobody' } },
    { path: '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets/g/status', as: { serviceAccount: 'nobody' } },
  ]);
  add('403-terminating-namespace', [
    { method: 'POST', path: CM, body: { ...cm('held'), metadata: { name: 'held', finalizers: ['diff.example.com/hold'] } }, setup: true },
    { method: 'DELETE', path: '/api/v1/namespaces/{{ns}}', setup: true },
    { method: 'POST', path: CM, body: cm('late') },
  ]);
  add('404-unknown-resource', [{ path: '/api/v1/namespaces/{{ns}}/widgets' }]);
  add('404-unknown-group', [{ path: '/apis/nope.example.com/v1/things' }], true);
  add('404-unknown-path', [{ path: '/not/a/kubernetes/path' }], true);
  add('404-unknown-subresource', [mk('a'), { path: `${CM}/a/scale` }]);
  add('405-post-to-item', [{ method: 'POST', path: `${CM}/a`, body: cm('a') }]);
  add('405-put-collection', [{ method: 'PUT', path: CM, body: cm('a') }]);
  add('405-patch-collection', [{ method: 'PATCH', path: CM, body: {}, contentType: MERGE }]);
  add('406-accept-xml', [{ path: CM, accept: 'application/xml' }]);
  add('406-accept-protobuf-only', [{ path: CM, accept: 'application/vnd.kubernetes.protobuf' }]);
  add('409-already-exists', [mk('a'), { method: 'POST', path: CM, body: cm('a') }]);
  add('409-namespace-exists', [
    { method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: '{{ns}}' } } },
  ]);
  add('413-huge-body', [{ method: 'POST', path: CM, body: cm('big', undefined, { x: 'y'.repeat(4 * 1024 * 1024) }), compare: 'status' }]);
  add('415-text-plain', [{ method: 'POST', path: CM, body: JSON.stringify(cm('a')), contentType: 'text/plain' }]);
  add('415-form', [{ method: 'POST', path: CM, body: 'a=b', contentType: 'application/x-www-form-urlencoded' }]);
  add('422-invalid-name', [{ method: 'POST', path: CM, body: cm('UPPER') }]);
  add('422-missing-name', [{ method: 'POST', path: CM, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: {} } }]);
  add('422-invalid-data-key', [{ method: 'POST', path: CM, body: cm('a', undefined, { 'bad key!': 'v' }) }]);
  add('422-invalid-label', [{ method: 'POST', path: CM, body: cm('a', { 'bad label!': 'x' }) }]);
  add('422-too-long-configmap', [{ method: 'POST', path: CM, body: cm('a', undefined, { x: 'y'.repeat(1024 * 1024 + 10) }) }]);
  add('422-immutable-configmap', [
    { method: 'POST', path: CM, body: { ...cm('a'), immutable: true }, setup: true },
    { method: 'PATCH', path: `${CM}/a`, body: { data: { k: 'changed' } }, contentType: MERGE },
  ]);
  add('422-rolebinding-roleref-change', [
    {
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings',
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'rb' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'a' },
        subjects: [],
      },
      setup: true,
    },
    {
      method: 'PATCH',
      path: '/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings/rb',
      body: { roleRef: { name: 'b' } },
      contentType: MERGE,
    },
  ]);
  add('422-uid-change', [
    mk('a'),
    { method: 'PATCH', path: `${CM}/a`, body: { metadata: { uid: '11111111-1111-1111-1111-111111111111' } }, contentType: MERGE },
  ]);
  add('422-name-change-via-patch', [mk('a'), { method: 'PATCH', path: `${CM}/a`, body: { metadata: { name: 'b' } }, contentType: MERGE }]);
  add(
    '422-crd-invalid',
    [
      {
        method: 'POST',
        path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        body: {
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'wrong.diff.example.com' },
          spec: { group: 'diff.example.com', scope: 'Namespaced', names: { plural: 'things', kind: 'Thing' }, versions: [] },
        },
      },
    ],
    true,
  );
  return s;
}
