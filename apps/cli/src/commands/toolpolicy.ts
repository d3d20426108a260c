import { readFileSync } from 'node:fs';
import { Option } from 'commander';
import type { Command } from 'commander';
import { TOOL_POLICY } from '@kars/policy-api';
import type { ToolPolicy, ToolPolicySpec } from '@kars/policy-api';
import { collect, wholeNumber } from '../lib/flags.js';
import { CliError } from '../lib/output.js';
import { policyCommand, policyStatusOf } from '../lib/policy-command.js';
import type { PolicyApplyFlags } from '../lib/policy-command.js';
import { appliesToWith, overlaySection } from './spec-overlay.js';
import { addPinCommand } from './toolpolicy-pin.js';

interface ApplyFlags extends PolicyApplyFlags {
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
  spec.appliesTo = appliesToWith(spec.appliesTo, { tool: f.tool, mcpServer: f.mcpServer }, f.sandboxLabel);
  overlaySection(spec, 'rateLimit', { rps: f.rps, burst: f.burst, window: f.window });
  overlaySection(spec, 'commerce', {
    dailyCap: f.dailyCap,
    monthlyCap: f.monthlyCap,
    perTransferCap: f.perTransferCap,
    counterpartyAllowlist: f.counterparty,
  });
  overlaySection(spec, 'approval', { mode: f.approvalMode, threshold: f.approvalThreshold, channel: f.approvalChannel });
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

/** `kars toolpolicy|tp apply|get|list|delete`, straight against the API (no kubectl). */
export function toolPolicyCommand(): Command {
  const cmd = policyCommand<ToolPolicy, ApplyFlags>({
    resource: TOOL_POLICY,
    command: 'toolpolicy',
    alias: 'tp',
    plural: 'ToolPolicies',
    description: 'manage ToolPolicies (which tools an agent may call, rate limits, approvals, AGT profile)',
    applyDescription: 'create or update a ToolPolicy; flags override fields of --filename or of the existing policy',
    fromFileHelp: 'YAML or JSON file with a ToolPolicy (its spec replaces the current one)',
    addFieldFlags: (c) =>
      c
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
        .option('--agt-file <file>', 'AGT profile YAML to inline as agtProfile.inline (what routers echo)'),
    anyFieldFlag: (f) => FIELD_FLAGS.some((k) => f[k] !== undefined),
    specFrom: toolSpecFrom,
    getDescription: 'show one ToolPolicy',
    getLines: (tp) => {
      const s = tp.spec;
      return [
        `Applies to:       tool ${s.appliesTo.tool ?? '*'}, MCP server ${s.appliesTo.mcpServer ?? '*'}${Object.keys(s.appliesTo.sandboxMatchLabels ?? {}).length > 0 ? `, sandbox labels ${JSON.stringify(s.appliesTo.sandboxMatchLabels)}` : ''}`,
        `Rate limit:       ${s.rateLimit ? `rps ${s.rateLimit.rps ?? '-'}, burst ${s.rateLimit.burst ?? '-'}, window ${s.rateLimit.window ?? '-'}` : '-'}`,
        `Approval:         ${s.approval ? `mode ${s.approval.mode ?? '-'}${s.approval.threshold ? `, threshold ${s.approval.threshold}` : ''}${s.approval.channel ? `, channel ${s.approval.channel}` : ''}` : '-'}`,
        `Commerce:         ${s.commerce ? `daily ${s.commerce.dailyCap ?? '-'}, monthly ${s.commerce.monthlyCap ?? '-'}, per transfer ${s.commerce.perTransferCap ?? '-'}` : '-'}`,
        `AGT profile:      ${s.agtProfile?.inline !== undefined ? `inline, ${s.agtProfile.inline.split('\n').length} lines` : s.agtProfile?.bundleRef ? 'bundle' : '-'}`,
        `Tool pins:        ${s.toolPins && s.toolPins.length > 0 ? `${s.toolPins.length} (${s.toolPins.map((p) => `${p.server ?? '*'}/${p.name}`).join(', ')})` : '-'}, unpinned tools ${s.unpinnedTools ?? 'Allow'}`,
        `Status:           ${policyStatusOf(tp)}, generation ${tp.metadata.generation ?? 1}, observedGeneration ${tp.status?.observedGeneration ?? '-'}`,
        `Compiled digest:  ${tp.status?.compiledDigest ?? '-'}`,
        `Loaded digest:    ${tp.status?.loadedDigest ?? '-'}`,
      ];
    },
    listDescription: 'list ToolPolicies',
    listColumns: ['TOOL', 'DAILYCAP'],
    listRow: (tp) => [tp.spec.appliesTo.tool ?? '*', tp.spec.commerce?.dailyCap ?? '-'],
    deleteDescription: 'delete a ToolPolicy',
  });
  addPinCommand(cmd);
  return cmd;
}
