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
 * The command registry. A command's module (and everything it imports: the API server, the router,
 * the controller, @kubernetes/client-node behind kube-client) is imported only when that command runs,
 * so every invocation pays only for its own command (ADR 0018).
 */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'up',
    options: true,
    description: 'run the whole local stack (apiserver, CRDs, controller, stubs, a demo sandbox with its router and policies) until Ctrl-C',
    load: async () => (await import('./commands/up.js')).upCommand(),
  },
  {
    name: 'apiserver',
    options: true,
    description: 'run the embedded Kubernetes-compatible API server (HTTPS, HTTP/2, durable SQLite storage)',
    load: async () => (await import('./commands/apiserver.js')).apiserverCommand(),
  },
  {
    name: 'controller',
    options: true,
    description: 'run the kars policy controller (InferencePolicy, ToolPolicy, EgressApproval, KarsSandbox)',
    load: async () => (await import('./commands/controller.js')).controllerCommand(),
  },
  {
    name: 'compile',
    options: true,
    description: 'compile kars policies offline into the ConfigMaps and digests the controller would write (JSON on stdout)',
    load: async () => (await import('./commands/compile.js')).compileCommand(),
  },
  {
    name: 'crds',
    options: false,
    description: 'print the kars CustomResourceDefinitions as multi-document YAML (pipe to kubectl apply -f -)',
    load: async () => (await import('./commands/crds.js')).crdsCommand(),
  },
  {
    name: 'router',
    options: true,
    description: 'run the policy-enforcing router for one sandbox',
    load: async () => (await import('./commands/router.js')).routerCommand(),
  },
  {
    name: 'audit',
    options: false,
    description: "read routers' decision records and check their tamper-evident logs",
    load: async () => (await import('./commands/audit.js')).auditCommand(),
  },
  {
    name: 'stub',
    options: false,
    description: 'run a local upstream stub for demos and tests',
    load: async () => (await import('./commands/stub.js')).stubCommand(),
  },
  {
    name: 'inferencepolicy',
    alias: 'ip',
    options: false,
    description: 'manage InferencePolicies (token budgets, content safety, model routing)',
    load: async () => (await import('./commands/inferencepolicy.js')).inferencePolicyCommand(),
  },
  {
    name: 'toolpolicy',
    alias: 'tp',
    options: false,
    description: 'manage ToolPolicies (which tools an agent may call, rate limits, approvals, AGT profile)',
    load: async () => (await import('./commands/toolpolicy.js')).toolPolicyCommand(),
  },
  {
    name: 'egress',
    options: false,
    description: "temporarily widen a sandbox's egress allowlist (EgressApproval)",
    load: async () => (await import('./commands/egress.js')).egressCommand(),
  },
  {
    name: 'sandbox',
    alias: 'ksb',
    options: false,
    description: "manage KarsSandboxes (which policies a sandbox's router enforces, baseline egress)",
    load: async () => (await import('./commands/sandbox.js')).sandboxCommand(),
  },
  {
    name: 'policy',
    options: false,
    description: 'inspect how policies are enforced',
    load: async () => (await import('./commands/policy-status.js')).policyCommand(),
  },
  {
    name: 'freshness',
    options: false,
    description: 'freshness conformance: measure how fast policy edits are enforced',
    load: async () => (await import('./commands/freshness.js')).freshnessCommand(),
  },
  {
    name: 'kube',
    options: false,
    description: 'run a real Kubernetes control plane (built by npm run kube:build) to point kars at',
    load: async () => (await import('./commands/kube.js')).kubeCommand(),
  },
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
