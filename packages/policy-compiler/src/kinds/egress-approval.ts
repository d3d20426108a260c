/**
 * The EgressApproval kind (ADR 0051): its descriptor, the per-approval file and the per-sandbox
 * ConfigMap the approvals compile to (kars-wire-contract.md §2.4).
 *
 * Every unexpired approval naming a sandbox writes one key, `approval-<name>.json`, into that
 * sandbox's ConfigMap `kars-<sandbox>-egress-approvals`, each with a field manager of its own so
 * siblings never clobber each other. The sandbox's routers echo the merged allowlist's digest
 * (`baseline ∪ approvals`) under kind `EgressApproval`.
 *
 * Decision: the reference writes the ConfigMap `clawsandbox-<sandbox>-egress-approvals` in the
 * sandbox pod namespace `kars-<sandbox>`. kars routers read ConfigMaps through the API from the
 * sandbox's own namespace (there are no per-sandbox pod namespaces), so it lives in the
 * EgressApproval's namespace (the sandbox's, §1.3) and is named `kars-<sandbox>-egress-approvals`.
 */
import { EGRESS_APPROVAL } from '@kars/policy-api';
import { compiledConfigMap, type CompiledConfigMap } from '../configmaps.js';
import { canonicalHosts, EGRESS_SCHEMA_VERSION, type EndpointInput } from '../egress.js';
import type { KindResource } from './descriptor.js';

/** The label naming the sandbox an approvals ConfigMap serves. */
export const EGRESS_SANDBOX_LABEL = 'kars.azure.com/sandbox';
/** Base of the per-approval field managers; see {@link egressApprovalFieldManager}. */
export const EGRESS_APPROVAL_FIELD_MANAGER_BASE = 'kars-controller/egressapproval';

/**
 * Field manager for one approval's key: `kars-controller/egressapproval/<approvalName>`, so sibling
 * approvals sharing one ConfigMap never clobber each other's keys.
 */
export function egressApprovalFieldManager(approvalName: string): string {
  return `${EGRESS_APPROVAL_FIELD_MANAGER_BASE}/${approvalName}`;
}

/** `kars-<sandbox>-egress-approvals` (kars naming; see the module doc for why not `clawsandbox-…`). */
export function egressApprovalsConfigMapName(sandbox: string): string {
  return `kars-${sandbox}-egress-approvals`;
}

const FILE_PREFIX = 'approval-';
const FILE_SUFFIX = '.json';

/** ConfigMap key of one approval's file: `approval-<approvalName>.json`. */
export function approvalFileKey(approvalName: string): string {
  return `${FILE_PREFIX}${approvalName}${FILE_SUFFIX}`;
}

/** The approval a ConfigMap key names (`approval-<approvalName>.json`), or undefined when it is not an approval's file. */
export function approvalOfFileKey(key: string): string | undefined {
  if (!key.startsWith(FILE_PREFIX) || !key.endsWith(FILE_SUFFIX) || key.length <= FILE_PREFIX.length + FILE_SUFFIX.length) return undefined;
  return key.slice(FILE_PREFIX.length, -FILE_SUFFIX.length);
}

/** What {@link approvalFile} needs from an EgressApproval. */
export interface ApprovalFileInput {
  metadata: { name: string };
  spec: { sandbox: string; hosts: readonly EndpointInput[]; reason: string; ticket?: string | undefined };
}

/** One approval's ConfigMap entry. */
export interface ApprovalFile {
  key: string;
  /** Compact JSON; `ticket` is omitted, not null, when unset. */
  body: string;
}

/**
 * The per-approval file: `{schemaVersion, approvalName, sandbox, hosts, reason, ticket?, effectiveAt, expiresAt}`
 * in that key order, with hosts canonicalised. `effectiveAt`/`expiresAt` are written as given
 * (callers pass RFC 3339 UTC with whole seconds, see {@link rfc3339Seconds}).
 */
export function approvalFile(approval: ApprovalFileInput, effectiveAt: string, expiresAt: string): ApprovalFile {
  const { spec } = approval;
  const doc: Record<string, unknown> = {
    schemaVersion: EGRESS_SCHEMA_VERSION,
    approvalName: approval.metadata.name,
    sandbox: spec.sandbox,
    hosts: canonicalHosts(spec.hosts),
    reason: spec.reason,
  };
  if (spec.ticket !== undefined) doc['ticket'] = spec.ticket;
  doc['effectiveAt'] = effectiveAt;
  doc['expiresAt'] = expiresAt;
  return { key: approvalFileKey(approval.metadata.name), body: JSON.stringify(doc) };
}

/**
 * The per-sandbox approvals ConfigMap, holding the given `approval-<name>.json` entries (sorted by
 * key). The controller applies one key per approval with that approval's field manager; pass a
 * single file to get that SSA body, or all of a sandbox's files to get the resulting whole object.
 * Annotations: none (the map is always present and empty so the shape matches the other kinds').
 */
export function egressApprovalsConfigMap(args: {
  sandbox: string;
  namespace: string;
  files: ReadonlyArray<{ key: string; body: string }>;
}): CompiledConfigMap {
  const data: Record<string, string> = {};
  for (const f of [...args.files].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) data[f.key] = f.body;
  return compiledConfigMap({
    name: egressApprovalsConfigMapName(args.sandbox),
    namespace: args.namespace,
    artifact: EGRESS_APPROVAL_KIND.configMap.artifact,
    labels: { [EGRESS_SANDBOX_LABEL]: args.sandbox },
    annotations: {},
    data,
  });
}

/** The EgressApproval descriptor: one ConfigMap per sandbox, one key and one field manager per approval. */
export const EGRESS_APPROVAL_KIND: {
  readonly kind: 'EgressApproval';
  readonly resource: KindResource;
  readonly finalizer: string;
  readonly fieldManager: (approvalName: string) => string;
  /** Field manager of the approval's status. */
  readonly statusManager: string;
  readonly configMap: {
    name(sandbox: string): string;
    readonly sandboxLabel: string;
    readonly artifact: string;
    fileKey(approvalName: string): string;
  };
  readonly echoKinds: readonly ['EgressApproval'];
  /** The sandbox an approval names: its routers echo it. */
  referencedBy(approval: { spec?: { sandbox?: string } }): string | undefined;
} = {
  kind: 'EgressApproval',
  resource: EGRESS_APPROVAL,
  // `<group>/egress-approval-cleanup`; the old (azureclaw) version spelled the group differently.
  finalizer: 'kars.azure.com/egress-approval-cleanup',
  fieldManager: egressApprovalFieldManager,
  statusManager: 'kars-controller/egressapproval-status',
  configMap: {
    name: egressApprovalsConfigMapName,
    sandboxLabel: EGRESS_SANDBOX_LABEL,
    artifact: 'egress-approvals',
    fileKey: approvalFileKey,
  },
  echoKinds: ['EgressApproval'],
  referencedBy: (a) => a.spec?.sandbox || undefined,
};
