/**
 * Wire types for the `kars.azure.com/v1alpha1` kinds: InferencePolicy, ToolPolicy, EgressApproval and KarsSandbox.
 *
 * These interfaces are what the controller, the compiler, the router and the CLI read and write. They are written by
 * hand so that they carry doc comments, but they cannot drift from the CRD schemas: `crds.ts` maps every OpenAPI
 * schema to a type with `FromSchema<>` and asserts, at compile time, that it is *equal* to the interface here
 * (see `schema-types.ts`). Change one without the other and `tsc` fails.
 *
 * Conventions:
 * - A field the API server defaults (for example `appliesTo.sandboxMatchLabels`, default `{}`) is optional here,
 *   because clients may omit it; objects read back from the server always carry it.
 * - Optional fields use `?:` and, under `exactOptionalPropertyTypes`, are never `undefined`: omit them instead.
 * - Fields the contract says are written as JSON `null` (e.g. `status.loadedDigest`) are typed `T | null`.
 */
import type { ObjectMeta } from '@kars/kube-core';
import type { EnforcementMode } from './dry-run.js';

// ---------------------------------------------------------------------------------------------------------------
// Group, version, kinds

/** The API group of every kars kind. */
export const GROUP = 'kars.azure.com';
/** The only served (and storage) version. */
export const VERSION = 'v1alpha1';
/** `apiVersion` as written in objects. */
export const API_VERSION = 'kars.azure.com/v1alpha1';
export type ApiVersion = typeof API_VERSION;

/** A kars kind as a resource: enough to build an API path and to name the kind in a body. */
export interface KarsResource<K extends string = string> {
  group: typeof GROUP;
  version: typeof VERSION;
  /** Plural, lower case: the path segment. */
  resource: string;
  singular: string;
  kind: K;
  listKind: `${K}List`;
  shortNames: readonly string[];
  namespaced: true;
}

/** A kars kind's resource: group, version, singular and list kind follow from the kind's name. */
function karsResource<K extends string, R extends string, S extends string>(kind: K, resource: R, shortName: S) {
  return {
    group: GROUP,
    version: VERSION,
    resource,
    singular: kind.toLowerCase() as Lowercase<K>,
    kind,
    listKind: `${kind}List` as const,
    shortNames: [shortName] as const,
    namespaced: true,
  } as const satisfies KarsResource<K>;
}

export const INFERENCE_POLICY = karsResource('InferencePolicy', 'inferencepolicies', 'ip');
export const TOOL_POLICY = karsResource('ToolPolicy', 'toolpolicies', 'tp');
export const EGRESS_APPROVAL = karsResource('EgressApproval', 'egressapprovals', 'eappr');
export const KARS_SANDBOX = karsResource('KarsSandbox', 'karssandboxes', 'ksb');

/** All four kinds, in a fixed order (the order of `deploy/crds/all.yaml`). */
export const KARS_RESOURCES = [INFERENCE_POLICY, TOOL_POLICY, EGRESS_APPROVAL, KARS_SANDBOX] as const;

/** Category every kars CRD joins, so `kubectl get kars` lists them all. */
export const KARS_CATEGORY = 'kars';

/** The ToolPolicy a sandbox uses when `governance.toolPolicyRef.name` is empty (the chart default). */
export const DEFAULT_TOOL_POLICY_NAME = 'kars-default';

// ---------------------------------------------------------------------------------------------------------------
// Conditions

/** `metav1.Condition`, as every kars status carries it. */
export interface Condition {
  type: string;
  status: ConditionStatus;
  /** `metadata.generation` the condition was computed for. */
  observedGeneration?: number;
  /** RFC 3339; kept from the previous condition unless `status` flips. */
  lastTransitionTime: string;
  /** CamelCase machine-readable reason, one of {@link Reason} for kars-written conditions. */
  reason: string;
  message: string;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** The three condition types every policy reconcile emits (contract §3.3). */
export const ConditionType = {
  Ready: 'Ready',
  Progressing: 'Progressing',
  Degraded: 'Degraded',
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

/**
 * Condition reasons. These strings are frozen: dashboards, scripts and the e2e suite match on them.
 *
 * `Failed` is the Progressing reason for a degraded reconcile; its exact spelling in the Rust source is
 * [UNVERIFIED] (contract §3.3), so we chose the plain word users would expect.
 */
export const Reason = {
  // InferencePolicy / ToolPolicy enforcement (§3.3)
  RouterEnforcing: 'RouterEnforcing',
  AwaitingRouterEnforcement: 'AwaitingRouterEnforcement',
  NoSandboxesReferencing: 'NoSandboxesReferencing',
  Reconciled: 'Reconciled',
  Failed: 'Failed',
  // Source resolution and write failures: one taxonomy for every signed kind (§3.1 step 3–4)
  InvalidSpec: 'InvalidSpec',
  Transient: 'Transient',
  AllowlistMissing: 'AllowlistMissing',
  AllowlistMalformed: 'AllowlistMalformed',
  AllowlistUnauthorized: 'AllowlistUnauthorized',
  AllowlistSignatureVerifyFailed: 'AllowlistSignatureVerifyFailed',
  InvalidRef: 'InvalidRef',
  SignerPolicyMalformed: 'SignerPolicyMalformed',
  ProfileWriteFailed: 'ProfileWriteFailed',
  // EgressApproval (§1.3, §3.6)
  BlockedOnSandbox: 'BlockedOnSandbox',
  RouterConfirmed: 'RouterConfirmed',
  AwaitingRouterEcho: 'AwaitingRouterEcho',
  TtlExceedsCeiling: 'TtlExceedsCeiling',
  TtlInvalid: 'TtlInvalid',
  ReasonInvalid: 'ReasonInvalid',
  Expired: 'Expired',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** Warning event reason published while a policy awaits router confirmation (§3.4). */
export const EVENT_AWAITING_ROUTER_CONFIRMATION = 'AwaitingRouterConfirmation';

// ---------------------------------------------------------------------------------------------------------------
// Shared shapes

/** A signed OCI bundle reference. The controller verifies it with cosign before use. */
export interface OciRef {
  /** Registry host, e.g. `myregistry.azurecr.io`. */
  registry: string;
  repository: string;
  /** Manifest digest `sha256:<64 hex>`; the bundle is pinned by digest, never by tag. */
  digest: string;
  /** Informational tag; the digest decides. */
  tag?: string;
}

/** A reference to an object of a known kind in the same namespace. */
export interface LocalObjectRef {
  name: string;
}

/** One egress endpoint. A missing port means 443 in the compiled form. */
export interface EgressEndpoint {
  /** Host name only: no scheme, no path, no port. */
  host: string;
  /** 1..65535. */
  port?: number;
}

// ---------------------------------------------------------------------------------------------------------------
// InferencePolicy (§1.1)

export type Severity = 'Safe' | 'Low' | 'Medium' | 'High';
export type InferenceAction = 'chat' | 'responses' | 'image' | 'embeddings' | '*';
export type InferenceProvider = 'azure-openai' | 'anthropic' | 'ollama' | 'bedrock';
export type GuardrailProvider = 'openai-moderation';
export type GuardrailApplyTo = 'input' | 'output' | 'both';

/** Selector. The fields are ANDed. */
export interface InferenceAppliesTo {
  /** Empty or absent: any sandbox in the namespace. */
  sandboxName?: string;
  /** Defaulted to `{}` by the server. */
  sandboxMatchLabels?: Record<string, string>;
  /** Defaulted to `*` by the server. */
  action?: InferenceAction;
}

/** Token caps on input+output tokens. Absent ⇒ no budget from this CR. */
export interface TokenBudget {
  perRequestTokens?: number;
  dailyTokens?: number;
  /** Must be ≥ `dailyTokens` when both are set. */
  monthlyTokens?: number;
}

/** The maximum tolerated severity per category; a finding strictly above blocks. An absent category is not policed. */
export interface ContentSafety {
  hate?: Severity;
  selfHarm?: Severity;
  sexual?: Severity;
  violence?: Severity;
  requirePromptShields?: boolean;
}

export interface ModelRef {
  provider: string;
  deployment: string;
}

export interface ModelPreference {
  primary: ModelRef;
  /** Ordered fallbacks; the first healthy route wins. Defaulted to `[]` by the server. */
  fallback?: ModelRef[];
}

export interface Guardrail {
  provider: GuardrailProvider;
  /** Absent ⇒ both. */
  applyTo?: GuardrailApplyTo;
}

export interface InferencePolicySpec {
  appliesTo: InferenceAppliesTo;
  tokenBudget?: TokenBudget;
  contentSafety?: ContentSafety;
  modelPreference?: ModelPreference;
  /**
   * Default upstream. The contract says the default is `azure-openai`; the server does **not** write that default,
   * because `bundleRef` is exclusive with `provider` and a defaulted value would make every bundle spec invalid.
   * The compiler treats absent as "router default" (`null` in the compiled JSON).
   */
  provider?: InferenceProvider;
  guardrails?: Guardrail[];
  displayName?: string;
  /** Signed bundle. Exclusive with every content field above; `appliesTo` always comes from the CR. */
  bundleRef?: OciRef;
  /** kars addition (ADR 0050): `DryRun` records what the policy would decide and enforces nothing; absent means `Enforce`. */
  enforcement?: EnforcementMode;
}

/** The content fields `bundleRef` excludes, in contract order. */
export const INFERENCE_CONTENT_FIELDS = [
  'tokenBudget',
  'contentSafety',
  'modelPreference',
  'provider',
  'guardrails',
  'displayName',
] as const;

export type PolicyPhase = 'Compiled' | 'Ready' | 'Degraded';

/** Time the last edit took to reach the routers. kars-only; the Rust controller does not write it. */
export interface Propagation {
  /** Milliseconds from the spec change being observed to every router echoing the compiled digest. */
  lastMs?: number;
  /** The largest {@link lastMs} recorded for this policy (kept in status across controller restarts). */
  maxMs?: number;
  /** Milliseconds spent compiling and writing the ConfigMap in the last reconcile. */
  lastCompileMs?: number;
}

export interface InferencePolicyStatus {
  phase?: PolicyPhase;
  observedGeneration?: number;
  /** Always all three of Ready, Progressing, Degraded once reconciled. */
  conditions?: Condition[];
  /** The compiled ConfigMap (its name is the InferencePolicy descriptor's, in `@kars/policy-compiler`). */
  profileConfigMapRef?: LocalObjectRef;
  /** 32 hex chars, legacy change detection. */
  versionHash?: string;
  /** RFC 3339 UTC, whole seconds, `Z`. */
  lastCompiledAt?: string;
  /** `sha256:<64 hex>`, the wire-contract digest. */
  compiledDigest?: string;
  /** Equal to `compiledDigest` only when every router confirmed it; otherwise null. */
  loadedDigest?: string | null;
  /** OCI manifest digest; present only on the bundle path. */
  bundleRefDigest?: string;
  propagation?: Propagation;
}

export interface InferencePolicy {
  apiVersion: ApiVersion;
  kind: 'InferencePolicy';
  metadata: ObjectMeta;
  spec: InferencePolicySpec;
  status?: InferencePolicyStatus;
}

// ---------------------------------------------------------------------------------------------------------------
// ToolPolicy (§1.2)

export type ApprovalMode = 'never' | 'always' | 'aboveThreshold';

/** AND selector; the most specific selector wins (router side). The CLI requires at least one field. */
export interface ToolAppliesTo {
  /** `*` = all tools. */
  tool?: string;
  mcpServer?: string;
  /** Defaulted to `{}` by the server. */
  sandboxMatchLabels?: Record<string, string>;
}

/** AP2 spend caps, amounts written `"<ISO 4217 code> <amount>"`, e.g. `"USD 100.00"`. */
export interface Commerce {
  dailyCap?: string;
  /** Must be ≥ `dailyCap` (same currency) when both are set. */
  monthlyCap?: string;
  perTransferCap?: string;
  /** Empty means deny-all (fail closed). Defaulted to `[]` by the server. */
  counterpartyAllowlist?: string[];
}

export interface RateLimit {
  rps?: number;
  burst?: number;
  /** `<n>s|m|h|d`, e.g. `1m`, `1h`, `24h`. */
  window?: string;
}

export interface Approval {
  /** Default `aboveThreshold` when `commerce` is set (applied by the compiler, not the server). */
  mode?: ApprovalMode;
  threshold?: string;
  channel?: string;
}

/** The customer's AGT profile. Exactly one of `inline` or `bundleRef`, or the whole block absent. */
export interface AgtProfile {
  /** Raw AGT YAML, written verbatim into `agt-profile.yaml`. */
  inline?: string;
  bundleRef?: OciRef;
}

/**
 * One approved MCP tool definition (ADR 0043): the gateway shows and lets the sandbox call the tool
 * only while the definition it last saw listed has this digest (`toolDefinitionDigest`).
 */
export interface ToolPin {
  /** The tool's name exactly as listed (the digest covers it; a call must use this spelling). */
  name: string;
  /** The MCP server (`--mcp-upstream NAME=URL`) the pin is for; absent: any server the policy governs. */
  server?: string;
  /** `sha256:` + 64 lower-case hex: SHA-256 of the RFC 8785 form of `{name, description, inputSchema}`. */
  digest: string;
}

/** What the gateway does with a tool the governing policy does not pin. */
export type UnpinnedTools = 'Allow' | 'Deny';

export interface ToolPolicySpec {
  appliesTo: ToolAppliesTo;
  commerce?: Commerce;
  rateLimit?: RateLimit;
  approval?: Approval;
  displayName?: string;
  agtProfile?: AgtProfile;
  /** Pinned tool definitions (ADR 0043); at most one per (server, name ignoring case). */
  toolPins?: ToolPin[];
  /** `Allow` (default): tools without a pin pass as before. `Deny`: they are hidden and refused (`tool_not_pinned`). */
  unpinnedTools?: UnpinnedTools;
  /** kars addition (ADR 0050): `DryRun` records what the policy would decide and enforces nothing; absent means `Enforce`. */
  enforcement?: EnforcementMode;
}

export interface ToolPolicyStatus {
  phase?: PolicyPhase;
  observedGeneration?: number;
  conditions?: Condition[];
  lastCompiledAt?: string;
  /** `sha256:` canonical digest over `agt-profile.yaml`; null when there is no AGT profile. */
  agtProfileDigest?: string | null;
  /** OCI manifest digest of the AGT bundle; omitted when not on the bundle path. */
  agtProfileBundleDigest?: string;
  /** kars symmetry with InferencePolicy: the echoed digest, i.e. `agtProfileDigest` when an AGT profile resolves. */
  compiledDigest?: string | null;
  /** Equal to `compiledDigest` only when every router confirmed it; otherwise null. */
  loadedDigest?: string | null;
  propagation?: Propagation;
}

export interface ToolPolicy {
  apiVersion: ApiVersion;
  kind: 'ToolPolicy';
  metadata: ObjectMeta;
  spec: ToolPolicySpec;
  status?: ToolPolicyStatus;
}

// ---------------------------------------------------------------------------------------------------------------
// EgressApproval (§1.3)

export interface EgressApprovalSpec {
  /** A sandbox in the same namespace as the approval. */
  sandbox: string;
  /** 1..16 entries. */
  hosts: EgressEndpoint[];
  /** 1..512 bytes (UTF-8); no control bytes except TAB/LF/CR, no DEL. */
  reason: string;
  /** 1..128 characters when set; omitted (never empty) when unset. */
  ticket?: string;
  /** ISO 8601 `P[nD][T[nH][nM][nS]]`, > 0 and ≤ the ceiling. */
  ttl: string;
}

export type EgressApprovalPhase = 'Pending' | 'Active' | 'Expired';

export interface EgressApprovalStatus {
  phase?: EgressApprovalPhase;
  observedGeneration?: number;
  /** RFC 3339; stamped once, never moves. */
  effectiveAt?: string;
  /** `effectiveAt + ttl`. */
  expiresAt?: string;
  /** Digest the router must echo (baseline ∪ this ∪ active siblings). */
  mergedDigest?: string;
  hostCount?: number;
  /** Reserved; the router does not report it yet. */
  usageCount?: number;
  conditions?: Condition[];
  /** kars addition: the merged digest the router echoed, when it matched. */
  loadedDigest?: string | null;
}

export interface EgressApproval {
  apiVersion: ApiVersion;
  kind: 'EgressApproval';
  metadata: ObjectMeta;
  spec: EgressApprovalSpec;
  status?: EgressApprovalStatus;
}

// ---------------------------------------------------------------------------------------------------------------
// KarsSandbox (§1.4): the binding between policies and routers

export interface Governance {
  /** When false, no ToolPolicy applies. Defaults to true. */
  enabled?: boolean;
  /** Empty or absent name ⇒ {@link DEFAULT_TOOL_POLICY_NAME}. */
  toolPolicyRef?: LocalObjectRef;
}

export interface SandboxNetworkPolicy {
  /** The baseline egress allowlist. */
  allowedEndpoints?: EgressEndpoint[];
  /**
   * A signed egress allowlist bundle. The shape is [UNVERIFIED] in the contract; the `Allowlist*` failure reasons
   * (signature verify, unauthorized, malformed) point to a cosign-signed OCI bundle, so it is an {@link OciRef}.
   */
  allowlistRef?: OciRef;
}

/**
 * The kars subset of the KarsSandbox spec. The full kars KarsSandbox carries many more fields (agent image,
 * resources, ...); the CRD keeps them (`x-kubernetes-preserve-unknown-fields` on `spec`) so real objects survive a
 * round trip, but only the binding fields below are typed and validated.
 */
export interface KarsSandboxSpec {
  inferenceRef?: LocalObjectRef;
  governance?: Governance;
  memoryRef?: LocalObjectRef;
  networkPolicy?: SandboxNetworkPolicy;
}

export type SandboxPhase = 'Pending' | 'Running';

export interface RouterInstance {
  instance: string;
  /**
   * RFC 3339: when what this router reports (its loaded digests or errors) last changed, or when it was first seen.
   * Not every lease renewal: that would rewrite the status every few seconds per router.
   */
  lastSeen: string;
  /** Loaded digest per echoed kind (from the router's echo Lease); null: the kind is configured but nothing loaded. */
  loaded?: Record<string, string | null>;
  /** Last load error per kind (a NACK: the previous digest stays loaded). */
  lastErrors?: Record<string, string>;
}

export interface KarsSandboxStatus {
  phase?: SandboxPhase;
  routers?: RouterInstance[];
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface KarsSandbox {
  apiVersion: ApiVersion;
  kind: 'KarsSandbox';
  metadata: ObjectMeta;
  spec: KarsSandboxSpec;
  status?: KarsSandboxStatus;
}

/** Any of the four kars kinds. */
export type KarsObject = InferencePolicy | ToolPolicy | EgressApproval | KarsSandbox;

/**
 * The ToolPolicy a sandbox's router enforces: `governance.toolPolicyRef.name`, or
 * {@link DEFAULT_TOOL_POLICY_NAME} when the name is empty; undefined when governance is absent or
 * disabled. The controller (referrers) and the router (what to load) both use this one rule.
 */
export function toolPolicyNameOf(sandbox: Pick<KarsSandbox, 'spec'>): string | undefined {
  const g = sandbox.spec?.governance;
  if (!g || g.enabled === false) return undefined;
  const n = g.toolPolicyRef?.name;
  return n !== undefined && n !== '' ? n : DEFAULT_TOOL_POLICY_NAME;
}
