import { Command } from 'commander';
import { apiserverCommand } from './commands/apiserver.js';
import { compileCommand } from './commands/compile.js';
import { controllerCommand } from './commands/controller.js';
import { crdsCommand } from './commands/crds.js';
import { routerCommand } from './commands/router.js';
import { stubCommand } from './commands/stub.js';

/** Build the `kars` command tree. Nothing runs until {@link main} parses arguments. */
export function buildProgram(): Command {
  const program = new Command('kars')
    .description('kars: a control plane for AI-agent sandbox policy on Kubernetes')
    .version('0.1.0')
    .showHelpAfterError();
  program.addCommand(apiserverCommand());
  program.addCommand(controllerCommand());
  program.addCommand(compileCommand());
  program.addCommand(crdsCommand());
  program.addCommand(routerCommand());
  program.addCommand(stubCommand());
  return program;
}

/** Run the CLI with process-style argv. Resolves with an exit code for commands that finish. */
export async function main(argv: string[]): Promise<number | void> {
  await buildProgram().parseAsync(argv);
}
