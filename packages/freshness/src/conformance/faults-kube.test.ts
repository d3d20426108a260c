import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { findKubeBinaries, processesMentioning, readPins } from '@kars/kube-envtest';
import { faultSuite } from './fault-suite.js';
import { KubeStack } from './kube-stack.js';

// The fault suite (the body faults.test.ts runs against kars apiserver, fault-suite.ts) against a
// real kube-apiserver, for every pinned Kubernetes version (issue 18): the kars processes and the
// probe connect through a TCP relay of ours; freeze and reset at the relay, a restart of
// kube-apiserver (same port, same etcd), a compaction in etcd (kube-apiserver without its watch
// cache, ADR 0029); the process faults as against kars apiserver.
// Skips (naming `npm run kube:build`) without the binaries.
for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  let stack: KubeStack | undefined;
  const suite = faultSuite({ stack: () => (stack = new KubeStack(found.binaries!)) });
  describe(
    `freshness conformance on kube-apiserver ${pin.version}: edit → router echo under each fault`,
    { skip: found.binaries ? false : found.reason },
    () => {
      before(suite.before);
      after(async () => {
        await suite.after();
        // The kars processes name the relay kubeconfig, inside the control plane's directory.
        const dir = stack?.cp?.dir;
        if (dir) assert.deepEqual(processesMentioning(dir), [], 'no process of the control plane or the kars stack is left running');
      });
      for (const c of suite.cases) it(c.name, { skip: c.skip }, c.run);
    },
  );
}
