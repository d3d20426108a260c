/**
 * `kars up`: the whole local stack in one command — kars apiserver (data in `.kars/`), the CRDs, the controller, the
 * OpenAI and MCP stubs, and a demo KarsSandbox with its router, InferencePolicy and ToolPolicy from `examples/` —
 * then what to try next, ready to paste. Ctrl-C stops everything; running it again resumes with the data kept.
 *
 * Each component is a child process running the same `kars` subcommand a user (or a container) would run, so the
 * local stack matches production's process boundaries and a crash in one is reported, not hidden (ADR 0007).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { Resources } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';
import { allCrds, INFERENCE_POLICY, KARS_SANDBOX, TOOL_POLICY } from '@kars/policy-api';
import type { KarsResource } from '@kars/policy-api';
import { DEFAULT_PROBE_SANDBOX } from '@kars/freshness';
import { DataDirLock, DataDirLockedError } from '@kars/apiserver/dir-lock';
import { routerChildEnv } from '@kars/router/process-options';
import { connect } from '../lib/kube.js';
import type { KubeContext } from '../lib/kube.js';
import { readObjectFile, waitEnforced } from '../lib/objects.js';
import { CliError } from '../lib/output.js';

const CLI_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The `kars` entry point the children run. */
const KARS_BIN = join(CLI_ROOT, 'bin/kars.js');
/** The repository's examples/ (the demo objects). */
export const EXAMPLES_DIR = resolve(CLI_ROOT, '../../examples');

/** The demo: sandbox name and the example files `kars up` creates when absent. */
export const DEMO = {
  namespace: 'default',
  sandbox: 'demo-agent',
  objects: [
    { file: 'sandbox.yaml', res: KARS_SANDBOX },
    { file: 'inference-policy.yaml', res: INFERENCE_POLICY },
    { file: 'tool-policy.yaml', res: TOOL_POLICY },
  ] as Array<{ file: string; res: KarsResource }>,
  tools: ['echo=Echo the arguments', 'search_web=Search the web', 'read_file=Read a file', 'delete_file=Delete a file'],
};

interface UpFlags {
  dataDir: string;
  host: string;
  apiserverPort: number;
  routerPort: number;
  egressPort: number;
  adminPort: number;
  openaiPort: number;
  mcpPort: number;
  anthropicPort: number;
  metricsPort: number;
  timeout: number;
}

/** The ports `kars up` listens on, with the flag that changes each (named in the port-in-use error). */
const PORTS = [
  { key: 'apiserverPort', flag: '--apiserver-port', what: 'kars apiserver', def: 6443 },
  { key: 'routerPort', flag: '--router-port', what: 'the demo router', def: 8088 },
  { key: 'egressPort', flag: '--egress-port', what: "the demo router's egress proxy", def: 8089 },
  { key: 'adminPort', flag: '--admin-port', what: "the demo router's admin endpoint", def: 8090 },
  { key: 'openaiPort', flag: '--openai-port', what: 'the OpenAI stub', def: 9000 },
  { key: 'mcpPort', flag: '--mcp-port', what: 'the MCP stub', def: 9001 },
  { key: 'anthropicPort', flag: '--anthropic-port', what: 'the Anthropic stub', def: 9002 },
  { key: 'metricsPort', flag: '--metrics-port', what: "the controller's /metrics and /healthz", def: 8080 },
] as const;

function port(flag: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!/^\d{1,5}$/.test(v) || n < 1 || n > 65535) throw new InvalidArgumentError(`${flag} must be a port from 1 to 65535, got "${v}"`);
    return n;
  };
}

/** Resolve when `host:port` can be bound (then release it); reject with the reason otherwise. */
function probePort(host: string, p: number): Promise<void> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(p, host, () => srv.close(() => res()));
  });
}

/** Ctrl-C (or SIGTERM) arrived while starting. */
class Interrupted extends Error {}

/** A running child: its name, process, log file, and a promise of its exit. */
interface Child {
  name: string;
  proc: ChildProcess;
  log: string;
  exited: Promise<number | null>;
  stopping: boolean;
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((l) => `    ${l}`)
      .join('\n');
  } catch {
    return '    (no log)';
  }
}

/** Progress for one step: `  label … done (1.2 s)`; on a terminal the elapsed time ticks while it runs. */
async function step<T>(out: NodeJS.WriteStream, label: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const tty = out.isTTY === true;
  out.write(`  ${label} …`);
  const ticker = tty ? setInterval(() => out.write(`\r  ${label} … ${((Date.now() - t0) / 1000).toFixed(0)} s`), 1000) : undefined;
  try {
    const v = await fn();
    if (ticker) clearInterval(ticker);
    out.write(`${tty ? `\r  ${label} …` : ''} done (${((Date.now() - t0) / 1000).toFixed(1)} s)${tty ? '\x1b[K' : ''}\n`);
    return v;
  } catch (err) {
    if (ticker) clearInterval(ticker);
    out.write(' failed\n');
    throw err;
  }
}

/** Completion tokens of the demo's "Try it" requests #1 and #2. */
const SMALL_REQUEST = 200;
const LARGE_REQUEST = 4000;

/**
 * What the "Try it" text states about the live objects, read from the API when it is printed (so a
 * resumed stack, whose kept edits may differ from `examples/`, is described as it is).
 */
export interface DemoState {
  /** The live InferencePolicy demo-budget's `tokenBudget.perRequestTokens`; null: none (or no policy). */
  perRequestTokens: number | null;
  /** `perRequestTokens` of `examples/inference-policy.yaml` and of the stricter edit `-strict.yaml`. */
  exampleCap: number | null;
  strictCap: number | null;
}

function capOf(obj: unknown): number | null {
  const v = (obj as { spec?: { tokenBudget?: { perRequestTokens?: unknown } } } | undefined)?.spec?.tokenBudget?.perRequestTokens;
  return typeof v === 'number' ? v : null;
}

/** Read {@link DemoState}: the live InferencePolicy (through `ctx`) and the two example files. */
export async function readDemoState(ctx: KubeContext, examplesDir: string = EXAMPLES_DIR): Promise<DemoState> {
  const live = await ctx.client.getOrUndefined<KubeObject>(INFERENCE_POLICY, ctx.namespace, 'demo-budget');
  const file = (f: string): number | null => {
    try {
      return capOf(readObjectFile(join(examplesDir, f), INFERENCE_POLICY.kind));
    } catch {
      return null;
    }
  };
  return {
    perRequestTokens: capOf(live),
    exampleCap: file('inference-policy.yaml'),
    strictCap: file('inference-policy-strict.yaml'),
  };
}

/** Whether a request for `n` completion tokens passes the per-request cap. */
const passes = (n: number, cap: number | null): boolean => cap === null || n <= cap;

/** The comment over a chat request of `n` tokens, worded from the live cap. */
function chatComment(step: number, n: number, cap: number | null): string {
  if (cap === null) return `# ${step}. a ${n}-token request: allowed (InferencePolicy demo-budget sets no per-request cap now)`;
  return passes(n, cap)
    ? `# ${step}. a request InferencePolicy demo-budget allows (${n} tokens; the cap is ${cap} per request)`
    : `# ${step}. a request InferencePolicy demo-budget blocks (${n} tokens > the cap of ${cap} per request: 429 per_request_tokens_exceeded)`;
}

/** Step 8: the edit that changes the outcome of request 1, worded from the live cap. */
function editStep(d: DemoState): string {
  if (d.strictCap !== null && d.perRequestTokens !== d.strictCap) {
    const after = passes(SMALL_REQUEST, d.strictCap) ? 'it is still allowed' : `now it is blocked (${SMALL_REQUEST} > ${d.strictCap})`;
    return `# 8. tighten the budget to ${d.strictCap} tokens; returns once the router enforces it, with the time it took
  npx kars ip apply -f examples/inference-policy-strict.yaml --wait
  #    then run request 1 again: ${after}`;
  }
  const after =
    d.exampleCap === null || passes(SMALL_REQUEST, d.exampleCap)
      ? `now it is allowed (${SMALL_REQUEST} ≤ ${d.exampleCap ?? 'no cap'})`
      : `it is still blocked (${SMALL_REQUEST} > ${d.exampleCap})`;
  return `# 8. the stricter budget (${d.perRequestTokens ?? 'none'} per request) is already in place (kept from the last run); put the example's back (${d.exampleCap ?? 'no cap'}); returns once the router enforces it, with the time it took
  npx kars ip apply -f examples/inference-policy.yaml --wait
  #    then run request 1 again: ${after}`;
}

/**
 * The instructions `kars up` prints once the stack is ready. Every line runs as written from the
 * repository root; what the comments promise is worded from `demo`, the live objects.
 */
export function nextSteps(o: {
  repo: string;
  kubeconfig: string;
  host: string;
  routerPort: number;
  egressPort: number;
  adminPort: number;
  adminTokenFile: string;
  logs: string;
  demo: DemoState;
}): string {
  const cap = o.demo.perRequestTokens;
  const r = `http://${o.host}:${o.routerPort}`;
  const chat = (n: number): string =>
    `curl -s ${r}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"gpt-4o","max_tokens":${n},"messages":[{"role":"user","content":"hi"}]}'`;
  const responses = `curl -s ${r}/v1/responses -H 'content-type: application/json' -d '{"model":"gpt-4o","max_output_tokens":${SMALL_REQUEST},"input":"hi"}'`;
  const messages = `curl -s ${r}/v1/messages -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -d '{"model":"claude-sonnet-4-5","max_tokens":${SMALL_REQUEST},"messages":[{"role":"user","content":"hi"}]}'`;
  return `
kars is up: apiserver, controller, OpenAI, Anthropic and MCP stubs, and sandbox demo-agent's router.
Logs: ${o.logs}/   Stop: Ctrl-C (data stays in ${dirname(o.logs)}/; kars up again resumes).

Try it, in another terminal:

  cd ${o.repo}
  export KUBECONFIG=${o.kubeconfig}

  ${chatComment(1, SMALL_REQUEST, cap)}
  ${chat(SMALL_REQUEST)}

  ${chatComment(2, LARGE_REQUEST, cap)}
  ${chat(LARGE_REQUEST)}

  # 3. the same budget on the OpenAI Responses API (Codex, the Agents SDK): max_output_tokens is capped
  ${responses}

  # 4. and on Anthropic Messages (Claude Code), sent to the Anthropic upstream that demo-budget's modelPreference names
  ${messages}

  # 5. a tool call ToolPolicy demo-tools blocks (its AGT profile denies *delete*)
  curl -s ${r}/mcp -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"notes.txt"}}}'

  # 6. an egress request the sandbox's allowlist blocks (403 names the command that would allow it)
  curl -s -x http://${o.host}:${o.egressPort} http://example.com/

  # 7. the objects, with kubectl
  kubectl --kubeconfig ${o.kubeconfig} get ksb,ip,tp

  ${editStep(o.demo)}

  # 9. which routers enforce which digest, and how fast edits reached them
  npx kars policy status

  # 10. the freshness conformance probe: 20 edits, each timed to every router's echo
  npx kars freshness probe --iterations 20

  # 11. the decision record of every request above (the policy digest that decided each), and a check of the log's hash chain
  npx kars audit tail --data-dir ${dirname(o.adminTokenFile)} --since 1h
  npx kars audit verify ${dirname(o.adminTokenFile)}/decisions

  # the router's own view (bearer token in ${o.adminTokenFile})
  curl -s -H "authorization: Bearer $(cat ${o.adminTokenFile})" http://${o.host}:${o.adminPort}/internal/policy-status
`;
}

/** `kars up`. */
export function upCommand(): Command {
  const cmd = new Command('up')
    .description('run the whole local stack (apiserver, CRDs, controller, stubs, a demo sandbox with its router and policies) until Ctrl-C')
    .option('--data-dir <dir>', 'where state and logs live (kept across runs)', '.kars')
    .option('--host <addr>', 'address every component listens on', '127.0.0.1')
    .option(
      '--timeout <seconds>',
      'give up when a step takes longer',
      (v) => {
        const n = Number(v);
        if (!(n > 0)) throw new InvalidArgumentError(`--timeout must be a positive number of seconds, got "${v}"`);
        return n;
      },
      90,
    );
  for (const p of PORTS) cmd.option(`${p.flag} <port>`, `port of ${p.what}`, port(p.flag), p.def);
  return cmd.action(async (flags: UpFlags) => {
    const out = process.stdout;
    const dataDir = resolve(flags.dataDir);
    // The directory is this process's until it exits (ADR 0024): a second kars up on it refuses here,
    // before it touches the logs, starts an apiserver, or rewrites the kubeconfig.
    let lock: DataDirLock;
    try {
      lock = DataDirLock.acquire(dataDir, { what: 'kars up', flag: '--data-dir' });
    } catch (err) {
      throw err instanceof DataDirLockedError ? new CliError(err.message) : err;
    }
    const logs = join(dataDir, 'logs');
    mkdirSync(logs, { recursive: true });
    const host = flags.host;

    for (const p of PORTS) {
      try {
        await probePort(host, flags[p.key]);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE')
          throw new CliError(
            `port ${flags[p.key]} (${p.what}) is already in use on ${host}: stop what holds it (a kars up already running?) or pass ${p.flag} PORT`,
          );
        throw new CliError(
          `cannot listen on ${host}:${flags[p.key]} (${p.what}): ${err instanceof Error ? err.message : String(err)}; pass ${p.flag} PORT`,
        );
      }
    }

    const children: Child[] = [];
    let shuttingDown = false;
    let failure: ((err: Error) => void) | undefined;
    const failed = new Promise<never>((_, rej) => (failure = rej));
    failed.catch(() => undefined);

    const start = (name: string, args: string[], env: Record<string, string> = {}): Child => {
      const log = join(logs, `${name}.log`);
      const fd = openSync(log, 'a');
      // A router runs with the node options of its container (ADR 0059).
      const proc = spawn(process.execPath, [KARS_BIN, ...args], {
        stdio: ['ignore', 'pipe', fd],
        env: { ...process.env, ...routerChildEnv(args, process.env['NODE_OPTIONS']), ...env },
      });
      closeSync(fd);
      const child: Child = {
        name,
        proc,
        log,
        stopping: false,
        exited: new Promise((res) => proc.once('exit', (code, signal) => res(code ?? (signal ? 128 : null)))),
      };
      children.push(child);
      void child.exited.then((code) => {
        if (!child.stopping && !shuttingDown)
          failure?.(new CliError(`${name} exited unexpectedly (code ${code ?? 'none'}); last lines of ${log}:\n${tail(log)}`));
      });
      return child;
    };
    /** Resolve with the first stdout line starting with `prefix` (the rest of the line). */
    const line = (child: Child, prefix: string): Promise<string> =>
      new Promise((res, rej) => {
        let buf = '';
        const onData = (c: Buffer): void => {
          buf += c.toString('utf8');
          for (const l of buf.split('\n')) {
            if (l.startsWith(prefix)) {
              child.proc.stdout?.off('data', onData);
              res(l.slice(prefix.length).trim());
              return;
            }
          }
        };
        child.proc.stdout?.on('data', onData);
        void child.exited.then(() =>
          rej(new CliError(`${child.name} exited before it was ready; last lines of ${child.log}:\n${tail(child.log)}`)),
        );
      });
    const withDeadline = <T>(what: string, p: Promise<T>): Promise<T> =>
      Promise.race([
        p,
        failed,
        interrupted,
        new Promise<never>((_, rej) =>
          setTimeout(
            () => rej(new CliError(`${what} did not finish within ${flags.timeout} s (see ${logs}/)`)),
            flags.timeout * 1000,
          ).unref(),
        ),
      ]);

    /** Stop every child: SIGTERM in reverse start order, SIGKILL after 10 s. */
    const stopAll = async (): Promise<void> => {
      shuttingDown = true;
      for (const c of [...children].reverse()) {
        c.stopping = true;
        if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGTERM');
        const killer = setTimeout(() => c.proc.kill('SIGKILL'), 10_000);
        await c.exited;
        clearTimeout(killer);
      }
    };

    let stopRequested: (() => void) | undefined;
    const stopped = new Promise<void>((res) => (stopRequested = res));
    const interrupted = stopped.then((): never => {
      throw new Interrupted();
    });
    interrupted.catch(() => undefined);
    const onSignal = (): void => stopRequested?.();
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);

    let ctx: KubeContext | undefined;
    try {
      out.write(
        `kars up: data in ${dataDir}${existsSync(join(dataDir, 'apiserver', 'db')) ? ' (resuming: kept from the last run)' : ''}\n`,
      );
      const apiserverDir = join(dataDir, 'apiserver');
      const api = start('apiserver', ['apiserver', '--listen', `${host}:${flags.apiserverPort}`, '--data-dir', apiserverDir]);
      const kubeconfig = resolve(
        await step(out, `starting kars apiserver on https://${host}:${flags.apiserverPort}`, () =>
          withDeadline('kars apiserver', line(api, 'kubeconfig:')),
        ),
      );

      ctx = connect({ kubeconfig, namespace: DEMO.namespace });
      const c = ctx;
      await step(out, 'installing the CRDs', () =>
        withDeadline(
          'installing the CRDs',
          (async () => {
            for (const crd of allCrds())
              await c.client.apply(
                Resources.customresourcedefinitions,
                crd as unknown as Record<string, unknown> & { metadata: { name: string } },
                'kars-up',
                { force: true },
              );
          })(),
        ),
      );

      const watchEnv = { LEADER_ELECTION_ENABLED: 'false' };
      start('controller', ['controller', '--kubeconfig', kubeconfig, '--metrics-addr', `${host}:${flags.metricsPort}`], watchEnv);
      await step(out, `starting the controller (/metrics on http://${host}:${flags.metricsPort})`, () =>
        withDeadline(
          'the controller',
          (async () => {
            for (;;) {
              try {
                if ((await fetch(`http://${host}:${flags.metricsPort}/healthz`)).ok) return;
              } catch {
                // not listening yet
              }
              await new Promise((r) => setTimeout(r, 100));
            }
          })(),
        ),
      );

      const openai = start('stub-openai', ['stub', 'openai', '--listen', `${host}:${flags.openaiPort}`]);
      const mcp = start('stub-mcp', ['stub', 'mcp', '--listen', `${host}:${flags.mcpPort}`, ...DEMO.tools.flatMap((t) => ['--tool', t])]);
      const anthropic = start('stub-anthropic', ['stub', 'anthropic', '--listen', `${host}:${flags.anthropicPort}`]);
      const [openaiUrl, mcpUrl, anthropicUrl] = await step(
        out,
        `starting the OpenAI, Anthropic and MCP stubs (tools: ${DEMO.tools.map((t) => t.split('=')[0]).join(', ')})`,
        () => withDeadline('the stubs', Promise.all([line(openai, 'listening:'), line(mcp, 'listening:'), line(anthropic, 'listening:')])),
      );

      const created = await step(out, `creating the demo sandbox and policies from examples/ (when absent)`, () =>
        withDeadline(
          'creating the demo objects',
          (async () => {
            const made: string[] = [];
            for (const o of DEMO.objects) {
              const obj = readObjectFile(join(EXAMPLES_DIR, o.file), o.res.kind) as unknown as KubeObject;
              const name = obj.metadata.name ?? '';
              if (await c.client.getOrUndefined(o.res, c.namespace, name)) continue;
              await c.client.create(
                o.res,
                { ...obj, metadata: { ...obj.metadata, namespace: c.namespace } },
                {
                  fieldManager: 'kars-up',
                  fieldValidation: 'Strict',
                },
              );
              made.push(`${o.res.kind} ${name}`);
            }
            return made;
          })(),
        ),
      );
      if (created.length < DEMO.objects.length)
        out.write(`    kept what exists (created: ${created.length > 0 ? created.join(', ') : 'nothing'})\n`);

      const adminTokenFile = join(dataDir, 'router-admin-token');
      if (!existsSync(adminTokenFile)) writeFileSync(adminTokenFile, randomBytes(24).toString('hex'), { mode: 0o600 });
      const router = start('router', [
        'router',
        '--sandbox',
        DEMO.sandbox,
        '--namespace',
        DEMO.namespace,
        '--kubeconfig',
        kubeconfig,
        '--listen',
        `${host}:${flags.routerPort}`,
        '--egress-listen',
        `${host}:${flags.egressPort}`,
        '--admin-listen',
        `${host}:${flags.adminPort}`,
        '--admin-token-file',
        adminTokenFile,
        '--decision-log',
        join(dataDir, 'decisions'),
        '--upstream',
        openaiUrl,
        '--upstream',
        `anthropic=${anthropicUrl}`,
        '--mcp-upstream',
        mcpUrl,
      ]);
      await step(out, `starting sandbox ${DEMO.sandbox}'s router on http://${host}:${flags.routerPort}`, () =>
        withDeadline('the router', line(router, 'listening:')),
      );
      // Where `kars audit tail` finds this router's decision records (with the token above).
      writeFileSync(join(dataDir, 'router-admin-url'), `http://${host}:${flags.adminPort}\n`);
      // A router for the freshness probe's dedicated sandbox (the probe creates and deletes the
      // sandbox and its throwaway policy), so `kars freshness probe` works against kars up as is.
      const probeRouter = start('router-probe', [
        'router',
        '--sandbox',
        DEFAULT_PROBE_SANDBOX,
        '--instance',
        `${DEFAULT_PROBE_SANDBOX}-0`,
        '--namespace',
        DEMO.namespace,
        '--kubeconfig',
        kubeconfig,
        '--listen',
        `${host}:0`,
        '--upstream',
        openaiUrl,
      ]);
      await step(out, `starting the freshness probe's router (sandbox ${DEFAULT_PROBE_SANDBOX})`, () =>
        withDeadline('the probe router', line(probeRouter, 'listening:')),
      );

      await step(out, 'waiting until the router enforces the demo policies (router echo)', () =>
        withDeadline(
          'router enforcement',
          (async () => {
            for (const res of [INFERENCE_POLICY, TOOL_POLICY]) {
              const name = res === INFERENCE_POLICY ? 'demo-budget' : 'demo-tools';
              const obj = await c.client.getOrUndefined<KubeObject>(res, c.namespace, name);
              if (obj) await waitEnforced(c, res, obj, flags.timeout * 1000);
            }
          })(),
        ),
      );
      const demo = await readDemoState(c);
      ctx.close();
      ctx = undefined;

      out.write(
        nextSteps({
          repo: resolve(EXAMPLES_DIR, '..'),
          kubeconfig,
          host,
          routerPort: flags.routerPort,
          egressPort: flags.egressPort,
          adminPort: flags.adminPort,
          adminTokenFile,
          logs,
          demo,
        }),
      );
      await Promise.race([stopped, failed]);
      out.write('\nkars up: stopping …\n');
    } catch (err) {
      const wasInterrupted = err instanceof Interrupted;
      process.stderr.write(
        wasInterrupted ? '\nkars up: interrupted, stopping …\n' : `kars up: ${err instanceof Error ? err.message : String(err)}\n`,
      );
      await stopAll();
      ctx?.close();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.exitCode = wasInterrupted ? 130 : 1;
      lock.release();
      return;
    }
    await stopAll();
    lock.release();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    out.write(`kars up: stopped (data kept in ${dataDir})\n`);
  });
}
