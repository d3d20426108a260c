import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findKubeBinaries } from './binaries.js';
import type { KubeBinaries } from './binaries.js';
import { kubeRequest } from './http.js';
import type { KubeRequestOptions, KubeResponse } from './http.js';
import { ensureControlPlanePki } from './pki.js';
import type { ControlPlanePki } from './pki.js';
import { ManagedProcess } from './process.js';

/** The controllers kube-controller-manager runs by default: the ones kars relies on, and no more (each costs CPU). */
export const DEFAULT_CONTROLLERS: readonly string[] = [
  'garbage-collector-controller',
  'namespace-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
];

/** The ServiceAccount token issuer (and default audience) kube-apiserver is started with. */
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

/** How to start a control plane. Everything is optional. */
export interface ControlPlaneOptions {
  /** A pinned version (`"1.34"`, `"v1.37.2"`); default the newest pinned. Ignored when `binaries` is given. */
  version?: string;
  /** Where the ports it picks itself come from (default: a free port of 127.0.0.1); for tests of the port race. */
  pickPort?: () => Promise<number>;
  /** Binaries to use instead of looking them up in the cache. */
  binaries?: KubeBinaries;
  /**
   * Where the data, certificates, kubeconfig, logs and audit log go. Given: kept after stop (and its
   * certificates and etcd data reused by the next start). Absent: a temp directory removed at stop.
   */
  dir?: string;
  /** Fixed loopback ports (default: free ones). */
  ports?: { etcd?: number; etcdPeer?: number; apiserver?: number };
  /**
   * The etcd URL kube-apiserver is given (`--etcd-servers`; default etcd's own client URL): a relay
   * in front of etcd (fixed `ports.etcd`) to cut kube-apiserver's storage connections.
   */
  apiserverEtcdUrl?: string;
  /** kube-controller-manager's `--controllers` (default {@link DEFAULT_CONTROLLERS}); `false`: do not start it. */
  controllers?: readonly string[] | false;
  /** Extra flags, appended (a later flag wins). */
  etcdArgs?: readonly string[];
  apiserverArgs?: readonly string[];
  controllerManagerArgs?: readonly string[];
  /** How long each process may take to become ready (default 120 s: a cold start on a loaded 2-core machine). */
  readyTimeoutMs?: number;
  /** How long a process gets between SIGTERM and SIGKILL at stop (default 10 s). */
  stopGraceMs?: number;
  /**
   * Run once kube-apiserver is ready, before kube-controller-manager starts, with the admin
   * kubeconfig and request: e.g. apply CRDs, so the garbage collector watches their kinds from its
   * first discovery instead of from its next 30 s resync.
   */
  beforeControllers?: (api: { kubeconfig: string; request: ControlPlane['request'] }) => Promise<void>;
  /** Progress lines ("etcd ready in 1.2 s"); default silent. */
  log?: (line: string) => void;
}

/** Which process a {@link ControlPlaneStartError} is about. */
export type ControlPlaneProcess = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';

/** A start that failed: names the process, says what happened, and quotes the tail of its output. */
export class ControlPlaneStartError extends Error {
  constructor(
    readonly process: ControlPlaneProcess | 'binaries',
    readonly detail: string,
    readonly tail: string,
  ) {
    super(`${process} ${detail}${tail ? `; its last output:\n${tail}` : ''}`);
    this.name = 'ControlPlaneStartError';
  }
}

/** How a {@link ControlPlane.restartApiserver} went. */
export interface ApiserverRestart {
  /** SIGTERM → the old process exited (ms): kube-apiserver's own shutdown, at most the stop grace. */
  stoppedMs: number;
  /** Whether the grace ran out and it was killed (kube-apiserver drains open watches until its 60 s shutdown timeout). */
  killed: boolean;
  /** Spawn of the new process → /readyz ok (ms). */
  startedMs: number;
}

/** A running control plane: etcd, kube-apiserver and (unless turned off) kube-controller-manager. */
export interface ControlPlane {
  /** The k8s.io/kubernetes tag running: `"v1.34.4"`. */
  version: string;
  binaries: KubeBinaries;
  dir: string;
  /** kube-apiserver's URL: `https://127.0.0.1:PORT`. */
  url: string;
  /** etcd's client URL: `http://127.0.0.1:PORT`. */
  etcdUrl: string;
  /** The admin kubeconfig (a `system:masters` client certificate). */
  kubeconfig: string;
  /** The CA (PEM) kube-apiserver's serving certificate chains to. */
  caPem: string;
  pki: ControlPlanePki;
  /** kube-apiserver's audit log: one JSON event per line, every request at Metadata level. */
  auditLog: string;
  etcd: ManagedProcess;
  apiserver: ManagedProcess;
  controllerManager: ManagedProcess | undefined;
  /** One request to kube-apiserver, as admin unless `token` (or another `cert`/`key`) is given. */
  request(path: string, opts?: Omit<KubeRequestOptions, 'ca'>): Promise<KubeResponse>;
  /** The audit events logged so far, parsed. */
  auditEvents(): AuditEvent[];
  /**
   * Stop kube-apiserver (SIGTERM, then SIGKILL after the stop grace) and start it again with the
   * same flags, port and etcd; resolves at /readyz ok, with how long each half took.
   */
  restartApiserver(): Promise<ApiserverRestart>;
  /** The pids of the processes started (for "nothing left running" checks). */
  pids(): number[];
  /** Stop everything (kube-controller-manager, kube-apiserver, etcd), then remove a temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** The fields of an audit.k8s.io/v1 Event the harness's users read. */
export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; namespace?: string; name?: string; apiGroup?: string; subresource?: string };
  responseStatus?: { code?: number };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

const AUDIT_POLICY = JSON.stringify({
  apiVersion: 'audit.k8s.io/v1',
  kind: 'Policy',
  // One event per request (at ResponseComplete; a watch also at ResponseStarted), at Metadata level.
  omitStages: ['RequestReceived'],
  rules: [{ level: 'Metadata' }],
});

function kubeconfigFor(name: string, url: string, pki: ControlPlanePki, cert: string, key: string): string {
  const b64 = (f: string): string => readFileSync(f).toString('base64');
  // JSON is YAML: kubectl and client-node read it as a kubeconfig.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'envtest', cluster: { server: url, 'certificate-authority-data': b64(pki.caCert) } }],
      users: [{ name, user: { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) } }],
      contexts: [{ name: 'envtest', context: { cluster: 'envtest', user: name } }],
      'current-context': 'envtest',
    },
    null,
    2,
  );
}

/**
 * Start a real control plane on loopback ports, in the spirit of controller-runtime's envtest:
 * etcd (its own data dir), kube-apiserver (RBAC and Node authorization, its own CA and serving
 * certificate, an admin client certificate, ServiceAccount token issuing, an audit log of every
 * request) and kube-controller-manager (garbage collector, namespace and ServiceAccount controllers,
 * each with its own ServiceAccount credentials). Resolves once kube-apiserver's /readyz is ok and
 * the controller manager has created the `default` ServiceAccount.
 *
 * A start that fails halfway stops what it started (and removes a temp dir) and rejects with a
 * {@link ControlPlaneStartError} naming the process and quoting its last output. The binaries come
 * from `npm run kube:build` ({@link findKubeBinaries}).
 */
/** How many times a start whose own ports were taken before its processes bound them is retried. */
const PORT_RACE_RETRIES = 3;

/**
 * Start a control plane. Ports it picks itself (none given in `opts.ports`) are free when picked, but
 * on a busy machine another process can take one before etcd or kube-apiserver binds it; such a
 * start ("address already in use") is stopped and retried with new ports, unless `opts.dir` is given.
 */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startControlPlaneOnce(opts);
    } catch (err) {
      const raced = err instanceof ControlPlaneStartError && /address already in use/.test(err.tail);
      // (Only in a directory of its own, which the failed start removed: a caller's keeps etcd's data.)
      if (!raced || opts.ports !== undefined || opts.dir !== undefined || attempt > PORT_RACE_RETRIES) throw err;
      opts.log?.(`${err.process}: a port was taken before it bound it; starting again with new ports`);
    }
  }
}

async function startControlPlaneOnce(opts: ControlPlaneOptions): Promise<ControlPlane> {
  const say = opts.log ?? ((): void => {});
  let binaries = opts.binaries;
  if (!binaries) {
    const found = findKubeBinaries(opts.version);
    if (!found.binaries) throw new ControlPlaneStartError('binaries', found.reason, '');
    binaries = found.binaries;
  }
  const bins = binaries;
  const ownDir = opts.dir === undefined;
  const dir = ownDir ? mkdtempSync(join(tmpdir(), 'kars-envtest-')) : resolvePath(opts.dir as string);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const graceMs = opts.stopGraceMs ?? 10_000;
  const started: ManagedProcess[] = [];
  let stopped = false;

  const stopAll = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // Reverse order: the controller manager, then the apiserver, then its storage.
    for (const p of [...started].reverse()) await p.stop(graceMs);
    if (ownDir) rmSync(dir, { recursive: true, force: true });
  };

  /** Poll `ready` until true; fail when `proc` exits first or the bound passes. */
  const waitReady = async (proc: ManagedProcess, what: ControlPlaneProcess, ready: () => Promise<boolean>): Promise<number> => {
    const t0 = Date.now();
    for (;;) {
      if (!proc.running)
        throw new ControlPlaneStartError(what, `${proc.describeExit()} before it was ready (log: ${proc.logFile})`, proc.tail());
      if (await ready().catch(() => false)) return Date.now() - t0;
      if (Date.now() - t0 > readyTimeoutMs)
        throw new ControlPlaneStartError(what, `was not ready within ${readyTimeoutMs / 1000} s (log: ${proc.logFile})`, proc.tail());
      await sleep(100);
    }
  };

  try {
    const pki = ensureControlPlanePki(join(dir, 'pki'));
    const caPem = readFileSync(pki.caCert, 'utf8');
    const adminCert = readFileSync(pki.adminCert, 'utf8');
    const adminKey = readFileSync(pki.adminKey, 'utf8');
    const pick = opts.pickPort ?? freePort;
    const etcdPort = opts.ports?.etcd ?? (await pick());
    const peerPort = opts.ports?.etcdPeer ?? (await pick());
    const apiPort = opts.ports?.apiserver ?? (await pick());
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const url = `https://127.0.0.1:${apiPort}`;
    const logs = join(dir, 'logs');
    mkdirSync(logs, { recursive: true });

    const t0 = Date.now();
    const peer = `http://127.0.0.1:${peerPort}`;
    const etcd = ManagedProcess.start({
      name: 'etcd',
      bin: bins.etcd,
      logFile: join(logs, 'etcd.log'),
      args: [
        '--name=envtest',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=envtest=${peer}`,
        // Test data: skip fsync (as most envtest setups do), it costs seconds per start on a busy disk.
        '--unsafe-no-fsync',
        '--log-level=warn',
        ...(opts.etcdArgs ?? []),
      ],
    });
    started.push(etcd);
    const etcdMs = await waitReady(etcd, 'etcd', async () => {
      const r = await kubeRequest(`${etcdUrl}/health`, { timeoutMs: 2000 });
      return r.status === 200 && (JSON.parse(r.body) as { health?: string }).health === 'true';
    });
    say(`etcd ready at ${etcdUrl} in ${(etcdMs / 1000).toFixed(1)} s`);

    const auditLog = join(dir, 'audit.log');
    const auditPolicy = join(dir, 'audit-policy.json');
    writeFileSync(auditPolicy, AUDIT_POLICY);
    const apiArgs = [
      `--etcd-servers=${opts.apiserverEtcdUrl ?? etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      // 1.37 refuses a loopback advertise address for the endpoint reconciler ("may not be in the
      // loopback range"); no pod here reaches the apiserver through the `kubernetes` Service anyway.
      '--endpoint-reconciler-type=none',
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.servingCert}`,
      `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`,
      '--authorization-mode=Node,RBAC',
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--service-account-key-file=${pki.serviceAccountPub}`,
      `--service-account-signing-key-file=${pki.serviceAccountKey}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      `--audit-policy-file=${auditPolicy}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-format=json',
      '--profiling=false',
      ...(opts.apiserverArgs ?? []),
    ];
    const startApiserver = (): ManagedProcess =>
      ManagedProcess.start({ name: 'kube-apiserver', bin: bins.kubeApiserver, logFile: join(logs, 'kube-apiserver.log'), args: apiArgs });
    const apiReady = async (): Promise<boolean> =>
      (await kubeRequest(`${url}/readyz`, { ca: caPem, cert: adminCert, key: adminKey, timeoutMs: 5000 })).status === 200;
    let apiserver = startApiserver();
    started.push(apiserver);
    const apiMs = await waitReady(apiserver, 'kube-apiserver', apiReady);
    say(`kube-apiserver ${bins.version} ready at ${url} in ${(apiMs / 1000).toFixed(1)} s`);

    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigFor('envtest-admin', url, pki, pki.adminCert, pki.adminKey), { mode: 0o600 });
    const request = (path: string, o: Omit<KubeRequestOptions, 'ca'> = {}): Promise<KubeResponse> =>
      kubeRequest(`${url}${path}`, {
        ...o,
        ca: caPem,
        ...(o.token === undefined && o.cert === undefined ? { cert: adminCert, key: adminKey } : {}),
      });

    if (opts.beforeControllers) await opts.beforeControllers({ kubeconfig, request });
    let controllerManager: ManagedProcess | undefined;
    if (opts.controllers !== false) {
      const controllers = opts.controllers ?? DEFAULT_CONTROLLERS;
      const kcmKubeconfig = join(dir, 'controller-manager.kubeconfig');
      writeFileSync(
        kcmKubeconfig,
        kubeconfigFor('system:kube-controller-manager', url, pki, pki.controllerManagerCert, pki.controllerManagerKey),
        { mode: 0o600 },
      );
      controllerManager = ManagedProcess.start({
        name: 'kube-controller-manager',
        bin: bins.kubeControllerManager,
        logFile: join(logs, 'kube-controller-manager.log'),
        args: [
          `--kubeconfig=${kcmKubeconfig}`,
          // No serving port of its own: readiness is the default ServiceAccount appearing below.
          '--secure-port=0',
          '--leader-elect=false',
          `--controllers=${controllers.join(',')}`,
          '--use-service-account-credentials=true',
          `--service-account-private-key-file=${pki.serviceAccountKey}`,
          `--root-ca-file=${pki.caCert}`,
          ...(opts.controllerManagerArgs ?? []),
        ],
      });
      started.push(controllerManager);
      if (controllers.includes('serviceaccount-controller') || controllers.includes('*')) {
        const kcmMs = await waitReady(
          controllerManager,
          'kube-controller-manager',
          async () => (await request('/api/v1/namespaces/default/serviceaccounts/default')).status === 200,
        );
        say(`kube-controller-manager ready (default ServiceAccount created) in ${(kcmMs / 1000).toFixed(1)} s`);
      }
    }
    say(`control plane ${bins.version} up in ${((Date.now() - t0) / 1000).toFixed(1)} s; kubeconfig ${kubeconfig}`);

    const cp: ControlPlane = {
      version: bins.version,
      binaries: bins,
      dir,
      url,
      etcdUrl,
      kubeconfig,
      caPem,
      pki,
      auditLog,
      etcd,
      get apiserver() {
        return apiserver;
      },
      controllerManager,
      request,
      auditEvents: () =>
        existsSync(auditLog)
          ? readFileSync(auditLog, 'utf8')
              .split('\n')
              .filter((l) => l !== '')
              .map((l) => JSON.parse(l) as AuditEvent)
          : [],
      async restartApiserver() {
        const t0 = performance.now();
        const exit = await apiserver.stop(graceMs);
        const stoppedMs = performance.now() - t0;
        const i = started.indexOf(apiserver);
        apiserver = startApiserver();
        started[i] = apiserver;
        const startedMs = await waitReady(apiserver, 'kube-apiserver', apiReady);
        return { stoppedMs, killed: exit.signal === 'SIGKILL', startedMs };
      },
      pids: () => started.map((p) => p.pid).filter((p): p is number => p !== undefined),
      stop: stopAll,
    };
    return cp;
  } catch (err) {
    await stopAll();
    throw err;
  }
}
