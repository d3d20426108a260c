import { after, before, describe, it } from 'node:test';
import { KubeClient } from '@kars/kube-client';
import { faultSuite } from './fault-suite.js';
import { foreignSkipReason } from './faults.js';
import { LocalStack, suiteWatchConfig } from './stack.js';

// The fault suite against kars apiserver (its own fault injection). The same body (fault-suite.ts)
// runs against kube-apiserver in faults-kube.test.ts.
//
// Point the suite at another cluster: KARS_CONFORMANCE_KUBECONFIG (and KARS_CONFORMANCE_NAMESPACE,
// KARS_CONFORMANCE_SANDBOX for a sandbox a router serves there). It then runs the fault-free case
// and skips every fault it cannot cause, with the reason.
const foreign = process.env['KARS_CONFORMANCE_KUBECONFIG'];

const suite = faultSuite(
  foreign
    ? {
        client: () => {
          const cfg = suiteWatchConfig();
          return KubeClient.fromKubeconfig({ kubeconfig: foreign, pingIntervalMs: cfg.pingIntervalMs, pingTimeoutMs: cfg.pingTimeoutMs });
        },
        namespace: process.env['KARS_CONFORMANCE_NAMESPACE'] ?? 'default',
        sandbox: process.env['KARS_CONFORMANCE_SANDBOX'] ?? 'kars-probe',
        skip: foreignSkipReason,
      }
    : { stack: () => new LocalStack() },
);

describe('freshness conformance: edit → router echo under each fault', () => {
  before(suite.before);
  after(suite.after);
  for (const c of suite.cases) it(c.name, { skip: c.skip }, c.run);
});
