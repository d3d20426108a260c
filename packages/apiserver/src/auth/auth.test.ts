// Authentication and RBAC over real HTTPS: TokenRequest, 401/403 Status bodies, revocation by
// ServiceAccount deletion, the self-reviews, the audit hook, and the permissive default.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestClient, startTestServer } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';
import { until } from '@kars/kube-core/testing';
import type { AuditRecord } from './authorizer.js';

async function mintToken(c: TestClient, ns: string, sa: string, spec: Record<string, unknown> = {}): Promise<string> {
  const r = await c.post(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec,
  });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.body.kind, 'TokenRequest');
  assert.match(r.body.status.expirationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  return r.body.status.token as string;
}

void describe('kars apiserver with --authorization-mode=RBAC', () => {
  let ts: TestServer;
  const audit: AuditRecord[] = [];
  let bot: TestClient;

  before(async () => {
    ts = await startTestServer({ authorizationMode: 'RBAC', audit: (r) => audit.push(r) });
    assert.equal((await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'bot' } })).status, 201);
    bot = new TestClient(ts.server.url, ts.server.caCert, await mintToken(ts.client, 'default', 'bot'));
  });
  after(async () => {
    bot.close();
    await ts.close();
  });

  it('denies a ServiceAccount with no rules with a metav1.Status in kube-apiserver form', async () => {
    const r = await bot.get('/api/v1/namespaces/default/configmaps');
    assert.equal(r.status, 403);
    assert.deepEqual(r.body, {
      apiVersion: 'v1',
      kind: 'Status',
      metadata: {},
      status: 'Failure',
      message:
        'configmaps is forbidden: User "system:serviceaccount:default:bot" cannot list resource "configmaps" in API group "" in the namespace "default"',
      reason: 'Forbidden',
      details: { kind: 'configmaps' }, // kube omits the empty name and core group
      code: 403,
    });
    const last = audit.filter((a) => a.user.name === 'system:serviceaccount:default:bot').at(-1);
    assert.equal(last?.allowed, false);
    assert.equal(last?.attributes.verb, 'list');
  });

  it('lets every authenticated user do discovery and the self-reviews (bootstrap policy)', async () => {
    for (const p of ['/api', '/apis', '/api/v1', '/version']) assert.equal((await bot.get(p)).status, 200, p);
    const who = await bot.post('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    });
    assert.equal(who.status, 201);
    assert.equal(who.body.status.userInfo.username, 'system:serviceaccount:default:bot');
    assert.deepEqual(who.body.status.userInfo.groups, ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated']);
    assert.equal((await ts.client.get('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews')).status, 405);
    assert.equal(
      (await bot.get('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews')).status,
      403,
      'authorization comes first, as in kube',
    );
  });

  it('grants exactly what a Role says: verbs, resourceNames, and a field-selected watch of one name', async () => {
    await ts.client.post('/api/v1/namespaces/default/configmaps', { metadata: { name: 'mine' } });
    await ts.client.post('/api/v1/namespaces/default/configmaps', { metadata: { name: 'theirs' } });
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles', {
      metadata: { name: 'one-cm' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'], resourceNames: ['mine'] }],
    });
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'one-cm' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'one-cm' },
      subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'default' }],
    });
    assert.equal((await bot.get('/api/v1/namespaces/default/configmaps/mine')).status, 200);
    const theirs = await bot.get('/api/v1/namespaces/default/configmaps/theirs');
    assert.equal(theirs.status, 403);
    assert.match(
      theirs.body.message,
      /^configmaps "theirs" is forbidden: User "system:serviceaccount:default:bot" cannot get resource "configmaps"/,
    );
    assert.equal(
      (await bot.get('/api/v1/namespaces/default/configmaps')).status,
      403,
      'a list names nothing, so resourceNames cannot allow it',
    );
    assert.equal((await bot.get('/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine')).status, 200);
    assert.equal((await bot.get('/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dtheirs')).status, 403);
    const w = await bot.watch('/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dmine');
    assert.equal(w.status, 200);
    w.stop();
    assert.equal(
      (await bot.put('/api/v1/namespaces/default/configmaps/mine', { metadata: { name: 'mine' }, data: { a: 'b' } })).status,
      403,
    );
    const ssar = await bot.post('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      spec: { resourceAttributes: { namespace: 'default', verb: 'get', resource: 'configmaps', name: 'mine' } },
    });
    assert.equal(ssar.status, 201);
    assert.equal(ssar.body.status.allowed, true);
    const no = await bot.post('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      spec: { resourceAttributes: { namespace: 'default', verb: 'delete', resource: 'configmaps', name: 'mine' } },
    });
    assert.equal(no.body.status.allowed, false);
  });

  it('a server-side apply that creates the object needs create as well as patch, as in kube-apiserver (issue 18)', async () => {
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles', {
      metadata: { name: 'apply-cm' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] }],
    });
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'apply-cm' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'apply-cm' },
      subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'default' }],
    });
    const applyCm = (name: string, v: string): ReturnType<TestClient['patch']> =>
      bot.patch(
        `/api/v1/namespaces/default/configmaps/${name}`,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { v } },
        'apply',
        '?fieldManager=bot&force=true',
      );
    // An apply to an object that exists is a patch only.
    await ts.client.post('/api/v1/namespaces/default/configmaps', { metadata: { name: 'applied-existing' } });
    await until('the Role is in force', async () => (await applyCm('applied-existing', '1')).status === 200);
    // kube-apiserver authorizes the PATCH as patch, then, finding no object, the create it becomes.
    const created = await applyCm('applied', '1');
    assert.equal(created.status, 403, created.text);
    assert.equal(
      created.body.message,
      'configmaps "applied" is forbidden: User "system:serviceaccount:default:bot" cannot create resource "configmaps" in API group "" in the namespace "default"',
    );
    assert.equal((await ts.client.get('/api/v1/namespaces/default/configmaps/applied')).status, 404, 'nothing was written');
    const denied = audit.filter((a) => a.user.name === 'system:serviceaccount:default:bot').at(-1);
    assert.deepEqual([denied?.attributes.verb, denied?.attributes.name, denied?.allowed], ['create', 'applied', false]);
    // With create granted too, the apply creates.
    await ts.client.patch(
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/apply-cm',
      { rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch', 'create'] }] },
      'merge',
    );
    await until('the Role edit is in force', async () => (await applyCm('applied', '2')).status === 201);
  });

  it('a token stops working when its ServiceAccount is deleted, and does not come back with a new one of the same name', async () => {
    await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'temp' } });
    const c = new TestClient(ts.server.url, ts.server.caCert, await mintToken(ts.client, 'default', 'temp'));
    try {
      assert.equal((await c.get('/api')).status, 200);
      assert.equal((await ts.client.delete('/api/v1/namespaces/default/serviceaccounts/temp')).status, 200);
      const r = await c.get('/api');
      assert.equal(r.status, 401);
      assert.equal(r.body.reason, 'Unauthorized');
      await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'temp' } });
      assert.equal((await c.get('/api')).status, 401, 'the new account has a new uid');
    } finally {
      c.close();
    }
  });

  it('refuses tampered, foreign-audience, malformed and short-lived tokens', async () => {
    const t = await mintToken(ts.client, 'default', 'bot');
    const [h, p, s] = t.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, any>;
    claims['kubernetes.io'].serviceaccount.name = 'admin';
    claims['sub'] = 'system:serviceaccount:default:admin';
    const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${p}.`;
    const foreign = await mintToken(ts.client, 'default', 'bot', { audiences: ['vault'] });
    for (const bad of [forged, none, foreign, 'x.y.z', `${t}x`, 'Bearer', '']) {
      const c = new TestClient(ts.server.url, ts.server.caCert, bad);
      try {
        assert.equal((await c.get('/api')).status, 401, bad.slice(0, 40));
      } finally {
        c.close();
      }
    }
    const short = await ts.client.post('/api/v1/namespaces/default/serviceaccounts/bot/token', { spec: { expirationSeconds: 60 } });
    assert.equal(short.status, 422);
    assert.match(short.body.message, /spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes/);
    assert.equal((await ts.client.post('/api/v1/namespaces/default/serviceaccounts/nobody/token', { spec: {} })).status, 404);
  });

  it('a server-side apply that creates the object needs create as well as patch (as kube-apiserver checks it)', async () => {
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles', {
      metadata: { name: 'patch-secrets' },
      rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['patch'] }],
    });
    await ts.client.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'patch-secrets' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'patch-secrets' },
      subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'default' }],
    });
    const path = '/api/v1/namespaces/default/secrets/applied';
    const applied = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'applied' }, data: { a: 'Yg==' } };
    const mark = audit.length;
    const refused = await bot.patch(path, applied, 'apply', '?fieldManager=bot');
    assert.equal(refused.status, 403, refused.text);
    assert.equal(
      refused.body.message,
      'secrets "applied" is forbidden: User "system:serviceaccount:default:bot" cannot create resource "secrets" in API group "" in the namespace "default"',
    );
    assert.deepEqual(
      audit
        .slice(mark)
        .filter((a) => a.user.name === 'system:serviceaccount:default:bot')
        .map((a) => [a.attributes.verb, a.attributes.name, a.allowed]),
      [
        ['patch', 'applied', true],
        ['create', 'applied', false],
      ],
      'both decisions go to the audit hook',
    );
    assert.equal((await ts.client.get(path)).status, 404, 'nothing was created');
    // A merge patch never creates: it needs no create (404 when the object is missing).
    assert.equal((await bot.patch('/api/v1/namespaces/default/secrets/missing', { data: {} }, 'merge')).status, 404);
    // An apply to an existing object is an update: patch alone suffices.
    assert.equal((await ts.client.post('/api/v1/namespaces/default/secrets', { metadata: { name: 'applied' } })).status, 201);
    assert.equal((await bot.patch(path, applied, 'apply', '?fieldManager=bot')).status, 200);
    // With create granted too, an apply creates.
    await ts.client.patch(
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/patch-secrets',
      { rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['patch', 'create'] }] },
      'merge',
    );
    const created = await bot.patch(
      '/api/v1/namespaces/default/secrets/applied-2',
      { ...applied, metadata: { name: 'applied-2' } },
      'apply',
      '?fieldManager=bot',
    );
    assert.equal(created.status, 201, created.text);
  });

  it('a ServiceAccount may mint tokens only when a rule grants create on serviceaccounts/token', async () => {
    const r = await bot.post('/api/v1/namespaces/default/serviceaccounts/bot/token', { spec: {} });
    assert.equal(r.status, 403);
    assert.equal(
      r.body.message,
      'serviceaccounts "bot" is forbidden: User "system:serviceaccount:default:bot" cannot create resource "serviceaccounts/token" in API group "" in the namespace "default"',
    );
  });
});

void describe('kars apiserver with the default authorization mode (AlwaysAllow)', () => {
  it('allows every authenticated request, including a ServiceAccount with no rules, and still refuses no token', async () => {
    const ts = await startTestServer();
    try {
      await ts.client.post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'bot' } });
      const c = new TestClient(ts.server.url, ts.server.caCert, await mintToken(ts.client, 'default', 'bot'));
      assert.equal((await c.get('/api/v1/namespaces/default/configmaps')).status, 200);
      c.close();
      const anon = new TestClient(ts.server.url, ts.server.caCert, undefined);
      assert.equal((await anon.get('/api/v1/namespaces/default/configmaps')).status, 401);
      assert.equal((await anon.get('/healthz')).status, 200);
      anon.close();
      const crs = await ts.client.get('/apis/rbac.authorization.k8s.io/v1/clusterroles');
      assert.equal(crs.body.items.length, 0, 'no bootstrap policy is written unless RBAC is on');
    } finally {
      await ts.close();
    }
  });
});
