// The objects the benchmark creates and reads, and small helpers around the API.

import type { KubeObject, Logger } from '@kars/kube-core';
import { INFERENCE_POLICY } from '@kars/policy-api';
export { dailyOf, isReadyFor } from '../../lib/dist/policy.js';
export type { ConfigMapObject, PolicyObject } from '../../lib/dist/policy.js';
import { errMsg, sleep } from '../../lib/dist/index.js';
import { nowMs } from './util.js';

export const API_VERSION = `${INFERENCE_POLICY.group}/${INFERENCE_POLICY.version}`;
const MONTHLY = 1_000_000_000_000; // room for every dailyTokens the edits write (CEL: monthly ≥ daily)
export const EDIT_NS = 'bench-edit';
export const POLICY = 'edited';
export const SANDBOX = 'sb';
export const INSTANCE = 'sb-0';

/** The edited InferencePolicy, with `daily` tokens a day. */
export const inferencePolicy = (daily: number): KubeObject => ({
  apiVersion: API_VERSION,
  kind: 'InferencePolicy',
  metadata: { name: POLICY, namespace: EDIT_NS },
  spec: {
    appliesTo: { sandboxName: SANDBOX },
    tokenBudget: { perRequestTokens: 32_000, dailyTokens: daily, monthlyTokens: MONTHLY },
    contentSafety: { hate: 'Low', selfHarm: 'Low', sexual: 'Low', violence: 'Medium', requirePromptShields: true },
    displayName: 'bench policy',
  },
});

/** One of the watched ConfigMaps of the drop phase. */
export const configMap = (ns: string, name: string, i: number): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: ns, labels: { app: 'kars-bench' } },
  data: { v: 'initial', index: String(i), payload: 'x'.repeat(200) },
});

/** A logger that drops debug and info, and hands warnings and errors to `sink` as one line. */
export const quietLog = (sink: (line: string) => void): Logger => {
  const l: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (o, msg) => sink(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    error: (o, msg) => sink(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    child: () => l,
    isLevelEnabled: (level) => level !== 'debug' && level !== 'info',
  };
  return l;
};

/** Retry `fn` until it resolves, for up to `ms` (a just-Established CRD's schema can lag on kube-apiserver). */
export async function retry<T>(what: string, ms: number, fn: () => Promise<T>): Promise<T> {
  const deadline = nowMs() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (nowMs() > deadline) throw new Error(`${what}: ${errMsg(err)}`);
      await sleep(200);
    }
  }
}

/** Whether `err` is a 409 / AlreadyExists. */
export const isConflict = (err: unknown): boolean =>
  /\b409\b|AlreadyExists|already exists/i.test(errMsg(err)) ||
  (typeof err === 'object' && err !== null && 'status' in err && err.status === 409);
