import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeClient, Resources } from '@kars/kube-client';
import { watchConfigFromEnv } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { allCrds } from '@kars/policy-api';

/** The `kars` binary of this checkout. */
export const KARS_BIN = fileURLToPath(new URL('../../../../apps/cli/bin/kars.js', import.meta.url));

/** The short knobs the suite runs the local stack with (issue 8's storm settings). */
export const SUITE_KNOBS: Record<string, string> = {
  KARS_WATCH_IDLE_TIMEOUT_SECS: '3',
  KARS_HTTP2_PING_INTERVAL_SECS: '1',
  KARS_HTTP2_PING_TIMEOUT_SECS: '1',
  KARS_HEARTBEAT_INTERVAL_SECS: '2',
  LEADER_ELECTION_LEASE_DURATION_SECS: '3',
  LEADER_ELECTION_RENEW_DEADLINE_SECS: '2',
  LEADER_ELECTION_RETRY_PERIOD_SECS: '0.5',
  KARS_LOG_LEVEL: 'warn',
};

/** The watch configuration those knobs give (so the suite computes the same detection bound as the processes use). */
export function suiteWatchConfig(): WatchConfig {
  return watchConfigFromEnv(SUITE_KNOBS);
}

/** A client of the suite's API server, with the suite's PING settings, after installing the kars CRDs through it. */
export async function suiteClientWithCrds(kubeconfig: string): Promise<KubeClient> {
  const cfg = suiteWatchConfig();
  const client = KubeClient.fromKubeconfig({ kubeconfig, pingIntervalMs: cfg.pingIntervalMs, pingTimeoutMs: cfg.pingTimeoutMs });
  for (const crd of allCrds()) await client.create(Resources.customresourcedefinitions, crd as never);
  return client;
}

interface Proc {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr: string[];
  /** Resolves when the process printed its readiness line (or after 20 s, or when it exits). */
  ready: Promise<void>;
}

/**
 * With `KARS_TRACE_DIR` set, every stack process traces its hops (`KARS_TRACE_HOPS`, named after the
 * process: apiserver, controller-ctl-a, router) and its whole stderr and stdout are appended to
 * `<dir>/<name>.log`, for `scripts/freshness-hops.mjs` or reading a slow case after the fact.
 */
const TRACE_DIR = process.env['KARS_TRACE_DIR'];

function start(
  args: string[],
  env: Record<string, string>,
  onLine?: (line: string) => void,
  readyLine?: RegExp,
  onStderrLine?: (line: string) => void,
): Proc {
  const label = `${args[0] ?? 'kars'}${env['POD_NAME'] ? `-${env['POD_NAME']}` : ''}`;
  const trace = TRACE_DIR ? { KARS_TRACE_HOPS: label } : {};
  const child = spawn(process.execPath, [KARS_BIN, ...args], {
    env: { ...process.env, ...SUITE_KNOBS, ...trace, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (TRACE_DIR) {
    mkdirSync(TRACE_DIR, { recursive: true });
    const file = join(TRACE_DIR, `${label}.log`);
    child.stdout?.on('data', (c: Buffer) => appendFileSync(file, c));
    child.stderr?.on('data', (c: Buffer) => appendFileSync(file, c));
  }
  const stderr: string[] = [];
  let buf = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
    setTimeout(resolve, 20_000).unref();
  });
  if (!readyLine) markReady();
  child.stdout?.on('data', (c: Buffer) => {
    if (readyLine?.test(c.toString('utf8'))) markReady();
    buf += c.toString('utf8');
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      onLine?.(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  let errBuf = '';
  child.stderr?.on('data', (c: Buffer) => {
    if (readyLine?.test(c.toString('utf8'))) markReady();
    stderr.push(c.toString('utf8'));
    if (stderr.length > 200) stderr.shift();
    if (!onStderrLine) return;
    errBuf += c.toString('utf8');
    let i;
    while ((i = errBuf.indexOf('\n')) >= 0) {
      onStderrLine(errBuf.slice(0, i));
      errBuf = errBuf.slice(i + 1);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code, sig) => resolve(code ?? (sig ? -1 : null))));
  void exited.then(() => markReady());
  return { child, exited, stderr, ready };
}

/**
 * What the fault suite drives: a kars stack (two `kars controller`s with leader election and a
 * `kars router` for the probe sandbox, with {@link SUITE_KNOBS}) on some apiserver, and a way to
 * cause each fault from outside that apiserver's clients. {@link LocalStack} (kars apiserver's own
 * fault injection) and `KubeStack` (kube-apiserver behind a relay of ours, etcd compaction) are the two.
 */
export interface FaultStack {
  /** A client for the probe, connected the way the stack's processes are (so faults hit it too). */
  readonly client: KubeClient;
  /** Which apiserver: "kars apiserver", "kube-apiserver v1.34.4". */
  readonly server: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Silence every current connection to the apiserver, both ways, without FIN or RST. */
  freeze(): Promise<void>;
  /** Reset every current connection to the apiserver (RST). */
  reset(): Promise<void>;
  /** Stop the apiserver and start it again on the same port and storage; resolves once it serves. */
  restartApiserver(): Promise<void>;
  /**
   * Compact the storage's whole history, so that a watch resuming from any resourceVersion seen so
   * far gets 410; resolves with the revision compacted to.
   */
  compact(): Promise<number>;
  /** kill -9 every controller, then start them again; resolves once they are up. */
  killControllers(): Promise<void>;
  /** kill -9 the leading controller so the standby takes over at lease expiry; start it again as the standby. */
  failoverController(): Promise<string | undefined>;
  /** Restart the router process (same instance); resolves once the new one listens. */
  restartRouter(): Promise<void>;
  /**
   * Watch restarts for 410 Expired the controllers have logged so far (`watch restarting`, reason
   * expired); with `windowFrom`, only those whose message ("too old resource version: RV (FLOOR)",
   * kube-apiserver's wording, which kars apiserver shares) puts the server's window floor at or
   * above that revision: 410s caused by a compaction to it, not left over from an earlier fault.
   */
  expiredWatchRestarts(windowFrom?: number): number;
  /** Recent stderr of every process, for a failure message. */
  logs(): string;
}

/**
 * The kars processes of a stack: two `kars controller`s with leader election (Lease
 * `default/kars-controller`) and a `kars router` for the probe sandbox (stable `--instance`), all with
 * {@link SUITE_KNOBS} and `kubeconfig`; the process faults (kill -9, failover, router restart) are here.
 * The controllers log at info, so their `watch restarting` lines with reason `expired` are counted.
 */
export abstract class KarsProcesses {
  /** The kubeconfig the controllers and the router use. */
  kubeconfig = '';
  client!: KubeClient;
  protected readonly controllers = new Map<string, Proc>();
  protected router: Proc | undefined;
  /** The window floor of each 410 the controllers logged (NaN when the message names none). */
  private readonly expired: number[] = [];

  constructor(
    readonly namespace = 'default',
    readonly sandbox = 'kars-probe',
  ) {}

  /** Start the stack; if any part fails to start, stop what did start before rethrowing. */
  async start(): Promise<void> {
    try {
      await this.startAll();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Start the apiserver side and then the kars processes (a failure is cleaned up by {@link start}). */
  protected abstract startAll(): Promise<void>;

  /** Stop every process of the stack; safe after a partial start and when called twice. */
  abstract stop(): Promise<void>;

  /** Start a controller; resolves once the process is up (its start-up log line), not when it leads. */
  startController(name: string): Promise<void> {
    const p = start(
      ['controller', '--kubeconfig', this.kubeconfig, '--metrics-addr', 'disabled', '--lease-namespace', 'default', '--log-level', 'info'],
      { POD_NAME: `ctl-${name}` },
      undefined,
      /kars controller starting/,
      (line) => {
        if (!line.includes('"msg":"watch restarting"') || !line.includes('"reason":"expired"')) return;
        this.expired.push(Number(/too old resource version: \d+ \((\d+)\)/.exec(line)?.[1] ?? NaN));
      },
    );
    this.controllers.set(name, p);
    return p.ready;
  }

  /** Start the probe router; resolves once it listens. */
  startRouter(): Promise<void> {
    this.router = start(
      [
        'router',
        '--sandbox',
        this.sandbox,
        '--namespace',
        this.namespace,
        '--instance',
        `${this.sandbox}-0`,
        '--upstream',
        'http://127.0.0.1:9',
        '--listen',
        '127.0.0.1:0',
        '--kubeconfig',
        this.kubeconfig,
      ],
      {},
      undefined,
      /listening: /,
    );
    return this.router.ready;
  }

  /** Start both controllers and the router. */
  protected startKars(): Promise<unknown> {
    return Promise.all([this.startController('a'), this.startController('b'), this.startRouter()]);
  }

  expiredWatchRestarts(windowFrom?: number): number {
    return windowFrom === undefined ? this.expired.length : this.expired.filter((floor) => floor >= windowFrom).length;
  }

  /** The controller that holds the leader Lease now (by identity), or undefined. */
  async leaderIdentity(): Promise<string | undefined> {
    const lease = await this.client.getOrUndefined<
      { metadata: { name: string }; spec?: { holderIdentity?: string } } & import('@kars/kube-core').KubeObject
    >(Resources.leases, 'default', 'kars-controller');
    return lease?.spec?.holderIdentity || undefined;
  }

  /** kill -9 every controller, then start them again (a crash of the whole controller deployment); resolves once they are up. */
  async killControllers(): Promise<void> {
    const all = [...this.controllers];
    for (const [, p] of all) p.child.kill('SIGKILL');
    await Promise.all(all.map(([, p]) => p.exited));
    await Promise.all(all.map(([name]) => this.startController(name)));
  }

  /** kill -9 the leading controller so the standby takes over at lease expiry; start it again as the new standby. */
  async failoverController(): Promise<string | undefined> {
    const holder = await this.leaderIdentity();
    const name = holder?.match(/^ctl-([a-z]+)-/)?.[1];
    const p = name ? this.controllers.get(name) : undefined;
    if (!name || !p) return undefined;
    p.child.kill('SIGKILL');
    await p.exited;
    void this.startController(name);
    return name;
  }

  /**
   * Restart the router process in the same "pod": graceful stop (withdraws its echo), start with the
   * same instance; resolves once the new process listens (process start-up is the platform's time,
   * not detection).
   */
  async restartRouter(): Promise<void> {
    const p = this.router;
    if (p) {
      p.child.kill('SIGTERM');
      await Promise.race([p.exited, new Promise((r) => setTimeout(r, 5000))]);
      p.child.kill('SIGKILL');
      // Gone before the next one starts, as a kubelet restarts a container: a process still alive
      // (or not yet reaped) holds the echo lease, and the new router rightly waits out its expiry.
      await p.exited;
    }
    await this.startRouter();
  }

  /** Stop the router and the controllers (SIGTERM, then SIGKILL after 5 s). */
  protected async stopKars(extra: Array<Proc | undefined> = []): Promise<void> {
    const procs = [this.router, ...this.controllers.values(), ...extra].filter((p): p is Proc => p !== undefined);
    for (const p of procs) p.child.kill('SIGTERM');
    await Promise.race([Promise.all(procs.map((p) => p.exited)), new Promise((r) => setTimeout(r, 5000))]);
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
  }

  /** The kars processes, by name, with their pid and whether they still run. */
  protected karsProcesses(): Array<{ name: string; pid: number | undefined; running: boolean }> {
    const all: Array<[string, Proc | undefined]> = [
      ...[...this.controllers].map(([n, p]): [string, Proc] => [`controller ${n}`, p]),
      ['router', this.router],
    ];
    return all.map(([name, p]) => ({
      name,
      pid: p?.child.pid,
      running: p !== undefined && p.child.exitCode === null && p.child.signalCode === null,
    }));
  }

  /** Recent stderr of the kars processes. */
  protected karsLogs(): string[] {
    const parts: string[] = [];
    for (const [n, p] of this.controllers) parts.push(`controller ${n}: ${p.stderr.join('').slice(-1500)}`);
    if (this.router) parts.push(`router: ${this.router.stderr.join('').slice(-1500)}`);
    return parts;
  }
}

/**
 * The local kars stack as real processes, for the conformance suite: `kars apiserver
 * --enable-fault-injection` (temporary data dir, free port, 1 s bookmarks), two `kars controller`s
 * with leader election, and a `kars router` for the probe sandbox (stable `--instance`), all with
 * {@link SUITE_KNOBS}. Every fault the suite injects is a method here.
 */
export class LocalStack extends KarsProcesses implements FaultStack {
  readonly server = 'kars apiserver';
  readonly dataDir = mkdtempSync(join(tmpdir(), 'kars-conformance-'));
  url = '';
  token = '';
  private apiserver: Proc | undefined;
  private stopped = false;
  /** How many `fault: restarted` lines the apiserver has logged, and who waits for the next. */
  private restarts = 0;
  private readonly restartWaiters: Array<() => void> = [];

  protected async startAll(): Promise<void> {
    const ready = new Promise<void>((resolve, reject) => {
      this.apiserver = start(
        [
          'apiserver',
          '--listen',
          '127.0.0.1:0',
          '--data-dir',
          join(this.dataDir, 'apiserver'),
          '--bookmark-interval',
          '1',
          '--enable-fault-injection',
        ],
        {},
        (line) => {
          const m = line.match(/^(kubeconfig|listening): (.*)$/);
          if (m?.[1] === 'kubeconfig') this.kubeconfig = m[2] ?? '';
          if (m?.[1] === 'listening') {
            this.url = m[2] ?? '';
            resolve();
          }
        },
        undefined,
        (line) => {
          if (line.includes('fault: restarted')) {
            this.restarts++;
            for (const w of this.restartWaiters.splice(0)) w();
          }
        },
      );
      void this.apiserver.exited.then((code) =>
        reject(new Error(`kars apiserver exited (${code}) before listening: ${this.apiserver?.stderr.join('').slice(-2000)}`)),
      );
    });
    await ready;
    this.token = readFileSync(join(this.dataDir, 'apiserver', 'token'), 'utf8').trim();
    this.client = await suiteClientWithCrds(this.kubeconfig);
    await this.startKars();
  }

  async freeze(): Promise<void> {
    await this.fault('freeze');
  }

  async reset(): Promise<void> {
    await this.fault('reset');
  }

  /**
   * The restart fault answers before the server halts; this resolves at the apiserver's next
   * `fault: restarted` log line, once it serves again (as kube-envtest's restart resolves at /readyz),
   * so that the suite's bound measures detection, not how long a loaded machine takes to boot it.
   */
  async restartApiserver(): Promise<void> {
    const seen = this.restarts;
    const restarted = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`kars apiserver did not restart within 60 s: ${this.logs()}`)), 60_000);
      const done = (): void => {
        clearTimeout(t);
        resolve();
      };
      if (this.restarts > seen) done();
      else this.restartWaiters.push(done);
    });
    await this.fault('restart');
    await restarted;
  }

  async compact(): Promise<number> {
    const body = JSON.parse(await this.fault('compact')) as { compactedTo?: number | string };
    return Number(body.compactedTo);
  }

  /**
   * POST /debug/faults/<action> on the apiserver (bearer token). The server may be restarting from a
   * previous fault: a refused connection is retried for up to 10 s. Reset and restart cut the very
   * connection that asked for them, so a reset reply counts as done. Resolves with the reply's body.
   */
  async fault(action: 'freeze' | 'reset' | 'compact' | 'restart'): Promise<string> {
    const ca = readFileSync(join(this.dataDir, 'apiserver', 'pki', 'ca.crt'), 'utf8');
    const https = await import('node:https');
    const once = (): Promise<string> =>
      new Promise<string>((resolve, reject) => {
        const req = https.request(
          new URL(`/debug/faults/${action}`, this.url),
          { method: 'POST', ca, agent: false, headers: { authorization: `Bearer ${this.token}` } },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (body += c));
            res.on('end', () =>
              res.statusCode && res.statusCode < 300
                ? resolve(body)
                : reject(new Error(`fault ${action}: HTTP ${res.statusCode}: ${body}`)),
            );
            res.on('error', (err: NodeJS.ErrnoException) =>
              err.code === 'ECONNRESET' && (action === 'reset' || action === 'restart') ? resolve('') : reject(err),
            );
          },
        );
        req.on('error', (err: NodeJS.ErrnoException) =>
          err.code === 'ECONNRESET' && (action === 'reset' || action === 'restart') ? resolve('') : reject(err),
        );
        req.end();
      });
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        return await once();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ECONNREFUSED' || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Stop everything (SIGTERM, then SIGKILL) and remove the data dir. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.client?.close();
    await this.stopKars([this.apiserver]);
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Every process of the stack, by name, with its pid and whether it still runs. */
  processes(): Array<{ name: string; pid: number | undefined; running: boolean }> {
    const api = this.apiserver;
    return [
      {
        name: 'apiserver',
        pid: api?.child.pid,
        running: api !== undefined && api.child.exitCode === null && api.child.signalCode === null,
      },
      ...this.karsProcesses(),
    ];
  }

  /** Recent stderr of every process, for a failure message. */
  logs(): string {
    const parts: string[] = [];
    if (this.apiserver) parts.push(`apiserver: ${this.apiserver.stderr.join('').slice(-1500)}`);
    return [...parts, ...this.karsLogs()].join('\n');
  }
}
