// The real kubectl against kars apiserver with RBAC on: `kubectl create token` and `kubectl auth can-i`.
// Uses the newest kubectl that speaks JSON for built-in creates (1.32+ may send protobuf); skipped when none.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { findKubectl, runKubectl, startTestServer } from '../testing/harness.js';
import type { KubectlRun, TestServer } from '../testing/harness.js';

const KUBECTL = findKubectl();

void describe('kubectl create token and kubectl auth can-i (RBAC)', { skip: KUBECTL ? false : 'kubectl not found on PATH' }, () => {
  let ts: TestServer;
  const run = (...args: string[]): Promise<KubectlRun> =>
    runKubectl(KUBECTL ?? 'kubectl', ts.server.kubeconfigPath, args, { timeoutMs: 30_000 });

  before(async () => {
    ts = await startTestServer({ authorizationMode: 'RBAC' });
  });
  after(() => ts.close());

  it('mints a token for a ServiceAccount that can-i answers for, yes and no, with exit codes', async () => {
    assert.equal((await run('create', 'serviceaccount', 'bot')).code, 0);
    const tok = await run('create', 'token', 'bot', '--duration', '20m');
    assert.equal(tok.code, 0, tok.stderr);
    const token = tok.stdout.trim();
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    const no = await run('auth', 'can-i', 'list', 'configmaps', '--token', token);
    assert.equal(no.stdout.trim(), 'no');
    assert.equal(no.code, 1);
    const denied = await run('get', 'configmaps', '--token', token);
    assert.notEqual(denied.code, 0);
    assert.match(
      denied.stderr,
      /Error from server \(Forbidden\): configmaps is forbidden: User "system:serviceaccount:default:bot" cannot list resource "configmaps" in API group "" in the namespace "default"/,
    );
    assert.equal((await run('create', 'role', 'cm', '--verb=get,list', '--resource=configmaps')).code, 0);
    assert.equal((await run('create', 'rolebinding', 'cm', '--role=cm', '--serviceaccount=default:bot')).code, 0);
    const yes = await run('auth', 'can-i', 'list', 'configmaps', '--token', token);
    assert.equal(yes.stdout.trim(), 'yes');
    assert.equal(yes.code, 0);
    assert.equal((await run('auth', 'can-i', 'delete', 'configmaps', '--token', token)).stdout.trim(), 'no');
    assert.equal((await run('auth', 'can-i', 'list', 'configmaps', '-n', 'kube-system', '--token', token)).stdout.trim(), 'no');
    const who = await run('auth', 'whoami', '--token', token, '-o', 'jsonpath={.status.userInfo.username}');
    assert.equal(who.stdout, 'system:serviceaccount:default:bot');
    assert.equal((await run('auth', 'can-i', 'delete', 'configmaps')).stdout.trim(), 'yes', 'the admin token is a superuser');
  });
});
