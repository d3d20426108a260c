/**
 * What every compiled ConfigMap shares (kars-wire-contract.md §2.6): the managed-by and artifact
 * labels, the policy-generation annotation, and the object shape applied with server-side apply
 * (`force: true`). No owner references here: the controller adds them (ADR 0032).
 *
 * What differs per kind (names, keys, labels, annotations, field managers) is in that kind's
 * descriptor under `kinds/`, and nowhere else.
 */
import type { WrittenObjectMeta } from '@kars/kube-core';
import type { ProfileConfigMap } from './kinds/descriptor.js';

/** `app.kubernetes.io/managed-by` value on every compiled ConfigMap. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'kars-controller';
export const ARTIFACT_LABEL = 'kars.azure.com/artifact';

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

/** A ConfigMap as applied with SSA. */
export interface CompiledConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: WrittenObjectMeta;
  data: Record<string, string>;
}

/** The generation annotation for `generation`, or nothing when it is unknown. */
export function generationAnnotation(generation: number | undefined): Record<string, string> {
  return generation === undefined ? {} : { [POLICY_GENERATION_ANNOTATION]: String(generation) };
}

/**
 * A compiled ConfigMap in the shape server-side apply takes: labelled managed-by kars-controller,
 * then `labels`, then its artifact (the label order every compiled ConfigMap has).
 */
export function compiledConfigMap(args: {
  name: string;
  namespace: string;
  artifact: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  data: Record<string, string>;
}): CompiledConfigMap {
  const labels = { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, ...args.labels, [ARTIFACT_LABEL]: args.artifact };
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: args.name, namespace: args.namespace, labels, annotations: args.annotations },
    data: args.data,
  };
}

/**
 * The ConfigMap compiled from the policy `policy` (in `namespace`, default `default`) of a profile
 * kind: named, and labelled with the policy and the artifact, as the kind's descriptor says.
 */
export function profileConfigMap(
  cm: Pick<ProfileConfigMap, 'name' | 'policyLabel' | 'artifact'>,
  policy: { name: string; namespace: string | undefined },
  annotations: Record<string, string>,
  data: Record<string, string>,
): CompiledConfigMap {
  const { name } = policy;
  return compiledConfigMap({
    name: cm.name(name),
    namespace: policy.namespace ?? 'default',
    artifact: cm.artifact,
    labels: { [cm.policyLabel]: name },
    annotations,
    data,
  });
}
