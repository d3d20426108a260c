import { Command, InvalidArgumentError } from 'commander';
import { watchConfigFromEnv } from '@kars/kube-runtime';
import { DEFAULT_PROBE_SANDBOX, formatReport, ProbeSetupError, runProbe } from '@kars/freshness';
import type { EditResult } from '@kars/freshness';
import { addKubeOptions, connect } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import { CliError, outputFormat } from '../lib/output.js';

interface ProbeFlags extends KubeFlags {
  iterations: number;
  slo: number;
  output?: string;
  sandbox: string;
  force?: boolean;
  timeout: number;
  routerTimeout: number;
}

function positive(name: string, integer = false): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
      throw new InvalidArgumentError(`${name} must be a positive ${integer ? 'integer' : 'number'}, got "${v}"`);
    return n;
  };
}

/** Exit codes: 0 every edit within the SLO, 1 an edit broke it (or was lost), 2 the probe could not start, 130 interrupted. */
export const PROBE_EXIT = { pass: 0, breach: 1, setup: 2, interrupted: 130 } as const;

/**
 * `kars freshness probe`: the freshness conformance case. Binds a dedicated probe sandbox to a throwaway
 * InferencePolicy, makes N edits and measures each one to the compiled ConfigMap, the router echo and Ready;
 * prints p50/p99/max; exits 1 when an edit breaks the SLO; always cleans up (also on Ctrl-C).
 */
export function freshnessCommand(): Command {
  const probe = addKubeOptions(new Command('probe'))
    .description('measure edit → ConfigMap → router echo → Ready on a live cluster (standard Kubernetes API only) and check an SLO')
    .option('--iterations <n>', 'edits to make, one after another', positive('--iterations', true), 20)
    .option('--slo <seconds>', 'edit → every router echoing must take at most this long', positive('--slo'), 1)
    .option('-o, --output <format>', 'table or json', 'table')
    .option(
      '--sandbox <name>',
      'dedicated sandbox whose router echoes (created and deleted when absent; a router must serve it)',
      DEFAULT_PROBE_SANDBOX,
    )
    .option(
      '--force',
      'allow re-pointing an existing sandbox that enforces a non-probe policy (changes its enforcement while the probe runs)',
    )
    .option('--timeout <seconds>', 'per edit: give up waiting after this long', positive('--timeout'), 30)
    .option(
      '--router-timeout <seconds>',
      'wait this long for a router to echo the probe policy before the first edit',
      positive('--router-timeout'),
      30,
    )
    .action(async (flags: ProbeFlags) => {
      const format = outputFormat(flags.output, ['table', 'json'] as const, 'table');
      const config = watchConfigFromEnv(process.env);
      const ctx = connect(flags, { pingIntervalMs: config.pingIntervalMs, pingTimeoutMs: config.pingTimeoutMs });
      const ac = new AbortController();
      let interrupted = false;
      const stop = (): void => {
        interrupted = true;
        process.stderr.write('interrupted: cleaning up the probe policy and sandbox…\n');
        ac.abort();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      try {
        const onEdit = (e: EditResult): void => {
          if (format === 'table')
            process.stderr.write(
              `edit ${e.edit}: ${e.toEchoMs === null ? `no echo (${e.error ?? ''})` : `echoed in ${Math.round(e.toEchoMs)} ms`}\n`,
            );
        };
        const report = await runProbe({
          client: ctx.client,
          namespace: ctx.namespace,
          sandbox: flags.sandbox,
          ...(flags.force ? { force: true } : {}),
          config,
          iterations: flags.iterations,
          sloMs: flags.slo * 1000,
          editTimeoutMs: flags.timeout * 1000,
          routerTimeoutMs: flags.routerTimeout * 1000,
          signal: ac.signal,
          onEdit,
        });
        process.stdout.write(format === 'json' ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
        if (interrupted) return void (process.exitCode = PROBE_EXIT.interrupted);
        process.exitCode = report.pass ? PROBE_EXIT.pass : PROBE_EXIT.breach;
      } catch (err) {
        if (err instanceof ProbeSetupError) throw new CliError(err.message, PROBE_EXIT.setup);
        if (interrupted) throw new CliError(`interrupted: ${err instanceof Error ? err.message : String(err)}`, PROBE_EXIT.interrupted);
        throw err;
      } finally {
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGTERM', stop);
        ctx.close();
      }
    });
  return new Command('freshness').description('freshness conformance: measure how fast policy edits are enforced').addCommand(probe);
}
