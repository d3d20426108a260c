import { builtinStrategicInfo } from '@kars/kube-patch';
import type { PrinterColumn, ResourceInfo, SubresourceInfo } from './resource.js';

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

interface BuiltinSpec {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  hasStatus?: boolean;
  tracksGeneration?: boolean;
  columns?: PrinterColumn[];
  deleteReturnsObject?: boolean;
  categories?: string[];
  verbs?: string[];
  subresources?: SubresourceInfo[];
  /** kube's strategy AllowUnconditionalUpdate (default true). */
  allowUnconditionalUpdate?: boolean;
}

/** Resources whose kube strategy has AllowCreateOnUpdate: a PUT of a missing object creates it. */
const CREATE_ON_UPDATE = new Set(['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings', 'leases', 'events', 'services']);

const SPECS: BuiltinSpec[] = [
  {
    group: '',
    version: 'v1',
    resource: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    hasStatus: true,
    columns: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }, AGE],
  },
  {
    group: '',
    version: 'v1',
    resource: 'configmaps',
    kind: 'ConfigMap',
    namespaced: true,
    shortNames: ['cm'],
    columns: [{ name: 'Data', type: 'integer', jsonPath: '.data' }, AGE],
  },
  {
    group: '',
    version: 'v1',
    resource: 'secrets',
    kind: 'Secret',
    namespaced: true,
    columns: [{ name: 'Type', type: 'string', jsonPath: '.type' }, { name: 'Data', type: 'integer', jsonPath: '.data' }, AGE],
  },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    namespaced: true,
    shortNames: ['ev'],
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.type' },
      { name: 'Reason', type: 'string', jsonPath: '.reason' },
      { name: 'Object', type: 'string', jsonPath: '.involvedObject.name' },
      { name: 'Message', type: 'string', jsonPath: '.message' },
    ],
  },
  {
    group: '',
    version: 'v1',
    resource: 'serviceaccounts',
    kind: 'ServiceAccount',
    namespaced: true,
    shortNames: ['sa'],
    columns: [AGE],
    deleteReturnsObject: true,
    subresources: [{ name: 'token', group: 'authentication.k8s.io', version: 'v1', kind: 'TokenRequest', verbs: ['create'] }],
  },
  {
    group: '',
    version: 'v1',
    resource: 'services',
    kind: 'Service',
    namespaced: true,
    shortNames: ['svc'],
    hasStatus: true,
    deleteReturnsObject: true,
    categories: ['all'],
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'Cluster-IP', type: 'string', jsonPath: '.spec.clusterIP' },
      AGE,
    ],
  },
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    resource: 'leases',
    kind: 'Lease',
    allowUnconditionalUpdate: false,
    namespaced: true,
    columns: [{ name: 'Holder', type: 'string', jsonPath: '.spec.holderIdentity' }, AGE],
  },
  {
    group: 'apps',
    version: 'v1',
    resource: 'deployments',
    kind: 'Deployment',
    namespaced: true,
    shortNames: ['deploy'],
    hasStatus: true,
    tracksGeneration: true,
    categories: ['all'],
    columns: [
      { name: 'Ready', type: 'string', jsonPath: '.status.readyReplicas' },
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      AGE,
    ],
  },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'roles', kind: 'Role', namespaced: true, columns: [AGE] },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'rolebindings',
    kind: 'RoleBinding',
    namespaced: true,
    columns: [{ name: 'Role', type: 'string', jsonPath: '.roleRef.name' }, AGE],
  },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles', kind: 'ClusterRole', namespaced: false, columns: [AGE] },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    namespaced: false,
    columns: [{ name: 'Role', type: 'string', jsonPath: '.roleRef.name' }, AGE],
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    resource: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    hasStatus: true,
    tracksGeneration: true,
    deleteReturnsObject: true,
    columns: [{ name: 'Created At', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
  },
  {
    group: 'policy',
    version: 'v1',
    resource: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    namespaced: true,
    shortNames: ['pdb'],
    hasStatus: true,
    tracksGeneration: true,
    columns: [
      { name: 'Min Available', type: 'string', jsonPath: '.spec.minAvailable' },
      { name: 'Max Unavailable', type: 'string', jsonPath: '.spec.maxUnavailable' },
      AGE,
    ],
  },
  {
    group: 'batch',
    version: 'v1',
    resource: 'cronjobs',
    kind: 'CronJob',
    namespaced: true,
    shortNames: ['cj'],
    hasStatus: true,
    tracksGeneration: true,
    categories: ['all'],
    columns: [
      { name: 'Schedule', type: 'string', jsonPath: '.spec.schedule' },
      { name: 'Suspend', type: 'boolean', jsonPath: '.spec.suspend' },
      AGE,
    ],
  },
  // Reviews: answered by the auth module, never stored.
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectaccessreviews',
    kind: 'SelfSubjectAccessReview',
    namespaced: false,
    verbs: ['create'],
  },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectrulesreviews',
    kind: 'SelfSubjectRulesReview',
    namespaced: false,
    verbs: ['create'],
  },
  {
    group: 'authentication.k8s.io',
    version: 'v1',
    resource: 'selfsubjectreviews',
    kind: 'SelfSubjectReview',
    namespaced: false,
    verbs: ['create'],
  },
];

/** The built-in resources `kars apiserver` serves (stored and served; only CRDs and namespaces have behaviour). */
export function builtinResources(): ResourceInfo[] {
  return SPECS.map((s) => {
    const singular = s.kind.toLowerCase();
    const ri: ResourceInfo = {
      group: s.group,
      resource: s.resource,
      singular,
      kind: s.kind,
      listKind: `${s.kind}List`,
      namespaced: s.namespaced,
      shortNames: s.shortNames ?? [],
      categories: s.categories ?? [],
      versions: [{ name: s.version, served: true, storage: true, printerColumns: s.columns ?? [AGE] }],
      hasStatus: s.hasStatus ?? false,
      tracksGeneration: s.tracksGeneration ?? false,
      allowUnconditionalUpdate: s.allowUnconditionalUpdate ?? true,
      allowCreateOnUpdate: CREATE_ON_UPDATE.has(s.resource),
      deleteReturnsObject: s.deleteReturnsObject ?? false,
      builtin: true,
      ...(s.verbs ? { verbs: s.verbs } : {}),
      ...(s.subresources ? { subresources: s.subresources } : {}),
    };
    const smp = builtinStrategicInfo[`${s.group}/${s.version}/${s.kind}`];
    ri.strategic = smp ?? { mergeKeys: {} };
    return ri;
  });
}
