import { Option } from 'commander';
import type { Command } from 'commander';
import { INFERENCE_POLICY } from '@kars/policy-api';
import type { InferencePolicy, InferencePolicySpec, ModelRef } from '@kars/policy-api';
import { collect, wholeNumber } from '../lib/flags.js';
import { CliError } from '../lib/output.js';
import { policyCommand, policyStatusOf } from '../lib/policy-command.js';
import type { PolicyApplyFlags } from '../lib/policy-command.js';
import { appliesToWith, overlaySection } from './spec-overlay.js';

interface ApplyFlags extends PolicyApplyFlags {
  sandbox?: string;
  action?: string;
  sandboxLabel?: string[];
  tokenBudget?: number | string;
  monthlyTokens?: number | string;
  perRequestTokens?: number | string;
  model?: string;
  provider?: string;
  fallback?: string[];
  contentSafetySeverity?: string;
  requirePromptShields?: boolean;
  displayName?: string;
}

const CONTENT_FLAGS = [
  'tokenBudget',
  'monthlyTokens',
  'perRequestTokens',
  'model',
  'contentSafetySeverity',
  'requirePromptShields',
  'fallback',
  'provider',
] as const;

function parseModelRef(v: string, flag: string): ModelRef {
  const i = v.indexOf(':');
  if (i <= 0 || i === v.length - 1) throw new CliError(`${flag} "${v}" must be provider:deployment (e.g. azure-openai:gpt-4o-mini)`);
  return { provider: v.slice(0, i), deployment: v.slice(i + 1) };
}

/** The spec `apply` writes: the file's spec (or the existing one, or empty), with every given flag laid over it. */
export function inferenceSpecFrom(base: InferencePolicySpec | undefined, f: ApplyFlags): InferencePolicySpec {
  const spec: InferencePolicySpec = structuredClone(base ?? { appliesTo: {} });
  spec.appliesTo = appliesToWith(spec.appliesTo, { sandboxName: f.sandbox, action: f.action }, f.sandboxLabel);
  overlaySection(spec, 'tokenBudget', { dailyTokens: f.tokenBudget, monthlyTokens: f.monthlyTokens, perRequestTokens: f.perRequestTokens });
  if (f.model !== undefined) {
    const provider = f.provider ?? spec.modelPreference?.primary.provider ?? 'azure-openai';
    spec.modelPreference = { ...(spec.modelPreference ?? {}), primary: { provider, deployment: f.model } };
  }
  if (f.fallback !== undefined) {
    if (spec.modelPreference === undefined) throw new CliError('--fallback needs a primary model: pass --model DEPLOYMENT too');
    spec.modelPreference = { ...spec.modelPreference, fallback: f.fallback.map((v) => parseModelRef(v, '--fallback')) };
  }
  if (f.provider !== undefined) spec.provider = f.provider as NonNullable<InferencePolicySpec['provider']>;
  const severity = f.contentSafetySeverity; // one level for all four categories
  overlaySection(spec, 'contentSafety', {
    hate: severity,
    selfHarm: severity,
    sexual: severity,
    violence: severity,
    requirePromptShields: f.requirePromptShields,
  });
  if (f.displayName !== undefined) spec.displayName = f.displayName;
  return spec;
}

function modelOf(ip: InferencePolicy): string {
  const p = ip.spec.modelPreference?.primary;
  return p ? `${p.provider}/${p.deployment}` : '-';
}

/** `kars inferencepolicy|ip apply|get|list|delete`, straight against the API (no kubectl). */
export function inferencePolicyCommand(): Command {
  return policyCommand<InferencePolicy, ApplyFlags>({
    resource: INFERENCE_POLICY,
    command: 'inferencepolicy',
    alias: 'ip',
    plural: 'InferencePolicies',
    description: 'manage InferencePolicies (token budgets, content safety, model routing)',
    applyDescription: 'create or update an InferencePolicy; flags override fields of --filename or of the existing policy',
    fromFileHelp: 'YAML or JSON file with an InferencePolicy (its spec replaces the current one)',
    addFieldFlags: (c) =>
      c
        .option('--sandbox <name>', 'appliesTo.sandboxName')
        .addOption(new Option('--action <action>', 'appliesTo.action').choices(['chat', 'responses', 'image', 'embeddings', '*']))
        .option('--sandbox-label <k=v>', 'appliesTo.sandboxMatchLabels (repeatable)', collect)
        .option('--token-budget <daily>', 'tokenBudget.dailyTokens', wholeNumber)
        .option('--monthly-tokens <n>', 'tokenBudget.monthlyTokens', wholeNumber)
        .option('--per-request-tokens <n>', 'tokenBudget.perRequestTokens', wholeNumber)
        .option('--model <deployment>', 'modelPreference.primary.deployment')
        .addOption(
          new Option('--provider <tag>', 'provider (and the primary model provider)').choices([
            'azure-openai',
            'anthropic',
            'ollama',
            'bedrock',
          ]),
        )
        .option('--fallback <provider:deployment>', 'modelPreference.fallback (repeatable, in order)', collect)
        .addOption(
          new Option('--content-safety-severity <level>', 'maximum tolerated severity for all four categories').choices([
            'Safe',
            'Low',
            'Medium',
            'High',
          ]),
        )
        .option('--require-prompt-shields', 'contentSafety.requirePromptShields: true')
        .option('--display-name <text>', 'displayName'),
    anyFieldFlag: (f) =>
      f.sandbox !== undefined ||
      f.action !== undefined ||
      f.sandboxLabel !== undefined ||
      f.displayName !== undefined ||
      CONTENT_FLAGS.some((k) => f[k] !== undefined),
    checkCreate: (f, ctx, name) => {
      if (!CONTENT_FLAGS.some((k) => f[k] !== undefined))
        throw new CliError(
          `InferencePolicy ${ctx.namespace}/${name} does not exist: to create it, pass -f FILE or at least one of --model, --token-budget, --monthly-tokens, --per-request-tokens, --content-safety-severity, --require-prompt-shields`,
        );
    },
    specFrom: inferenceSpecFrom,
    getDescription: 'show one InferencePolicy',
    getLines: (ip) => {
      const s = ip.spec;
      const tb = s.tokenBudget;
      const cs = s.contentSafety;
      return [
        `Applies to:       ${s.appliesTo.sandboxName ? `sandbox ${s.appliesTo.sandboxName}` : 'any sandbox'}${Object.keys(s.appliesTo.sandboxMatchLabels ?? {}).length > 0 ? ` with labels ${JSON.stringify(s.appliesTo.sandboxMatchLabels)}` : ''}, action ${s.appliesTo.action ?? '*'}`,
        `Token budget:     per request ${tb?.perRequestTokens ?? '-'}, daily ${tb?.dailyTokens ?? '-'}, monthly ${tb?.monthlyTokens ?? '-'}`,
        `Content safety:   ${cs ? `hate ${cs.hate ?? '-'}, selfHarm ${cs.selfHarm ?? '-'}, sexual ${cs.sexual ?? '-'}, violence ${cs.violence ?? '-'}, prompt shields ${cs.requirePromptShields ? 'required' : 'not required'}` : '-'}`,
        `Model:            ${modelOf(ip)}${(s.modelPreference?.fallback ?? []).length > 0 ? `, fallback ${(s.modelPreference?.fallback ?? []).map((m) => `${m.provider}/${m.deployment}`).join(', ')}` : ''}`,
        `Status:           ${policyStatusOf(ip)}, generation ${ip.metadata.generation ?? 1}, observedGeneration ${ip.status?.observedGeneration ?? '-'}`,
        `Compiled digest:  ${ip.status?.compiledDigest ?? '-'}`,
        `Loaded digest:    ${ip.status?.loadedDigest ?? '-'}`,
        `Edit → enforced:  ${ip.status?.propagation?.lastMs !== undefined ? `${ip.status.propagation.lastMs} ms (last)` : '-'}`,
      ];
    },
    listDescription: 'list InferencePolicies',
    listColumns: ['SANDBOX', 'MODEL', 'DAILY'],
    listRow: (ip) => [ip.spec.appliesTo.sandboxName || '*', modelOf(ip), String(ip.spec.tokenBudget?.dailyTokens ?? '-')],
    deleteDescription: 'delete an InferencePolicy',
  });
}
