/**
 * The one `apply|get|list|delete` command shape for a kars policy kind (`kars ip`, `kars tp`):
 * argument parsing, the file/name/namespace rules, the upsert with its refusals, `--wait`, the
 * `get` layout, the `list` table and `delete`. A kind supplies only what differs: its flags, how
 * they build a spec, its `get` lines and its `list` columns.
 */
import { Command } from 'commander';
import type { KubeObject } from '@kars/kube-core';
import type { Condition, EnforcementMode, KarsObject, KarsResource } from '@kars/policy-api';
import { ENFORCEMENT_MODES } from '@kars/policy-api';
import { addFilenameOption, filenameOf } from './flags.js';
import type { FilenameFlags } from './flags.js';
import { addKubeOptions, withKube } from './kube.js';
import type { KubeContext, KubeFlags } from './kube.js';
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
} from './objects.js';
import { age, CliError, outputFormat, render, table } from './output.js';

/** Flags every `apply` has, besides the kind's own. */
export interface PolicyApplyFlags extends KubeFlags, FilenameFlags {
  wait?: boolean;
  timeout: number;
  /** `spec.enforcement` (ADR 0050). */
  enforcement?: EnforcementMode;
}

function enforcementFlag(v: string): EnforcementMode {
  const m = ENFORCEMENT_MODES.find((x) => x === v);
  if (m === undefined) throw new CliError(`--enforcement must be ${ENFORCEMENT_MODES.join(' or ')}, got "${v}"`);
  return m;
}

/** What one policy kind adds to the shared command shape. */
export interface PolicyKind<T extends KarsObject, F extends PolicyApplyFlags> {
  resource: KarsResource;
  /** Command name and alias (`inferencepolicy`, `ip`). */
  command: string;
  alias: string;
  /** The kind in plural, for the list's empty message (`InferencePolicies`). */
  plural: string;
  description: string;
  /** `apply`'s description and its `-f, --filename` help. */
  applyDescription: string;
  fromFileHelp: string;
  /** Add the kind's field flags (between `--filename` and `--wait`). */
  addFieldFlags(cmd: Command): Command;
  /** Whether any field flag was given. */
  anyFieldFlag(f: F): boolean;
  /** Refuse to create from flags alone when they cannot make a valid object (throw a CliError), or do nothing. */
  checkCreate?(f: F, ctx: KubeContext, name: string): void;
  /** The spec `apply` writes: `base` (the file's spec, or the existing one) with every given flag laid over it. */
  specFrom(base: T['spec'] | undefined, f: F): T['spec'];
  getDescription: string;
  /** The kind's `get` lines between `Namespace:` and `Ready:`. */
  getLines(obj: T & KubeObject): string[];
  listDescription: string;
  /** The list's columns between NAME and AGE/STATUS, and a row's values for them. */
  listColumns: string[];
  listRow(obj: T & KubeObject): string[];
  deleteDescription: string;
}

/** `Phase` or `Phase (Reason)` when not Ready, `Pending` before the controller has written a status. */
export function policyStatusOf(obj: { status?: { phase?: string; conditions?: Condition[] } }): string {
  const ready = condition(obj, 'Ready');
  return obj.status?.phase ? `${obj.status.phase}${ready && ready.status !== 'True' ? ` (${ready.reason})` : ''}` : 'Pending';
}

/** `kars <command>|<alias> apply|get|list|delete` for one policy kind, straight against the API (no kubectl). */
export function policyCommand<T extends KarsObject, F extends PolicyApplyFlags>(k: PolicyKind<T, F>): Command {
  const res = k.resource;
  const cmd = new Command(k.command).alias(k.alias).description(k.description);

  addKubeOptions(
    k
      .addFieldFlags(
        addFilenameOption(
          cmd.command('apply').argument('[name]', 'policy name (default: metadata.name from --filename)').description(k.applyDescription),
          k.fromFileHelp,
        ),
      )
      .option(
        '--enforcement <mode>',
        'spec.enforcement: Enforce, or DryRun (routers of the sandboxes appliesTo selects record what it would decide, and enforce nothing; ADR 0050)',
        enforcementFlag,
      )
      .option('--wait', 'return once every router of every referencing sandbox enforces the edit (router echo), and print the time it took')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit code 2)', parseTimeout, 60),
  ).action(async (nameArg: string | undefined, f: F) => {
    const path = filenameOf(f);
    const file = path !== undefined ? (readObjectFile(path, res.kind, f.namespace) as unknown as T) : undefined;
    const name = nameArg ?? file?.metadata?.name;
    if (!name) throw new CliError(`a name is required: kars ${k.alias} apply NAME [flags] (or a file with metadata.name)`);
    if (nameArg && file?.metadata?.name && file.metadata.name !== nameArg)
      throw new CliError(`the name "${nameArg}" does not match metadata.name "${file.metadata.name}" in ${path ?? ''}`);
    if (f.namespace === undefined && file?.metadata?.namespace) f.namespace = file.metadata.namespace;
    const anyFlag = k.anyFieldFlag(f) || f.enforcement !== undefined;
    await withKube(f, async (ctx) => {
      const r = await upsert<T>(ctx, res, name, (existing) => {
        if (!file && !existing) k.checkCreate?.(f, ctx, name);
        if (!file && existing && !anyFlag)
          throw new CliError(`nothing to change: pass -f FILE or at least one field flag (see kars ${k.alias} apply --help)`);
        const spec = k.specFrom(file ? file.spec : existing?.spec, f);
        if (f.enforcement !== undefined) (spec as { enforcement?: EnforcementMode }).enforcement = f.enforcement;
        return {
          spec,
          ...(file?.metadata?.labels ? { labels: file.metadata.labels } : {}),
          ...(file?.metadata?.annotations ? { annotations: file.metadata.annotations } : {}),
        };
      });
      process.stdout.write(`${refOf(res, name)} ${r.action}\n`);
      if (f.wait) printEnforced(res, await waitEnforced(ctx, res, r.obj, f.timeout * 1000), r.writtenAtMs);
    });
  });

  addKubeOptions(
    cmd.command('get').argument('<name>').description(k.getDescription).option('-o, --output <format>', 'pretty, yaml or json', 'pretty'),
  ).action(async (name: string, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['pretty', 'yaml', 'json'] as const, 'pretty');
    await withKube(f, async (ctx) => {
      const obj = await getRequired<T & KubeObject>(ctx, res, name);
      if (format !== 'pretty') return void process.stdout.write(render(obj, format));
      const lines = [`Name:             ${name}`, `Namespace:        ${ctx.namespace}`, ...k.getLines(obj)];
      const ready = condition(obj, 'Ready');
      if (ready) lines.push(`Ready:            ${ready.status} (${ready.reason}) ${ready.message}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  });

  addKubeOptions(cmd.command('list').description(k.listDescription).option('-o, --output <format>', 'table, yaml or json', 'table')).action(
    async (f: KubeFlags & { output: string }) => {
      const format = outputFormat(f.output, ['table', 'yaml', 'json'] as const, 'table');
      await withKube(f, async (ctx) => {
        const list = await ctx.client.list<T & KubeObject>(res, { namespace: ctx.namespace });
        if (format !== 'table') return void process.stdout.write(render(list, format));
        if (list.items.length === 0) return void process.stderr.write(`No ${k.plural} found in ${ctx.namespace} namespace.\n`);
        const rows = list.items.map((o) => [o.metadata.name ?? '', ...k.listRow(o), age(o.metadata.creationTimestamp), policyStatusOf(o)]);
        process.stdout.write(table(['NAME', ...k.listColumns, 'AGE', 'STATUS'], rows));
      });
    },
  );

  addKubeOptions(
    cmd
      .command('delete')
      .argument('<name>')
      .description(k.deleteDescription)
      .option('--no-prompt', 'do not ask for confirmation on a terminal'),
  ).action(async (name: string, f: KubeFlags & { prompt: boolean }) => {
    await withKube(f, (ctx) => deleteObject(ctx, res, name, !f.prompt));
  });
  return cmd;
}
