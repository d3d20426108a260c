import { builtinStrategicInfo } from '@kars/kube-patch';
import type { PrinterColumn, ResourceInfo, SubresourceInfo } from './resource.js';
import { OBJECT_META_FIELD_LABELS } from './resource.js';

/** kube's built-in printers type every Age column `string` and describe it by ObjectMeta.creationTimestamp's doc. */
const AGE: PrinterColumn = {
  name: 'Age',
  type: 'string',
  jsonPath: '.metadata.creationTimestamp',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
};

/** A printer column. */
const col = (name: string, type: string, jsonPath: string): PrinterColumn => ({ name, type, jsonPath });

/**
 * What sets a kind apart from the default (namespaced, no status, generation not tracked, DELETE
 * answers a Status, unconditional PUT allowed): `cluster` scope, a `status` subresource, `generation`
 * tracking, a DELETE that answers the object, and kube's strategy forbidding an unconditional update.
 */
type Trait = 'cluster' | 'status' | 'generation' | 'deleteReturnsObject' | 'noUnconditionalUpdate';

interface BuiltinSpec {
  group: string;
  version: string;
  resource: string;
  kind: string;
  traits: readonly Trait[];
  shortNames?: string[];
  /** Printer columns; default Age alone. */
  columns?: PrinterColumn[];
  categories?: string[];
  verbs?: string[];
  subresources?: SubresourceInfo[];
  /** Field labels beyond kube's default (k8s.io/kubernetes pkg/apis/core/v1/conversion.go). */
  fieldLabels?: readonly string[];
}

type KindSpec = Omit<BuiltinSpec, 'group' | 'version' | 'traits'> & { traits?: readonly Trait[] };

/** The kinds of one API group version. */
const inGroup = (group: string, version: string, kinds: KindSpec[]): BuiltinSpec[] =>
  kinds.map((k) => ({ group, version, ...k, traits: k.traits ?? [] }));

/** Resources whose kube strategy has AllowCreateOnUpdate: a PUT of a missing object creates it. */
const CREATE_ON_UPDATE = new Set(['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings', 'leases', 'events', 'services']);

const ALL = ['all'];
const INVOLVED_OBJECT_LABELS = ['kind', 'namespace', 'name', 'uid', 'apiVersion', 'resourceVersion', 'fieldPath'].map(
  (f) => `involvedObject.${f}`,
);
const CREATE_ONLY = ['create'];
const ROLE_REF = col('Role', 'string', '.roleRef.name');
/** The Data column (a count of keys) of a ConfigMap or Secret, typed and described as kube's printers do. */
const data = (description: string): PrinterColumn => ({ name: 'Data', type: 'string', jsonPath: '.data', description });
const CONFIG_MAP_DATA = data(
  "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
);
const SECRET_DATA = data(
  "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
);

const SPECS: BuiltinSpec[] = [
  ...inGroup('', 'v1', [
    {
      resource: 'namespaces',
      kind: 'Namespace',
      traits: ['cluster', 'status', 'deleteReturnsObject'],
      shortNames: ['ns'],
      columns: [col('Status', 'string', '.status.phase'), AGE],
      fieldLabels: ['status.phase', 'metadata.name'],
    },
    { resource: 'configmaps', kind: 'ConfigMap', shortNames: ['cm'], columns: [CONFIG_MAP_DATA, AGE] },
    {
      resource: 'secrets',
      kind: 'Secret',
      columns: [col('Type', 'string', '.type'), SECRET_DATA, AGE],
      fieldLabels: ['type', ...OBJECT_META_FIELD_LABELS],
    },
    {
      resource: 'events',
      kind: 'Event',
      shortNames: ['ev'],
      fieldLabels: [...INVOLVED_OBJECT_LABELS, 'reason', 'reportingComponent', 'source', 'type', ...OBJECT_META_FIELD_LABELS],
      columns: [
        col('Type', 'string', '.type'),
        col('Reason', 'string', '.reason'),
        col('Object', 'string', '.involvedObject.name'),
        col('Message', 'string', '.message'),
      ],
    },
    {
      resource: 'serviceaccounts',
      kind: 'ServiceAccount',
      traits: ['deleteReturnsObject'],
      shortNames: ['sa'],
      subresources: [{ name: 'token', group: 'authentication.k8s.io', version: 'v1', kind: 'TokenRequest', verbs: ['create'] }],
    },
    {
      resource: 'services',
      kind: 'Service',
      traits: ['status', 'deleteReturnsObject'],
      shortNames: ['svc'],
      fieldLabels: [...OBJECT_META_FIELD_LABELS, 'spec.clusterIP', 'spec.type'],
      categories: ALL,
      columns: [col('Type', 'string', '.spec.type'), col('Cluster-IP', 'string', '.spec.clusterIP'), AGE],
    },
  ]),
  ...inGroup('coordination.k8s.io', 'v1', [
    {
      resource: 'leases',
      kind: 'Lease',
      traits: ['noUnconditionalUpdate'],
      columns: [col('Holder', 'string', '.spec.holderIdentity'), AGE],
    },
  ]),
  ...inGroup('apps', 'v1', [
    {
      resource: 'deployments',
      kind: 'Deployment',
      traits: ['status', 'generation'],
      shortNames: ['deploy'],
      categories: ALL,
      columns: [col('Ready', 'string', '.status.readyReplicas'), col('Replicas', 'integer', '.spec.replicas'), AGE],
    },
  ]),
  ...inGroup('rbac.authorization.k8s.io', 'v1', [
    { resource: 'roles', kind: 'Role' },
    { resource: 'rolebindings', kind: 'RoleBinding', columns: [ROLE_REF, AGE] },
    { resource: 'clusterroles', kind: 'ClusterRole', traits: ['cluster'] },
    { resource: 'clusterrolebindings', kind: 'ClusterRoleBinding', traits: ['cluster'], columns: [ROLE_REF, AGE] },
  ]),
  ...inGroup('apiextensions.k8s.io', 'v1', [
    {
      resource: 'customresourcedefinitions',
      kind: 'CustomResourceDefinition',
      traits: ['cluster', 'status', 'generation', 'deleteReturnsObject'],
      shortNames: ['crd', 'crds'],
      columns: [col('Created At', 'date', '.metadata.creationTimestamp')],
    },
  ]),
  ...inGroup('policy', 'v1', [
    {
      resource: 'poddisruptionbudgets',
      kind: 'PodDisruptionBudget',
      traits: ['status', 'generation'],
      shortNames: ['pdb'],
      columns: [col('Min Available', 'string', '.spec.minAvailable'), col('Max Unavailable', 'string', '.spec.maxUnavailable'), AGE],
    },
  ]),
  ...inGroup('batch', 'v1', [
    {
      resource: 'cronjobs',
      kind: 'CronJob',
      traits: ['status', 'generation'],
      shortNames: ['cj'],
      categories: ALL,
      columns: [col('Schedule', 'string', '.spec.schedule'), col('Suspend', 'boolean', '.spec.suspend'), AGE],
    },
  ]),
  // Reviews: answered by the auth module, never stored.
  ...inGroup('authorization.k8s.io', 'v1', [
    { resource: 'selfsubjectaccessreviews', kind: 'SelfSubjectAccessReview', traits: ['cluster'], verbs: CREATE_ONLY },
    { resource: 'selfsubjectrulesreviews', kind: 'SelfSubjectRulesReview', traits: ['cluster'], verbs: CREATE_ONLY },
  ]),
  ...inGroup('authentication.k8s.io', 'v1', [
    { resource: 'selfsubjectreviews', kind: 'SelfSubjectReview', traits: ['cluster'], verbs: CREATE_ONLY },
  ]),
];

/** The built-in resources `kars apiserver` serves (stored and served; only CRDs and namespaces have behaviour). */
export function builtinResources(): ResourceInfo[] {
  return SPECS.map((s) => {
    const singular = s.kind.toLowerCase();
    const has = (t: Trait): boolean => s.traits.includes(t);
    const ri: ResourceInfo = {
      group: s.group,
      resource: s.resource,
      singular,
      kind: s.kind,
      listKind: `${s.kind}List`,
      namespaced: !has('cluster'),
      shortNames: s.shortNames ?? [],
      categories: s.categories ?? [],
      versions: [{ name: s.version, served: true, storage: true, printerColumns: s.columns ?? [AGE] }],
      hasStatus: has('status'),
      tracksGeneration: has('generation'),
      allowUnconditionalUpdate: !has('noUnconditionalUpdate'),
      allowCreateOnUpdate: CREATE_ON_UPDATE.has(s.resource),
      deleteReturnsObject: has('deleteReturnsObject'),
      builtin: true,
      ...(s.verbs ? { verbs: s.verbs } : {}),
      ...(s.subresources ? { subresources: s.subresources } : {}),
      ...(s.fieldLabels ? { fieldLabels: s.fieldLabels } : {}),
    };
    const smp = builtinStrategicInfo[`${s.group}/${s.version}/${s.kind}`];
    ri.strategic = smp ?? { mergeKeys: {} };
    return ri;
  });
}
