import { formatHostPort } from '@kars/kube-core';
import { Command } from 'commander';
import type { KubeObject } from '@kars/kube-core';
import { KARS_SANDBOX, parseHostArg, toolPolicyNameOf } from '@kars/policy-api';
import type { KarsSandbox, KarsSandboxSpec } from '@kars/policy-api';
import { addFilenameOption, collect, filenameOf } from '../lib/flags.js';
import type { FilenameFlags } from '../lib/flags.js';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import { deleteObject, getRequired, readObjectFile, refOf, upsert } from '../lib/objects.js';
import { age, CliError, outputFormat, render, shortDigest, table } from '../lib/output.js';

interface CreateFlags extends KubeFlags, FilenameFlags {
  inference?: string;
  toolPolicy?: string;
  allow?: string[];
}

/** `kars sandbox create|get|list|delete`: KarsSandboxes, the binding between policies and a router. */
export function sandboxCommand(): Command {
  const cmd = new Command('sandbox')
    .alias('ksb')
    .description("manage KarsSandboxes (which policies a sandbox's router enforces, baseline egress)");

  addKubeOptions(
    addFilenameOption(
      cmd
        .command('create')
        .argument('[name]', 'sandbox name (default: metadata.name from --filename)')
        .description('create or update a KarsSandbox; flags override fields of --filename or of the existing sandbox'),
      'YAML or JSON file with a KarsSandbox',
    )
      .option('--inference <policy>', 'spec.inferenceRef.name: the InferencePolicy its router enforces')
      .option('--tool-policy <policy>', 'spec.governance.toolPolicyRef.name: the ToolPolicy its router enforces')
      .option(
        '--allow <host[:port]>',
        'baseline egress endpoint, port 443 when omitted; IPv6 in brackets, [2001:db8::1]:443 (repeatable)',
        collect,
      ),
  ).action(async (nameArg: string | undefined, f: CreateFlags) => {
    const path = filenameOf(f);
    const file = path !== undefined ? (readObjectFile(path, 'KarsSandbox', f.namespace) as unknown as KarsSandbox) : undefined;
    const name = nameArg ?? file?.metadata?.name;
    if (!name) throw new CliError('a name is required: kars sandbox create NAME [flags] (or a file with metadata.name)');
    if (f.namespace === undefined && file?.metadata?.namespace) f.namespace = file.metadata.namespace;
    const allow = f.allow?.map((h) => {
      const r = parseHostArg(h);
      if (!r.ok) throw new CliError(r.message.replace('--host', '--allow'));
      return r.endpoint;
    });
    await withKube(f, async (ctx) => {
      const r = await upsert<KarsSandbox>(ctx, KARS_SANDBOX, name, (existing) => {
        const spec: KarsSandboxSpec = structuredClone(file?.spec ?? existing?.spec ?? {});
        if (f.inference !== undefined) spec.inferenceRef = { name: f.inference };
        if (f.toolPolicy !== undefined)
          spec.governance = { ...(spec.governance ?? {}), enabled: true, toolPolicyRef: { name: f.toolPolicy } };
        if (allow !== undefined) spec.networkPolicy = { ...(spec.networkPolicy ?? {}), allowedEndpoints: allow };
        return { spec, ...(file?.metadata?.labels ? { labels: file.metadata.labels } : {}) };
      });
      process.stdout.write(`${refOf(KARS_SANDBOX, name)} ${r.action}\n`);
    });
  });

  addKubeOptions(
    cmd
      .command('get')
      .argument('<name>')
      .description('show one KarsSandbox and its routers')
      .option('-o, --output <format>', 'pretty, yaml or json', 'pretty'),
  ).action(async (name: string, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['pretty', 'yaml', 'json'] as const, 'pretty');
    await withKube(f, async (ctx) => {
      const sb = await getRequired<KarsSandbox & KubeObject>(ctx, KARS_SANDBOX, name);
      if (format !== 'pretty') return void process.stdout.write(render(sb, format));
      const lines = [
        `Name:             ${name}`,
        `Namespace:        ${ctx.namespace}`,
        `InferencePolicy:  ${sb.spec.inferenceRef?.name ?? '-'}`,
        `ToolPolicy:       ${toolPolicyNameOf(sb) ?? '- (governance off)'}`,
        `Baseline egress:  ${(sb.spec.networkPolicy?.allowedEndpoints ?? []).map((e) => formatHostPort(e.host, e.port ?? 443)).join(', ') || '- (none: all egress is denied)'}`,
        `Phase:            ${sb.status?.phase ?? 'Pending'}`,
        `Routers:          ${(sb.status?.routers ?? []).length === 0 ? '- (none live)' : ''}`,
      ];
      for (const r of sb.status?.routers ?? []) {
        const loaded = (r as { loaded?: Record<string, string | null> }).loaded ?? {};
        lines.push(
          `  ${r.instance}  last seen ${r.lastSeen}  ${Object.entries(loaded)
            .map(([k, d]) => `${k} ${shortDigest(d)}`)
            .join(', ')}`,
        );
      }
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  });

  addKubeOptions(
    cmd.command('list').description('list KarsSandboxes').option('-o, --output <format>', 'table, yaml or json', 'table'),
  ).action(async (f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['table', 'yaml', 'json'] as const, 'table');
    await withKube(f, async (ctx) => {
      const list = await ctx.client.list<KarsSandbox & KubeObject>(KARS_SANDBOX, { namespace: ctx.namespace });
      if (format !== 'table') return void process.stdout.write(render(list, format));
      if (list.items.length === 0) return void process.stderr.write(`No KarsSandboxes found in ${ctx.namespace} namespace.\n`);
      const rows = list.items.map((sb) => [
        sb.metadata.name ?? '',
        sb.status?.phase ?? 'Pending',
        sb.spec.inferenceRef?.name ?? '-',
        toolPolicyNameOf(sb) ?? '-',
        String((sb.status?.routers ?? []).length),
        age(sb.metadata.creationTimestamp),
      ]);
      process.stdout.write(table(['NAME', 'PHASE', 'INFERENCE', 'TOOLPOLICY', 'ROUTERS', 'AGE'], rows));
    });
  });

  addKubeOptions(
    cmd
      .command('delete')
      .argument('<name>')
      .description('delete a KarsSandbox')
      .option('--no-prompt', 'do not ask for confirmation on a terminal'),
  ).action(async (name: string, f: KubeFlags & { prompt: boolean }) => {
    await withKube(f, (ctx) => deleteObject(ctx, KARS_SANDBOX, name, !f.prompt));
  });
  return cmd;
}
