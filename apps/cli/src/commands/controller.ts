import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { pino } from 'pino';
import { abortOnSignals } from '../shutdown.js';
import { KubeClient } from '@kars/kube-client';
import { leaderElectionEnabled, RuntimeMetrics, startHealthServer, watchConfigFromEnv } from '@kars/kube-runtime';
import { PolicyController } from '@kars/policy-controller';

interface ControllerFlags {
  kubeconfig?: string;
  namespace?: string;
  metricsAddr: string;
  leaseNamespace: string;
  leaseName: string;
}

/**
 * `kars controller`: compile policies into ConfigMaps and report, in status, whether every router
 * enforces them. Kubeconfig: --kubeconfig, then KUBECONFIG, then ~/.kube/config, then in-cluster.
 */
export function controllerCommand(): Command {
  return new Command('controller')
    .description('run the kars policy controller (InferencePolicy, ToolPolicy, EgressApproval, KarsSandbox)')
    .option('--kubeconfig <file>', 'kubeconfig to use (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--namespace <ns>', 'watch one namespace only (default: all namespaces)')
    .option('--metrics-addr <host:port|disabled>', 'serve /metrics, /healthz and /readyz here', process.env['CONTROLLER_METRICS_ADDR'] ?? '127.0.0.1:8080')
    .option('--lease-namespace <ns>', 'namespace of the leader-election Lease', process.env['POD_NAMESPACE'] ?? 'default')
    .option('--lease-name <name>', 'name of the leader-election Lease', process.env['LEADER_ELECTION_LEASE_NAME'] ?? 'kars-controller')
    .action(async (flags: ControllerFlags) => {
      const log = pino({ name: 'kars-controller' }, pino.destination(2));
      const config = watchConfigFromEnv(process.env);
      const client = KubeClient.fromKubeconfig({
        ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
        pingIntervalMs: config.pingIntervalMs,
        pingTimeoutMs: config.pingTimeoutMs,
        log: (level, msg, extra) => log[level](extra ?? {}, msg),
      });
      const metrics = new RuntimeMetrics();
      const identity = `${hostname()}-${randomBytes(3).toString('hex')}`;
      const controller = new PolicyController({
        client,
        config,
        metrics,
        log,
        env: process.env,
        ...(flags.namespace ? { namespace: flags.namespace } : {}),
        leaderElection: { enabled: leaderElectionEnabled(process.env), namespace: flags.leaseNamespace, name: flags.leaseName, identity },
      });
      const ac = abortOnSignals(log);
      if (flags.metricsAddr !== 'disabled') {
        const health = await startHealthServer({ listen: flags.metricsAddr, registry: metrics.registry, readiness: controller.readiness(), signal: ac.signal });
        log.info({ url: health.url }, 'serving /metrics, /healthz, /readyz');
      }
      log.info({ identity, config, namespace: flags.namespace ?? '(all)' }, 'kars controller starting');
      await controller.run(ac.signal);
      client.close();
    });
}
