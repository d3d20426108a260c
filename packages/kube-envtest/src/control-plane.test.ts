// The real control plane, for every pinned Kubernetes version whose binaries `npm run kube:build`
// has built: it starts, serves over HTTPS with its own CA, authenticates the admin kubeconfig,
// issues ServiceAccount tokens that RBAC authorises, audits requests, runs the garbage collector
// and the namespace controller, and stops without leaving a process. Skips (naming the command)
// when the binaries are absent.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { until } from '@kars/kube-core/testing';
import { findKubeBinaries, findKubectlBinary } from './binaries.js';
import { startControlPlane } from './control-plane.js';
import type { ControlPlane } from './control-plane.js';
import { kubeRequest } from './http.js';
import { kubectl, processesMentioning } from './testing.js';
import { readPins } from './versions.js';

const json = (body: string): Record<string, unknown> => JSON.parse(body) as Record<string, unknown>;
const WAIT = { timeoutMs: 90_000, everyMs: 200 };

/** A port of 127.0.0.1 that is free now. */
function freePortOf(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  describe(`real control plane ${pin.version}`, { skip: found.binaries ? false : found.reason }, () => {
    let cp: ControlPlane;
    const ns = `t-${randomBytes(3).toString('hex')}`;
    before(async () => {
      cp = await startControlPlane({ binaries: found.binaries! });
      const r = await cp.request('/api/v1/namespaces', {
        method: 'POST',
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      });
      assert.equal(r.status, 201, r.body);
    });
    after(() => cp?.stop());

    it('serves /readyz over HTTPS with its own CA, and reports the pinned version', async () => {
      const ready = await cp.request('/readyz');
      assert.equal(ready.status, 200, ready.body);
      const v = json((await cp.request('/version')).body);
      assert.equal(v['gitVersion'], pin.version);
      // Without the CA the serving certificate is not trusted.
      await assert.rejects(kubeRequest(`${cp.url}/readyz`), /self[- ]signed|unable to verify|certificate/i);
    });

    it('the admin kubeconfig works from kubectl (lists namespaces)', async (t) => {
      const bin = findKubectlBinary();
      if (!bin) return t.skip('no kubectl on PATH');
      const r = await kubectl(bin, cp.kubeconfig, ['get', 'namespaces', '-o', 'json']);
      assert.equal(r.code, 0, r.stderr);
      const names = (json(r.stdout)['items'] as { metadata: { name: string } }[]).map((i) => i.metadata.name);
      for (const n of ['default', 'kube-system', ns]) assert.ok(names.includes(n), `${n} in ${names.join(', ')}`);
      const who = await kubectl(bin, cp.kubeconfig, ['auth', 'can-i', '*', '*', '--all-namespaces']);
      assert.equal(who.stdout.trim(), 'yes', 'the admin is in system:masters');
    });

    it('helm and etcd are the pinned versions, and helm talks to the apiserver', async () => {
      const pins = readPins();
      const run = (bin: string, args: string[]): Promise<string> =>
        new Promise((resolve, reject) =>
          execFile(
            bin,
            args,
            { env: { ...process.env, KUBECONFIG: cp.kubeconfig, HELM_CACHE_HOME: join(cp.dir, 'helm') } },
            (err, stdout, stderr) => (err ? reject(new Error(`${bin} ${args.join(' ')}: ${stderr}`)) : resolve(stdout)),
          ),
        );
      assert.match(await run(cp.binaries.helm, ['version', '--short']), new RegExp(`^${pins.helm.version.replace(/\./g, '\\.')}`));
      assert.match(
        await run(cp.binaries.etcd, ['--version']),
        new RegExp(`etcd Version: ${pins.etcd.version.slice(1).replace(/\./g, '\\.')}`),
      );
      assert.equal((await run(cp.binaries.helm, ['list', '--all-namespaces', '-o', 'json'])).trim(), '[]');
    });

    it('an anonymous request to a resource is refused (RBAC is on)', async () => {
      const r = await kubeRequest(`${cp.url}/api/v1/namespaces`, { ca: cp.caPem });
      assert.equal(r.status, 403, r.body);
      assert.match(r.body, /system:anonymous/);
    });

    it('issues a ServiceAccount token (TokenRequest) that RBAC authorises: 403 without a binding, 200 with one', async () => {
      const sa = 'probe';
      const created = await cp.request(`/api/v1/namespaces/${ns}/serviceaccounts`, {
        method: 'POST',
        body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa } },
      });
      assert.equal(created.status, 201, created.body);
      const tr = await cp.request(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
        method: 'POST',
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
      });
      assert.equal(tr.status, 201, tr.body);
      const token = (json(tr.body)['status'] as { token: string }).token;
      assert.ok(token.split('.').length === 3, 'a JWT');

      const list = `/api/v1/namespaces/${ns}/configmaps`;
      const denied = await cp.request(list, { token });
      assert.equal(denied.status, 403, denied.body);
      assert.match(denied.body, new RegExp(`system:serviceaccount:${ns}:${sa}`), 'the token authenticated as the ServiceAccount');

      const role = await cp.request(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
        method: 'POST',
        body: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'cm-reader' },
          rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
        },
      });
      assert.equal(role.status, 201, role.body);
      const binding = await cp.request(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        method: 'POST',
        body: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: 'cm-reader' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
          subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
        },
      });
      assert.equal(binding.status, 201, binding.body);
      // The authorizer reads bindings from an informer: allowed once it has seen this one.
      await until('the bound token is allowed', async () => (await cp.request(list, { token })).status === 200, WAIT);
      // Only what the Role grants: listing Secrets stays forbidden.
      assert.equal((await cp.request(`/api/v1/namespaces/${ns}/secrets`, { token })).status, 403);
    });

    it('the audit log records a request, with its user and status', async () => {
      const name = `audit-probe-${randomBytes(4).toString('hex')}`;
      const r = await cp.request(`/api/v1/namespaces/${ns}/configmaps/${name}`);
      assert.equal(r.status, 404);
      const ev = await until(
        'the audit event',
        () => cp.auditEvents().find((e) => e.objectRef?.name === name && e.stage === 'ResponseComplete'),
        WAIT,
      );
      assert.equal(ev.verb, 'get');
      assert.equal(ev.user.username, 'kars-envtest-admin');
      assert.ok(ev.user.groups?.includes('system:masters'));
      assert.equal(ev.responseStatus?.code, 404);
      assert.equal(ev.objectRef?.namespace, ns);
    });

    it('the garbage collector deletes a ConfigMap whose owner was deleted', async () => {
      const cms = `/api/v1/namespaces/${ns}/configmaps`;
      const owner = await cp.request(cms, { method: 'POST', body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner' } } });
      assert.equal(owner.status, 201, owner.body);
      const uid = (json(owner.body)['metadata'] as { uid: string }).uid;
      const child = await cp.request(cms, {
        method: 'POST',
        body: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'child', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid }] },
        },
      });
      assert.equal(child.status, 201, child.body);
      // An unowned one beside it must survive.
      assert.equal(
        (await cp.request(cms, { method: 'POST', body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'bystander' } } })).status,
        201,
      );
      assert.equal((await cp.request(`${cms}/owner`, { method: 'DELETE' })).status, 200);
      await until('the garbage collector deletes the child', async () => (await cp.request(`${cms}/child`)).status === 404, WAIT);
      assert.equal((await cp.request(`${cms}/bystander`)).status, 200);
    });

    it('the namespace controller finalizes a deleted namespace', async () => {
      const gone = `gone-${randomBytes(3).toString('hex')}`;
      assert.equal(
        (
          await cp.request('/api/v1/namespaces', {
            method: 'POST',
            body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: gone } },
          })
        ).status,
        201,
      );
      assert.equal(
        (
          await cp.request(`/api/v1/namespaces/${gone}/configmaps`, {
            method: 'POST',
            body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } },
          })
        ).status,
        201,
      );
      assert.equal((await cp.request(`/api/v1/namespaces/${gone}`, { method: 'DELETE' })).status, 200);
      await until('the namespace is gone', async () => (await cp.request(`/api/v1/namespaces/${gone}`)).status === 404, WAIT);
    });

    it('restarts kube-apiserver on the same port and etcd, keeping the data', async () => {
      const before = cp.apiserver.pid;
      const r = await cp.restartApiserver();
      assert.notEqual(cp.apiserver.pid, before);
      // How long each half took: the stop within the grace (plus the kill), the start a real wait for /readyz.
      assert.ok(r.stoppedMs >= 0 && r.stoppedMs < 15_000, `stoppedMs ${r.stoppedMs}`);
      assert.ok(r.startedMs > 0, `startedMs ${r.startedMs}`);
      assert.equal(typeof r.killed, 'boolean');
      assert.equal((await cp.request(`/api/v1/namespaces/${ns}/serviceaccounts/probe`)).status, 200);
    });

    it('starts again with new ports when one it picked was taken before etcd bound it', async () => {
      const holder = createServer();
      await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
      const taken = (holder.address() as { port: number }).port;
      const picks: number[] = [];
      let first = true;
      const logs: string[] = [];
      const raced = await startControlPlane({
        binaries: found.binaries!,
        controllers: false,
        log: (l) => logs.push(l),
        // The first pick (etcd's client port) is a port something else already holds.
        pickPort: async () => {
          const p = first ? taken : await freePortOf();
          first = false;
          picks.push(p);
          return p;
        },
      });
      try {
        assert.equal((await raced.request('/readyz')).status, 200);
        assert.ok(picks.length >= 6, `ports picked twice: ${picks.join(' ')}`);
        assert.ok(
          logs.some((l) => /etcd: a port was taken before it bound it/.test(l)),
          logs.join('\n'),
        );
      } finally {
        await raced.stop();
        holder.close();
      }
    });

    it('stop() leaves no process and removes its temp dir', async () => {
      const pids = cp.pids();
      assert.equal(pids.length, 3, 'etcd, kube-apiserver, kube-controller-manager');
      await cp.stop();
      assert.deepEqual(processesMentioning(cp.dir), []);
      for (const pid of pids) assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
      assert.equal(existsSync(cp.dir), false);
    });
  });
}
