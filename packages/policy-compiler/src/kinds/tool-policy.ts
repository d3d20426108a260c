/**
 * The ToolPolicy kind (ADR 0051): its descriptor, the ConfigMap it compiles to, and its compilation
 * (kars-wire-contract.md §2.3).
 *
 * It compiles to the ConfigMap `toolpolicy-<name>-profile`, keys `profile.json` and (with an AGT
 * profile) `agt-profile.yaml`. A router echoes them under kinds `ToolPolicy` and `AgtProfile`. A
 * sandbox refers to it by `spec.governance.toolPolicyRef.name` (policy-api `toolPolicyNameOf`).
 *
 * `profile.json` is `{appliesTo{tool, mcpServer, sandboxMatchLabels}, commerce{dailyCap, monthlyCap,
 * perTransferCap, counterpartyAllowlist}|null, rateLimit{rps, burst, window}|null,
 * approval{mode, threshold, channel}|null, displayName|null}`, written pretty-printed (two-space
 * indent, as serde_json's pretty printer). Its `versionHash` (over the compact form) goes into an
 * annotation. kars addition: routers enforce profile.json too (scope, rate limit, approval mode), so
 * they echo `canonicalDigest("profile.json", bytes)` under kind `ToolPolicy` ({@link CompiledToolPolicy.profileDigest}).
 *
 * The contract's echoed artifact is `agt-profile.yaml`: the inline AGT YAML, verbatim. Its digest is
 * `canonicalDigest("agt-profile.yaml", bytes)` (router echo kind `AgtProfile`).
 *
 * kars addition (ADR 0043): `toolPins: [{server, name, digest}]` (sorted) and `unpinnedTools:
 * "Allow"|"Deny"` follow `displayName`, each only when the spec sets it: a policy without them
 * compiles to the same bytes as before, and a router that does not know them refuses the profile.
 * ADR 0050: `enforcement: "DryRun"` follows them, only for a dry-run policy (Enforce is not written).
 *
 * Decisions:
 * - When `commerce` is set and no approval mode is given, the compiled form makes the contract's
 *   default explicit: `approval.mode = "aboveThreshold"` (a missing `approval` block becomes
 *   `{mode: "aboveThreshold", threshold: null, channel: null}`).
 * - An empty `agtProfile.inline` string counts as unset, as in the reference reconciler.
 *
 * Caveats: `agtProfile.bundleRef` needs OCI access, so it fails with `InvalidRef`.
 */
import { isToolDigest, TOOL_POLICY, toolPolicyNameOf, validateToolPolicySpec, type ToolPolicy } from '@kars/policy-api';
import { canonicalDigest, versionHash } from '../digest.js';
import { profileConfigMap, generationAnnotation, type CompiledConfigMap } from '../configmaps.js';
import { checkEnforcement, checkUint, orNull, sortedLabels } from '../json.js';
import { fail, type CompileFailure, type CompileResult } from '../result.js';
import { policyHeader } from '../header.js';
import { toolOutcome, type LoadOutcome, type ToolDigests, type ToolOutcome } from '../router-view.js';
import { profileNaming, type EchoExpectation, type ProfileKind } from './descriptor.js';

/** ConfigMap key of the compiled (pretty) profile. */
export const TOOL_PROFILE_FILENAME = 'profile.json';
/** ConfigMap key of the AGT profile and the domain separator of its digest. */
export const AGT_PROFILE_FILENAME = 'agt-profile.yaml';
/** The label naming the policy a compiled ConfigMap came from. */
export const TOOL_POLICY_LABEL = 'kars.azure.com/toolpolicy';
export const TOOL_POLICY_VERSION_HASH_ANNOTATION = 'kars.azure.com/toolpolicy-version-hash';
export const AGT_PROFILE_DIGEST_ANNOTATION = 'kars.azure.com/agt-profile-digest';
/** Approval mode the compiled profile carries when `commerce` is set without one. */
export const DEFAULT_COMMERCE_APPROVAL_MODE = 'aboveThreshold';

const U32_MAX = 0xffff_ffff;

/** The compiled ToolPolicy. */
export interface CompiledToolPolicy {
  /** `profile.json`, pretty-printed with two-space indentation and no trailing newline. */
  profileJson: string;
  /** The compact form of the same profile; {@link versionHash} hashes these bytes. */
  profileCompact: string;
  /** `agt-profile.yaml`, verbatim; absent when the spec has no AGT profile. */
  agtProfileYaml?: string;
  /** `canonicalDigest("agt-profile.yaml", agtProfileYaml)`; absent with it. */
  agtProfileDigest?: string;
  /** `canonicalDigest("profile.json", profileJson)`: what routers echo under kind `ToolPolicy` (kars addition). */
  profileDigest: string;
  /** First 16 bytes of SHA-256(compact profile.json), 32 hex. */
  versionHash: string;
  /** The `toolpolicy-<name>-profile` ConfigMap, ready for SSA. */
  configMap: CompiledConfigMap;
}

/** What the compiler reads from a ToolPolicy. */
export type ToolPolicyInput = Pick<ToolPolicy, 'metadata' | 'spec'>;

/** One compiled pin: `server` null means any server the policy governs. */
export interface CompiledToolPin {
  server: string | null;
  name: string;
  digest: string;
}

/**
 * `spec.toolPins` in compiled form: `[{server, name, digest}]` sorted by server (null first), then
 * name, so the order pins were written in does not change the digest. Refused: a malformed pin, a
 * duplicate (server, lower-cased name), an `unpinnedTools` other than Allow or Deny.
 */
function compilePins(
  toolPins: ToolPolicy['spec']['toolPins'],
  unpinned: unknown,
): { ok: true; pins: CompiledToolPin[] | undefined } | CompileFailure {
  if (unpinned !== undefined && unpinned !== 'Allow' && unpinned !== 'Deny')
    return fail('InvalidSpec', 'spec.unpinnedTools', 'spec.unpinnedTools must be Allow or Deny');
  if (toolPins === undefined) return { ok: true, pins: undefined };
  if (!Array.isArray(toolPins)) return fail('InvalidSpec', 'spec.toolPins', 'spec.toolPins must be a list of {name, server?, digest}');
  const pins: CompiledToolPin[] = [];
  const keys = new Set<string>();
  for (const [i, p] of toolPins.entries()) {
    const at = `spec.toolPins[${i}]`;
    const ok =
      typeof p === 'object' &&
      p !== null &&
      typeof p.name === 'string' &&
      p.name !== '' &&
      isToolDigest(p.digest) &&
      (p.server === undefined || (typeof p.server === 'string' && p.server !== ''));
    if (!ok) return fail('InvalidSpec', at, `${at} must have a name, an optional server and a sha256: digest`);
    const key = `${p.server ?? ''}\u0000${p.name.toLowerCase()}`;
    if (keys.has(key)) return fail('InvalidSpec', at, `${at} pins ${p.name} twice for the same server (names are matched ignoring case)`);
    keys.add(key);
    pins.push({ server: p.server ?? null, name: p.name, digest: p.digest });
  }
  pins.sort(
    (x, y) => (x.server === null ? 0 : 1) - (y.server === null ? 0 : 1) || cmp(x.server ?? '', y.server ?? '') || cmp(x.name, y.name),
  );
  return { ok: true, pins };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Compile one ToolPolicy. Pure; never throws for malformed input. */
export function compileToolPolicy(policy: ToolPolicyInput): CompileResult<CompiledToolPolicy> {
  const header = policyHeader(policy);
  if (!header.ok) return header;
  const { name, spec, appliesTo } = header;

  let agt: string | undefined;
  const src = spec.agtProfile;
  if (src !== undefined) {
    const inlineSet = typeof src.inline === 'string' && src.inline !== '';
    const bundleSet = src.bundleRef !== undefined;
    if (inlineSet && bundleSet) {
      return fail(
        'InvalidSpec',
        'spec.agtProfile',
        'spec.agtProfile.inline and spec.agtProfile.bundleRef are mutually exclusive; set exactly one',
      );
    }
    if (bundleSet) {
      return fail(
        'InvalidRef',
        'spec.agtProfile.bundleRef',
        'spec.agtProfile.bundleRef needs an OCI registry and cosign verification, which this offline compiler does not do; use agtProfile.inline or let the controller resolve the bundle',
      );
    }
    if (inlineSet) agt = src.inline;
  }

  const rl = spec.rateLimit;
  if (rl !== undefined) {
    for (const k of ['rps', 'burst'] as const) {
      const bad = checkUint(rl[k], `spec.rateLimit.${k}`, U32_MAX);
      if (bad) return bad;
    }
  }
  const c = spec.commerce;
  if (c?.counterpartyAllowlist !== undefined && !Array.isArray(c.counterpartyAllowlist)) {
    return fail('InvalidSpec', 'spec.commerce.counterpartyAllowlist', 'spec.commerce.counterpartyAllowlist must be a list of strings');
  }

  const mode = checkEnforcement(spec.enforcement);
  if (mode) return mode;
  const pinned = compilePins(spec.toolPins, spec.unpinnedTools);
  if (!pinned.ok) return pinned;
  const { pins } = pinned;

  const a = spec.approval;
  const defaultMode = c !== undefined ? DEFAULT_COMMERCE_APPROVAL_MODE : undefined;
  const approval =
    a === undefined
      ? defaultMode === undefined
        ? null
        : { mode: defaultMode, threshold: null, channel: null }
      : { mode: orNull(a.mode ?? defaultMode), threshold: orNull(a.threshold), channel: orNull(a.channel) };

  const profile = {
    appliesTo: {
      tool: orNull(appliesTo.tool),
      mcpServer: orNull(appliesTo.mcpServer),
      sandboxMatchLabels: sortedLabels(appliesTo.sandboxMatchLabels),
    },
    commerce:
      c === undefined
        ? null
        : {
            dailyCap: orNull(c.dailyCap),
            monthlyCap: orNull(c.monthlyCap),
            perTransferCap: orNull(c.perTransferCap),
            counterpartyAllowlist: [...(c.counterpartyAllowlist ?? [])],
          },
    rateLimit: rl === undefined ? null : { rps: orNull(rl.rps), burst: orNull(rl.burst), window: orNull(rl.window) },
    approval,
    displayName: orNull(spec.displayName),
    // ADR 0043: written only when the spec sets them, so the bytes (and digest) of a policy without
    // pins are unchanged, and a router that predates pins refuses (never echoes) one with them.
    ...(pins === undefined ? {} : { toolPins: pins }),
    ...(spec.unpinnedTools === undefined ? {} : { unpinnedTools: spec.unpinnedTools }),
    // ADR 0050: only DryRun is written (Enforce is the default), for the same reasons.
    ...(spec.enforcement === 'DryRun' ? { enforcement: 'DryRun' } : {}),
  };

  const profileCompact = JSON.stringify(profile);
  const profileJson = JSON.stringify(profile, null, 2);
  const vh = versionHash(profileCompact);
  const agtProfileDigest = agt === undefined ? undefined : canonicalDigest(AGT_PROFILE_FILENAME, agt);
  return {
    ok: true,
    profileJson,
    profileCompact,
    ...(agt === undefined ? {} : { agtProfileYaml: agt }),
    ...(agtProfileDigest === undefined ? {} : { agtProfileDigest }),
    profileDigest: toolProfileDigest(profileJson),
    versionHash: vh,
    configMap: profileConfigMap(
      TOOL_POLICY_KIND.configMap,
      { name, namespace: policy.metadata.namespace },
      {
        [TOOL_POLICY_VERSION_HASH_ANNOTATION]: vh,
        ...generationAnnotation(policy.metadata.generation),
        ...(agtProfileDigest === undefined ? {} : { [AGT_PROFILE_DIGEST_ANNOTATION]: agtProfileDigest }),
      },
      { [TOOL_PROFILE_FILENAME]: profileJson, ...(agt === undefined ? {} : { [AGT_PROFILE_FILENAME]: agt }) },
    ),
  };
}

/** The echo kinds of a ToolPolicy: `ToolPolicy` over profile.json, `AgtProfile` over the AGT profile. */
export const TOOL_ECHO_KINDS = ['ToolPolicy', 'AgtProfile'] as const;
/** One of {@link TOOL_ECHO_KINDS}. */
export type ToolEchoKind = (typeof TOOL_ECHO_KINDS)[number];

/** The digest a ToolPolicy load is echoed with under `kind` (null: no AGT profile). */
export function toolDigestOf(kind: ToolEchoKind, digests: ToolDigests): string | null {
  return kind === 'ToolPolicy' ? digests.profile : digests.agt;
}

/** The digests of a compiled ToolPolicy a router must echo: profile.json always, the AGT profile when there is one. */
export function toolEchoes(c: Pick<CompiledToolPolicy, 'profileDigest' | 'agtProfileDigest'>): EchoExpectation[] {
  const expect: EchoExpectation[] = [{ kind: 'ToolPolicy', digest: c.profileDigest }];
  if (c.agtProfileDigest !== undefined) expect.push({ kind: 'AgtProfile', digest: c.agtProfileDigest });
  return expect;
}

/** The digest a router echoes under `ToolPolicy` for these profile.json bytes. */
export function toolProfileDigest(profileJson: string): string {
  return canonicalDigest(TOOL_PROFILE_FILENAME, profileJson);
}

/** The ToolPolicy descriptor. */
export const TOOL_POLICY_KIND: ProfileKind<ToolPolicyInput, CompiledToolPolicy, ToolOutcome> = {
  kind: 'ToolPolicy',
  resource: TOOL_POLICY,
  finalizer: 'kars.azure.com/toolpolicy-cleanup',
  fieldManager: 'kars-controller/toolpolicy',
  statusManager: 'kars-controller/toolpolicy-status',
  configMap: {
    ...profileNaming('toolpolicy-'),
    policyLabel: TOOL_POLICY_LABEL,
    artifact: 'compiled-profile',
    bodyKey: TOOL_PROFILE_FILENAME,
  },
  echoKinds: TOOL_ECHO_KINDS,
  statusDigestKind: 'AgtProfile',
  referencedBy: toolPolicyNameOf,
  validate: (spec) => validateToolPolicySpec(spec),
  compile: compileToolPolicy,
  status: (c) => ({
    configMap: c.configMap,
    digest: c.agtProfileDigest,
    expect: toolEchoes(c),
    extra: { agtProfileDigest: c.agtProfileDigest ?? null },
  }),
  load: (name, data, source, caps) => {
    const profile = data?.[TOOL_PROFILE_FILENAME];
    const agt = data?.[AGT_PROFILE_FILENAME];
    const digests = {
      profile: profile === undefined ? '' : toolProfileDigest(profile),
      agt: agt === undefined ? null : canonicalDigest(AGT_PROFILE_FILENAME, agt),
    };
    const o = toolOutcome(name, profile, agt, digests, source, caps);
    return o.kind === 'loaded' ? { ...o, name } : o;
  },
  echoesOf: (outcome) => TOOL_ECHO_KINDS.map((kind) => ({ kind, outcome: underEchoKind(kind, outcome) })),
};

/** A ToolPolicy outcome as recorded under one of its echo kinds: that kind's digest, loaded or refused. */
function underEchoKind(kind: ToolEchoKind, outcome: ToolOutcome): LoadOutcome<unknown> {
  if (outcome.kind === 'none') return outcome;
  if (outcome.kind === 'error') return { ...outcome, rejectedDigest: toolDigestOf(kind, outcome.digests) };
  return { ...outcome, digest: toolDigestOf(kind, outcome.value.digests) };
}
