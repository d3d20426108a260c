import { Command } from 'commander';
import { formatHostPort } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { EGRESS_APPROVAL, parseHostArg } from '@kars/policy-api';
import type { EgressApproval, EgressApprovalSpec } from '@kars/policy-api';
import { addFilenameOption, collect, filenameOf } from '../lib/flags.js';
import type { FilenameFlags } from '../lib/flags.js';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import { deleteObject, parseTimeout, printEnforced, readObjectFile, refOf, upsert, waitEnforced } from '../lib/objects.js';
import { age, CliError, outputFormat, render, table } from '../lib/output.js';

interface AllowFlags extends KubeFlags, FilenameFlags {
  host?: string[];
  ttl?: string;
  reason?: string;
  ticket?: string;
  name?: string;
  wait?: boolean;
  timeout: number;
}

interface LearnedFlags extends KubeFlags {
  since: string;
  output: string;
  adminUrl?: string;
  adminTokenFile?: string;
  dataDir: string;
  approve?: string;
  ttl?: string;
  reason?: string;
  ticket?: string;
  name?: string;
}

/** `<sandbox>-extra-<yyyymmdd-hhmmss>z` in UTC (lower case, so it is a valid object name). */
export function defaultApprovalName(sandbox: string, now = new Date()): string {
  const iso = now.toISOString(); // 2026-11-30T13:50:07.123Z
  const stamp = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}-${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}z`;
  return `${sandbox}-extra-${stamp}`;
}

/** `kars egress allow-extra|approvals|revoke`: temporary egress widenings (EgressApproval), straight against the API. */
export function egressCommand(): Command {
  const cmd = new Command('egress').description("temporarily widen a sandbox's egress allowlist (EgressApproval)");

  addKubeOptions(
    addFilenameOption(
      cmd
        .command('allow-extra')
        .argument('<sandbox>', 'the KarsSandbox to widen')
        .description('create an EgressApproval: the sandbox may reach these hosts until the TTL runs out')
        .option(
          '--host <host[:port]>',
          'host to allow, port 443 when omitted; an IPv6 address in brackets, [2001:db8::1]:443 (repeatable, 1 to 16; URLs are refused)',
          collect,
        )
        .option(
          '--ttl <duration>',
          'ISO 8601 duration P[nD][T[nH][nM][nS]], e.g. PT1H (at most the controller ceiling, default 24 h, hard 7 d)',
        )
        .option('--reason <text>', 'why (1 to 512 bytes, no control characters)')
        .option('--ticket <id>', 'ticket or incident id (at most 128 characters)')
        .option('--name <name>', 'approval name (default: <sandbox>-extra-<yyyymmdd-hhmmss>z)'),
      'YAML or JSON file with an EgressApproval; flags override its fields',
    )
      .option('--wait', "return once the sandbox's router enforces the widened allowlist (router echo)")
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit code 2)', parseTimeout, 60),
  ).action((sandbox: string, f: AllowFlags) => allowExtra(sandbox, f));

  addKubeOptions(
    cmd
      .command('approvals')
      .argument('[sandbox]', "only this sandbox's approvals")
      .description('list EgressApprovals')
      .option('-o, --output <format>', 'table, yaml or json', 'table'),
  ).action(async (sandbox: string | undefined, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['table', 'yaml', 'json'] as const, 'table');
    await withKube(f, async (ctx) => {
      const list = await ctx.client.list<EgressApproval & KubeObject>(EGRESS_APPROVAL, { namespace: ctx.namespace });
      const items = list.items.filter((a) => sandbox === undefined || a.spec.sandbox === sandbox);
      if (format !== 'table') return void process.stdout.write(render({ ...list, items }, format));
      if (items.length === 0)
        return void process.stderr.write(
          `No EgressApprovals${sandbox ? ` for sandbox ${sandbox}` : ''} found in ${ctx.namespace} namespace.\n`,
        );
      const rows = items.map((a) => [
        a.metadata.name ?? '',
        a.spec.hosts.map((h) => formatHostPort(h.host, h.port ?? 443)).join(','),
        a.spec.ttl,
        a.status?.expiresAt ?? '-',
        a.status?.phase ?? 'Pending',
        age(a.metadata.creationTimestamp),
      ]);
      process.stdout.write(table(['NAME', 'HOSTS', 'TTL', 'EXPIRES', 'PHASE', 'AGE'], rows));
    });
  });

  addKubeOptions(
    cmd
      .command('learned')
      .argument('<sandbox>', 'the KarsSandbox whose refusals to list')
      .description(
        "the hosts a sandbox was refused, with counts and last-seen times, from its router's decision records; --approve turns one into an EgressApproval",
      )
      .option(
        '--approve <host[:port]>',
        'turn this refused host (port 443 when omitted) into an EgressApproval, with --ttl and --reason, validated as allow-extra is',
      )
      .option('--ttl <duration>', 'with --approve: ISO 8601 duration, e.g. PT1H')
      .option('--reason <text>', 'with --approve: why')
      .option('--ticket <id>', 'with --approve: ticket or incident id')
      .option('--name <name>', 'with --approve: approval name (default: <sandbox>-extra-<yyyymmdd-hhmmss>z)'),
  )
    .option('--since <when>', 'records since a duration ago (10m, 2h, 1d) or an RFC 3339 time', '24h')
    .option('-o, --output <format>', 'table or json', 'table')
    .option(
      '--admin-url <url>',
      "the router's admin listener (on a cluster: through kubectl port-forward); default: the one kars up records in --data-dir",
    )
    .option('--admin-token-file <file>', 'its bearer token (default: the kars up token, else env KARS_ROUTER_ADMIN_TOKEN)')
    .option('--data-dir <dir>', 'the kars up data dir', '.kars')
    .action(async (sandbox: string, f: LearnedFlags) => {
      const { learned } = await import('./audit.js');
      if (f.approve === undefined) return void (await learned(sandbox, f));
      // Approve only what the records show was refused: learning, not a second allow-extra.
      const want = parseHostArg(f.approve);
      if (!want.ok) throw new CliError(want.message);
      const { host, port = 443 } = want.endpoint;
      const hosts = await learned(sandbox, { ...f, output: 'none' });
      const seen = hosts.find((h) => h.host.toLowerCase() === host.toLowerCase() && h.port === port);
      if (seen === undefined)
        throw new CliError(
          `${formatHostPort(host, port)} was not refused for sandbox ${sandbox} in the records since ${f.since} (refused: ${hosts.map((h) => formatHostPort(h.host, h.port)).join(', ') || 'none'}); to allow another host, use kars egress allow-extra`,
        );
      // The host as the records name it (the proxy's canonical spelling), with its port.
      await allowExtra(sandbox, { ...f, host: [formatHostPort(seen.host, seen.port)], timeout: 60 });
    });

  addKubeOptions(
    cmd
      .command('revoke')
      .argument('<name>', 'the EgressApproval to delete')
      .description('revoke an EgressApproval (the router drops the hosts as soon as the controller removes them)')
      .option('--no-prompt', 'do not ask for confirmation on a terminal'),
  ).action(async (name: string, f: KubeFlags & { prompt: boolean }) => {
    await withKube(f, (ctx) => deleteObject(ctx, EGRESS_APPROVAL, name, !f.prompt));
  });
  return cmd;
}

/**
 * Create (or update) an EgressApproval from `allow-extra`'s flags: the hosts, TTL and reason are
 * checked here and by the same validation the controller runs, then written through the API.
 * `kars egress learned --approve` comes through here too.
 */
async function allowExtra(sandbox: string, f: AllowFlags): Promise<void> {
  const path = filenameOf(f);
  const file = path !== undefined ? (readObjectFile(path, 'EgressApproval', f.namespace) as unknown as EgressApproval) : undefined;
  if (file && file.spec?.sandbox && file.spec.sandbox !== sandbox)
    throw new CliError(`the sandbox "${sandbox}" does not match spec.sandbox "${file.spec.sandbox}" in ${path ?? ''}`);
  if (f.namespace === undefined && file?.metadata?.namespace) f.namespace = file.metadata.namespace;
  const hosts = (f.host ?? []).map((h) => {
    const r = parseHostArg(h);
    if (!r.ok) throw new CliError(r.message);
    return r.endpoint;
  });
  const spec: EgressApprovalSpec = { ...(file?.spec ?? ({} as EgressApprovalSpec)), sandbox };
  if (hosts.length > 0) spec.hosts = hosts;
  if (f.ttl !== undefined) spec.ttl = f.ttl;
  if (f.reason !== undefined) spec.reason = f.reason;
  if (f.ticket !== undefined) spec.ticket = f.ticket;
  const missing = [
    spec.hosts === undefined ? '--host' : '',
    spec.ttl === undefined ? '--ttl' : '',
    spec.reason === undefined ? '--reason' : '',
  ].filter((x) => x !== '');
  if (missing.length > 0)
    throw new CliError(
      `missing ${missing.join(', ')}: e.g. kars egress allow-extra ${sandbox} --host example.com --ttl PT1H --reason "why"`,
    );
  const name = f.name ?? file?.metadata?.name ?? defaultApprovalName(sandbox);
  await withKube(f, async (ctx) => {
    const r = await upsert<EgressApproval>(ctx, EGRESS_APPROVAL, name, () => ({ spec }));
    process.stdout.write(`${refOf(EGRESS_APPROVAL, name)} ${r.action}\n`);
    if (f.wait) printEnforced(EGRESS_APPROVAL, await waitEnforced(ctx, EGRESS_APPROVAL, r.obj, f.timeout * 1000), r.writtenAtMs);
  });
}
