import { del, JSON_PATCH, manifest, MERGE, patch, post } from './steps.js';
import type { Content } from './steps.js';
import type { Identity, RequestStep, Scenario, Step, WatchReadStep } from './types.js';

const CM = '/api/v1/namespaces/{{ns}}/configmaps';
const SEL = 'labelSelector=suite%3Ddiff';
const GADGETS = '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets';
const SAVE_RV = { save: { rv: 'metadata.resourceVersion' } };

const cm = (name: string, labels: Record<string, string> = { suite: 'diff' }, data: Record<string, string> = { k: 'v' }): Content =>
  manifest('v1', 'ConfigMap', { name, labels }, { data });
/** The ConfigMap `name` created as setup. */
const mk = (name: string, labels?: Record<string, string>, extra: Partial<RequestStep> = {}): RequestStep =>
  post(CM, cm(name, labels), { setup: true, ...extra });
/** A merge patch of the ConfigMap `name`, as setup. */
const setupMerge = (name: string, body: Content): RequestStep => patch(`${CM}/${name}`, body, MERGE, { setup: true });

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
  const secrets = '/api/v1/namespaces/{{ns}}/secrets';
  add('field-secret-type', [
    post(secrets, manifest('v1', 'Secret', { name: 's' }, { type: 'kars/x' }), { setup: true }),
    { path: `${secrets}?fieldSelector=type%3Dkars%2Fx` },
  ]);
  add('field-custom-resource-name', [
    post(GADGETS, manifest('diff.example.com/v1', 'Gadget', { name: 'g' }, { spec: { size: 1 } }), { setup: true }),
    { path: `${GADGETS}?fieldSelector=metadata.name%3Dg` },
    { path: `${GADGETS}?fieldSelector=spec.size%3D1` },
  ]);
  add('rv-0', [mk('a'), { path: `${CM}?${SEL}&resourceVersion=0` }]);
  add('rv-exact', [mk('a', undefined, SAVE_RV), mk('b'), { path: `${CM}?${SEL}&resourceVersion={{rv}}&resourceVersionMatch=Exact` }]);
  add('rv-not-older-than', [
    mk('a', undefined, SAVE_RV),
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

/** A watch of the suite's ConfigMaps with the query `q`. */
const W = (q: string): string => `${CM}?watch=true&${SEL}&${q}`;

/**
 * Open the watch `w` on `path` (as `as`), run `between`, then read it (`read`: how many events, how long).
 * The steps of most watch scenarios.
 */
function watchRead(path: string, read: Omit<WatchReadStep, 'kind' | 'id'> = {}, between: Step[] = [], as?: Identity): Step[] {
  return [{ kind: 'watch', id: 'w', path, ...(as ? { as } : {}) }, ...between, { kind: 'read', id: 'w', ...read }];
}

/** watch from unset, 0, an exact resourceVersion; bookmarks, initial events, selector transitions, timeouts. */
export function watchScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[]): void => void s.push({ id: `watch/${id}`, steps });
  add('from-unset', [mk('a'), mk('b'), ...watchRead(W(''), { events: 2 })]);
  add('from-0', [mk('a'), ...watchRead(W('resourceVersion=0'), { events: 1 })]);
  add('from-exact', [
    mk('a', undefined, SAVE_RV),
    ...watchRead(W('resourceVersion={{rv}}'), { events: 2 }, [setupMerge('a', { data: { k: 'w' } }), del(`${CM}/a`, { setup: true })]),
  ]);
  add('from-exact-before-create', [
    mk('z', { other: 'x' }, SAVE_RV),
    mk('a'),
    mk('b'),
    ...watchRead(W('resourceVersion={{rv}}'), { events: 2 }),
  ]);
  add('label-transitions', [
    mk('a'),
    ...watchRead(`${CM}?watch=true&labelSelector=suite%3Ddiff,on%3Dyes&resourceVersion=0`, { events: 3 }, [
      setupMerge('a', { metadata: { labels: { on: 'yes' } } }),
      setupMerge('a', { data: { k: 'v2' } }),
      setupMerge('a', { metadata: { labels: { on: 'no' } } }),
    ]),
  ]);
  add('field-selector', [
    mk('a'),
    mk('b'),
    ...watchRead(`${CM}?watch=true&fieldSelector=metadata.name%3Db`, { events: 2 }, [setupMerge('b', { data: { k: 'v2' } })]),
  ]);
  add('timeout-seconds', watchRead(W('timeoutSeconds=1'), { timeoutMs: 30_000 }));
  add('send-initial-events', [
    mk('a'),
    mk('b'),
    ...watchRead(W('sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true'), { events: 3 }),
  ]);
  add('send-initial-events-without-bookmarks', watchRead(W('sendInitialEvents=true&resourceVersionMatch=NotOlderThan')));
  add('send-initial-events-bad-match', watchRead(W('sendInitialEvents=true&allowWatchBookmarks=true')));
  add('too-old-rv', watchRead(W('resourceVersion=1'), { events: 1 }));
  add('bad-rv', watchRead(W('resourceVersion=abc')));
  add(
    'custom-resource',
    watchRead(`${GADGETS}?watch=true&resourceVersion=0`, { events: 3 }, [
      post(GADGETS, manifest('diff.example.com/v1', 'Gadget', { name: 'g' }, { spec: { size: 1 } }), { setup: true }),
      patch(`${GADGETS}/g/status`, { status: { phase: 'Up' } }, MERGE, { setup: true }),
      del(`${GADGETS}/g`, { setup: true }),
    ]),
  );
  add(
    'finalizer-delete-events',
    watchRead(W('resourceVersion=0'), { events: 3 }, [
      post(CM, { ...cm('f'), metadata: { name: 'f', labels: { suite: 'diff' }, finalizers: ['diff.example.com/hold'] } }, { setup: true }),
      del(`${CM}/f`, { setup: true }),
      setupMerge('f', { metadata: { finalizers: null } }),
    ]),
  );
  add('watch-named-object', [
    mk('a'),
    mk('b'),
    ...watchRead(`${CM}?watch=true&fieldSelector=metadata.name%3Da&resourceVersion=0`, { events: 1 }),
  ]);
  add('watch-forbidden', watchRead(W(''), {}, [], 'none'));
  return s;
}

/** The error codes and their Status bodies. */
export function errorScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Step[], noNamespace = false): void =>
    void s.push({ id: `errors/${id}`, steps, ...(noNamespace ? { noNamespace } : {}) });
  /** A scenario of one POST to the ConfigMaps. */
  const posting = (id: string, body: unknown, extra?: Partial<RequestStep>): void => add(id, [post(CM, body, extra)]);
  posting('400-malformed-json', '{"apiVersion":"v1","kind":"ConfigMap",');
  posting('400-not-an-object', '[1,2,3]');
  posting('400-malformed-yaml', 'apiVersion: v1\nkind: [', { contentType: 'application/yaml' });
  posting('400-missing-kind', { apiVersion: 'v1', metadata: { name: 'x' } });
  posting('400-wrong-api-version', manifest('v2', 'ConfigMap', { name: 'x' }));
  add('400-bad-json-patch', [mk('a'), patch(`${CM}/a`, '{"op":"add"}', JSON_PATCH)]);
  add('400-bad-dry-run', [post(`${CM}?dryRun=Some`, cm('a'))]);
  add('400-field-manager-too-long', [post(`${CM}?fieldManager=${'m'.repeat(200)}`, cm('a'))]);
  add('401-bad-token', [{ path: CM, as: 'badtoken' }]);
  add('401-bad-token-health', [{ path: '/healthz', as: 'badtoken', compare: 'status' }]);
  add('403-anonymous', [{ path: CM, as: 'none' }]);
  add('403-anonymous-version', [{ path: '/version', as: 'none', compare: 'status' }], true);
  const nobody = { serviceAccount: 'nobody' };
  add('403-no-role', [
    post('/api/v1/namespaces/{{ns}}/serviceaccounts', manifest('v1', 'ServiceAccount', { name: 'nobody' }), { setup: true }),
    { path: CM, as: nobody },
    { path: `${CM}/x`, as: nobody },
    post(CM, cm('x'), { as: nobody }),
    { path: '/api/v1/namespaces', as: nobody },
    { path: `${GADGETS}/g/status`, as: nobody },
  ]);
  add('403-terminating-namespace', [
    post(CM, { ...cm('held'), metadata: { name: 'held', finalizers: ['diff.example.com/hold'] } }, { setup: true }),
    del('/api/v1/namespaces/{{ns}}', { setup: true }),
    post(CM, cm('late')),
  ]);
  add('404-unknown-resource', [{ path: '/api/v1/namespaces/{{ns}}/widgets' }]);
  add('404-unknown-group', [{ path: '/apis/nope.example.com/v1/things' }], true);
  add('404-unknown-path', [{ path: '/not/a/kubernetes/path' }], true);
  add('404-unknown-subresource', [mk('a'), { path: `${CM}/a/scale` }]);
  add('405-post-to-item', [post(`${CM}/a`, cm('a'))]);
  add('405-put-collection', [{ method: 'PUT', path: CM, body: cm('a') }]);
  add('405-patch-collection', [patch(CM, {}, MERGE)]);
  add('406-accept-xml', [{ path: CM, accept: 'application/xml' }]);
  add('406-accept-protobuf-only', [{ path: CM, accept: 'application/vnd.kubernetes.protobuf' }]);
  add('409-already-exists', [mk('a'), post(CM, cm('a'))]);
  add('409-namespace-exists', [post('/api/v1/namespaces', manifest('v1', 'Namespace', { name: '{{ns}}' }))]);
  posting('413-huge-body', cm('big', undefined, { x: 'y'.repeat(4 * 1024 * 1024) }), { compare: 'status' });
  posting('415-text-plain', JSON.stringify(cm('a')), { contentType: 'text/plain' });
  posting('415-form', 'a=b', { contentType: 'application/x-www-form-urlencoded' });
  posting('422-invalid-name', cm('UPPER'));
  posting('422-missing-name', manifest('v1', 'ConfigMap', {}));
  posting('422-invalid-data-key', cm('a', undefined, { 'bad key!': 'v' }));
  posting('422-invalid-label', cm('a', { 'bad label!': 'x' }));
  posting('422-too-long-configmap', cm('a', undefined, { x: 'y'.repeat(1024 * 1024 + 10) }));
  add('422-immutable-configmap', [
    post(CM, { ...cm('a'), immutable: true }, { setup: true }),
    patch(`${CM}/a`, { data: { k: 'changed' } }, MERGE),
  ]);
  const rolebindings = '/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings';
  add('422-rolebinding-roleref-change', [
    post(
      rolebindings,
      manifest(
        'rbac.authorization.k8s.io/v1',
        'RoleBinding',
        { name: 'rb' },
        {
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'a' },
          subjects: [],
        },
      ),
      { setup: true },
    ),
    patch(`${rolebindings}/rb`, { roleRef: { name: 'b' } }, MERGE),
  ]);
  add('422-uid-change', [mk('a'), patch(`${CM}/a`, { metadata: { uid: '11111111-1111-1111-1111-111111111111' } }, MERGE)]);
  add('422-name-change-via-patch', [mk('a'), patch(`${CM}/a`, { metadata: { name: 'b' } }, MERGE)]);
  add(
    '422-crd-invalid',
    [
      post(
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        manifest(
          'apiextensions.k8s.io/v1',
          'CustomResourceDefinition',
          { name: 'wrong.diff.example.com' },
          {
            spec: { group: 'diff.example.com', scope: 'Namespaced', names: { plural: 'things', kind: 'Thing' }, versions: [] },
          },
        ),
      ),
    ],
    true,
  );
  return s;
}
