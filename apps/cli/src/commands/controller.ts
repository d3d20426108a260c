import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { abortOnSignals } from '../shutdown.js';
import { KubeClient } from '@kars/kube-client';
import { eventLoopWatchdog, leaderElectionEnabled, RuntimeMetrics, startHealthServer, watchConfigFromEnv } from '@kars/kube-runtime';
import { PolicyController } from '@kars/policy-controller';

interface ControllerFlags {
  kubeconfig?: string;
  namespace?: string;
  metricsAddr: string;
  leaseNamespace: string;
  leaseName: string;
  logLevel: string;
  livenessMaxLoopDelay: number;
  livenessReconcileStall: number;
  concurrency?: number;
}

function positiveSeconds(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number of seconds, got "${v}"`);
    return n;
  };
}

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > 4096) throw new InvalidArgumentError(`${name} must be an integer from 1 to 4096, got "${v}"`);
    return n;
  };
}

/** A positive integer from the environment; unset or invalid: undefined (the default applies). */
function envInt(env: string): number | undefined {
  const n = Number(process.env[env] ?? '');
  return Number.isInteger(n) && n >= 1 && n <= 4096 ? n : undefined;
}

function envSeconds(env: string, fallback: number): number {
  const v = process.env[env];
  const n = v === undefined || v === '' ? NaN : Number(v);
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

/**
 * Leader-election timing from the environment (seconds, fractional allowed; for tests and small
 * clusters): LEADER_ELECTION_LEASE_DURATION_SECS (15), LEADER_ELECTION_RENEW_DEADLINE_SECS (10),
 * LEADER_ELECTION_RETRY_PERIOD_SECS (2). Unset or invalid values keep the defaults.
 */
export function leaderTimingFromEnv(env: Record<string, string | undefined>): {
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
} {
  const ms = (name: string): number | undefined => {
    const v = env[name];
    const n = v === undefined || v.trim() === '' ? NaN : Number(v);
    return Number.isFinite(n) && n > 0 ? n * 1000 : undefined;
  };
  const out: { leaseDurationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number } = {};
  const lease = ms('LEADER_ELECTION_LEASE_DURATION_SECS');
  const renew = ms('LEADER_ELECTION_RENEW_DEADLINE_SECS');
  const retry = ms('LEADER_ELECTION_RETRY_PERIOD_SECS');
  if (lease !== undefined) out.leaseDurationMs = lease;
  if (renew !== undefined) out.renewDeadlineMs = renew;
  if (retry !== undefined) out.retryPeriodMs = retry;
  return out;
}

/** pino's levels, lowest first. */
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/**
 * `kars controller`: compile policies into ConfigMaps and report, in status, whether every router
 * enforces them. Kubeconfig: --kubeconfig, then KUBECONFIG, then ~/.kube/config, then in-cluster.
 */
export function controllerCommand(): Command {
  return new Command('controller')
    .description('run the kars policy controller (InferencePolicy, ToolPolicy, EgressApproval, KarsSandbox)')
    .option('--kubeconfig <file>', 'kubeconfig to use (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--namespace <ns>', 'watch one namespace only (default: all namespaces)')
    .option(
      '--metrics-addr <host:port|disabled>',
      'serve /metrics, /healthz and /readyz here (env CONTROLLER_METRICS_ADDR)',
      process.env['CONTROLLER_METRICS_ADDR'] ?? '0.0.0.0:8080',
    )
    .option('--lease-namespace <ns>', 'namespace of the leader-election Lease', process.env['POD_NAMESPACE'] ?? 'default')
    .option('--lease-name <name>', 'name of the leader-election Lease', process.env['LEADER_ELECTION_LEASE_NAME'] ?? 'kars-controller')
    .addOption(
      new Option('--log-level <level>', 'log level; debug adds every watch change and every compiled digest (env KARS_LOG_LEVEL)')
        .choices(LOG_LEVELS)
        .default(LOG_LEVELS.includes(process.env['KARS_LOG_LEVEL'] ?? '') ? process.env['KARS_LOG_LEVEL'] : 'info'),
    )
    .option(
      '--liveness-max-loop-delay <seconds>',
      '/healthz fails while the event loop has stalled this long within the last 10 s (env KARS_LIVENESS_MAX_LOOP_DELAY_SECS)',
      positiveSeconds('--liveness-max-loop-delay'),
      envSeconds('KARS_LIVENESS_MAX_LOOP_DELAY_SECS', 5),
    )
    .option(
      '--liveness-reconcile-stall <seconds>',
      '/healthz fails when the leader has keys queued and no reconcile started or finished for this long (env KARS_LIVENESS_RECONCILE_STALL_SECS)',
      positiveSeconds('--liveness-reconcile-stall'),
      envSeconds('KARS_LIVENESS_RECONCILE_STALL_SECS', 300),
    )
    .option(
      '--concurrency <n>',
      'reconciles in flight per kind (env KARS_CONTROLLER_CONCURRENCY; default 32, see ADR 0017)',
      positiveInt('--concurrency'),
      envInt('KARS_CONTROLLER_CONCURRENCY'),
    )
    .action(async (flags: ControllerFlags) => {
      // Asynchronous: a cold start logs a line per policy, and a synchronous write per line held the
      // event loop. pino flushes what is buffered when the process exits.
      const log = pino({ name: 'kars-controller', level: flags.logLevel }, pino.destination({ dest: 2, sync: false }));
      const config = watchConfigFromEnv(process.env);
      const client = KubeClient.fromKubeconfig({
        ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
        pingIntervalMs: config.pingIntervalMs,
        pingTimeoutMs: config.pingTimeoutMs,
        log,
      });
      const metrics = new RuntimeMetrics();
      const identity = `${process.env['POD_NAME'] || hostname()}-${randomBytes(3).toString('hex')}`;
      const controller = new PolicyController({
        client,
        config,
        metrics,
        log,
        env: process.env,
        ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
        ...(flags.namespace ? { namespace: flags.namespace } : {}),
        leaderElection: {
          enabled: leaderElectionEnabled(process.env),
          namespace: flags.leaseNamespace,
          name: flags.leaseName,
          identity,
          ...leaderTimingFromEnv(process.env),
        },
      });
      const ac = abortOnSignals(log);
      if (flags.metricsAddr !== 'disabled') {
        const liveness = [
          eventLoopWatchdog({ maxDelayMs: flags.livenessMaxLoopDelay * 1000, signal: ac.signal }),
          ...controller.liveness(flags.livenessReconcileStall * 1000),
        ];
        const health = await startHealthServer({
          listen: flags.metricsAddr,
          registry: metrics.registry,
          readiness: controller.readiness(),
          liveness,
          signal: ac.signal,
        });
        log.info({ url: health.url }, 'serving /metrics, /healthz, /readyz');
      }
      log.info(
        {
          identity,
          config,
          namespace: flags.namespace ?? '(all)',
          logLevel: flags.logLevel,
          livenessMaxLoopDelaySeconds: flags.livenessMaxLoopDelay,
          livenessReconcileStallSeconds: flags.livenessReconcileStall,
        },
        'kars controller starting',
      );
      await controller.run(ac.signal);
      client.close();
    });
}
