import { Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { ApiServer, DataDirLockedError, DEFAULT_MAX_BATCH } from '@kars/apiserver';
import { CliError } from '../lib/output.js';
import { abortOnSignals } from '../shutdown.js';

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive integer, got "${v}"`);
    return n;
  };
}

interface ApiserverFlags {
  listen: string;
  dataDir: string;
  kubeconfigOut?: string;
  bookmarkInterval: number;
  historyWindow: number;
  commitBatch: number;
  minRequestTimeout: number;
  enableFaultInjection?: boolean;
  authorizationMode: 'AlwaysAllow' | 'RBAC';
}

/** `kars apiserver`: run the embedded Kubernetes-compatible API server until SIGINT or SIGTERM. */
export function apiserverCommand(): Command {
  return new Command('apiserver')
    .description('run the embedded Kubernetes-compatible API server (HTTPS, HTTP/2, durable SQLite storage)')
    .option('--listen <host:port>', 'address to listen on; port 0 picks a free port', '127.0.0.1:6443')
    .option('--data-dir <dir>', 'state, certificates and token', '.kars/apiserver')
    .option('--kubeconfig-out <file>', 'where to write the kubeconfig (default <data-dir>/kubeconfig)')
    .option('--bookmark-interval <seconds>', 'seconds between watch bookmarks', positiveInt('--bookmark-interval'), 60)
    .option(
      '--history-window <n>',
      'past changes a watch can resume from; older resourceVersions get 410 Expired',
      positiveInt('--history-window'),
      10000,
    )
    .option(
      '--commit-batch <n>',
      'most writes that share one transaction and one fsync (group commit); 1 = one fsync per write',
      positiveInt('--commit-batch'),
      DEFAULT_MAX_BATCH,
    )
    .option(
      '--min-request-timeout <seconds>',
      'watch lifetime without timeoutSeconds is random in [t, 2t)',
      positiveInt('--min-request-timeout'),
      1800,
    )
    .addOption(
      new Option(
        '--authorization-mode <mode>',
        'AlwaysAllow: every authenticated request is allowed; RBAC: Roles and bindings decide (the admin token stays a superuser)',
      )
        .choices(['AlwaysAllow', 'RBAC'])
        .default('AlwaysAllow'),
    )
    .option('--enable-fault-injection', 'TEST ONLY: relay connections and serve POST /debug/faults/{freeze,reset,compact,restart}')
    .action(async (flags: ApiserverFlags) => {
      const logger = pino({ name: 'kars-apiserver' }, pino.destination(2));
      const server = await ApiServer.start({
        listen: flags.listen,
        dataDir: flags.dataDir,
        ...(flags.kubeconfigOut ? { kubeconfigOut: flags.kubeconfigOut } : {}),
        bookmarkIntervalSeconds: flags.bookmarkInterval,
        historyWindow: flags.historyWindow,
        maxCommitBatch: flags.commitBatch,
        minRequestTimeoutSeconds: flags.minRequestTimeout,
        faultInjection: flags.enableFaultInjection === true,
        authorizationMode: flags.authorizationMode,
        log: logger,
        signal: abortOnSignals(logger).signal,
      }).catch((err: unknown) => {
        // Another live process holds the data directory: one line that says who and what to do.
        throw err instanceof DataDirLockedError ? new CliError(err.message) : err;
      });
      process.stdout.write(`kubeconfig: ${server.kubeconfigPath}\nlistening: ${server.url}\n`);
      logger.info(
        {
          url: server.url,
          dataDir: server.dataDir,
          faultInjection: flags.enableFaultInjection === true,
          authorizationMode: flags.authorizationMode,
        },
        'kars apiserver ready',
      );
      await server.done;
    });
}
