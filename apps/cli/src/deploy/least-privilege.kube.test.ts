// Least privilege, proven by the real authorizer: the same suite as least-privilege.test.ts
// (least-privilege-suite.ts) against real kube-apiserver, once per pinned Kubernetes version (1.34
// and 1.37), with its RBAC authorizer deciding and its own audit log (audit.k8s.io/v1 events at
// Metadata level) recording the calls. Skips, naming `npm run kube:build`, without the binaries.
import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import {
  findKubeBinaries,
  findKubectlBinary,
  processesMentioning,
  readPins,
  serviceAccountToken,
  startControlPlane,
} from '@kars/kube-envtest';
import type { AuditEvent, ControlPlane } from '@kars/kube-envtest';
import { until } from '@kars/kube-core/testing';
import { leastPrivilegeSuite } from './least-privilege-suite.js';
import type { AdminApi, ApiAnswer, RecordedCall } from './least-privilege-suite.js';

/** The audit event fields read here (kube-apiserver writes more). */
type Event = AuditEvent & { annotations?: Record<string, string> };

/**
 * The resource requests in kube-apiserver's audit log, in order, each once: a watch is logged at
 * ResponseStarted and again at ResponseComplete under one auditID. Reads only what was appended
 * since the last call.
 */
export function auditCalls(cp: ControlPlane): () => { calls: RecordedCall[]; events: Event[] } {
  let offset = 0;
  let rest = '';
  const seen = new Map<string, RecordedCall>();
  const calls: RecordedCall[] = [];
  const events: Event[] = [];
  return () => {
    if (!existsSync(cp.auditLog)) return { calls, events };
    const size = statSync(cp.auditLog).size;
    if (size > offset) {
      const buf = Buffer.alloc(size - offset);
      const fd = openSync(cp.auditLog, 'r');
      try {
        readSync(fd, buf, 0, buf.length, offset);
      } finally {
        closeSync(fd);
      }
      offset = size;
      const lines = (rest + buf.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        const e = JSON.parse(line) as Event;
        events.push(e);
        const refused = e.responseStatus?.code === 403 || e.annotations?.['authorization.k8s.io/decision'] === 'forbid';
        const prev = seen.get(e.auditID);
        if (prev) {
          // ResponseComplete after ResponseStarted: the same call (a refusal is never "started").
          if (refused) prev.allowed = false;
          continue;
        }
        if (!e.objectRef?.resource) continue; // a non-resource request (discovery, /readyz)
        const o = e.objectRef;
        const call: RecordedCall = {
          user: e.user.username,
          call: {
            verb: e.verb,
            apiGroup: o.apiGroup ?? '',
            resource: o.resource ?? '',
            subresource: o.subresource ?? '',
            namespace: o.namespace ?? '',
            // The log names a created object (from its body), but RBAC authorizes a POST to the
            // collection with no name (so resourceNames cannot limit create): record what RBAC saw.
            name: e.verb === 'create' && !o.subresource ? '' : (o.name ?? ''),
          },
          allowed: !refused,
        };
        seen.set(e.auditID, call);
        calls.push(call);
        // A PATCH that creates the object (a server-side apply of a missing one) is authorized for
        // `create` as well, inside the handler: logged as one patch, answered 201 when both were
        // allowed, 403 after the request filter allowed the patch when create was refused.
        const filterAllowed = e.annotations?.['authorization.k8s.io/decision'] === 'allow';
        if (e.verb === 'patch' && (e.responseStatus?.code === 201 || (filterAllowed && e.responseStatus?.code === 403))) {
          call.allowed = true;
          calls.push({ user: call.user, call: { ...call.call, verb: 'create' }, allowed: e.responseStatus?.code === 201 });
        }
      }
    }
    return { calls, events };
  };
}

/** Admin requests with the control plane's client certificate, on one keep-alive agent. */
function adminApi(cp: ControlPlane): AdminApi & { close(): void } {
  const agent = new Agent({
    ca: cp.caPem,
    cert: readFileSync(cp.pki.adminCert),
    key: readFileSync(cp.pki.adminKey),
    keepAlive: true,
    maxSockets: 32,
  });
  const call = (method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<ApiAnswer> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = httpsRequest(
        new URL(path, cp.url),
        {
          method,
          agent,
          headers: { accept: 'application/json', ...(payload === undefined ? {} : { 'content-type': contentType }) },
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed, text });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
      req.on('error', reject);
      req.end(payload);
    });
  return {
    get: (path) => call('GET', path),
    post: (path, body) => call('POST', path, body),
    patch: (path, body) => call('PATCH', path, body, 'application/merge-patch+json'),
    delete: (path) => call('DELETE', path),
    close: () => agent.destroy(),
  };
}

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  const kubectl = findKubectlBinary();
  const skip = !found.binaries ? found.reason : !kubectl ? 'no kubectl on PATH' : false;
  void describe(
    `least privilege on kube-apiserver ${pin.version}: deploy/ RBAC against its audit log of the live pipeline`,
    { skip },
    () => {
      const lp = leastPrivilegeSuite(
        async () => {
          const cp = await startControlPlane({ binaries: found.binaries! });
          const read = auditCalls(cp);
          const api = adminApi(cp);
          let markers = 0;
          return {
            url: cp.url,
            caPem: cp.caPem,
            kubeconfig: cp.kubeconfig,
            kubectl: kubectl!,
            api,
            subjectAccessReview: async (who, c) => {
              const r = await api.post('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
                apiVersion: 'authorization.k8s.io/v1',
                kind: 'SubjectAccessReview',
                spec: {
                  user: who.username,
                  groups: who.groups,
                  resourceAttributes: {
                    verb: c.verb,
                    group: c.apiGroup,
                    resource: c.resource,
                    subresource: c.subresource,
                    namespace: c.namespace,
                    name: c.name,
                  },
                },
              });
              assert.equal(r.status, 201, r.text);
              return r.body.status.allowed === true;
            },
            token: async (sa) => (await serviceAccountToken(cp, sa.namespace, sa.name)).token,
            records: async ({ settle = false } = {}) => {
              if (settle) {
                // The audit event of a call is written once it has been answered: a marker request asked
                // after every call of interest was answered, seen in the log, means they are in too.
                const name = `kars-lp-audit-marker-${++markers}`;
                await cp.request(`/api/v1/namespaces/default/configmaps/${name}`);
                await until(
                  'the audit marker in the log',
                  () => read().events.some((e) => e.objectRef?.name === name && e.stage === 'ResponseComplete'),
                  { timeoutMs: 30_000, everyMs: 50 },
                );
              }
              return [...read().calls];
            },
            close: async () => {
              api.close();
              await cp.stop();
              assert.deepEqual(processesMentioning(cp.dir), [], 'no process of this control plane is left running');
            },
          };
        },
        { subjectAccessReview: true },
      );
      before(lp.before);
      after(lp.after);
      for (const [name, fn] of lp.tests) void it(name, fn);
    },
  );
}
