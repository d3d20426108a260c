// Least privilege, proven on kars apiserver: it runs with --authorization-mode=RBAC, and its audit
// hook records every authorization decision. The body of the test (the pipeline, the coverage of
// deploy/ RBAC, dropping a rule for real, the router's 403s) is least-privilege-suite.ts, shared with
// least-privilege.kube.test.ts (real kube-apiserver 1.34 and 1.37, recorded from its own audit log).
// Skipped when no kubectl binary is found.
import { after, before, describe, it } from 'node:test';
import type { AuditRecord } from '@kars/apiserver';
import { findKubectl, startTestServer } from '@kars/apiserver/testing';
import { leastPrivilegeSuite } from './least-privilege-suite.js';
import type { RecordedCall } from './least-privilege-suite.js';

const KUBECTL = findKubectl();

void describe(
  'least privilege: deploy/ RBAC against the recorded calls of the live pipeline',
  { skip: KUBECTL ? false : 'kubectl not found on PATH' },
  () => {
    const lp = leastPrivilegeSuite(async () => {
      const audit: AuditRecord[] = [];
      const ts = await startTestServer({ authorizationMode: 'RBAC', audit: (r) => audit.push(r), bookmarkIntervalSeconds: 2 });
      return {
        url: ts.server.url,
        caPem: ts.server.caCert,
        kubeconfig: ts.server.kubeconfigPath,
        kubectl: KUBECTL ?? 'kubectl',
        api: ts.client,
        token: async (sa) => {
          const r = await ts.client.post(`/api/v1/namespaces/${sa.namespace}/serviceaccounts/${sa.name}/token`, {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: { expirationSeconds: 3600 },
          });
          if (r.status !== 201) throw new Error(`TokenRequest for ${sa.namespace}/${sa.name}: ${r.status} ${r.text}`);
          return r.body.status.token as string;
        },
        // The hook is called synchronously with each decision: every answered call is in already.
        records: () =>
          Promise.resolve(
            audit
              .filter((a) => a.attributes.resourceRequest)
              .map(({ user, attributes: a, allowed }): RecordedCall => ({
                user: user.name,
                call: {
                  verb: a.verb,
                  apiGroup: a.apiGroup,
                  resource: a.resource,
                  subresource: a.subresource,
                  namespace: a.namespace,
                  name: a.name,
                },
                allowed,
              })),
          ),
        close: () => ts.close(),
      };
    });
    before(lp.before);
    after(lp.after);
    for (const [name, fn] of lp.tests) void it(name, fn);
  },
);
