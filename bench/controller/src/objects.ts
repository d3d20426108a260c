// The objects the benchmark creates and reads: InferencePolicies, KarsSandboxes, the compiled
// ConfigMaps.

import type { KubeObject } from '@kars/kube-core';
import { INFERENCE_POLICY } from '@kars/policy-api';
export { dailyOf, isReadyFor } from '../../lib/dist/policy.js';
export type { ConfigMapObject, PolicyObject } from '../../lib/dist/policy.js';

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
