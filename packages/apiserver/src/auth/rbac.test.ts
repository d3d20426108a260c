// RBAC evaluation, pure: each matcher as kube's rbac/v1 helpers, then whole decisions over bindings.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  clusterRoleRules,
  forbiddenMessage,
  nonResourceURLMatches,
  rbacAllows,
  resourceMatches,
  ruleAllows,
  subjectMatches,
} from './rbac.js';
import type { BindingLike, RbacSource, RequestAttributes, RoleLike, UserInfo } from './rbac.js';

function attrs(a: Partial<RequestAttributes>): RequestAttributes {
  return {
    verb: 'get',
    resourceRequest: true,
    apiGroup: '',
    apiVersion: 'v1',
    resource: 'configmaps',
    subresource: '',
    namespace: 'ns',
    name: '',
    path: '/x',
    ...a,
  };
}

function source(o: {
  crbs?: BindingLike[];
  rbs?: Record<string, BindingLike[]>;
  crs?: RoleLike[];
  roles?: Record<string, RoleLike[]>;
}): RbacSource {
  return {
    clusterRoleBindings: () => o.crbs ?? [],
    roleBindings: (ns) => o.rbs?.[ns] ?? [],
    clusterRole: (n) => (o.crs ?? []).find((r) => r.metadata.name === n),
    clusterRoles: () => o.crs ?? [],
    role: (ns, n) => (o.roles?.[ns] ?? []).find((r) => r.metadata.name === n),
  };
}

const sa: UserInfo = {
  name: 'system:serviceaccount:ns:bot',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:ns', 'system:authenticated'],
};

void describe('rbac rule matching', () => {
  it('matches a subresource only when the rule names it, as resource/sub or */sub', () => {
    const log = attrs({ resource: 'pods', subresource: 'log' });
    assert.equal(resourceMatches({ resources: ['pods'] }, 'pods/log', 'log'), false);
    assert.equal(resourceMatches({ resources: ['pods/log'] }, 'pods/log', 'log'), true);
    assert.equal(resourceMatches({ resources: ['*/log'] }, 'pods/log', 'log'), true);
    assert.equal(resourceMatches({ resources: ['*/status'] }, 'pods/log', 'log'), false);
    assert.equal(resourceMatches({ resources: ['*/log'] }, 'pods', ''), false);
    assert.equal(ruleAllows(log, { verbs: ['get'], apiGroups: [''], resources: ['*'] }), true);
  });

  it('a rule with resourceNames never allows a request without a name (list, create)', () => {
    const rule = { verbs: ['get', 'list', 'create'], apiGroups: [''], resources: ['configmaps'], resourceNames: ['a'] };
    assert.equal(ruleAllows(attrs({ name: 'a' }), rule), true);
    assert.equal(ruleAllows(attrs({ name: 'b' }), rule), false);
    assert.equal(ruleAllows(attrs({ verb: 'list', name: '' }), rule), false);
    assert.equal(ruleAllows(attrs({ verb: 'create', name: '' }), rule), false);
  });

  it('verbs and apiGroups match exactly or by *', () => {
    assert.equal(ruleAllows(attrs({ verb: 'watch' }), { verbs: ['*'], apiGroups: [''], resources: ['configmaps'] }), true);
    assert.equal(ruleAllows(attrs({ verb: 'watch' }), { verbs: ['get', 'list'], apiGroups: [''], resources: ['configmaps'] }), false);
    assert.equal(
      ruleAllows(attrs({ apiGroup: 'apps', resource: 'deployments' }), { verbs: ['get'], apiGroups: [''], resources: ['deployments'] }),
      false,
    );
    assert.equal(
      ruleAllows(attrs({ apiGroup: 'apps', resource: 'deployments' }), { verbs: ['get'], apiGroups: ['*'], resources: ['deployments'] }),
      true,
    );
    // a rule without apiGroups never matches a resource request
    assert.equal(ruleAllows(attrs({}), { verbs: ['get'], resources: ['configmaps'] }), false);
  });

  it('non-resource URLs match exactly, by *, or by a trailing-* prefix; resource rules never match them', () => {
    assert.equal(nonResourceURLMatches({ nonResourceURLs: ['/apis/*'] }, '/apis/apps/v1'), true);
    assert.equal(nonResourceURLMatches({ nonResourceURLs: ['/apis/*'] }, '/apis'), false);
    assert.equal(nonResourceURLMatches({ nonResourceURLs: ['/apis'] }, '/apis'), true);
    assert.equal(nonResourceURLMatches({ nonResourceURLs: ['/healthz'] }, '/healthz/etcd'), false);
    assert.equal(ruleAllows(attrs({ resourceRequest: false, path: '/api' }), { verbs: ['*'], apiGroups: ['*'], resources: ['*'] }), false);
  });

  it('property: a rule allows a request only if each of its lists admits the attribute', () => {
    const word = fc.constantFrom('', 'a', 'b', '*', 'pods', 'log', 'apps');
    fc.assert(
      fc.property(
        fc.array(word, { maxLength: 3 }),
        fc.array(word, { maxLength: 3 }),
        fc.array(word, { maxLength: 3 }),
        fc.array(word, { maxLength: 2 }),
        word,
        word,
        word,
        word,
        (verbs, groups, resources, names, verb, group, resource, name) => {
          const a = attrs({ verb, apiGroup: group, resource, name });
          const allowed = ruleAllows(a, { verbs, apiGroups: groups, resources, resourceNames: names });
          const expect =
            (verbs.includes('*') || verbs.includes(verb)) &&
            (groups.includes('*') || groups.includes(group)) &&
            (resources.includes('*') || resources.includes(resource)) &&
            (names.length === 0 || names.includes(name));
          assert.equal(allowed, expect);
        },
      ),
    );
  });
});

void describe('rbac decisions', () => {
  const reader: RoleLike = {
    metadata: { name: 'reader', namespace: 'ns' },
    rules: [{ verbs: ['get'], apiGroups: [''], resources: ['configmaps'] }],
  };

  it('a RoleBinding grants only in its namespace; a ServiceAccount subject without namespace takes the binding namespace', () => {
    const src = source({
      roles: { ns: [reader] },
      rbs: {
        ns: [
          {
            metadata: { name: 'b', namespace: 'ns' },
            roleRef: { kind: 'Role', name: 'reader' },
            subjects: [{ kind: 'ServiceAccount', name: 'bot' }],
          },
        ],
      },
    });
    assert.equal(rbacAllows(sa, attrs({ namespace: 'ns' }), src), true);
    assert.equal(rbacAllows(sa, attrs({ namespace: 'other' }), src), false);
    assert.equal(rbacAllows(sa, attrs({ namespace: '' }), src), false);
    assert.equal(rbacAllows({ ...sa, name: 'system:serviceaccount:other:bot' }, attrs({ namespace: 'ns' }), src), false);
  });

  it('a ClusterRoleBinding to a group grants everywhere; a binding to a missing role grants nothing', () => {
    const cr: RoleLike = { metadata: { name: 'cm' }, rules: [{ verbs: ['list'], apiGroups: [''], resources: ['configmaps'] }] };
    const crbs = [
      {
        metadata: { name: 'x' },
        roleRef: { kind: 'ClusterRole', name: 'cm' },
        subjects: [{ kind: 'Group', name: 'system:serviceaccounts:ns' }],
      },
    ];
    assert.equal(rbacAllows(sa, attrs({ verb: 'list', namespace: 'anywhere' }), source({ crs: [cr], crbs })), true);
    assert.equal(rbacAllows(sa, attrs({ verb: 'list', namespace: '' }), source({ crs: [cr], crbs })), true);
    assert.equal(rbacAllows(sa, attrs({ verb: 'list' }), source({ crs: [], crbs })), false);
  });

  it('a RoleBinding may reference a ClusterRole, granting it in the binding namespace only', () => {
    const cr: RoleLike = { metadata: { name: 'cm' }, rules: [{ verbs: ['get'], apiGroups: [''], resources: ['configmaps'] }] };
    const src = source({
      crs: [cr],
      rbs: {
        ns: [
          {
            metadata: { name: 'b', namespace: 'ns' },
            roleRef: { kind: 'ClusterRole', name: 'cm' },
            subjects: [{ kind: 'User', name: sa.name }],
          },
        ],
      },
    });
    assert.equal(rbacAllows(sa, attrs({ namespace: 'ns' }), src), true);
    assert.equal(rbacAllows(sa, attrs({ namespace: 'ns2' }), src), false);
  });

  it('aggregated ClusterRoles take the rules of every ClusterRole their selectors match', () => {
    const agg: RoleLike = {
      metadata: { name: 'agg' },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'kars.io/aggregate': 'true' } }] },
      rules: [],
    };
    const part: RoleLike = {
      metadata: { name: 'part', labels: { 'kars.io/aggregate': 'true' } },
      rules: [{ verbs: ['watch'], apiGroups: [''], resources: ['secrets'] }],
    };
    const other: RoleLike = { metadata: { name: 'other' }, rules: [{ verbs: ['delete'], apiGroups: [''], resources: ['secrets'] }] };
    const src = source({
      crs: [agg, part, other],
      crbs: [{ metadata: { name: 'b' }, roleRef: { kind: 'ClusterRole', name: 'agg' }, subjects: [{ kind: 'User', name: sa.name }] }],
    });
    assert.deepEqual(clusterRoleRules(agg, src), part.rules);
    assert.equal(rbacAllows(sa, attrs({ verb: 'watch', resource: 'secrets' }), src), true);
    assert.equal(rbacAllows(sa, attrs({ verb: 'delete', resource: 'secrets' }), src), false);
  });

  it('subjects: User by name, Group by membership, unknown kinds never', () => {
    assert.equal(subjectMatches(sa, { kind: 'Group', name: 'system:authenticated' }, ''), true);
    assert.equal(subjectMatches(sa, { kind: 'User', name: 'system:serviceaccount:ns:bot' }, ''), true);
    assert.equal(subjectMatches(sa, { kind: 'ServiceAccount', name: 'bot' }, ''), false);
    assert.equal(subjectMatches(sa, { kind: 'Robot', name: 'bot' }, 'ns'), false);
  });
});

void describe('forbidden message', () => {
  it('has kube-apiserver form for namespaced, cluster-scoped, subresource and non-resource requests', () => {
    assert.equal(
      forbiddenMessage(sa, attrs({ verb: 'list' })),
      'configmaps is forbidden: User "system:serviceaccount:ns:bot" cannot list resource "configmaps" in API group "" in the namespace "ns"',
    );
    assert.equal(
      forbiddenMessage(sa, attrs({ verb: 'patch', apiGroup: 'kars.azure.com', resource: 'inferencepolicies', name: 'p' })),
      'inferencepolicies.kars.azure.com "p" is forbidden: User "system:serviceaccount:ns:bot" cannot patch resource "inferencepolicies" in API group "kars.azure.com" in the namespace "ns"',
    );
    assert.equal(
      forbiddenMessage(sa, attrs({ verb: 'list', resource: 'namespaces', namespace: '' })),
      'namespaces is forbidden: User "system:serviceaccount:ns:bot" cannot list resource "namespaces" in API group "" at the cluster scope',
    );
    assert.equal(
      forbiddenMessage(sa, attrs({ verb: 'create', resource: 'serviceaccounts', subresource: 'token', name: 'x' })),
      'serviceaccounts "x" is forbidden: User "system:serviceaccount:ns:bot" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ns"',
    );
    assert.equal(
      forbiddenMessage(sa, attrs({ resourceRequest: false, verb: 'get', path: '/metrics' })),
      'forbidden: User "system:serviceaccount:ns:bot" cannot get path "/metrics"',
    );
  });
});
