// The objects the benchmark creates and reads: InferencePolicies, KarsSandboxes, the compiled
// ConfigMaps.

import type { KubeObject } from '@kars/kube-core';
import { INFERENCE_POLICY } from '@kars/policy-api';
import type { InferencePolicyStatus } from '@kars/policy-api';

/** A ConfigMap as the bench's watch holds it. */
export interface ConfigMapObject extends KubeObject {
  data?: Record<string, string>;
}

/** An InferencePolicy as the bench's watch holds it (the fields it reads). */
export interface PolicyObject extends KubeObject {
  spec?: { tokenBudget?: { dailyTokens?: number } };
  status?: InferencePolicyStatus;
}

const API_VERSION = `${INFERENCE_POLICY.group}/${INFERENCE_POLICY.version}`;
/** Room for every dailyTokens value the edits write (the CRD's CEL rule wants monthly ≥ daily). */
const MONTHLY = 1_000_000_000_000;

/** InferencePolicy ns/name for the sandbox named `sandbox` ('' = any), with `daily` tokens a day. */
export function inferencePolicy(ns: string, name: string, sandbox: string, daily: number): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'InferencePolicy',
    metadata: { name, namespace: ns },
    spec: {
      appliesTo: { sandboxName: sandbox },
      tokenBudget: { perRequestTokens: 32_000, dailyTokens: daily, monthlyTokens: MONTHLY },
      contentSafety: { hate: 'Low', selfHarm: 'Low', sexual: 'Low', violence: 'Medium', requirePromptShields: true },
      modelPreference: {
        primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
        fallback: [{ provider: 'azure-openai', deployment: 'gpt-4o-mini' }],
      },
      displayName: `bench policy ${name}`,
    },
  };
}

/** KarsSandbox ns/name referencing the InferencePolicy `policy`. */
export function sandbox(ns: string, name: string, policy: string): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'KarsSandbox',
    metadata: { name, namespace: ns },
    spec: { inferenceRef: { name: policy }, networkPolicy: { allowedEndpoints: [{ host: 'api.example.com' }] } },
  };
}

/** The dailyTokens of a compiled InferencePolicy ConfigMap; undefined when absent or unreadable. */
export function dailyOf(cm: ConfigMapObject | undefined): number | undefined {
  const body = cm?.data?.['inference-policy.json'];
  if (body === undefined) return undefined;
  try {
    return (JSON.parse(body) as { tokenBudget?: { dailyTokens?: number } } | null)?.tokenBudget?.dailyTokens;
  } catch {
    return undefined;
  }
}

/** Ready at its generation, with every router's echo confirming the compiled digest. */
export const isReadyFor = (o: PolicyObject | undefined): boolean => {
  const st = o?.status;
  return (
    !!st &&
    st.phase === 'Ready' &&
    st.observedGeneration === o.metadata.generation &&
    typeof st.loadedDigest === 'string' &&
    st.loadedDigest === st.compiledDigest
  );
};
