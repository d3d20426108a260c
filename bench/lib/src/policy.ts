/**
 * `bench/lib/dist/policy.js`: what the benchmarks that edit InferencePolicies (bench/controller,
 * bench/targets) read back: the watched objects' shapes, the dailyTokens a compiled ConfigMap
 * holds, and whether a policy is Ready at its generation. A module of its own, not re-exported by
 * the index: it loads policy-compiler, which the load-generator children must not.
 */
import type { KubeObject } from '@kars/kube-core';
import type { InferencePolicyStatus } from '@kars/policy-api';
import { INFERENCE_POLICY_KIND } from '@kars/policy-compiler';

/** A ConfigMap as a benchmark's watch holds it. */
export interface ConfigMapObject extends KubeObject {
  data?: Record<string, string>;
}

/** An InferencePolicy as a benchmark's watch holds it (the fields it reads). */
export interface PolicyObject extends KubeObject {
  spec?: { tokenBudget?: { dailyTokens?: number } };
  status?: InferencePolicyStatus;
}

/** The dailyTokens of a compiled InferencePolicy ConfigMap; undefined when absent or unreadable. */
export function dailyOf(cm: ConfigMapObject | undefined): number | undefined {
  const body = cm?.data?.[INFERENCE_POLICY_KIND.configMap.bodyKey];
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
