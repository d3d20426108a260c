import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { Resources, traceHop } from '@kars/kube-client';
import type { KubeClient } from '@kars/kube-client';
import { Reflector } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { INFERENCE_POLICY, isLive, KARS_SANDBOX, readEcho, ROUTER_LABEL, SANDBOX_LABEL } from '@kars/policy-api';
import type { InferencePolicy, KarsSandbox } from '@kars/policy-api';
import { INFERENCE_POLICY_DIGEST_ANNOTATION, INFERENCE_POLICY_KIND } from '@kars/policy-compiler';
import { summarize } from './stats.js';
import type { Summary } from './stats.js';

/** The dedicated sandbox the probe uses unless told otherwise; a router must serve it. */
export const DEFAULT_PROBE_SANDBOX = 'kars-probe';
/** Throwaway policies are named `kars-probe-<random>`; an existing sandbox bound to anything else is not touched without `force`. */
export const PROBE_POLICY_PREFIX = 'kars-probe-';
/** Label on what the probe creates. */
export const PROBE_LABEL = 'kars.azure.com/freshness-probe';

export interface ProbeOptions {
  client: KubeClient;
  namespace: string;
  /** Sandbox whose router echoes (default {@link DEFAULT_PROBE_SANDBOX}). Created and deleted when absent. */
  sandbox?: string;
  /** Re-point an existing sandbox bound to a non-probe policy (changes its enforcement while the probe runs). */
  force?: boolean;
  /** Watch settings for the probe's own watches (the shared runtime's). */
  config: WatchConfig;
  /** Per edit: give up waiting for echo and Ready after this long (default 30 s). */
  editTimeoutMs?: number;
  /** How long to wait for a router to echo the probe policy before the first edit (default 30 s). */
  routerTimeoutMs?: number;
  /** Wait for Ready (status condition) too, not only the router echo (default true). */
  waitReady?: boolean;
  signal?: AbortSignal;
}

/** What one edit measured. Times are from just before the write to when the probe's watch saw the effect. */
export interface EditResult {
  edit: number;
  /** metadata.generation the write produced. */
  generation: number;
  /** status.observedGeneration once the controller had compiled this edit (null: never seen). */
  observedGeneration: number | null;
  compiledDigest: string | null;
  configMapResourceVersion: string | null;
  toConfigMapMs: number | null;
  /** Edit → every live router of the sandbox echoes the compiled digest. */
  toEchoMs: number | null;
  /** Edit → status Ready=True for this generation. */
  toReadyMs: number | null;
  routers: number;
  error?: string;
}

export class ProbeSetupError extends Error {
  override name = 'ProbeSetupError';
}

type IP = InferencePolicy & KubeObject;
type SB = KarsSandbox & KubeObject;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Retry an API call through transient faults (connection resets, restarts) until `deadline`. */
async function retrying<T>(what: string, fn: () => Promise<T>, deadlineMs: number, signal?: AbortSignal): Promise<T> {
  let delay = 100;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const permanent = err instanceof ApiError && err.code >= 400 && err.code < 500 && err.code !== 429 && err.code !== 409;
      if (permanent || performance.now() > deadlineMs || signal?.aborted)
        throw err instanceof Error ? err : new Error(`${what}: ${String(err)}`);
      await sleep(delay);
      delay = Math.min(1000, delay * 2);
    }
  }
}

function digestOf(cm: KubeObject | undefined): string | undefined {
  return cm?.metadata.annotations?.[INFERENCE_POLICY_DIGEST_ANNOTATION];
}

/**
 * One probe run against one sandbox: a throwaway InferencePolicy bound to the sandbox, watches on
 * the policy, its compiled ConfigMap and the sandbox's router echo Leases, and edits measured one at
 * a time. Only standard Kubernetes API calls (CRUD, merge patch, list/watch), so it runs against any
 * cluster that runs kars. Always call {@link ProbeSession.close} (it restores or deletes what the
 * probe created, also after errors).
 */
export class ProbeSession {
  readonly sandbox: string;
  readonly policy: string;
  private createdSandbox = false;
  private originalRef: { name: string } | null | undefined;
  private readonly ac = new AbortController();
  private readonly policies: Reflector<IP>;
  private readonly configmaps: Reflector;
  private readonly leases: Reflector;
  private runs: Promise<void>[] = [];
  private readonly listeners = new Set<() => void>();
  private edits = 0;
  private base = 1_000_000 + Math.floor(Math.random() * 1_000_000);
  private lastDigest: string | undefined;
  private closed = false;

  private constructor(private readonly opts: ProbeOptions) {
    this.sandbox = opts.sandbox ?? DEFAULT_PROBE_SANDBOX;
    this.policy = `${PROBE_POLICY_PREFIX}${randomBytes(4).toString('hex')}`;
    setMaxListeners(0, this.ac.signal);
    const common = { client: opts.client, namespace: opts.namespace, config: opts.config };
    this.policies = new Reflector<IP>({
      ...common,
      name: 'probe-policy',
      resource: INFERENCE_POLICY,
      fieldSelector: `metadata.name=${this.policy}`,
    });
    this.configmaps = new Reflector({
      ...common,
      name: 'probe-configmap',
      resource: Resources.configmaps,
      fieldSelector: `metadata.name=${INFERENCE_POLICY_KIND.configMap.name(this.policy)}`,
    });
    this.leases = new Reflector({
      ...common,
      name: 'probe-leases',
      resource: Resources.leases,
      labelSelector: `${ROUTER_LABEL}=true,${SANDBOX_LABEL}=${this.sandbox}`,
    });
    for (const r of [this.policies, this.configmaps, this.leases] as Reflector[]) r.subscribe(() => this.notify());
  }

  private notify(): void {
    for (const fn of [...this.listeners]) fn();
  }

  /** Resolve with the first truthy value of `check`, re-evaluated on every watch event (and every 200 ms). */
  private until<T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
    return new Promise((resolve) => {
      const done = (v: T | undefined): void => {
        this.listeners.delete(onEvent);
        clearTimeout(timer);
        clearInterval(tick);
        resolve(v);
      };
      const onEvent = (): void => {
        const v = check();
        if (v !== undefined) done(v);
      };
      const timer = setTimeout(() => done(undefined), timeoutMs);
      const tick = setInterval(onEvent, 200);
      this.listeners.add(onEvent);
      onEvent();
    });
  }

  /** Live routers of the sandbox and whether they all echo `digest`. */
  private echoState(digest: string): { routers: number; all: boolean } {
    const now = Date.now();
    const live = this.leases.store
      .list()
      .map((l) => readEcho(l))
      .filter((e) => e !== undefined && isLive(e, now));
    return { routers: live.length, all: live.length > 0 && live.every((e) => e?.digests.InferencePolicy === digest) };
  }

  /** Create the throwaway policy, bind the sandbox to it, start the watches and wait for a router to echo it. */
  static async open(opts: ProbeOptions): Promise<ProbeSession> {
    const s = new ProbeSession(opts);
    try {
      await s.setup();
      return s;
    } catch (err) {
      await s.close();
      throw err;
    }
  }

  private async setup(): Promise<void> {
    const { client, namespace } = this.opts;
    const deadline = performance.now() + 30_000;
    try {
      await retrying('list InferencePolicies', () => client.list(INFERENCE_POLICY, { namespace, limit: 1 }), deadline, this.opts.signal);
    } catch (err) {
      if (err instanceof ApiError && err.code === 404)
        throw new ProbeSetupError(
          'the kars CRDs are not installed on this cluster (InferencePolicy not found): install them with `kars crds | kubectl apply -f -`',
        );
      throw err;
    }
    const existing = await retrying(
      'get sandbox',
      () => client.getOrUndefined<SB>(KARS_SANDBOX, namespace, this.sandbox),
      deadline,
      this.opts.signal,
    );
    if (existing) {
      const ref = existing.spec?.inferenceRef?.name;
      if (ref && !ref.startsWith(PROBE_POLICY_PREFIX) && !this.opts.force) {
        throw new ProbeSetupError(
          `sandbox ${namespace}/${this.sandbox} enforces InferencePolicy "${ref}"; the probe would replace it while it runs. Use a dedicated probe sandbox (default "${DEFAULT_PROBE_SANDBOX}"), or pass --force`,
        );
      }
      this.originalRef = existing.spec?.inferenceRef ? { name: existing.spec.inferenceRef.name } : null;
    }
    const labels = { [PROBE_LABEL]: 'true' };
    /** Create one of the probe's objects (labelled {@link PROBE_LABEL}) in the namespace, retrying until the setup deadline. */
    const create = (what: string, res: typeof INFERENCE_POLICY | typeof KARS_SANDBOX, name: string, spec: (IP | SB)['spec']) =>
      retrying(
        what,
        () =>
          client.create<IP | SB>(res, {
            apiVersion: `${res.group}/${res.version}`,
            kind: res.kind,
            metadata: { name, namespace, labels },
            spec,
          } as IP | SB),
        deadline,
        this.opts.signal,
      );
    await create('create policy', INFERENCE_POLICY, this.policy, {
      appliesTo: { sandboxName: this.sandbox },
      tokenBudget: { dailyTokens: this.base },
    });
    if (existing) {
      await retrying(
        'bind sandbox',
        () => client.patch(KARS_SANDBOX, namespace, this.sandbox, { spec: { inferenceRef: { name: this.policy } } }, 'merge'),
        deadline,
        this.opts.signal,
      );
    } else {
      await create('create sandbox', KARS_SANDBOX, this.sandbox, { inferenceRef: { name: this.policy } });
      this.createdSandbox = true;
    }
    this.runs = [this.policies.run(this.ac.signal), this.configmaps.run(this.ac.signal), this.leases.run(this.ac.signal)];
    const routerTimeout = this.opts.routerTimeoutMs ?? 30_000;
    const first = await this.until(() => {
      const d = digestOf(this.configmaps.store.get(`${namespace}/${INFERENCE_POLICY_KIND.configMap.name(this.policy)}`));
      return d && this.echoState(d).all ? d : undefined;
    }, routerTimeout);
    if (!first) {
      const routers = this.leases.store
        .list()
        .map((l) => readEcho(l))
        .filter((e) => e !== undefined && isLive(e, Date.now())).length;
      const compiled = this.configmaps.store.list().length > 0;
      if (!compiled)
        throw new ProbeSetupError(
          `the controller did not compile the probe policy ${namespace}/${this.policy} within ${routerTimeout / 1000} s: is kars controller running?`,
        );
      if (routers === 0)
        throw new ProbeSetupError(
          `no router serves sandbox ${namespace}/${this.sandbox} (no live echo Lease): the probe needs one, e.g. \`kars router --sandbox ${this.sandbox} --namespace ${namespace} --upstream URL\` (kars up starts one), or --sandbox NAME of a dedicated sandbox with a router`,
        );
      throw new ProbeSetupError(
        `the router(s) of sandbox ${namespace}/${this.sandbox} did not echo the probe policy within ${routerTimeout / 1000} s`,
      );
    }
    this.lastDigest = first;
    // Start the first edit from a settled state, as every later edit starts after the previous one
    // is Ready: otherwise it races the controller's status writes for the setup itself.
    if (this.opts.waitReady !== false)
      await this.until(() => {
        const p = this.policies.store.get(`${namespace}/${this.policy}`);
        const ready = p?.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'True' && ready.observedGeneration === p?.metadata.generation ? true : undefined;
      }, routerTimeout);
  }

  /** Make one edit and measure it. Never throws for a slow or lost effect: the result says what was missing. */
  async edit(): Promise<EditResult> {
    const { client, namespace } = this.opts;
    const n = ++this.edits;
    const timeoutMs = this.opts.editTimeoutMs ?? 30_000;
    const t0 = performance.now();
    traceHop('probe.edit', { n });
    const result: EditResult = {
      edit: n,
      generation: 0,
      observedGeneration: null,
      compiledDigest: null,
      configMapResourceVersion: null,
      toConfigMapMs: null,
      toEchoMs: null,
      toReadyMs: null,
      routers: 0,
    };
    let written: IP;
    try {
      written = await retrying(
        'edit policy',
        () =>
          client.patch<IP>(INFERENCE_POLICY, namespace, this.policy, { spec: { tokenBudget: { dailyTokens: this.base + n } } }, 'merge'),
        t0 + timeoutMs,
        this.opts.signal,
      );
    } catch (err) {
      result.error = `the edit could not be written: ${err instanceof Error ? err.message : String(err)}`;
      return result;
    }
    traceHop('probe.ack', { n });
    const gen = written.metadata.generation ?? 0;
    result.generation = gen;
    const before = this.lastDigest;
    const cmKey = `${namespace}/${INFERENCE_POLICY_KIND.configMap.name(this.policy)}`;
    const left = (): number => Math.max(0, t0 + timeoutMs - performance.now());
    const cm = await this.until(() => {
      const o = this.configmaps.store.get(cmKey);
      const d = digestOf(o);
      return o && d && d !== before ? { digest: d, rv: o.metadata.resourceVersion ?? '', at: performance.now() } : undefined;
    }, left());
    if (!cm) {
      result.error = `no compiled ConfigMap for generation ${gen} within ${timeoutMs} ms`;
      return result;
    }
    traceHop('probe.cm', { n });
    result.toConfigMapMs = cm.at - t0;
    result.compiledDigest = cm.digest;
    result.configMapResourceVersion = cm.rv;
    this.lastDigest = cm.digest;
    const echo = await this.until(() => {
      const s = this.echoState(cm.digest);
      return s.all ? { routers: s.routers, at: performance.now() } : undefined;
    }, left());
    if (echo) {
      traceHop('probe.echo', { n });
      result.toEchoMs = echo.at - t0;
      result.routers = echo.routers;
    } else {
      result.routers = this.echoState(cm.digest).routers;
      result.error = `the router(s) did not echo ${cm.digest} within ${timeoutMs} ms`;
    }
    const status = await this.until(
      () => {
        const p = this.policies.store.get(`${namespace}/${this.policy}`);
        const st = p?.status;
        if (!st || (st.observedGeneration ?? 0) < gen) return undefined;
        result.observedGeneration = st.observedGeneration ?? null;
        if (this.opts.waitReady === false) return { at: NaN };
        const ready = st.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'True' && ready.observedGeneration === gen ? { at: performance.now() } : undefined;
      },
      echo ? left() : 0,
    );
    traceHop('probe.ready', { n });
    if (status && Number.isFinite(status.at)) result.toReadyMs = status.at - t0;
    else if (this.opts.waitReady !== false && !result.error)
      result.error = `status did not turn Ready for generation ${gen} within ${timeoutMs} ms`;
    return result;
  }

  /** Delete the throwaway policy and restore (or delete) the sandbox; stop the watches. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.ac.abort();
    await Promise.allSettled(this.runs);
    const { client, namespace } = this.opts;
    const deadline = performance.now() + 15_000;
    const ignore404 = (p: Promise<unknown>): Promise<unknown> =>
      p.catch((err: unknown) => {
        if (err instanceof ApiError && err.code === 404) return undefined;
        throw err;
      });
    const errors: string[] = [];
    if (this.createdSandbox) {
      await retrying('delete sandbox', () => ignore404(client.delete(KARS_SANDBOX, namespace, this.sandbox)), deadline).catch(
        (e: unknown) => errors.push(String(e)),
      );
    } else if (this.originalRef !== undefined) {
      await retrying(
        'restore sandbox',
        () => ignore404(client.patch(KARS_SANDBOX, namespace, this.sandbox, { spec: { inferenceRef: this.originalRef } }, 'merge')),
        deadline,
      ).catch((e: unknown) => errors.push(String(e)));
    }
    await retrying('delete policy', () => ignore404(client.delete(INFERENCE_POLICY, namespace, this.policy)), deadline).catch(
      (e: unknown) => errors.push(String(e)),
    );
    if (errors.length) throw new Error(`probe cleanup incomplete: ${errors.join('; ')}`);
  }
}

/** A whole probe run. */
export interface ProbeReport {
  namespace: string;
  sandbox: string;
  policy: string;
  sloMs: number;
  edits: EditResult[];
  summary: { configMap: Summary; echo: Summary; ready: Summary };
  /** Edits whose echo was missing or slower than the SLO. */
  breaches: number;
  pass: boolean;
}

/** Summarise edits against an SLO on edit → router echo. */
export function report(session: { sandbox: string; policy: string }, namespace: string, edits: EditResult[], sloMs: number): ProbeReport {
  const breaches = edits.filter((e) => e.toEchoMs === null || e.toEchoMs > sloMs).length;
  return {
    namespace,
    sandbox: session.sandbox,
    policy: session.policy,
    sloMs,
    edits,
    summary: {
      configMap: summarize(edits.map((e) => e.toConfigMapMs)),
      echo: summarize(edits.map((e) => e.toEchoMs)),
      ready: summarize(edits.map((e) => e.toReadyMs)),
    },
    breaches,
    pass: edits.length > 0 && breaches === 0,
  };
}

/** Open a session, make `iterations` edits one after another, summarise, and always clean up. */
export async function runProbe(
  opts: ProbeOptions & { iterations: number; sloMs: number; onEdit?: (r: EditResult) => void },
): Promise<ProbeReport> {
  const session = await ProbeSession.open(opts);
  const edits: EditResult[] = [];
  try {
    for (let i = 0; i < opts.iterations && !opts.signal?.aborted; i++) {
      const r = await session.edit();
      edits.push(r);
      opts.onEdit?.(r);
    }
  } finally {
    await session.close();
  }
  return report(session, opts.namespace, edits, opts.sloMs);
}
