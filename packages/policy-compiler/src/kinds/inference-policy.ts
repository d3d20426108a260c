/**
 * The InferencePolicy kind (ADR 0051): its descriptor, the ConfigMap it compiles to, and its
 * compilation (kars-wire-contract.md §2.2).
 *
 * It compiles to the ConfigMap `inferencepolicy-<name>-profile`, key `inference-policy.json`, and a
 * router echoes that body's digest under kind `InferencePolicy`. A sandbox refers to it by
 * `spec.inferenceRef.name`.
 *
 * The compiled body is compact JSON with this exact key order; every optional block is `null`
 * (never omitted), inner optional scalars are `null`, and `sandboxMatchLabels` has sorted keys:
 *
 * ```text
 * appliesTo{sandboxName, sandboxMatchLabels, action}
 * tokenBudget{perRequestTokens, dailyTokens, monthlyTokens} | null
 * contentSafety{hate, selfHarm, sexual, violence, requirePromptShields} | null
 * modelPreference{primary{provider, deployment}, fallback[{provider, deployment}]} | null
 * provider | null
 * guardrails[{provider, applyTo}] | null
 * displayName | null
 * enforcement: "DryRun"   (kars addition, ADR 0050: only on a dry-run policy)
 * ```
 *
 * `compiledDigest = canonicalDigest("inference-policy.json", body)` is what the router echoes under
 * kind `InferencePolicy`; `versionHash` is the legacy 32-hex change detector.
 *
 * Assumptions: the policy is as the API server returns it (defaults applied). Absent defaulted
 * collections compile as the reference types default them (`sandboxMatchLabels` → `{}`,
 * `fallback` → `[]`); an absent `action` compiles as `null` (the server would have written `*`).
 *
 * Caveats: the bundle path needs OCI access and cosign, so a spec with `bundleRef` fails with
 * `InvalidRef` (or `InvalidSpec` when content fields are set beside it).
 */
import { dryRunUnrecordedField, INFERENCE_POLICY, validateInferencePolicySpec, type InferencePolicy } from '@kars/policy-api';
import { canonicalDigest, versionHash } from '../digest.js';
import { profileConfigMap, generationAnnotation, type CompiledConfigMap } from '../configmaps.js';
import { isObject } from '@kars/kube-core';
import { checkEnforcement, checkUint, orNull, sortedLabels } from '../json.js';
import { fail, type CompileResult } from '../result.js';
import { policyHeader } from '../header.js';
import { inferenceOutcome, type InferenceRules, type LoadOutcome } from '../router-view.js';
import { profileNaming, type ProfileKind } from './descriptor.js';

/** Filename and ConfigMap key of the compiled InferencePolicy; the digest's domain separator. */
export const INFERENCE_POLICY_FILENAME = 'inference-policy.json';
/** The label naming the policy a compiled ConfigMap came from. */
export const INFERENCE_POLICY_LABEL = 'kars.azure.com/inferencepolicy';
export const INFERENCE_POLICY_VERSION_HASH_ANNOTATION = 'kars.azure.com/inferencepolicy-version-hash';
export const INFERENCE_POLICY_DIGEST_ANNOTATION = 'kars.azure.com/inference-policy-digest';

/** Content fields `bundleRef` excludes (contract §1.1), in contract order. */
const CONTENT_FIELDS = ['tokenBudget', 'contentSafety', 'modelPreference', 'provider', 'guardrails', 'displayName'] as const;

/** The compiled InferencePolicy. */
export interface CompiledInferencePolicy {
  /** Compact JSON, the exact bytes of the ConfigMap value. */
  body: string;
  /** `sha256:<64 hex>` over `canonical("inference-policy.json", body)`. */
  compiledDigest: string;
  /** First 16 bytes of SHA-256(body), 32 hex. */
  versionHash: string;
  /** The `inferencepolicy-<name>-profile` ConfigMap, ready for SSA. */
  configMap: CompiledConfigMap;
}

/** What the compiler reads from an InferencePolicy: its name, namespace and spec. */
export type InferencePolicyInput = Pick<InferencePolicy, 'metadata' | 'spec'>;

/** Compile one InferencePolicy. Pure; never throws for malformed input. */
export function compileInferencePolicy(policy: InferencePolicyInput): CompileResult<CompiledInferencePolicy> {
  const header = policyHeader(policy);
  if (!header.ok) return header;
  const { name, spec, appliesTo } = header;

  if (spec.bundleRef !== undefined) {
    const clash = CONTENT_FIELDS.find((f) => spec[f] !== undefined);
    if (clash !== undefined) {
      return fail('InvalidSpec', `spec.${clash}`, `spec.bundleRef is mutually exclusive with spec.${clash}; remove one of them`);
    }
    return fail(
      'InvalidRef',
      'spec.bundleRef',
      'spec.bundleRef needs an OCI registry and cosign verification, which this offline compiler does not do; use inline content or let the controller resolve the bundle',
    );
  }

  const mode = checkEnforcement(spec.enforcement);
  if (mode) return mode;
  const unrecorded = dryRunUnrecordedField(spec);
  if (unrecorded) return fail('InvalidSpec', unrecorded.field, unrecorded.message);
  const tb = spec.tokenBudget;
  if (tb !== undefined) {
    for (const k of ['perRequestTokens', 'dailyTokens', 'monthlyTokens'] as const) {
      const bad = checkUint(tb[k], `spec.tokenBudget.${k}`);
      if (bad) return bad;
    }
  }

  const cs = spec.contentSafety;
  const mp = spec.modelPreference;
  if (mp !== undefined) {
    if (!isObject(mp.primary))
      return fail('InvalidSpec', 'spec.modelPreference.primary', 'spec.modelPreference.primary {provider, deployment} is required');
    if (mp.fallback !== undefined && (!Array.isArray(mp.fallback) || !mp.fallback.every(isObject))) {
      return fail('InvalidSpec', 'spec.modelPreference.fallback', 'spec.modelPreference.fallback must be a list of {provider, deployment}');
    }
  }
  if (spec.guardrails !== undefined && (!Array.isArray(spec.guardrails) || !spec.guardrails.every(isObject))) {
    return fail('InvalidSpec', 'spec.guardrails', 'spec.guardrails must be a list of {provider, applyTo}');
  }
  const compiled = {
    appliesTo: {
      sandboxName: orNull(appliesTo.sandboxName),
      sandboxMatchLabels: sortedLabels(appliesTo.sandboxMatchLabels),
      action: orNull(appliesTo.action),
    },
    tokenBudget:
      tb === undefined
        ? null
        : { perRequestTokens: orNull(tb.perRequestTokens), dailyTokens: orNull(tb.dailyTokens), monthlyTokens: orNull(tb.monthlyTokens) },
    contentSafety:
      cs === undefined
        ? null
        : {
            hate: orNull(cs.hate),
            selfHarm: orNull(cs.selfHarm),
            sexual: orNull(cs.sexual),
            violence: orNull(cs.violence),
            requirePromptShields: orNull(cs.requirePromptShields),
          },
    modelPreference:
      mp === undefined
        ? null
        : {
            primary: { provider: mp.primary.provider, deployment: mp.primary.deployment },
            fallback: (mp.fallback ?? []).map((f) => ({ provider: f.provider, deployment: f.deployment })),
          },
    provider: orNull(spec.provider),
    guardrails: spec.guardrails === undefined ? null : spec.guardrails.map((g) => ({ provider: g.provider, applyTo: orNull(g.applyTo) })),
    displayName: orNull(spec.displayName),
    // ADR 0050: written only for a dry-run policy, so an enforced policy's bytes (and digest) are as before.
    ...(spec.enforcement === 'DryRun' ? { enforcement: 'DryRun' } : {}),
  };

  const body = JSON.stringify(compiled);
  const compiledDigest = canonicalDigest(INFERENCE_POLICY_FILENAME, body);
  const vh = versionHash(body);
  return {
    ok: true,
    body,
    compiledDigest,
    versionHash: vh,
    configMap: profileConfigMap(
      INFERENCE_POLICY_KIND.configMap,
      { name, namespace: policy.metadata.namespace },
      {
        [INFERENCE_POLICY_VERSION_HASH_ANNOTATION]: vh,
        [INFERENCE_POLICY_DIGEST_ANNOTATION]: compiledDigest,
        ...generationAnnotation(policy.metadata.generation),
      },
      { [INFERENCE_POLICY_FILENAME]: body },
    ),
  };
}

/** The InferencePolicy descriptor. */
export const INFERENCE_POLICY_KIND: ProfileKind<InferencePolicyInput, CompiledInferencePolicy, LoadOutcome<InferenceRules>> = {
  kind: 'InferencePolicy',
  resource: INFERENCE_POLICY,
  finalizer: 'kars.azure.com/inferencepolicy-cleanup',
  fieldManager: 'kars-controller/inferencepolicy',
  statusManager: 'kars-controller/inferencepolicy-status',
  configMap: {
    ...profileNaming('inferencepolicy-'),
    policyLabel: INFERENCE_POLICY_LABEL,
    artifact: 'inference-policy-profile',
    bodyKey: INFERENCE_POLICY_FILENAME,
  },
  echoKinds: ['InferencePolicy'],
  statusDigestKind: 'InferencePolicy',
  referencedBy: (sandbox) => sandbox.spec?.inferenceRef?.name || undefined,
  validate: validateInferencePolicySpec,
  compile: compileInferencePolicy,
  status: (c) => ({
    configMap: c.configMap,
    digest: c.compiledDigest,
    expect: [{ kind: 'InferencePolicy', digest: c.compiledDigest }],
    extra: { versionHash: c.versionHash, profileConfigMapRef: { name: c.configMap.metadata.name } },
  }),
  load: (name, data, source, caps) => {
    const o = inferenceOutcome(
      data?.[INFERENCE_POLICY_FILENAME],
      INFERENCE_POLICY_FILENAME,
      `${source}/${INFERENCE_POLICY_FILENAME}`,
      caps,
    );
    return o.kind === 'loaded' ? { ...o, name } : o;
  },
  echoesOf: (outcome) => [{ kind: 'InferencePolicy', outcome }],
};
