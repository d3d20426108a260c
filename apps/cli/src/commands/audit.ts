/**
 * `kars audit`: read and check routers' decision logs (ADR 0040).
 *
 * - `kars audit tail` streams a router's records from its admin listener (`GET /decisions`, NDJSON,
 *   bearer token). Under `kars up` it finds the demo router by itself: the admin URL and token that
 *   `kars up` keeps in its data dir (`router-admin-url`, `router-admin-token`). On a cluster, where
 *   the router's admin listener is on the pod's loopback, `kubectl port-forward pod/P 8090` and
 *   `--admin-url http://127.0.0.1:8090 --admin-token-file …` (the API server's pods/services proxy
 *   strips the `Authorization` header, so it cannot carry the admin token; see the ADR).
 * - `kars audit verify FILE|DIR…` checks the hash chain of log files and exits 1 naming the first
 *   record altered, removed, reordered or truncated.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { logFiles, verifyChain, type ChainFile, type ChainLine, type DecisionRecord } from '@kars/router/decisions';
import { CliError, outputFormat, shortDigest, table } from '../lib/output.js';

interface TailFlags {
  sandbox?: string;
  decision?: string;
  kind?: string;
  since?: string;
  follow?: boolean;
  output?: string;
  adminUrl?: string;
  adminTokenFile?: string;
  dataDir: string;
}

/** `10m`, `2h`, `30s`, `1d`, `500ms` → milliseconds; an RFC 3339 time → the ms before now; undefined for anything else. */
export function sinceMs(v: string, nowMs: number): number | undefined {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(v);
  if (m !== null) {
    const n = Number(m[1]);
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
    return nowMs - n * unit;
  }
  const t = Date.parse(v);
  return /^\d{4}-\d{2}-\d{2}T/.test(v) && Number.isFinite(t) ? t : undefined;
}

function oneOf(name: string, allowed: readonly string[]): (v: string) => string {
  return (v) => {
    if (!allowed.includes(v)) throw new InvalidArgumentError(`${name} must be one of ${allowed.join(', ')}, got "${v}"`);
    return v;
  };
}

/** Where `tail` reads from: the flags, else what `kars up` keeps in its data dir. */
export function adminEndpoint(
  flags: Pick<TailFlags, 'adminUrl' | 'adminTokenFile' | 'dataDir'>,
  env: NodeJS.ProcessEnv,
): { url: string; token: string } {
  const dir = resolve(flags.dataDir);
  const urlFile = join(dir, 'router-admin-url');
  const url = flags.adminUrl ?? (existsSync(urlFile) ? readFileSync(urlFile, 'utf8').trim() : undefined);
  if (url === undefined)
    throw new CliError(
      `no router to read: pass --admin-url (on a cluster, through kubectl port-forward), or run kars up (data dir ${dir})`,
    );
  const tokenFile = flags.adminTokenFile ?? (flags.adminUrl === undefined ? join(dir, 'router-admin-token') : undefined);
  const token = tokenFile !== undefined ? readFileSync(tokenFile, 'utf8').trim() : env['KARS_ROUTER_ADMIN_TOKEN'];
  if (token === undefined || token === '') throw new CliError('no admin token: pass --admin-token-file, or set KARS_ROUTER_ADMIN_TOKEN');
  return { url: url.replace(/\/$/, ''), token };
}

function targetText(r: DecisionRecord): string {
  const t = r.target as unknown as Record<string, unknown>;
  if (r.kind === 'inference') return [t['api'], t['model'], t['deployment']].filter((x) => typeof x === 'string').join(' ');
  if (r.kind === 'tool')
    return `${t['action'] === 'list' ? 'list ' : ''}${typeof t['server'] === 'string' ? `${t['server']}/` : ''}${String(t['tool'])}`;
  return `${String(t['via'])} ${String(t['host'])}:${String(t['port'])}`;
}

/** One table row for a chain line. */
export function rowOf(l: ChainLine): string[] {
  if (l.type === 'gap') return [l.time, '-', 'GAP', '-', `${l.dropped ?? '?'} records dropped`, '-', '-'];
  if (l.type === 'start') return [l.time, l.instance, 'START', '-', l.truncatedTail ? 'the log before ended in a cut line' : '-', '-', '-'];
  const r = l as ChainLine & DecisionRecord;
  const digests = r.policies.map((p) => `${p.kind}=${shortDigest(p.digest)}`).join(',');
  const tokens = r.tokens === null ? '-' : `${r.tokens.reserved}/${r.tokens.charged}`;
  // A dry-run policy's would-be decision (ADR 0050) is marked: nothing it decided was enforced.
  const decision = `${r.decision.toUpperCase()}${r.mode === 'DryRun' ? ' (DRY RUN)' : ''}`;
  return [r.time, r.kind, decision, r.reason, targetText(r), tokens, digests];
}

const HEADERS = ['TIME', 'KIND', 'DECISION', 'REASON', 'TARGET', 'TOKENS', 'POLICY'] as const;

/** Denied egress targets of a sandbox, from its router's records: host:port, how often, when last. */
export interface LearnedHost {
  host: string;
  port: number;
  count: number;
  lastSeen: string;
}

/** Fold egress deny records into one row per host:port, most refused first (then most recent). */
export function learnedHosts(lines: readonly ChainLine[], sandbox: string): LearnedHost[] {
  const by = new Map<string, LearnedHost>();
  for (const l of lines) {
    if (l.type !== 'decision') continue;
    const r = l as ChainLine & DecisionRecord;
    if (r.kind !== 'egress' || r.decision !== 'deny' || r.sandbox !== sandbox) continue;
    const t = r.target as { host: string; port: number };
    const key = `${t.host}:${t.port}`;
    const h = by.get(key);
    if (h === undefined) by.set(key, { host: t.host, port: t.port, count: 1, lastSeen: r.time });
    else {
      h.count++;
      if (r.time > h.lastSeen) h.lastSeen = r.time;
    }
  }
  return [...by.values()].sort((a, b) => b.count - a.count || (a.lastSeen < b.lastSeen ? 1 : -1));
}

/** `kars egress learned SANDBOX`: the hosts a sandbox was refused, from its router's decision records. */
export async function learned(
  sandbox: string,
  flags: Pick<TailFlags, 'since' | 'output' | 'adminUrl' | 'adminTokenFile' | 'dataDir'>,
): Promise<LearnedHost[]> {
  // `none`: only read them (`kars egress learned --approve` checks the host it approves against them).
  const format = flags.output === 'none' ? 'none' : outputFormat(flags.output, ['table', 'json'] as const, 'table');
  const { url, token } = adminEndpoint(flags, process.env);
  const q = new URLSearchParams({ kind: 'egress', decision: 'deny' });
  const ms = sinceMs(flags.since ?? '24h', Date.now());
  if (ms === undefined) throw new CliError(`--since must be a duration (10m, 2h, 1d) or an RFC 3339 time, got "${flags.since ?? ''}"`);
  q.set('since', String(ms));
  let res: Response;
  try {
    res = await fetch(`${url}/decisions?${q.toString()}`, { headers: { authorization: `Bearer ${token}` } });
  } catch (err) {
    throw new CliError(`cannot reach the router's admin listener at ${url}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const text = await res.text();
  if (res.status !== 200) throw new CliError(`${url}/decisions answered ${res.status}: ${text.slice(0, 300)}`);
  const lines: ChainLine[] = [];
  for (const l of text.split('\n')) {
    if (l === '') continue;
    try {
      lines.push(JSON.parse(l) as ChainLine);
    } catch {
      // a cut last line: left out
    }
  }
  const hosts = learnedHosts(lines, sandbox);
  if (format === 'none') return hosts;
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(hosts, null, 2)}\n`);
    return hosts;
  }
  if (hosts.length === 0) {
    process.stderr.write(`No refused egress for sandbox ${sandbox} in the records read.\n`);
    return hosts;
  }
  process.stdout.write(
    table(
      ['HOST', 'PORT', 'REFUSED', 'LAST SEEN'],
      hosts.map((h) => [h.host, String(h.port), String(h.count), h.lastSeen]),
    ),
  );
  process.stdout.write(`allow one for a while: kars egress learned ${sandbox} --approve HOST[:PORT] --ttl PT1H --reason "why"\n`);
  return hosts;
}

async function tail(flags: TailFlags): Promise<void> {
  const format = outputFormat(flags.output, ['table', 'json'] as const, 'table');
  const { url, token } = adminEndpoint(flags, process.env);
  const q = new URLSearchParams();
  if (flags.since !== undefined) {
    const ms = sinceMs(flags.since, Date.now());
    if (ms === undefined) throw new CliError(`--since must be a duration (10m, 2h, 1d) or an RFC 3339 time, got "${flags.since}"`);
    q.set('since', String(ms));
  }
  if (flags.kind !== undefined) q.set('kind', flags.kind);
  if (flags.decision !== undefined) q.set('decision', flags.decision);
  if (flags.follow === true) q.set('follow', '1');
  const ac = new AbortController();
  const stop = (): void => ac.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let res: Response;
  try {
    res = await fetch(`${url}/decisions?${q.toString()}`, { headers: { authorization: `Bearer ${token}` }, signal: ac.signal });
  } catch (err) {
    throw new CliError(`cannot reach the router's admin listener at ${url}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (res.status !== 200) throw new CliError(`${url}/decisions answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const out = process.stdout;
  // Following, rows are printed as they come, tab-separated (columns cannot wait for a stream's end);
  // otherwise the table is aligned once all rows are in.
  const rows: string[][] = [];
  const live = flags.follow === true;
  if (format === 'table' && live) out.write(`${HEADERS.join('\t')}\n`);
  const decoder = new TextDecoder();
  let buf = '';
  const emit = (line: string): void => {
    if (line === '') return;
    let l: ChainLine;
    try {
      l = JSON.parse(line) as ChainLine;
    } catch {
      return;
    }
    if (flags.sandbox !== undefined && l.sandbox !== flags.sandbox) return;
    if (format === 'json') out.write(`${line}\n`);
    else if (live) out.write(`${rowOf(l).join('\t')}\n`);
    else rows.push(rowOf(l));
  };
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        emit(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw new CliError(`the stream from ${url} broke: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  emit(buf);
  if (format === 'table' && !live) out.write(table(HEADERS, rows));
}

/** The files to check: each FILE as given; each DIR's decision-log files in chain order. */
export function chainFilesOf(paths: readonly string[]): ChainFile[] {
  const out: ChainFile[] = [];
  for (const p of paths) {
    let isDir: boolean;
    try {
      isDir = statSync(p).isDirectory();
    } catch {
      throw new CliError(`cannot read ${p}`);
    }
    const names = isDir ? logFiles(p).map((n) => join(p, n)) : [p];
    if (isDir && names.length === 0)
      throw new CliError(`${p} holds no decision-log files (decisions-*.jsonl): ${readdirSync(p).length} other entries`);
    for (const n of names) out.push({ name: n, text: readFileSync(n, 'utf8') });
  }
  // The log names files by the seq of their first line, 12 digits: by name is chain order.
  const base = (n: string): string => n.slice(n.lastIndexOf('/') + 1);
  return out.sort((a, b) => (base(a.name) < base(b.name) ? -1 : base(a.name) > base(b.name) ? 1 : 0));
}

function verify(paths: string[], flags: { head?: string; output?: string }): void {
  const format = outputFormat(flags.output, ['text', 'json'] as const, 'text');
  const v = verifyChain(chainFilesOf(paths), flags.head);
  if (format === 'json') process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  else if (v.ok) {
    const gaps =
      v.gaps.length === 0
        ? 'no gaps'
        : `${v.gaps.length} gap(s): ${v.gaps.map((g) => `${g.dropped} dropped before seq ${g.seq}`).join('; ')}`;
    process.stdout.write(
      `ok: ${v.records} records in ${v.files} file(s), seq ${v.firstSeq ?? '-'}..${v.lastSeq ?? '-'}, ${v.fromGenesis ? 'from the genesis record' : 'older files rotated away'}; ${gaps}\nhead: ${v.head ?? '-'}\n`,
    );
  }
  if (!v.ok) {
    if (format === 'text') process.stderr.write(`chain broken (${v.problem.kind}): ${v.problem.message}\n`);
    process.exitCode = 1;
  }
}

/** `kars audit`: tail and verify routers' decision logs. */
export function auditCommand(): Command {
  const cmd = new Command('audit').description("read routers' decision records and check their tamper-evident logs");
  cmd
    .command('tail')
    .description("stream a router's decision records from its admin listener (the kars up router by default)")
    .option('--sandbox <name>', 'only records of this sandbox')
    .option('--decision <d>', 'only allow, deny or cap', oneOf('--decision', ['allow', 'deny', 'cap']))
    .option('--kind <k>', 'only inference, tool or egress', oneOf('--kind', ['inference', 'tool', 'egress']))
    .option('--since <when>', 'records since a duration ago (10m, 2h, 1d) or an RFC 3339 time')
    .option('-f, --follow', 'keep reading new records as they are written')
    .option('-o, --output <format>', 'table (default) or json (the log lines as written, NDJSON)')
    .option(
      '--admin-url <url>',
      "the router's admin listener (on a cluster: through kubectl port-forward); default: the one kars up records in --data-dir",
    )
    .option('--admin-token-file <file>', 'its bearer token (default: the kars up token, else env KARS_ROUTER_ADMIN_TOKEN)')
    .option('--data-dir <dir>', 'the kars up data dir', '.kars')
    .action((flags: TailFlags) => tail(flags));
  cmd
    .command('verify')
    .description(
      'check the hash chain of decision-log files (FILE or DIR, oldest first); exit 1 naming the first record altered, removed, reordered or truncated',
    )
    .argument('<paths...>', 'log files, or directories of them')
    .option(
      '--head <hash>',
      'the hash the last record must have (from an earlier verify or GET /decisions/head): catches an edit of the last record or a tail cut at a line boundary',
    )
    .option('-o, --output <format>', 'text (default) or json')
    .action((paths: string[], flags: { head?: string; output?: string }) => verify(paths, flags));
  return cmd;
}
