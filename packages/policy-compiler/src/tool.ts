/**
 * ToolPolicy compilation (kars-wire-contract.md §2.3).
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
 * Decisions:
 * - When `commerce` is set and no approval mode is given, the compiled form makes the contract's
 *   default explicit: `approval.mode = "aboveThreshold"` (a missing `approval` block becomes
 *   `{mode: "aboveThreshold", threshold: null, channel: null}`).
 * - An empty `agtProfile.inline` string counts as unset, as in the reference reconciler.
 *
 * Caveats: `agtProfile.bundleRef` needs OCI access, so it fails with `InvalidRef`.
 */
import type { ToolPolicy } from '@kars/policy-api';
import { canonicalDigest, versionHash } from './digest.js';
import { toolPolicyConfigMap, type CompiledConfigMap } from './configmaps.js';
import { checkUint, orNull, sortedLabels } from './json.js';
import { fail, type CompileResult } from './result.js';
import { policyHeader } from './header.js';

/** ConfigMap key of the compiled (pretty) profile. */
export const TOOL_PROFILE_FILENAME = 'profile.json';
/** ConfigMap key of the AGT profile and the domain separator of its digest. */
export const AGT_PROFILE_FILENAME = 'agt-profile.yaml';
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
    profileDigest: canonicalDigest(TOOL_PROFILE_FILENAME, profileJson),
    versionHash: vh,
    configMap: toolPolicyConfigMap({
      name,
      namespace: policy.metadata.namespace ?? 'default',
      profileJson,
      versionHash: vh,
      agtProfileYaml: agt,
      agtProfileDigest,
    }),
  };
}
