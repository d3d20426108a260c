import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Command, InvalidArgumentError } from 'commander';
import { pino } from 'pino';
import { abortOnSignals } from '../shutdown.js';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics, watchConfigFromEnv } from '@kars/kube-runtime';
import { MCP_SERVER_NAME, startRouter, tuneRouterHeap } from '@kars/router';

interface RouterFlags {
  sandbox: string;
  namespace: string;
  listen: string;
  upstream: InferenceUpstreamFlag[];
  mcpUpstream: McpUpstreamFlag[];
  egressListen?: string;
  adminListen?: string;
  adminTokenFile?: string;
  kubeconfig?: string;
  policyDir?: string;
  maxStaleness?: number;
  onStale: 'closed' | 'open';
  instance?: string;
  maxInflightBodyBytes?: number;
  maxConcurrentRequests?: number;
  guardrailUrl?: string;
  decisionLog?: string;
  decisionLogMaxBytes?: number;
  decisionLogFiles?: number;
}

/** The moderation backend of `--guardrail-url`, with its key from the environment (wire contract §5.3 step 7). */
function guardrailBackend(url: string, env: NodeJS.ProcessEnv): { url: URL; apiKey?: string } {
  const key = env['OPENAI_MODERATION_API_KEY'] ?? env['OPENAI_API_KEY'];
  return key ? { url: new URL(url), apiKey: key } : { url: new URL(url) };
}

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1)
      throw new InvalidArgumentError(`${name} must be a positive integer, got "${v}"`);
    return n;
  };
}

/**
 * This router's instance name in its echo lease: --instance, else POD_NAME, else the hostname.
 * Stable across restarts of the process in the same pod, so a restarted router takes over its own
 * lease instead of leaving an orphan echo that blocks Ready until it expires.
 */
export function routerInstance(flag: string | undefined, env: Record<string, string | undefined>, host: string = hostname()): string {
  const pick = [flag, env['POD_NAME'], host].find((v) => v !== undefined && v.trim() !== '');
  return (pick ?? 'router')
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '-');
}

/** Where a pod's service-account token is mounted; with KUBERNETES_SERVICE_HOST it means "running in a cluster". */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * Whether `kars router` talks to the API at all. Watching the API (no `--policy-dir`) needs it.
 * A `--policy-dir` router publishes its echo lease only where API access was asked for: an explicit
 * `--kubeconfig`, or a pod's in-cluster service account. It never picks up whatever KUBECONFIG or
 * ~/.kube/config happens to be around, which would echo into an unrelated cluster (or log errors).
 */
export function routerUsesApi(
  flags: Pick<RouterFlags, 'policyDir' | 'kubeconfig'>,
  env: Record<string, string | undefined>,
  tokenMounted: (path: string) => boolean = existsSync,
): boolean {
  if (flags.policyDir === undefined || flags.kubeconfig !== undefined) return true;
  return (env['KUBERNETES_SERVICE_HOST'] ?? '') !== '' && tokenMounted(SERVICE_ACCOUNT_TOKEN);
}

/** One `[NAME=]URL` flag value: `name` is undefined for a bare URL. */
export interface NamedUrlFlag {
  name: string | undefined;
  url: URL;
}

/** One `--mcp-upstream` value: `URL` (the unnamed server at /mcp) or `NAME=URL` (server NAME at /mcp/NAME). */
export type McpUpstreamFlag = NamedUrlFlag;

/** One `--upstream` value: `URL` (the default upstream) or `NAME=URL` (provider NAME's). */
export type InferenceUpstreamFlag = NamedUrlFlag;

/**
 * Parse one value of the `[NAME=]URL` flag `flag`. `NAME=URL` names it, a NAME `valid` refuses being an error that
 * says it `must be` so; anything else must be a URL. A URL's own `=` (in a query) is never taken for a name, because
 * the text before it contains the scheme's `:`.
 */
function parseNamedUrl(flag: string, v: string, names: { valid: (name: string) => boolean; must: string }): NamedUrlFlag {
  const eq = v.indexOf('=');
  const head = eq > 0 ? v.slice(0, eq) : '';
  if (eq > 0 && !head.includes(':') && !head.includes('/')) {
    if (!names.valid(head)) throw new InvalidArgumentError(`${flag} NAME=URL: NAME must be ${names.must}, got "${head}"`);
    try {
      return { name: head, url: new URL(v.slice(eq + 1)) };
    } catch {
      throw new InvalidArgumentError(`${flag} ${head}=URL: "${v.slice(eq + 1)}" is not a URL`);
    }
  }
  try {
    return { name: undefined, url: new URL(v) };
  } catch {
    throw new InvalidArgumentError(`${flag} must be a URL or NAME=URL, got "${v}"`);
  }
}

/**
 * A commander collector for the repeatable `[NAME=]URL` flag `flag`: parses each value with `parse`, refusing a
 * NAME given twice, or a second bare URL (the error `bareTwice`).
 */
function collectNamedUrls(
  flag: string,
  parse: (v: string) => NamedUrlFlag,
  bareTwice: string,
): (v: string, prev: NamedUrlFlag[]) => NamedUrlFlag[] {
  return (v, prev) => {
    const next = parse(v);
    if (prev.some((p) => p.name === next.name))
      throw new InvalidArgumentError(next.name === undefined ? bareTwice : `${flag} ${next.name}= is given twice`);
    return [...prev, next];
  };
}

/** Parse one `--mcp-upstream` value: `NAME=URL` names the server (NAME a lower-case DNS label); anything else must be a URL. */
export function parseMcpUpstream(v: string): McpUpstreamFlag {
  return parseNamedUrl('--mcp-upstream', v, {
    valid: (name) => MCP_SERVER_NAME.test(name),
    must: "a lower-case DNS label (letters, digits, '.', '_', '-')",
  });
}

/** Providers `--upstream NAME=URL` may name (bedrock is not implemented by the router). */
export const UPSTREAM_PROVIDERS: readonly string[] = ['azure-openai', 'anthropic', 'ollama'];

/** Parse one `--upstream` value: `NAME=URL` names the provider (one of {@link UPSTREAM_PROVIDERS}); anything else must be a URL. */
export function parseInferenceUpstream(v: string): InferenceUpstreamFlag {
  return parseNamedUrl('--upstream', v, {
    valid: (name) => UPSTREAM_PROVIDERS.includes(name),
    must: `one of ${UPSTREAM_PROVIDERS.join(', ')}`,
  });
}

/** The default upstream (the bare URL, else the first NAME=URL) and the named ones. */
export function inferenceUpstreams(flags: InferenceUpstreamFlag[]): { upstream: URL; upstreams?: Map<string, URL> } {
  const first = flags.find((f) => f.name === undefined) ?? flags[0];
  if (first === undefined) throw new InvalidArgumentError('--upstream is required');
  const named = new Map(flags.flatMap((f) => (f.name === undefined ? [] : [[f.name, f.url] as const])));
  return { upstream: first.url, ...(named.size > 0 ? { upstreams: named } : {}) };
}

function url(name: string): (v: string) => string {
  return (v) => {
    try {
      return new URL(v).toString();
    } catch {
      throw new InvalidArgumentError(`${name} must be a URL, got "${v}"`);
    }
  };
}

function mcpOptions(flags: McpUpstreamFlag[]): { mcpUpstream?: URL; mcpUpstreams?: Array<{ name: string; url: URL }> } {
  const unnamed = flags.find((f) => f.name === undefined);
  const named = flags.flatMap((f) => (f.name === undefined ? [] : [{ name: f.name, url: f.url }]));
  return { ...(unnamed ? { mcpUpstream: unnamed.url } : {}), ...(named.length > 0 ? { mcpUpstreams: named } : {}) };
}

/** `kars router`: enforce a sandbox's compiled policy on its traffic and echo what it enforces. */
export function routerCommand(): Command {
  return new Command('router')
    .description('run the policy-enforcing router for one sandbox')
    .requiredOption('--sandbox <name>', 'the KarsSandbox this router serves')
    .option('--namespace <ns>', 'namespace of the sandbox and its compiled ConfigMaps', 'default')
    .option('--listen <host:port>', 'agent traffic, /healthz, /readyz, /metrics', '127.0.0.1:8088')
    .requiredOption(
      '--upstream <[provider=]url>',
      `inference upstream, repeatable: PROVIDER=URL (${UPSTREAM_PROVIDERS.join(', ')}) serves the requests a policy routes to that provider; a bare URL is the default for every provider without its own (when none is given, the first PROVIDER=URL is)`,
      collectNamedUrls('--upstream', parseInferenceUpstream, '--upstream URL (the default) is given twice'),
      [] as InferenceUpstreamFlag[],
    )
    .option(
      '--mcp-upstream <[name=]url>',
      'MCP-over-HTTP server behind the tool gateway, repeatable: NAME=URL serves it at /mcp/NAME and lets ToolPolicies scoped to appliesTo.mcpServer: NAME be enforced there; a bare URL is the unnamed server at /mcp',
      collectNamedUrls(
        '--mcp-upstream',
        parseMcpUpstream,
        '--mcp-upstream URL (the unnamed server) is given twice; name them with NAME=URL',
      ),
      [] as McpUpstreamFlag[],
    )
    .option('--egress-listen <host:port>', 'HTTP forward proxy (CONNECT and absolute-URI HTTP) for egress')
    .option('--admin-listen <host:port>', 'serve GET /internal/policy-status and GET /internal/mcp-tools (bearer token)')
    .option('--admin-token-file <file>', 'bearer token for the admin endpoint (default: env KARS_ROUTER_ADMIN_TOKEN)')
    .option('--kubeconfig <file>', 'kubeconfig (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--instance <name>', 'instance name in the echo lease (default: POD_NAME, then the hostname); keep it stable across restarts')
    .option(
      '--policy-dir <dir>',
      'read policy from a mounted ConfigMap directory instead of watching the API; the echo lease is published only with --kubeconfig or in a pod',
    )
    .option(
      '--max-staleness <seconds>',
      'refuse traffic when the policy view cannot be confirmed fresh within this bound (off by default)',
      (v) => {
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0)
          throw new InvalidArgumentError(`--max-staleness must be a positive number of seconds, got "${v}"`);
        return n;
      },
    )
    .option(
      '--on-stale <mode>',
      'closed (503 policy_stale) or open (allow and log) when stale',
      (v) => {
        if (v !== 'closed' && v !== 'open') throw new InvalidArgumentError(`--on-stale must be closed or open, got "${v}"`);
        return v;
      },
      'closed',
    )
    .option(
      '--guardrail-url <url>',
      'OpenAI-compatible moderation backend for InferencePolicy guardrails stages (openai-moderation): POST <url>/v1/moderations, key from OPENAI_MODERATION_API_KEY or OPENAI_API_KEY; without it a policy with guardrails is refused (not Ready) and such requests get 503 guardrail_misconfigured',
      url('--guardrail-url'),
    )
    .option(
      '--max-inflight-body-bytes <bytes>',
      'bound on request body bytes held by agent requests in flight; above it new requests get 503 router_busy (default 33554432 = 32 MiB, at least the 10 MiB per-request limit)',
      positiveInt('--max-inflight-body-bytes'),
    )
    .option(
      '--max-concurrent-requests <n>',
      'bound on agent requests in flight; above it new requests get 503 router_busy (default 256)',
      positiveInt('--max-concurrent-requests'),
    )
    .option(
      '--decision-log <dir>',
      'write a record of every decision (inference, tool, egress) to hash-chained JSON-lines files in DIR, also served at GET /decisions on the admin listener (off by default; on under kars up). ADR 0040',
    )
    .option(
      '--decision-log-max-bytes <bytes>',
      'start a new decision-log file when the current one reaches this size (default 67108864 = 64 MiB)',
      positiveInt('--decision-log-max-bytes'),
    )
    .option(
      '--decision-log-files <n>',
      'decision-log files kept, the current one included; older ones are deleted (default 8)',
      positiveInt('--decision-log-files'),
    )
    .action(async (flags: RouterFlags) => {
      tuneRouterHeap();
      const log = pino({ name: 'kars-router', base: { sandbox: flags.sandbox } }, pino.destination(2));
      const config = watchConfigFromEnv(process.env);
      const wantsApi = flags.policyDir === undefined;
      let client: KubeClient | undefined;
      if (routerUsesApi(flags, process.env)) {
        try {
          client = KubeClient.fromKubeconfig({
            ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
            pingIntervalMs: config.pingIntervalMs,
            pingTimeoutMs: config.pingTimeoutMs,
          });
        } catch (err) {
          if (wantsApi) throw err;
          log.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'no API access: serving from --policy-dir without an echo lease',
          );
        }
      } else {
        log.info('serving from --policy-dir without an echo lease: pass --kubeconfig (or run in a pod) to publish one');
      }
      const adminToken = flags.adminTokenFile ? readFileSync(flags.adminTokenFile, 'utf8').trim() : process.env['KARS_ROUTER_ADMIN_TOKEN'];
      const ac = abortOnSignals(log);
      const router = await startRouter(
        {
          sandbox: flags.sandbox,
          namespace: flags.namespace,
          listen: flags.listen,
          ...inferenceUpstreams(flags.upstream),
          ...mcpOptions(flags.mcpUpstream),
          ...(flags.egressListen ? { egressListen: flags.egressListen } : {}),
          ...(flags.adminListen ? { adminListen: flags.adminListen } : {}),
          ...(adminToken ? { adminToken } : {}),
          source:
            wantsApi && client
              ? { kind: 'api', client, config }
              : { kind: 'dir', dir: flags.policyDir ?? '.', ...(client ? { client } : {}) },
          ...(flags.maxStaleness !== undefined ? { maxStalenessMs: flags.maxStaleness * 1000 } : {}),
          onStale: flags.onStale,
          ...(flags.guardrailUrl !== undefined ? { guardrail: guardrailBackend(flags.guardrailUrl, process.env) } : {}),
          ...(flags.maxInflightBodyBytes !== undefined ? { maxInflightBodyBytes: flags.maxInflightBodyBytes } : {}),
          ...(flags.maxConcurrentRequests !== undefined ? { maxConcurrentRequests: flags.maxConcurrentRequests } : {}),
          ...(Number(process.env['TOKEN_BUDGET_DAILY']) > 0 ? { defaultDailyTokens: Number(process.env['TOKEN_BUDGET_DAILY']) } : {}),
          ...(flags.decisionLog !== undefined
            ? {
                decisionLog: {
                  dir: flags.decisionLog,
                  ...(flags.decisionLogMaxBytes !== undefined ? { maxBytes: flags.decisionLogMaxBytes } : {}),
                  ...(flags.decisionLogFiles !== undefined ? { files: flags.decisionLogFiles } : {}),
                },
              }
            : {}),
          instance: routerInstance(flags.instance, process.env),
          metrics: new RuntimeMetrics(),
          log,
        },
        ac.signal,
      );
      process.stdout.write(
        `listening: ${router.url}\n${router.adminUrl ? `admin: ${router.adminUrl}\n` : ''}${router.egressUrl ? `egress: ${router.egressUrl}\n` : ''}`,
      );
      await router.done;
      client?.close();
    });
}
