import { Command } from 'commander';
import { apiserverCommand } from './commands/apiserver.js';
import { compileCommand } from './commands/compile.js';
import { controllerCommand } from './commands/controller.js';
import { crdsCommand } from './commands/crds.js';
import { routerCommand } from './commands/router.js';
import { stubCommand } from './commands/stub.js';
import { egressCommand } from './commands/egress.js';
import { inferencePolicyCommand } from './commands/inferencepolicy.js';
import { sandboxCommand } from './commands/sandbox.js';
import { toolPolicyCommand } from './commands/toolpolicy.js';
import { upCommand } from './commands/up.js';
import { policyCommand } from './commands/policy-status.js';
import { freshnessCommand } from './commands/freshness.js';
import { ApiError } from '@kars/kube-core';
import { CliError } from './lib/output.js';

/** Build the `kars` command tree. Nothing runs until {@link main} parses arguments. */
export function buildProgram(): Command {
  const program = new Command('kars')
    .description('kars: a control plane for AI-agent sandbox policy on Kubernetes')
    .version('0.1.0')
    .showHelpAfterError();
  program.addCommand(upCommand());
  program.addCommand(apiserverCommand());
  program.addCommand(controllerCommand());
  program.addCommand(compileCommand());
  program.addCommand(crdsCommand());
  program.addCommand(routerCommand());
  program.addCommand(stubCommand());
  program.addCommand(inferencePolicyCommand());
  program.addCommand(toolPolicyCommand());
  program.addCommand(egressCommand());
  program.addCommand(sandboxCommand());
  program.addCommand(policyCommand());
  program.addCommand(freshnessCommand());
  return program;
}

/** Run the CLI with process-style argv. Resolves with an exit code for commands that finish. */
export async function main(argv: string[]): Promise<number | void> {
  try {
    await buildProgram().parseAsync(argv);
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
