/**
 * Valid sample objects of each kind, typed with the wire types. Tests here admit them through the CRD schemas,
 * so they double as proof that a value of the TS type is a value the API server accepts. Other packages' tests may
 * use them (`@kars/policy-api/testing`). Every call returns a fresh object.
 */
import { API_VERSION, type EgressApproval, type InferencePolicy, type KarsSandbox, type ToolPolicy } from '../types.js';

export const SAMPLE_DIGEST = `sha256:${'ab'.repeat(32)}`;

/** An InferencePolicy that sets every content field. */
export function sampleInferencePolicy(name = 'chat-default', namespace = 'default'): InferencePolicy {
  return {
    apiVersion: API_VERSION,
    kind: 'InferencePolicy',
    metadata: { name, namespace },
    spec: {
      appliesTo: { sandboxName: 'alice', sandboxMatchLabels: { team: 'a' }, action: 'chat' },
      tokenBudget: { perRequestTokens: 4096, dailyTokens: 100000, monthlyTokens: 2000000 },
      contentSafety: { hate: 'Low', selfHarm: 'Safe', sexual: 'Low', violence: 'Medium', requirePromptShields: true },
      modelPreference: {
        primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
        fallback: [{ provider: 'anthropic', deployment: 'claude' }],
      },
      provider: 'azure-openai',
      guardrails: [{ provider: 'openai-moderation', applyTo: 'both' }],
      displayName: 'Default chat policy',
    },
  };
}

/** An InferencePolicy whose content comes from a signed bundle. */
export function sampleBundleInferencePolicy(name = 'bundled', namespace = 'default'): InferencePolicy {
  return {
    apiVersion: API_VERSION,
    kind: 'InferencePolicy',
    metadata: { name, namespace },
    spec: {
      appliesTo: { sandboxName: 'alice' },
      bundleRef: { registry: 'example.azurecr.io', repository: 'policies/inference', digest: SAMPLE_DIGEST, tag: 'v1' },
    },
  };
}

export const SAMPLE_AGT_YAML = 'apiVersion: governance.toolkit/v1\nkind: PolicyProfile\nrules:\n  - action: "tool:*"\n    effect: allow\n';

/** A ToolPolicy with commerce caps, a rate limit, approval and an inline AGT profile. */
export function sampleToolPolicy(name = 'kars-default', namespace = 'default'): ToolPolicy {
  return {
    apiVersion: API_VERSION,
    kind: 'ToolPolicy',
    metadata: { name, namespace },
    spec: {
      appliesTo: { tool: '*', mcpServer: 'payments' },
      commerce: { dailyCap: 'USD 100.00', monthlyCap: 'USD 2000', perTransferCap: 'USD 25.5', counterpartyAllowlist: ['merchant-a'] },
      rateLimit: { rps: 5, burst: 10, window: '1m' },
      approval: { mode: 'aboveThreshold', threshold: 'USD 50.00', channel: 'teams' },
      displayName: 'Default tools',
      agtProfile: { inline: SAMPLE_AGT_YAML },
    },
  };
}

/** An EgressApproval widening one sandbox for an hour. */
export function sampleEgressApproval(name = 'alice-extra', namespace = 'default'): EgressApproval {
  return {
    apiVersion: API_VERSION,
    kind: 'EgressApproval',
    metadata: { name, namespace },
    spec: {
      sandbox: 'alice',
      hosts: [{ host: 'example.com' }, { host: 'api.example.org', port: 8443 }],
      reason: 'Incident 42:\tfetch the\nrunbook',
      ticket: 'INC-42',
      ttl: 'PT1H',
    },
  };
}

/** A KarsSandbox bound to an InferencePolicy and a ToolPolicy, with a baseline allowlist. */
export function sampleKarsSandbox(name = 'alice', namespace = 'default'): KarsSandbox {
  return {
    apiVersion: API_VERSION,
    kind: 'KarsSandbox',
    metadata: { name, namespace },
    spec: {
      inferenceRef: { name: 'chat-default' },
      governance: { enabled: true, toolPolicyRef: { name: 'kars-default' } },
      networkPolicy: { allowedEndpoints: [{ host: 'login.microsoftonline.com' }, { host: 'pypi.org', port: 443 }] },
    },
  };
}

/**
 * The sample makers by name, one valid sample of each kind (an InferencePolicy twice: with content
 * and from a bundle). Iterate it where a test must cover every kind, so a new kind is covered once
 * it is added here.
 */
export const samples = {
  inferencePolicy: sampleInferencePolicy,
  bundleInferencePolicy: sampleBundleInferencePolicy,
  toolPolicy: sampleToolPolicy,
  egressApproval: sampleEgressApproval,
  karsSandbox: sampleKarsSandbox,
} as const;
