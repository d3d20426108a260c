// One fleet: N real `kars router` processes (one per sandbox, loading policy from the API), one
// `kars controller`, the OpenAI and MCP stubs, and observer watches of this process, on one target
// API server. Each phase returns plain figures; report.ts prints them.

import { createWriteStream } from 'node:fs';
import { get as httpGet } from 'node:http';
import { KubeClient, Resources } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';
import { startKars, stopKars } from '@kars/kube-envtest';
import type { KarsChild } from '@kars/kube-envtest';
import { Reflector, watchConfigFromEnv } from '@kars/kube-runtime';
import type { Change } from '@kars/kube-runtime';
import { allCrds, HEARTBEAT_CONFIGMAP, INFERENCE_POLICY, KARS_SANDBOX, readEcho, ROUTER_LABEL, TOOL_POLICY } from '@kars/policy-api';
import { connectionsTo, cpuSeconds, rssMiB } from './procs.js';
import type { Target } from './targets.js';

/** BENCH_CONTROLLER_LOG=<prefix>: the controller logs at debug level to `<prefix>-<target>-<N>.log`, and each edit's times are logged (for finding where a slow Ready went). */
const controllerLog = process.env['BENCH_CONTROLLER_LOG'];

export const NS = 'fleet';
const SHARED = 'shared';
const API_VERSION = `${INFERENCE_POLICY.group}/${INFERENCE_POLICY.version}`;
const MONTHLY = 1_000_000_000_000;

interface PolicyStatus {
  phase?: string;
  observedGeneration?: number;
  loadedDigest?: string;
  compiledDigest?: string;
  conditions?: Array<{ type: string; reason?: string; message?: string }>;
}
type Obj = KubeObject & { spec?: Record<string, unknown>; status?: PolicyStatus; data?: Record<string, string> };

const sandboxName = (i: number): string => `sb-${i}`;
const toolPolicyName = (i: number): string => `tp-${i}`;

const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Ready for its current generation (InferencePolicy: and the loaded digest is the compiled one). */
export function isReady(o: Obj | undefined): boolean {
  const st = o?.status;
  if (!o || !st || st.phase !== 'Ready' || st.observedGeneration !== o.metadata.generation) return false;
  // An InferencePolicy carries its compiled digest: Ready means the routers loaded that one (list items may lack `kind`).
  return st.compiledDigest === undefined || st.loadedDigest === st.compiledDigest;
}

async function retry<T>(what: string, ms: number, fn: () => Promise<T>): Promise<T> {
  const deadline = now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (now() > deadline) throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`);
      await sleep(200);
    }
  }
}

const ignoreConflict = (err: unknown): void => {
  if (!/409|AlreadyExists|already exists/i.test(err instanceof Error ? err.message : String(err))) throw err;
};

/** Run `fn` over 0..n-1, `concurrency` at a time. */
async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

function fetchText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpGet(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${url}: no answer in 10 s`)));
  });
}

/** The sum over samples of Prometheus counter `name` in `text`. */
export function sumCounter(text: string, name: string): number {
  let s = 0;
  for (const line of text.split('\n')) if (line.startsWith(name)) s += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  return s;
}

/**
 * How much a counter grew across the routers read both times, and how many routers were not (a
 * scrape that failed under load must not count as a counter that fell to zero).
 */
export function counterGrowth<K extends string>(
  before: ReadonlyArray<number | undefined>,
  after: ReadonlyArray<number | undefined>,
  key: K,
): Record<K, number> & Record<`${K}Unread`, number> {
  let grew = 0;
  let unread = 0;
  for (let i = 0; i < before.length; i++) {
    const a = before[i];
    const b = after[i];
    if (a === undefined || b === undefined) unread++;
    else grew += b - a;
  }
  return { [key]: grew, [`${key}Unread`]: unread } as Record<K, number> & Record<`${K}Unread`, number>;
}

export interface EditFigures {
  /** Per edit: patch sent → every router echoes the new digest, and → the policy is Ready (ms). */
  toAllEcho: number[];
  toReady: number[];
  timeouts: number;
}

export interface SteadyFigures {
  seconds: number;
  /** Writes/s seen on the observer watches, by kind. */
  writesPerSec: Record<string, number>;
  /** Status writes of KarsSandboxes and policies in the window (none expected: the echoes did not change). */
  statusWrites: number;
  /** For the first status write of each kind: the fields that changed (what made the write). */
  statusDiffs: Record<string, string>;
  /** kube-apiserver only: requests/s by "verb resource" (audit log), and watches opened in the window. */
  requestsPerSec: Record<string, number> | undefined;
  connections: number;
  apiserverCpuPct: number;
  apiserverRssMiB: number;
  controllerCpuPct: number;
  controllerRssMiB: number;
  routerCpuPctEach: number;
  routerRssMiBMedian: number;
}

export interface RestartFigures {
  /** Restart begun (SIGTERM) → the old process exited, its connections with it (ms): the server's own shutdown. */
  stopped: number;
  /** Whether the stop grace ran out and the old process was killed. */
  killed: boolean;
  /** Restart begun → the API server serves again (ms). */
  serving: number;
  /** Restart begun → every router echoes an edit made as soon as the server served (ms). */
  allFresh: number;
  /**
   * The old process exited → every router echoes that edit (ms): what the routers' side of a
   * restart costs (the new server's start-up included), the figure the detection bound + 5 s applies to.
   */
  exitToAllFresh: number;
  /** That edit → every router echoes it (ms). */
  editToAllEcho: number;
  /** Relists and watch restarts the routers counted during the restart (their /metrics). */
  relists: number;
  watchRestarts: number;
  /** Routers whose /metrics could not be read before or after (left out of the two counts above). */
  relistsUnread: number;
  watchRestartsUnread: number;
  /** kube-apiserver only: LIST and WATCH requests in the restart window (audit log). */
  lists: number | undefined;
  watches: number | undefined;
}

/** The leaf paths that differ between two objects (metadata.resourceVersion and managedFields left out), old → new. */
export function diff(a: unknown, b: unknown, path = ''): string {
  if (path === '.metadata.resourceVersion' || path === '.metadata.managedFields') return '';
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys]
      .map((k) => diff((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`))
      .filter(Boolean)
      .join('; ');
  }
  return JSON.stringify(a) === JSON.stringify(b) ? '' : `${path}: ${JSON.stringify(a)} → ${JSON.stringify(b)}`;
}

export class Fleet {
  readonly api: KubeClient;
  private readonly obs: KubeClient;
  private readonly ac = new AbortController();
  private readonly runs: Array<Promise<void>> = [];
  private readonly children: KarsChild[] = [];
  readonly routers: Array<{ child: KarsChild; url: string }> = [];
  controller: KarsChild | undefined;
  private readonly subs = new Set<(kind: string, c: Change<Obj>) => void>();
  readonly leases: Reflector<Obj>;
  readonly ips: Reflector<Obj>;
  readonly tps: Reflector<Obj>;
  /** digest → lease name → when the echo Lease first carried it (InferencePolicy digests). */
  private readonly echoSeen = new Map<string, Map<string, number>>();

  constructor(
    readonly target: Target,
    readonly n: number,
    private readonly log: (l: string) => void,
  ) {
    this.api = KubeClient.fromKubeconfig({ kubeconfig: target.kubeconfig });
    this.obs = KubeClient.fromKubeconfig({ kubeconfig: target.kubeconfig });
    const cfg = watchConfigFromEnv(process.env);
    const mk = (kind: string, resource: ConstructorParameters<typeof Reflector<Obj>>[0]['resource'], labelSelector?: string) => {
      const r = new Reflector<Obj>({
        name: kind,
        client: this.obs,
        resource,
        namespace: NS,
        config: cfg,
        ...(labelSelector ? { labelSelector } : {}),
      });
      r.subscribe((c) => {
        for (const f of this.subs) f(kind, c);
      });
      return r;
    };
    this.leases = mk('Lease (echo)', Resources.leases, `${ROUTER_LABEL}=true`);
    this.ips = mk('InferencePolicy', INFERENCE_POLICY);
    this.tps = mk('ToolPolicy', TOOL_POLICY);
    const sbs = mk('KarsSandbox', KARS_SANDBOX);
    const cms = mk('ConfigMap', Resources.configmaps);
    this.subs.add((kind, c) => {
      if (kind !== 'Lease (echo)' || c.type !== 'apply') return;
      const d = readEcho(c.object)?.digests?.InferencePolicy;
      if (!d) return;
      let m = this.echoSeen.get(d);
      if (!m) this.echoSeen.set(d, (m = new Map()));
      if (!m.has(c.object.metadata.name ?? '')) m.set(c.object.metadata.name ?? '', now());
    });
    this.reflectors = [this.leases, this.ips, this.tps, sbs, cms];
  }
  private readonly reflectors: Array<Reflector<Obj>>;

  /** CRDs, the namespace, N sandboxes, the shared InferencePolicy, N ToolPolicies; then the stubs, the controller and N routers; until all are Ready. */
  async start(routerConcurrency: number): Promise<void> {
    for (const crd of allCrds())
      await this.api.create(Resources.customresourcedefinitions, crd as unknown as KubeObject).catch(ignoreConflict);
    await retry('the kars CRDs served', 60_000, async () => {
      await this.api.list(INFERENCE_POLICY, { limit: 1 });
      await this.api.list(TOOL_POLICY, { limit: 1 });
    });
    await this.api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }).catch(ignoreConflict);
    await retry('the shared InferencePolicy', 60_000, () =>
      this.api.create(INFERENCE_POLICY, {
        apiVersion: API_VERSION,
        kind: 'InferencePolicy',
        metadata: { name: SHARED, namespace: NS },
        spec: {
          appliesTo: { sandboxMatchLabels: { fleet: 'bench' } },
          tokenBudget: { perRequestTokens: 32_000, dailyTokens: 1_000_000, monthlyTokens: MONTHLY },
        },
      } as KubeObject),
    );
    await pool(this.n, 16, async (i) => {
      await this.api.create(KARS_SANDBOX, {
        apiVersion: API_VERSION,
        kind: 'KarsSandbox',
        metadata: { name: sandboxName(i), namespace: NS, labels: { fleet: 'bench', sandbox: sandboxName(i) } },
        spec: { inferenceRef: { name: SHARED }, governance: { toolPolicyRef: { name: toolPolicyName(i) } } },
      } as KubeObject);
      await this.api.create(TOOL_POLICY, {
        apiVersion: API_VERSION,
        kind: 'ToolPolicy',
        metadata: { name: toolPolicyName(i), namespace: NS },
        spec: { appliesTo: { tool: '*' }, rateLimit: { rps: 5, burst: 10 } },
      } as KubeObject);
    });
    for (const r of this.reflectors) this.runs.push(r.run(this.ac.signal));
    await Promise.all(this.reflectors.map((r) => r.store.ready()));

    const quiet = { KARS_LOG_LEVEL: 'warn' };
    const openai = this.child(startKars('stub-openai', ['stub', 'openai', '--listen', '127.0.0.1:0'], quiet));
    const mcp = this.child(startKars('stub-mcp', ['stub', 'mcp', '--listen', '127.0.0.1:0'], quiet));
    const [openaiUrl, mcpUrl] = await Promise.all([openai.url, mcp.url]);
    this.controller = this.child(
      startKars('controller', ['controller', '--kubeconfig', this.target.kubeconfig, '--metrics-addr', 'disabled'], {
        ...quiet,
        ...(controllerLog ? { KARS_LOG_LEVEL: 'debug' } : {}),
        LEADER_ELECTION_ENABLED: 'false',
      }),
    );
    if (controllerLog) {
      const out = createWriteStream(`${controllerLog}-${this.target.label.replace(/\W+/g, '_')}-${this.n}.log`);
      this.controller.proc.stdout?.pipe(out);
      this.controller.proc.stderr?.pipe(out);
    }
    const t0 = now();
    await pool(this.n, routerConcurrency, async (i) => {
      const child = this.child(
        startKars(
          `router-${i}`,
          [
            'router',
            '--sandbox',
            sandboxName(i),
            '--namespace',
            NS,
            '--instance',
            `${sandboxName(i)}-0`,
            '--listen',
            '127.0.0.1:0',
            '--upstream',
            openaiUrl,
            '--mcp-upstream',
            `${mcpUrl.replace(/\/$/, '')}/mcp`,
            '--kubeconfig',
            this.target.kubeconfig,
          ],
          quiet,
        ),
      );
      this.routers.push({ child, url: await child.url });
    });
    this.log(`    ${this.n} routers listening in ${((now() - t0) / 1000).toFixed(1)} s`);
    await this.waitFor(
      () => isReady(this.ips.store.get(`${NS}/${SHARED}`)) && this.allToolPoliciesReady(),
      Number(process.env['BENCH_READY_TIMEOUT_SECS'] ?? 300) * 1000,
      'the shared InferencePolicy and every ToolPolicy Ready',
    ).catch((err: unknown) => {
      const st = (o: Obj | undefined): string =>
        JSON.stringify({
          generation: o?.metadata.generation,
          phase: o?.status?.phase,
          observedGeneration: o?.status?.observedGeneration,
          loaded: o?.status?.loadedDigest,
          compiled: o?.status?.compiledDigest,
          ready: o?.status?.conditions?.find((c) => c.type === 'Ready'),
        });
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}; ${SHARED}: ${st(this.ips.store.get(`${NS}/${SHARED}`))}; ${toolPolicyName(0)}: ${st(this.tps.store.get(`${NS}/${toolPolicyName(0)}`))}`,
      );
    });
    this.log(`    all Ready ${((now() - t0) / 1000).toFixed(1)} s after the first router started`);
  }

  private child(c: KarsChild): KarsChild {
    this.children.push(c);
    return c;
  }

  private allToolPoliciesReady(generations?: Map<string, number>): boolean {
    for (let i = 0; i < this.n; i++) {
      const o = this.tps.store.get(`${NS}/${toolPolicyName(i)}`);
      if (!isReady(o)) return false;
      const g = generations?.get(toolPolicyName(i));
      if (g !== undefined && (o?.metadata.generation ?? 0) < g) return false;
    }
    return true;
  }

  /** Resolves once `pred` holds (checked on every observed change and every 250 ms); rejects after `ms` or when a child exits. */
  waitFor(pred: () => boolean, ms: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const dead = this.children.find((c) => c.proc.exitCode !== null || c.proc.signalCode !== null);
        if (dead) finish(new Error(`${what}: kars ${dead.name} exited: ${dead.output.join('').slice(-1500)}`));
        else if (pred()) finish();
      };
      const finish = (err?: Error): void => {
        clearTimeout(timer);
        clearInterval(poll);
        this.subs.delete(check);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => finish(new Error(`${what}: not within ${ms / 1000} s`)), ms);
      const poll = setInterval(check, 250);
      this.subs.add(check);
      check();
    });
  }

  private dailyTokens = 1_000_000;

  /** Patch the shared policy; resolves with the patch's send time and the new generation. */
  private async editShared(): Promise<{ t0: number; generation: number }> {
    const v = ++this.dailyTokens;
    const t0 = now();
    const o = await this.api.patch(INFERENCE_POLICY, NS, SHARED, { spec: { tokenBudget: { dailyTokens: v } } }, 'merge');
    return { t0, generation: o.metadata.generation ?? 0 };
  }

  /** Wait until the shared policy is Ready at `generation` and all N routers echo its digest; returns both times. */
  private async awaitShared(generation: number, ms: number): Promise<{ readyAt: number; allEchoAt: number }> {
    let readyAt = 0;
    let digest: string | undefined;
    await this.waitFor(
      () => {
        const o = this.ips.store.get(`${NS}/${SHARED}`);
        if (!o || (o.metadata.generation ?? 0) < generation || !isReady(o)) return false;
        readyAt ||= now();
        digest = o.status?.compiledDigest;
        return (this.echoSeen.get(digest ?? '')?.size ?? 0) >= this.n;
      },
      ms,
      `shared policy generation ${generation} Ready and echoed by all ${this.n} routers`,
    );
    const seen = [...(this.echoSeen.get(digest ?? '')?.values() ?? [])];
    return { readyAt, allEchoAt: Math.max(...seen) };
  }

  /** `edits` edits of the one policy every sandbox shares, one after another. */
  async sharedEdits(edits: number, warmup: number, timeoutMs: number): Promise<EditFigures> {
    const f: EditFigures = { toAllEcho: [], toReady: [], timeouts: 0 };
    for (let i = 0; i < warmup + edits; i++) {
      const { t0, generation } = await this.editShared();
      try {
        const { readyAt, allEchoAt } = await this.awaitShared(generation, timeoutMs);
        if (i >= warmup) {
          f.toAllEcho.push(allEchoAt - t0);
          f.toReady.push(readyAt - t0);
        }
        if (controllerLog)
          this.log(
            `    edit ${i}: generation ${generation} patched at ${new Date(Date.now() - (now() - t0)).toISOString()}; every router echoing +${Math.round(allEchoAt - t0)} ms, Ready +${Math.round(readyAt - t0)} ms`,
          );
      } catch (err) {
        if (this.children.some((c) => c.proc.exitCode !== null)) throw err;
        f.timeouts++;
        this.log(`    edit ${i}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    return f;
  }

  /** Edit all N ToolPolicies at once; ms from the first patch until all are Ready at their new generation. */
  async burst(timeoutMs: number): Promise<{ allReady: number; patchesMs: number }> {
    const gens = new Map<string, number>();
    const t0 = now();
    await pool(this.n, 32, async (i) => {
      const o = await this.api.patch(
        TOOL_POLICY,
        NS,
        toolPolicyName(i),
        { spec: { rateLimit: { rps: 6 + (this.burstRound % 50) } } },
        'merge',
      );
      gens.set(toolPolicyName(i), o.metadata.generation ?? 0);
    });
    this.burstRound++;
    const patchesMs = now() - t0;
    await this.waitFor(() => gens.size === this.n && this.allToolPoliciesReady(gens), timeoutMs, `all ${this.n} ToolPolicies Ready`);
    return { allReady: now() - t0, patchesMs };
  }
  private burstRound = 0;

  /** Nothing edited for `seconds`: what the fleet costs the API server at rest. */
  async steady(seconds: number): Promise<SteadyFigures> {
    const writes: Record<string, number> = {};
    let statusWrites = 0;
    const statusDiffs = new Map<string, string>();
    const count = (kind: string, c: Change<Obj>): void => {
      if (c.type !== 'apply' || (c.old && c.old.metadata.resourceVersion === c.object.metadata.resourceVersion)) return;
      const k = kind === 'ConfigMap' && c.object.metadata.name === HEARTBEAT_CONFIGMAP ? 'ConfigMap (heartbeat)' : kind;
      writes[k] = (writes[k] ?? 0) + 1;
      if (kind === 'KarsSandbox' || kind === 'InferencePolicy' || kind === 'ToolPolicy') {
        statusWrites++;
        if (!statusDiffs.has(kind) && c.old) statusDiffs.set(kind, diff(c.old, c.object));
      }
    };
    // Let the echoes of the phase before settle (a sandbox's status lists what its router loaded last).
    await sleep(5000);
    const routerPids = this.routers.map((r) => r.child.proc.pid);
    const before = {
      api: cpuSeconds(this.target.pid()),
      ctl: cpuSeconds(this.controller?.proc.pid),
      routers: routerPids.map(cpuSeconds),
      audit: this.target.requests()?.length,
    };
    const t0 = now();
    this.subs.add(count);
    await sleep(seconds * 1000);
    this.subs.delete(count);
    const dt = (now() - t0) / 1000;
    const apiCpu = cpuSeconds(this.target.pid()) - before.api;
    const ctlCpu = cpuSeconds(this.controller?.proc.pid) - before.ctl;
    const routerCpu = routerPids.map((p, i) => cpuSeconds(p) - (before.routers[i] ?? 0));
    let requestsPerSec: Record<string, number> | undefined;
    const audit = this.target.requests();
    if (audit && before.audit !== undefined) {
      requestsPerSec = {};
      for (const e of audit.slice(before.audit)) {
        // One event per request at ResponseComplete; a watch also logs ResponseStarted: count that once, as "watch opened".
        if (e.stage !== 'ResponseComplete' && !(e.stage === 'ResponseStarted' && e.verb === 'watch')) continue;
        if (e.verb === 'watch' && e.stage === 'ResponseComplete') continue;
        const res = `${e.objectRef?.resource ?? e.requestURI.split('?')[0]}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
        const k = `${e.verb} ${res}`;
        requestsPerSec[k] = (requestsPerSec[k] ?? 0) + 1;
      }
      for (const k of Object.keys(requestsPerSec)) requestsPerSec[k] = (requestsPerSec[k] ?? 0) / dt;
    }
    for (const k of Object.keys(writes)) writes[k] = (writes[k] ?? 0) / dt;
    const rss = this.routers.map((r) => rssMiB(r.child.proc.pid)).sort((a, b) => a - b);
    return {
      seconds: dt,
      writesPerSec: writes,
      statusWrites,
      statusDiffs: Object.fromEntries(statusDiffs),
      requestsPerSec,
      connections: connectionsTo(this.target.port),
      apiserverCpuPct: (100 * apiCpu) / dt,
      apiserverRssMiB: rssMiB(this.target.pid()),
      controllerCpuPct: (100 * ctlCpu) / dt,
      controllerRssMiB: rssMiB(this.controller?.proc.pid),
      routerCpuPctEach: (100 * routerCpu.reduce((a, b) => a + b, 0)) / dt / Math.max(1, routerCpu.length),
      routerRssMiBMedian: rss[Math.floor(rss.length / 2)] ?? NaN,
    };
  }

  /** Sum of `name` over every router's /metrics. */
  /** Each router's counter `name` from its /metrics; undefined for a router whose scrape failed. */
  private async routerCounters(name: string): Promise<Array<number | undefined>> {
    const out: Array<number | undefined> = this.routers.map(() => undefined);
    await pool(this.routers.length, 16, async (i) => {
      const r = this.routers[i];
      if (r)
        out[i] = await fetchText(`${r.url.replace(/\/$/, '')}/metrics`).then(
          (t) => sumCounter(t, name),
          () => undefined,
        );
    });
    return out;
  }

  /** Restart the API server; then edit the shared policy as soon as it serves, until every router echoes it. */
  async restart(timeoutMs: number): Promise<RestartFigures> {
    const relists0 = await this.routerCounters('kars_watch_relists_total');
    const restarts0 = await this.routerCounters('kars_watch_restarts_total');
    const audit0 = this.target.requests()?.length;
    const t0 = now();
    const { stoppedMs, killed } = await this.target.restart();
    const serving = now() - t0;
    const { t0: tEdit, generation } = await retry('the first edit after the restart', 60_000, () => this.editShared());
    const { allEchoAt } = await this.awaitShared(generation, timeoutMs);
    // The routers' counters settle once their watches are back.
    await sleep(1000);
    const audit = this.target.requests();
    const after = audit && audit0 !== undefined ? audit.slice(audit0) : undefined;
    const completes = (verb: string): number | undefined =>
      after?.filter((e) => e.verb === verb && e.stage === (verb === 'watch' ? 'ResponseStarted' : 'ResponseComplete')).length;
    return {
      stopped: stoppedMs,
      killed,
      serving,
      allFresh: allEchoAt - t0,
      exitToAllFresh: allEchoAt - (t0 + stoppedMs),
      editToAllEcho: allEchoAt - tEdit,
      ...counterGrowth(relists0, await this.routerCounters('kars_watch_relists_total'), 'relists'),
      ...counterGrowth(restarts0, await this.routerCounters('kars_watch_restarts_total'), 'watchRestarts'),
      lists: completes('list'),
      watches: completes('watch'),
    };
  }

  /** Stop every child (routers first), the observer watches and the clients. */
  async stop(): Promise<void> {
    await Promise.all([...this.children].reverse().map((c) => stopKars(c)));
    this.ac.abort();
    await Promise.allSettled(this.runs);
    this.api.close();
    this.obs.close();
  }
}
