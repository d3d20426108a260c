/**
 * Builders for the compiled ConfigMaps (kars-wire-contract.md §2.6). Each returns an object ready
 * for server-side apply (`force: true`) with the matching field manager: apiVersion, kind,
 * metadata {name, namespace, labels, annotations} and data. No owner references: cleanup is by
 * finalizer.
 *
 * Decision — egress approvals: the contract writes one ConfigMap per sandbox named
 * `clawsandbox-<sandbox>-egress-approvals` in the sandbox pod namespace `kars-<sandbox>`. kars
 * routers read ConfigMaps through the API from the sandbox's own namespace (there are no
 * per-sandbox pod namespaces), so we write it in the EgressApproval's namespace (which is the
 * sandbox's namespace, §1.3) and name it `kars-<sandbox>-egress-approvals`.
 */

/** `app.kubernetes.io/managed-by` value on every compiled ConfigMap. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'kars-controller';
export const ARTIFACT_LABEL = 'kars.azure.com/artifact';

export const INFERENCE_POLICY_LABEL = 'kars.azure.com/inferencepolicy';
export const INFERENCE_POLICY_ARTIFACT = 'inference-policy-profile';
export const INFERENCE_POLICY_VERSION_HASH_ANNOTATION = 'kars.azure.com/inferencepolicy-version-hash';
export const INFERENCE_POLICY_DIGEST_ANNOTATION = 'kars.azure.com/inference-policy-digest';

export const TOOL_POLICY_LABEL = 'kars.azure.com/toolpolicy';
export const TOOL_POLICY_ARTIFACT = 'compiled-profile';
export const TOOL_POLICY_VERSION_HASH_ANNOTATION = 'kars.azure.com/toolpolicy-version-hash';
export const AGT_PROFILE_DIGEST_ANNOTATION = 'kars.azure.com/agt-profile-digest';

/**
 * kars addition: the `metadata.generation` of the policy a compiled ConfigMap was written from, so a
 * router's decision records can name it (issue 21). Not part of any digest.
 */
export const POLICY_GENERATION_ANNOTATION = 'kars.azure.com/policy-generation';

/** The policy generation a compiled ConfigMap names ({@link POLICY_GENERATION_ANNOTATION}), or undefined. */
export function policyGenerationOf(
  cm: { metadata: { annotations?: Readonly<Record<string, string>> | undefined } } | undefined,
): number | undefined {
  const v = cm?.metadata.annotations?.[POLICY_GENERATION_ANNOTATION];
  if (v === undefined || !/^[1-9][0-9]{0,15}$/.test(v)) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : undefined;
}

export const EGRESS_SANDBOX_LABEL = 'kars.azure.com/sandbox';
export const EGRESS_APPROVALS_ARTIFACT = 'egress-approvals';

/** SSA field manager of the InferencePolicy reconciler. */
export const INFERENCE_POLICY_FIELD_MANAGER = 'kars-controller/inferencepolicy';
/** SSA field manager of the ToolPolicy reconciler. */
export const TOOL_POLICY_FIELD_MANAGER = 'kars-controller/toolpolicy';
/** Base of the per-approval field managers; see {@link egressApprovalFieldManager}. */
export const EGRESS_APPROVAL_FIELD_MANAGER_BASE = 'kars-controller/egressapproval';

/**
 * Field manager for one approval's key: `kars-controller/egressapproval/<approvalName>`, so sibling
 * approvals sharing one ConfigMap never clobber each other's keys.
 */
export function egressApprovalFieldManager(approvalName: string): string {
  return `${EGRESS_APPROVAL_FIELD_MANAGER_BASE}/${approvalName}`;
}

/** `inferencepolicy-<name>-profile` (also `status.profileConfigMapRef.name`). */
export function inferencePolicyConfigMapName(policyName: string): string {
  return `inferencepolicy-${policyName}-profile`;
}

/** `toolpolicy-<name>-profile`. */
export function toolPolicyConfigMapName(policyName: string): string {
  return `toolpolicy-${policyName}-profile`;
}

/** `kars-<sandbox>-egress-approvals` (kars naming; see the module doc for why not `clawsandbox-…`). */
export function egressApprovalsConfigMapName(sandbox: string): string {
  return `kars-${sandbox}-egress-approvals`;
}

/** A ConfigMap as applied with SSA. */
export interface CompiledConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  data: Record<string, string>;
}

function generationAnnotation(generation: number | undefined): Record<string, string> {
  return generation === undefined ? {} : { [POLICY_GENERATION_ANNOTATION]: String(generation) };
}

function configMap(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  annotations: Record<string, string>,
  data: Record<string, string>,
): CompiledConfigMap {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels, annotations }, data };
}

/** The InferencePolicy ConfigMap: key `inference-policy.json` holds the compact canonical bytes. */
export function inferencePolicyConfigMap(args: {
  name: string;
  namespace: string;
  body: string;
  versionHash: string;
  compiledDigest: string;
  /** The policy's `metadata.generation`, when known ({@link POLICY_GENERATION_ANNOTATION}). */
  generation?: number | undefined;
}): CompiledConfigMap {
  return configMap(
    inferencePolicyConfigMapName(args.name),
    args.namespace,
    { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [INFERENCE_POLICY_LABEL]: args.name, [ARTIFACT_LABEL]: INFERENCE_POLICY_ARTIFACT },
    {
      [INFERENCE_POLICY_VERSION_HASH_ANNOTATION]: args.versionHash,
      [INFERENCE_POLICY_DIGEST_ANNOTATION]: args.compiledDigest,
      ...generationAnnotation(args.generation),
    },
    { 'inference-policy.json': args.body },
  );
}

/** The ToolPolicy ConfigMap: `profile.json` (pretty) and, when an AGT profile resolved, `agt-profile.yaml` verbatim. */
export function toolPolicyConfigMap(args: {
  name: string;
  namespace: string;
  profileJson: string;
  versionHash: string;
  agtProfileYaml?: string | undefined;
  agtProfileDigest?: string | undefined;
  /** The policy's `metadata.generation`, when known ({@link POLICY_GENERATION_ANNOTATION}). */
  generation?: number | undefined;
}): CompiledConfigMap {
  const annotations: Record<string, string> = {
    [TOOL_POLICY_VERSION_HASH_ANNOTATION]: args.versionHash,
    ...generationAnnotation(args.generation),
  };
  if (args.agtProfileDigest !== undefined) annotations[AGT_PROFILE_DIGEST_ANNOTATION] = args.agtProfileDigest;
  const data: Record<string, string> = { 'profile.json': args.profileJson };
  if (args.agtProfileYaml !== undefined) data['agt-profile.yaml'] = args.agtProfileYaml;
  return configMap(
    toolPolicyConfigMapName(args.name),
    args.namespace,
    { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [TOOL_POLICY_LABEL]: args.name, [ARTIFACT_LABEL]: TOOL_POLICY_ARTIFACT },
    annotations,
    data,
  );
}

/**
 * The per-sandbox approvals ConfigMap, holding the given `approval-<name>.json` entries (sorted by
 * key). The controller applies one key per approval with that approval's field manager; pass a
 * single file to get that SSA body, or all of a sandbox's files to get the resulting whole object.
 * Annotations: none (the map is always present and empty so the shape matches the other builders).
 */
export function egressApprovalsConfigMap(args: {
  sandbox: string;
  namespace: string;
  files: ReadonlyArray<{ key: string; body: string }>;
}): CompiledConfigMap {
  const data: Record<string, string> = {};
  for (const f of [...args.files].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) data[f.key] = f.body;
  return configMap(
    egressApprovalsConfigMapName(args.sandbox),
    args.namespace,
    { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [EGRESS_SANDBOX_LABEL]: args.sandbox, [ARTIFACT_LABEL]: EGRESS_APPROVALS_ARTIFACT },
    {},
    data,
  );
}
