import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import type { KubeObject } from '@kars/kube-core';
import { TOOL_POLICY } from '@kars/policy-api';
import type { Condition, ToolPolicy, ToolPolicySpec } from '@kars/policy-api';
import { collect, labels, wholeNumber } from '../lib/flags.js';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import {
  condition,
  deleteObject,
  getRequired,
  parseTimeout,
  printEnforced,
  readObjectFile,
  refOf,
  upsert,
  waitEnforced,
} from '../lib/objects.js';
import { age, CliError, outputFormat, render, table } from '../lib/output.js';

interface ApplyFlags extends KubeFlags {
  fromFile?: string;
  tool?: string;
  mcpServer?: string;
  sandboxLabel?: string[];
  rps?: number | string;
  burst?: number | string;
  window?: string;
  dailyCap?: string;
  monthlyCap?: string;
  perTransferCap?: string;
  counterparty?: string[];
  approvalMode?: string;
  approvalThreshold?: string;
  approvalChannel?: string;
  displayName?: string;
  agtFile?: string;
  wait?: boolean;
  timeout: number;
}

const FIELD_FLAGS = [
  'tool',
  'mcpServer',
  'sandboxLabel',
  'rps',
  'burst',
  'window',
  'dailyCap',
  'monthlyCap',
  'perTransferCap',
  'counterparty',
  'approvalMode',
  'approvalThreshold',
  'approvalChannel',
  'displayName',
  'agtFile',
] as const;

/** The spec `apply` writes: the file's spec (or the existing one, or empty), with every given flag laid over it. */
export function toolSpecFrom(base: ToolPolicySpec | undefined, f: ApplyFlags): ToolPolicySpec {
  const spec: ToolPolicySpec = structuredClone(base ?? { appliesTo: {} });
  const at = { ...(spec.appliesTo ?? {}) };
  if (f.tool !== undefined) at.tool = f.tool;
  if (f.mcpServer !== undefined) at.mcpServer = f.mcpServer;
  const lbl = labels(f.sandboxLabel, '--sandbox-label');
  if (lbl) at.sandboxMatchLabels = { ...(at.sandboxMatchLabels ?? {}), ...lbl };
  spec.appliesTo = at;
  if (f.rps !== undefined || f.burst !== undefined || f.window !== undefined) {
    const rl = { ...(spec.rateLimit ?? {}) } as Record<string, unknown>;
    if (f.rps !== undefined) rl['rps'] = f.rps;
    if (f.burst !== undefined) rl['burst'] = f.burst;
    if (f.window !== undefined) rl['window'] = f.window;
    spec.rateLimit = rl as NonNullable<ToolPolicySpec['rateLimit']>;
  }
  if (f.dailyCap !== undefined || f.monthlyCap !== undefined || f.perTransferCap !== undefined || f.counterparty !== undefined) {
    const c = { ...(spec.commerce ?? {}) };
    if (f.dailyCap !== undefined) c.dailyCap = f.dailyCap;
    if (f.monthlyCap !== undefined) c.monthlyCap = f.monthlyCap;
    if (f.perTransferCap !== undefined) c.perTransferCap = f.perTransferCap;
    if (f.counterparty !== undefined) c.counterpartyAllowlist = f.counterparty;
    spec.commerce = c;
  }
  if (f.approvalMode !== undefined || f.approvalThreshold !== undefined || f.approvalChannel !== undefined) {
    const a = { ...(spec.approval ?? {}) };
    if (f.approvalMode !== undefined) a.mode = f.approvalMode as NonNullable<typeof a.mode>;
    if (f.approvalThreshold !== undefined) a.threshold = f.approvalThreshold;
    if (f.approvalChannel !== undefined) a.channel = f.approvalChannel;
    spec.approval = a;
  }
  if (f.displayName !== undefined) spec.displayName = f.displayName;
  if (f.agtFile !== undefined) {
    let inline: string;
    try {
      inline = readFileSync(f.agtFile, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read --agt-file ${f.agtFile}: ${err instanceof Error ? err.message : String(err)}`);
    }
    spec.agtProfile = { inline };
  }
  return spec;
}

function statusOf(obj: { status?: { phase?: string; conditions?: Condition[] } }): string {
  const ready = condition(obj, 'Ready');
  return obj.status?.phase ? `${obj.status.phase}${ready && ready.status !== 'True' ? ` (${ready.reason})` : ''}` : 'Pending';
}

/** `kars toolpolicy|tp apply|get|list|delete`, straight against the API (no kubectl). */
export function toolPolicyCommand(): Command {
  const cmd = new Command('toolpolicy')
    .alias('tp')
    .description('manage ToolPolicies (which tools an agent may call, rate limits, approvals, AGT profile)');

  addKubeOptions(
    cmd
      .command('apply')
      .argument('[name]', 'policy name (default: metadata.name from --from-file)')
      .description('create or update a ToolPolicy; flags override fields of --from-file or of the existing policy')
      .option('-f, --from-file <file>', 'YAML or JSON file with a ToolPolicy (its spec replaces the current one)')
      .option('--tool <name>', 'appliesTo.tool ("*" = every tool)')
      .option('--mcp-server <name>', 'appliesTo.mcpServer')
      .option('--sandbox-label <k=v>', 'appliesTo.sandboxMatchLabels (repeatable)', collect)
      .option('--rps <n>', 'rateLimit.rps', wholeNumber)
      .option('--burst <n>', 'rateLimit.burst', wholeNumber)
      .option('--window <w>', 'rateLimit.window (e.g. 1m, 1h, 24h)')
      .option('--daily-cap <amount>', 'commerce.dailyCap, e.g. "USD 100.00"')
      .option('--monthly-cap <amount>', 'commerce.monthlyCap')
      .option('--per-transfer-cap <amount>', 'commerce.perTransferCap')
      .option('--counterparty <name>', 'commerce.counterpartyAllowlist (repeatable)', collect)
      .addOption(new Option('--approval-mode <mode>', 'approval.mode').choices(['never', 'always', 'aboveThreshold']))
      .option('--approval-threshold <amount>', 'approval.threshold')
      .option('--approval-channel <channel>', 'approval.channel')
      .option('--display-name <text>', 'displayName')
      .option('--agt-file <file>', 'AGT profile YAML to inline as agtProfile.inline (what routers echo)')
      .option('--wait', 'return once every router of every referencing sandbox enforces the edit (router echo), and print the time it took')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit code 2)', parseTimeout, 60),
  ).action(async (nameArg: string | undefined, f: ApplyFlags) => {
    const file = f.fromFile !== undefined ? (readObjectFile(f.fromFile, 'ToolPolicy') as unknown as ToolPolicy) : undefined;
    const name = nameArg ?? file?.metadata?.name;
    if (!name) throw new CliError('a name is required: kars tp apply NAME [flags] (or a file with metadata.name)');
    if (nameArg && file?.metadata?.name && file.metadata.name !== nameArg)
      throw new CliError(`the name "${nameArg}" does not match metadata.name "${file.metadata.name}" in ${f.fromFile ?? ''}`);
    if (f.namespace === undefined && file?.metadata?.namespace) f.namespace = file.metadata.namespace;
    const anyFlag = FIELD_FLAGS.some((k) => f[k] !== undefined);
    await withKube(f, async (ctx) => {
      const r = await upsert<ToolPolicy>(ctx, TOOL_POLICY, name, (existing) => {
        if (!file && existing && !anyFlag)
          throw new CliError('nothing to change: pass --from-file or at least one field flag (see kars tp apply --help)');
        return {
          spec: toolSpecFrom(file ? file.spec : existing?.spec, f),
          ...(file?.metadata?.labels ? { labels: file.metadata.labels } : {}),
          ...(file?.metadata?.annotations ? { annotations: file.metadata.annotations } : {}),
        };
      });
      process.stdout.write(`${refOf(TOOL_POLICY, name)} ${r.action}\n`);
      if (f.wait) printEnforced(TOOL_POLICY, await waitEnforced(ctx, TOOL_POLICY, r.obj, f.timeout * 1000), r.writtenAtMs);
    });
  });

  addKubeOptions(
    cmd
      .command('get')
      .argument('<name>')
      .description('show one ToolPolicy')
      .option('-o, --output <format>', 'pretty, yaml or json', 'pretty'),
  ).action(async (name: string, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['pretty', 'yaml', 'json'] as const, 'pretty');
    await withKube(f, async (ctx) => {
      const tp = await getRequired<ToolPolicy & KubeObject>(ctx, TOOL_POLICY, name);
      if (format !== 'pretty') return void process.stdout.write(render(tp, format));
      const s = tp.spec;
      const lines = [
        `Name:             ${name}`,
        `Namespace:        ${ctx.namespace}`,
        `Applies to:       tool ${s.appliesTo.tool ?? '*'}, MCP server ${s.appliesTo.mcpServer ?? '*'}${Object.keys(s.appliesTo.sandboxMatchLabels ?? {}).length > 0 ? `, sandbox labels ${JSON.stringify(s.appliesTo.sandboxMatchLabels)}` : ''}`,
        `Rate limit:       ${s.rateLimit ? `rps ${s.rateLimit.rps ?? '-'}, burst ${s.rateLimit.burst ?? '-'}, window ${s.rateLimit.window ?? '-'}` : '-'}`,
        `Approval:         ${s.approval ? `mode ${s.approval.mode ?? '-'}${s.approval.threshold ? `, threshold ${s.approval.threshold}` : ''}${s.approval.channel ? `, channel ${s.approval.channel}` : ''}` : '-'}`,
        `Commerce:         ${s.commerce ? `daily ${s.commerce.dailyCap ?? '-'}, monthly ${s.commerce.monthlyCap ?? '-'}, per transfer ${s.commerce.perTransferCap ?? '-'}` : '-'}`,
        `AGT profile:      ${s.agtProfile?.inline !== undefined ? `inline, ${s.agtProfile.inline.split('\n').length} lines` : s.agtProfile?.bundleRef ? 'bundle' : '-'}`,
        `Status:           ${statusOf(tp)}, generation ${tp.metadata.generation ?? 1}, observedGeneration ${tp.status?.observedGeneration ?? '-'}`,
        `Compiled digest:  ${tp.status?.compiledDigest ?? '-'}`,
        `Loaded digest:    ${tp.status?.loadedDigest ?? '-'}`,
      ];
      const ready = condition(tp, 'Ready');
      if (ready) lines.push(`Ready:            ${ready.status} (${ready.reason}) ${ready.message}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  });

  addKubeOptions(
    cmd.command('list').description('list ToolPolicies').option('-o, --output <format>', 'table, yaml or json', 'table'),
  ).action(async (f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['table', 'yaml', 'json'] as const, 'table');
    await withKube(f, async (ctx) => {
      const list = await ctx.client.list<ToolPolicy & KubeObject>(TOOL_POLICY, { namespace: ctx.namespace });
      if (format !== 'table') return void process.stdout.write(render(list, format));
      if (list.items.length === 0) return void process.stderr.write(`No ToolPolicies found in ${ctx.namespace} namespace.\n`);
      const rows = list.items.map((tp) => [
        tp.metadata.name ?? '',
        tp.spec.appliesTo.tool ?? '*',
        tp.spec.commerce?.dailyCap ?? '-',
        age(tp.metadata.creationTimestamp),
        statusOf(tp),
      ]);
      process.stdout.write(table(['NAME', 'TOOL', 'DAILYCAP', 'AGE', 'STATUS'], rows));
    });
  });

  addKubeOptions(
    cmd
      .command('delete')
      .argument('<name>')
      .description('delete a ToolPolicy')
      .option('--no-prompt', 'do not ask for confirmation on a terminal'),
  ).action(async (name: string, f: KubeFlags & { prompt: boolean }) => {
    await withKube(f, (ctx) => deleteObject(ctx, TOOL_POLICY, name, !f.prompt));
  });
  return cmd;
}
