import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { Resources } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import type { Lease, LeaseApi } from './leader.js';

/** Adapt the REST client to the four Lease calls leader election makes. */
export function leaseApi(client: KubeClient): LeaseApi {
  return {
    get: async (namespace, name) => {
      try {
        return (await client.get(Resources.leases, namespace, name)) as unknown as Lease;
      } catch (err) {
        if (err instanceof ApiError && err.code === 404) return undefined;
        throw err;
      }
    },
    create: async (namespace, lease) =>
      (await client.create(Resources.leases, {
        ...lease,
        metadata: { ...lease.metadata, namespace },
      } as unknown as KubeObject)) as unknown as Lease,
    replace: async (namespace, lease) =>
      (await client.replace(Resources.leases, {
        ...lease,
        metadata: { ...lease.metadata, namespace },
      } as unknown as KubeObject)) as unknown as Lease,
  };
}
