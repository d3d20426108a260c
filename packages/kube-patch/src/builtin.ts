/** Strategic-merge metadata (patchMergeKey) of the built-in kinds kars serves. */
import type { StrategicInfo } from './strategic.js';

const META: Record<string, string> = { 'metadata.ownerReferences': 'uid', 'metadata.finalizers': '' };

function containers(prefix: string): Record<string, string> {
  return {
    [prefix]: 'name',
    [`${prefix}[].env`]: 'name',
    [`${prefix}[].ports`]: 'containerPort',
    [`${prefix}[].volumeMounts`]: 'mountPath',
    [`${prefix}[].volumeDevices`]: 'devicePath',
  };
}

function podSpec(p: string): Record<string, string> {
  return {
    ...containers(`${p}.containers`),
    ...containers(`${p}.initContainers`),
    ...containers(`${p}.ephemeralContainers`),
    [`${p}.volumes`]: 'name',
    [`${p}.imagePullSecrets`]: 'name',
    [`${p}.hostAliases`]: 'ip',
    [`${p}.topologySpreadConstraints`]: 'topologyKey',
    [`${p}.resourceClaims`]: 'name',
    [`${p}.schedulingGates`]: 'name',
  };
}

function info(extra: Record<string, string> = {}): StrategicInfo {
  return { mergeKeys: { ...META, ...extra } };
}

const rbac = 'rbac.authorization.k8s.io/v1';

/** Keyed by "group/version/Kind" ("/v1/Service" for the core group). RBAC rules and subjects have no key: replaced. */
export const builtinStrategicInfo: Record<string, StrategicInfo> = {
  '/v1/Pod': info(podSpec('spec')),
  'apps/v1/Deployment': info(podSpec('spec.template.spec')),
  'apps/v1/ReplicaSet': info(podSpec('spec.template.spec')),
  'apps/v1/StatefulSet': info(podSpec('spec.template.spec')),
  'apps/v1/DaemonSet': info(podSpec('spec.template.spec')),
  'batch/v1/Job': info(podSpec('spec.template.spec')),
  'batch/v1/CronJob': info(podSpec('spec.jobTemplate.spec.template.spec')),
  '/v1/Service': info({ 'spec.ports': 'port' }),
  '/v1/ServiceAccount': info({ secrets: 'name' }),
  '/v1/ConfigMap': info(),
  '/v1/Secret': info(),
  '/v1/Namespace': info(),
  '/v1/Event': info(),
  'events.k8s.io/v1/Event': info(),
  'coordination.k8s.io/v1/Lease': info(),
  [`${rbac}/Role`]: info(),
  [`${rbac}/ClusterRole`]: info(),
  [`${rbac}/RoleBinding`]: info(),
  [`${rbac}/ClusterRoleBinding`]: info(),
};
