import { Command, Help } from 'commander';
import { ApiError } from '@kars/kube-core';
import { CliError } from './lib/output.js';

/**
 * One top-level command, loaded only when it runs. The name, alias, whether it has options and the
 * description are what the root help shows; they must match the command's own definition (a test
 * loads every command and compares), so `kars --help` needs no command module at all.
 */
export interface CommandEntry {
  name: string;
  alias?: string;
  options: boolean;
  description: string;
  load: () => Promise<Command>;
}

/**
 * An entry from the term the root help shows for its command (`name` or `name|alias`, with ` [options]` when it has
 * options), its description and how to load it.
 */
function lazy(term: string, description: string, load: () => Promise<Command>): CommandEntry {
  const m = /^([a-z-]+)(?:\|([a-z]+))?( \[options\])?$/.exec(term);
  if (!m?.[1]) throw new Error(`command term "${term}" is not name[|alias][ [options]]`);
  return { name: m[1], ...(m[2] ? { alias: m[2] } : {}), options: m[3] !== undefined, description, load };
}

/**
 * The command registry. A command's module (and everything it imports: the API server, the router,
 * the controller, @kubernetes/client-node behind kube-client) is imported only when that command runs,
 * so every invocation pays only for its own command (ADR 0018).
 */
export const COMMANDS: readonly CommandEntry[] = [
  lazy(
    'up [options]',
    'run the whole local stack (apiserver, CRDs, controller, stubs, a demo sandbox with its router and policies) until Ctrl-C',
    async () => (await import('./commands/up.js')).upCommand(),
  ),
  lazy('apiserver [options]', 'run the embedded Kubernetes-compatible API server (HTTPS, HTTP/2, durable SQLite storage)', async () =>
    (await import('./commands/apiserver.js')).apiserverCommand(),
  ),
  lazy('controller [options]', 'run the kars policy controller (InferencePolicy, ToolPolicy, EgressApproval, KarsSandbox)', async () =>
    (await import('./commands/controller.js')).controllerCommand(),
  ),
  lazy(
    'compile [options]',
    'compile kars policies offline into the ConfigMaps and digests the controller would write (JSON on stdout)',
    async () => (await import('./commands/compile.js')).compileCommand(),
  ),
  lazy('crds', 'print the kars CustomResourceDefinitions as multi-document YAML (pipe to kubectl apply -f -)', async () =>
    (await import('./commands/crds.js')).crdsCommand(),
  ),
  lazy('router [options]', 'run the policy-enforcing router for one sandbox', async () =>
    (await import('./commands/router.js')).routerCommand(),
  ),
  lazy('audit', "read routers' decision records and check their tamper-evident logs", async () =>
    (await import('./commands/audit.js')).auditCommand(),
  ),
  lazy('stub', 'run a local upstream stub for demos and tests', async () => (await import('./commands/stub.js')).stubCommand()),
  lazy('inferencepolicy|ip', 'manage InferencePolicies (token budgets, content safety, model routing)', async () =>
    (await import('./commands/inferencepolicy.js')).inferencePolicyCommand(),
  ),
  lazy('toolpolicy|tp', 'manage ToolPolicies (which tools an agent may call, rate limits, approvals, AGT profile)', async () =>
    (await import('./commands/toolpolicy.js')).toolPolicyCommand(),
  ),
  lazy('egress', "temporarily widen a sandbox's egress allowlist (EgressApproval)", async () =>
    (await import('./commands/egress.js')).egressCommand(),
  ),
  lazy('sandbox|ksb', "manage KarsSandboxes (which policies a sandbox's router enforces, baseline egress)", async () =>
    (await import('./commands/sandbox.js')).sandboxCommand(),
  ),
  lazy('policy', 'inspect how policies are enforced', async () => (await import('./commands/policy-status.js')).policyCommand()),
  lazy('freshness', 'freshness conformance: measure how fast policy edits are enforced', async () =>
    (await import('./commands/freshness.js')).freshnessCommand(),
  ),
  lazy('kube', 'run a real Kubernetes control plane (built by npm run kube:build) to point kars at', async () =>
    (await import('./commands/kube.js')).kubeCommand(),
  ),
];

/** The root help's term for an entry, as commander writes it for the loaded command (`name|alias [options]`). */
export function entryTerm(e: CommandEntry): string {
  return `${e.name}${e.alias ? `|${e.alias}` : ''}${e.options ? ' [options]' : ''}`;
}

/**
 * The command an argv runs: the first word after the options (`kars --x ip list` → ip), or the word
 * after `help` (`kars help ip` → ip). Undefined for `kars`, `kars --help`, `kars --version`, or an
 * unknown word (commander then prints its error and suggestions from the registry's names).
 */
export function selectedEntry(argv: readonly string[]): CommandEntry | undefined {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  const word = words[0] === 'help' ? words[1] : words[0];
  return word === undefined ? undefined : COMMANDS.find((e) => e.name === word || e.alias === word);
}

/**
 * Build the `kars` command tree. With `load: 'all'` (the default) every command module is loaded;
 * with an entry, only that one is (with null, none), and the others are placeholders that carry just what the root
 * help shows. Nothing runs until {@link main} parses arguments.
 */
export async function buildProgram(load: 'all' | CommandEntry | null = 'all'): Promise<Command> {
  const program = new Command('kars')
    .description('kars: a control plane for AI-agent sandbox policy on Kubernetes')
    .version('0.1.0')
    .showHelpAfterError();
  const byName = new Map(COMMANDS.map((e) => [e.name, e]));
  program.configureHelp({
    subcommandTerm: (cmd: Command) => {
      const e = cmd.parent === program ? byName.get(cmd.name()) : undefined;
      return e ? entryTerm(e) : new Help().subcommandTerm(cmd);
    },
  });
  for (const e of COMMANDS) {
    if (load === 'all' || load === e) program.addCommand(await e.load());
    else {
      const placeholder = new Command(e.name).description(e.description);
      if (e.alias) placeholder.alias(e.alias);
      program.addCommand(placeholder);
    }
  }
  return program;
}

/** Run the CLI with process-style argv. Resolves with an exit code for commands that finish. */
export async function main(argv: string[]): Promise<number | void> {
  try {
    await (await buildProgram(selectedEntry(argv) ?? null)).parseAsync(argv);
  } catch (err) {
    // Errors a user can act on print as one line, the way kubectl prints them; anything else propagates.
    if (err instanceof CliError) {
      process.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    if (err instanceof ApiError) {
      process.stderr.write(`Error from server (${err.reason}): ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
