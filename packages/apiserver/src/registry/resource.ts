import type { CompiledSchema } from '@kars/kube-schema';
import type { StrategicInfo } from '@kars/kube-patch';

/** One column of `kubectl get` output, as in additionalPrinterColumns. */
export interface PrinterColumn {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
  /** JSONPath-like path, e.g. ".spec.replicas" or ".metadata.creationTimestamp". */
  jsonPath: string;
}

/** Per-version details of a resource: its schema (custom resources only) and printer columns. */
export interface VersionInfo {
  name: string;
  served: boolean;
  storage: boolean;
  schema?: CompiledSchema;
  /** The CRD's openAPIV3Schema as written (custom resources only), for /openapi/v2 and /openapi/v3. */
  openAPIV3Schema?: unknown;
  printerColumns: PrinterColumn[];
  /** Dotted paths of associative lists and their keys, from x-kubernetes-list-map-keys. */
  listKeys?: Record<string, string[]>;
  /** A custom resource's `selectableFields`, as field labels (`spec.color`). */
  selectableFields?: string[];
}

/**
 * Everything the server knows about one resource (a REST collection).
 * Built-in resources are static; custom resources come from CRDs at run time.
 */
export interface ResourceInfo {
  group: string;
  resource: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  versions: VersionInfo[];
  /** Whether `/status` is a subresource (and main-resource writes ignore status). */
  hasStatus: boolean;
  /** Whether metadata.generation is maintained (bumped on spec changes). */
  tracksGeneration: boolean;
  /** Whether PUT without metadata.resourceVersion is accepted (kube: true for most built-ins, false for CRs). */
  allowUnconditionalUpdate: boolean;
  /** Whether PUT of a missing object creates it (kube's AllowCreateOnUpdate: RBAC, Lease, Event, Service). */
  allowCreateOnUpdate?: boolean;
  /** Whether DELETE answers with the object (custom resources) or a Status (core built-ins). */
  deleteReturnsObject: boolean;
  /** Merge keys for strategic merge patch; undefined means SMP is unsupported (415), as for custom resources. */
  strategic?: StrategicInfo;
  builtin: boolean;
  /** The verbs served, when not the usual eight (reviews serve only `create`). */
  verbs?: string[];
  /** Subresources other than `status`, for discovery (e.g. `serviceaccounts/token`). */
  subresources?: SubresourceInfo[];
  /**
   * A built-in kind's field labels, where kube registers a conversion of its own (Secret's `type`,
   * Event's `involvedObject.*`); absent, kube's default: `metadata.name` and `metadata.namespace`.
   */
  fieldLabels?: readonly string[];
}

/** A subresource served by a handler of its own, with its own kind (e.g. TokenRequest). */
export interface SubresourceInfo {
  name: string;
  group: string;
  version: string;
  kind: string;
  verbs: string[];
}

/** The field labels every kind selects on, unless it registers its own (kube's DefaultMetaV1FieldSelectorConversion). */
export const OBJECT_META_FIELD_LABELS: readonly string[] = ['metadata.name', 'metadata.namespace'];

/** The storage key of a resource: "group/resource" ("" group for core). */
export function grKey(group: string, resource: string): string {
  return `${group}/${resource}`;
}

/** The version objects are stored at. */
export function storageVersion(ri: ResourceInfo): string {
  return (ri.versions.find((v) => v.storage) ?? ri.versions[0])?.name ?? 'v1';
}

export function servedVersion(ri: ResourceInfo, version: string): VersionInfo | undefined {
  return ri.versions.find((v) => v.name === version && v.served);
}
