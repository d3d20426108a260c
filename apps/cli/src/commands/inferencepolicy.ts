import { Command, Option } from 'commander';
import { INFERENCE_POLICY } from '@kars/policy-api';
import type { Condition, InferencePolicy, InferencePolicySpec, ModelRef } from '@kars/policy-api';
import type { KubeObject } from '@kars/kube-core';
import { collect, labels, wholeNumber } from '../lib/flags.js';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import {
  parseTimeout,
  printEnforced,
  readObjectFile,
  refOf,
  upsert,
  waitEnforced,
  deleteObject,
  getRequired,
  condition,
} from '../lib/objects.js';
import { age, CliError, outputFormat, render, table } from '../lib/output.js';

interface ApplyFlags extends KubeFlags {
  fromFile?: string;
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
  wait?: boolean;
  timeout: number;
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
  const at = { ...(spec.appliesTo ?? {}) };
  if (f.sandbox !== undefined) at.sandboxName = f.sandbox;
  if (f.action !== undefined) at.action = f.action as NonNullable<typeof at.action>;
  const lbl = labels(f.sandboxLabel, '--sandbox-label');
  if (lbl) at.sandboxMatchLabels = { ...(at.sandboxMatchLabels ?? {}), ...lbl };
  spec.appliesTo = at;
  if (f.tokenBudget !== undefined || f.monthlyTokens !== undefined || f.perRequestTokens !== undefined) {
    const tb = { ...(spec.tokenBudget ?? {}) } as Record<string, unknown>;
    if (f.tokenBudget !== undefined) tb['dailyTokens'] = f.tokenBudget;
    if (f.monthlyTokens !== undefined) tb['monthlyTokens'] = f.monthlyTokens;
    if (f.perRequestTokens !== undefined) tb['perRequestTokens'] = f.perRequestTokens;
    spec.tokenBudget = tb as NonNullable<InferencePolicySpec['tokenBudget']>;
  }
  if (f.model !== undefined) {
    const provider = f.provider ?? spec.modelPreference?.primary.provider ?? 'azure-openai';
    spec.modelPreference = { ...(spec.modelPreference ?? {}), primary: { provider, deployment: f.model } };
  }
  if (f.fallback !== undefined) {
    if (spec.modelPreference === undefined) throw new CliError('--fallback needs a primary model: pass --model DEPLOYMENT too');
    spec.modelPreference = { ...spec.modelPreference, fallback: f.fallback.map((v) => parseModelRef(v, '--fallback')) };
  }
  if (f.provider !== undefined) spec.provider = f.provider as NonNullable<InferencePolicySpec['provider']>;
  if (f.contentSafetySeverity !== undefined || f.requirePromptShields !== undefined) {
    const cs = { ...(spec.contentSafety ?? {}) };
    if (f.contentSafetySeverity !== undefined) {
      const s = f.contentSafetySeverity as NonNullable<typeof cs.hate>;
      Object.assign(cs, { hate: s, selfHarm: s, sexual: s, violence: s });
    }
    if (f.requirePromptShields !== undefined) cs.requirePromptShields = f.requirePromptShields;
    spec.contentSafety = cs;
  }
  if (f.displayName !== undefined) spec.displayName = f.displayName;
  return spec;
}

function modelOf(ip: InferencePolicy): string {
  const p = ip.spec.modelPreference?.primary;
  return p ? `${p.provider}/${p.deployment}` : '-';
}

function statusOf(obj: { status?: { phase?: string; conditions?: Condition[] } }): string {
  const ready = condition(obj, 'Ready');
  return obj.status?.phase ? `${obj.status.phase}${ready && ready.status !== 'True' ? ` (${ready.reason})` : ''}` : 'Pending';
}

/** `kars inferencepolicy|ip apply|get|list|delete`, straight against the API (no kubectl). */
export function inferencePolicyCommand(): Command {
  const cmd = new Command('inferencepolicy')
    .alias('ip')
    .description('manage InferencePolicies (token budgets, content safety, model routing)');

  addKubeOptions(
    cmd
      .command('apply')
      .argument('[name]', 'policy name (default: metadata.name from --from-file)')
      .description('create or update an InferencePolicy; flags override fields of --from-file or of the existing policy')
      .option('-f, --from-file <file>', 'YAML or JSON file with an InferencePolicy (its spec replaces the current one)')
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
      .option('--display-name <text>', 'displayName')
      .option('--wait', 'return once every router of every referencing sandbox enforces the edit (router echo), and print the time it took')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit code 2)', parseTimeout, 60),
  ).action(async (nameArg: string | undefined, f: ApplyFlags) => {
    const file = f.fromFile !== undefined ? (readObjectFile(f.fromFile, 'InferencePolicy') as unknown as InferencePolicy) : undefined;
    const name = nameArg ?? file?.metadata?.name;
    if (!name) throw new CliError('a name is required: kars ip apply NAME [flags] (or a file with metadata.name)');
    if (nameArg && file?.metadata?.name && file.metadata.name !== nameArg)
      throw new CliError(`the name "${nameArg}" does not match metadata.name "${file.metadata.name}" in ${f.fromFile ?? ''}`);
    if (f.namespace === undefined && file?.metadata?.namespace) f.namespace = file.metadata.namespace;
    const anyFlag =
      f.sandbox !== undefined ||
      f.action !== undefined ||
      f.sandboxLabel !== undefined ||
      f.displayName !== undefined ||
      CONTENT_FLAGS.some((k) => f[k] !== undefined);
    await withKube(f, async (ctx) => {
      const r = await upsert<InferencePolicy>(ctx, INFERENCE_POLICY, name, (existing) => {
        if (!file && !existing && !CONTENT_FLAGS.some((k) => f[k] !== undefined))
          throw new CliError(
            `InferencePolicy ${ctx.namespace}/${name} does not exist: to create it, pass --from-file or at least one of --model, --token-budget, --monthly-tokens, --per-request-tokens, --content-safety-severity, --require-prompt-shields`,
          );
        if (!file && existing && !anyFlag)
          throw new CliError('nothing to change: pass --from-file or at least one field flag (see kars ip apply --help)');
        return {
          spec: inferenceSpecFrom(file ? file.spec : existing?.spec, f),
          ...(file?.metadata?.labels ? { labels: file.metadata.labels } : {}),
          ...(file?.metadata?.annotations ? { annotations: file.metadata.annotations } : {}),
        };
      });
      process.stdout.write(`${refOf(INFERENCE_POLICY, name)} ${r.action}\n`);
      if (f.wait) printEnforced(INFERENCE_POLICY, await waitEnforced(ctx, INFERENCE_POLICY, r.obj, f.timeout * 1000), r.writtenAtMs);
    });
  });

  addKubeOptions(
    cmd
      .command('get')
      .argument('<name>')
      .description('show one InferencePolicy')
      .option('-o, --output <format>', 'pretty, yaml or json', 'pretty'),
  ).action(async (name: string, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['pretty', 'yaml', 'json'] as const, 'pretty');
    await withKube(f, async (ctx) => {
      const ip = await getRequired<InferencePolicy & KubeObject>(ctx, INFERENCE_POLICY, name);
      if (format !== 'pretty') return void process.stdout.write(render(ip, format));
      const s = ip.spec;
      const tb = s.tokenBudget;
      const cs = s.contentSafety;
      const lines = [
        `Name:             ${name}`,
        `Namespace:        ${ctx.namespace}`,
        `Applies to:       ${s.appliesTo.sandboxName ? `sandbox ${s.appliesTo.sandboxName}` : 'any sandbox'}${Object.keys(s.appliesTo.sandboxMatchLabels ?? {}).length > 0 ? ` with labels ${JSON.stringify(s.appliesTo.sandboxMatchLabels)}` : ''}, action ${s.appliesTo.action ?? '*'}`,
        `Token budget:     per request ${tb?.perRequestTokens ?? '-'}, daily ${tb?.dailyTokens ?? '-'}, monthly ${tb?.monthlyTokens ?? '-'}`,
        `Content safety:   ${cs ? `hate ${cs.hate ?? '-'}, selfHarm ${cs.selfHarm ?? '-'}, sexual ${cs.sexual ?? '-'}, violence ${cs.violence ?? '-'}, prompt shields ${cs.requirePromptShields ? 'required' : 'not required'}` : '-'}`,
        `Model:            ${modelOf(ip)}${(s.modelPreference?.fallback ?? []).length > 0 ? `, fallback ${(s.modelPreference?.fallback ?? []).map((m) => `${m.provider}/${m.deployment}`).join(', ')}` : ''}`,
        `Status:           ${statusOf(ip)}, generation ${ip.metadata.generation ?? 1}, observedGeneration ${ip.status?.observedGeneration ?? '-'}`,
        `Compiled digest:  ${ip.status?.compiledDigest ?? '-'}`,
        `Loaded digest:    ${ip.status?.loadedDigest ?? '-'}`,
        `Edit → enforced:  ${ip.status?.propagation?.lastMs !== undefined ? `${ip.status.propagation.lastMs} ms (last)` : '-'}`,
      ];
      const ready = condition(ip, 'Ready');
      if (ready) lines.push(`Ready:            ${ready.status} (${ready.reason}) ${ready.message}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  });

  addKubeOptions(
    cmd.command('list').description('list InferencePolicies').option('-o, --output <format>', 'table, yaml or json', 'table'),
  ).action(async (f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['table', 'yaml', 'json'] as const, 'table');
    await withKube(f, async (ctx) => {
      const list = await ctx.client.list<InferencePolicy & KubeObject>(INFERENCE_POLICY, { namespace: ctx.namespace });
      if (format !== 'table') return void process.stdout.write(render(list, format));
      if (list.items.length === 0) return void process.stderr.write(`No InferencePolicies found in ${ctx.namespace} namespace.\n`);
      const rows = list.items.map((ip) => [
        ip.metadata.name ?? '',
        ip.spec.appliesTo.sandboxName || '*',
        modelOf(ip),
        String(ip.spec.tokenBudget?.dailyTokens ?? '-'),
        age(ip.metadata.creationTimestamp),
        statusOf(ip),
      ]);
      process.stdout.write(table(['NAME', 'SANDBOX', 'MODEL', 'DAILY', 'AGE', 'STATUS'], rows));
    });
  });

  addKubeOptions(
    cmd
      .command('delete')
      .argument('<name>')
      .description('delete an InferencePolicy')
      .option('--no-prompt', 'do not ask for confirmation on a terminal'),
  ).action(async (name: string, f: KubeFlags & { prompt: boolean }) => {
    await withKube(f, (ctx) => deleteObject(ctx, INFERENCE_POLICY, name, !f.prompt));
  });
  return cmd;
}
