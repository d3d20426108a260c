/**
 * The policy kinds, each declared once by its descriptor (ADR 0051). Adding a kind means adding its
 * descriptor file here and its tests; every consumer iterates these.
 */
export * from './descriptor.js';
export * from './inference-policy.js';
export * from './tool-policy.js';
export * from './egress-approval.js';

import { INFERENCE_POLICY_KIND } from './inference-policy.js';
import { TOOL_POLICY_KIND } from './tool-policy.js';

/** The kinds that compile to a ConfigMap per policy and are referred to by sandboxes, in a fixed order. */
export const PROFILE_KINDS = [INFERENCE_POLICY_KIND, TOOL_POLICY_KIND] as const;
