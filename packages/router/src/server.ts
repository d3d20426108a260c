import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { KubeClient } from '@kars/kube-client';
import type { RuntimeMetrics, WatchConfig } from '@kars/kube-runtime';
import { AdmissionGate, admitRequest } from './admission.js';
import { EchoPublisher } from './echo-publisher.js';
import { startEgressProxy } from './egress/proxy.js';
import { createInferenceHandler } from './inference/handler.js';
import { internalError, sendRefusal, type InferenceRefusal } from './inference/errors.js';
import { decideAtDoor } from './front-door.js';
import { wireOf } from './inference/routes.js';
import { UpstreamClient } from './http/upstream.js';
import { TokenBudgetTracker } from './inference/budget.js';
import { PolicyState } from './state.js';
import { RouterMetrics } from './router-metrics.js';
import { capabilityNames } from '@kars/policy-compiler/runtime';
import { listenOn, systemClock } from '@kars/kube-core';
import type { Clock, Logger } from '@kars/kube-core';
import type { GuardrailProvider, RouterCapabilities } from '@kars/policy-compiler/runtime';
import { createAdminServer } from './admin.js';
import { createMcpGateways, createPolicySources } from './router-parts.js';
import { DecisionLog } from './decisions/log.js';
import { DecisionRecorder, bindRequest, UNBOUND } from './decisions/recorder.js';
import { digestHeaderValue, POLICY_DIGEST_HEADER, REQUEST_ID_HEADER } from './decisions/record.js';

/** Where a router's policy comes from. */
export type PolicySourceOptions =
  { kind: 'api'; client: KubeClient; config: WatchConfig } | { kind: 'dir'; dir: string; client?: KubeClient };

export interface RouterOptions {
  sandbox: string;
  namespace: string;
  /** Agent traffic plus /healthz, /readyz, /metrics. */
  listen: string;
  upstream: URL;
  /** Inference upstreams by provider (`--upstream NAME=URL`: `azure-openai`, `anthropic`, `ollama`); a provider without one uses `upstream`. */
  upstreams?: ReadonlyMap<string, URL>;
  /** The unnamed MCP server behind `/mcp` (the old single `--mcp-upstream URL`). No ToolPolicy can be scoped to it. */
  mcpUpstream?: URL;
  /**
   * Named MCP servers (`--mcp-upstream NAME=URL`), each behind `/mcp/<name>`. A ToolPolicy with
   * `appliesTo.mcpServer: <name>` is enforced on exactly that route; one naming a server not listed
   * here is refused (NACK) and never becomes Ready.
   */
  mcpUpstreams?: ReadonlyArray<{ name: string; url: URL }>;
  egressListen?: string;
  adminListen?: string;
  /** Bearer token for /internal/policy-status; without one the admin endpoint refuses every request. */
  adminToken?: string;
  source: PolicySourceOptions;
  /** Refuse (or, with onStale 'open', allow and log) agent traffic when the view is older than this. */
  maxStalenessMs?: number;
  onStale?: 'closed' | 'open';
  /**
   * Guardrail providers whose backend is configured on this router (e.g. `openai-moderation` when a
   * moderation endpoint is set). A compiled InferencePolicy with a stage for any other provider is
   * refused (NACK) and never becomes Ready. See {@link routerCapabilities}.
   */
  guardrailProviders?: readonly GuardrailProvider[];
  /**
   * The OpenAI-compatible moderation backend for `openai-moderation` guardrail stages
   * (`kars router --guardrail-url`): requests go to `<url>/v1/moderations`. Setting it adds the
   * `openai-moderation` capability.
   */
  guardrail?: { url: URL; apiKey?: string };
  /** Bound on request body bytes held by requests in flight (default 32 MiB; 503 router_busy above). */
  maxInflightBodyBytes?: number;
  /** Bound on agent requests in flight (default 256; 503 router_busy above). */
  maxConcurrentRequests?: number;
  /** Daily token cap when no InferencePolicy sets one (the contract's TOKEN_BUDGET_DAILY). */
  defaultDailyTokens?: number;
  /**
   * Time allowed for an inference upstream's response headers, and for reading the rest of an
   * answer after the agent has gone (ADR 0027); default 300 s.
   */
  fetchTimeoutMs?: number;
  /**
   * The decision log (ADR 0040): a directory of hash-chained JSON-lines files, one record per
   * decision, also served on the admin listener at `GET /decisions`. Off when absent.
   */
  decisionLog?: { dir: string; maxBytes?: number; files?: number; queue?: number };
  /** Identity of this router instance in its echo lease. */
  instance: string;
  metrics: RuntimeMetrics;
  log: Logger;
  /**
   * The one time source (ADR 0016): the view's age and freshness, heartbeat staleness, budget
   * periods, rate limits, approval expiry, the egress sweep, the echo lease's timers and stamps.
   * Default the system clock; tests pass a `FakeClock`.
   */
  clock?: Clock;
}

/** A running router. */
export interface RunningRouter {
  url: string;
  adminUrl: string | undefined;
  egressUrl: string | undefined;
  state: PolicyState;
  /** Whether a policy view is loaded and confirmed fresh, and no other live router keeps it out of its echo lease. */
  isReady(): boolean;
  /** Why this router does not publish its echo (another live process holds the lease), or undefined. */
  echoBlocked(): string | undefined;
  /** This process's holder identity in its echo lease (undefined without an API client). */
  echoHolder: string | undefined;
  /** Age of the policy view in ms (how long since it was last confirmed current). */
  viewAgeMs(): number;
  /** Heartbeat staleness in seconds (API source only; undefined for a mounted directory). */
  stalenessSeconds(): number | undefined;
  /** Resolves when every part has stopped (after the signal aborted). */
  done: Promise<void>;
}

/**
 * What this router can enforce beyond the core, from its options: the one place router flags turn
 * into wire-contract capabilities (`mcp-server:<name>`, `guardrail:<provider>`).
 */
export function routerCapabilities(opts: Pick<RouterOptions, 'guardrailProviders' | 'mcpUpstreams' | 'guardrail'>): RouterCapabilities {
  const providers: GuardrailProvider[] = [
    ...(opts.guardrailProviders ?? []),
    ...(opts.guardrail !== undefined ? (['openai-moderation'] as const) : []),
  ];
  return {
    mcpServers: [...new Set((opts.mcpUpstreams ?? []).map((u) => u.name))].sort(),
    guardrailProviders: [...new Set(providers)].sort(),
  };
}

/** The digest header of a snapshot without policies (hand-made, in tests): nothing bound. */
const NO_INFERENCE = digestHeaderValue(UNBOUND.inference);
const NO_TOOLS = digestHeaderValue(UNBOUND.tools);

/** The MCP server named by a gateway path (`/mcp/<name>`), null for the unnamed `/mcp`. */
function mcpServerOf(path: string | undefined): string | null {
  return path !== undefined && path.startsWith('/mcp/') ? path.slice('/mcp/'.length) : null;
}

export { MCP_SERVER_NAME } from './router-parts.js';

/**
 * Start a router for one sandbox: load its policy (from the API through the freshness runtime, or
 * from a mounted directory), publish what it enforces, and serve agent traffic (inference, MCP),
 * egress, health, metrics and the admin status endpoint. Runs until `signal` aborts.
 */
export async function startRouter(opts: RouterOptions, signal: AbortSignal): Promise<RunningRouter> {
  const clock = opts.clock ?? systemClock;
  const state = new PolicyState(() => clock.wallNow());
  const capabilities = routerCapabilities(opts);
  const log = opts.log;
  const registry = opts.metrics.registry;
  const { api, dir, viewAgeMs, isLoaded } = createPolicySources(opts, state, capabilities, clock);
  const budget = new TokenBudgetTracker({ clock });
  const routerMetrics = new RouterMetrics(registry, {
    viewAgeMs,
    ...(api ? { stalenessSeconds: () => api.staleness.stalenessSeconds() } : {}),
    budget: () => budget.usage(opts.sandbox),
  });
  // Created here so readiness can see it; run below. A router that another live process keeps out of
  // its echo lease is not ready (ADR 0024): its echo would merge with that process's.
  const echoClient = opts.source.client;
  const echo = echoClient
    ? new EchoPublisher({
        client: echoClient,
        namespace: opts.namespace,
        sandbox: opts.sandbox,
        instance: opts.instance,
        state,
        capabilities: capabilityNames(capabilities),
        log,
        clock,
        ...(api ? { staleness: api.staleness } : {}),
      })
    : undefined;
  const isReady = (): boolean => isLoaded() && (api ? api.isFresh() : true) && echo?.blockedReason() === undefined;

  // Decision records (ADR 0040): built by the recorder, written off the request path by the log.
  const decisionLog =
    opts.decisionLog === undefined
      ? undefined
      : new DecisionLog({
          dir: opts.decisionLog.dir,
          sandbox: opts.sandbox,
          instance: opts.instance,
          ...(opts.decisionLog.maxBytes !== undefined ? { maxBytes: opts.decisionLog.maxBytes } : {}),
          ...(opts.decisionLog.files !== undefined ? { files: opts.decisionLog.files } : {}),
          ...(opts.decisionLog.queue !== undefined ? { queue: opts.decisionLog.queue } : {}),
          wallNow: () => clock.wallNow(),
          registry,
        });
  const recorder = new DecisionRecorder({
    sandbox: opts.sandbox,
    instance: opts.instance,
    clock,
    sink: decisionLog,
    onDryRun: (c) => routerMetrics.dryRunDecision(c),
  });

  // One upstream client (keep-alive pool, timeouts, stale-connection retry) for inference, every
  // MCP server and the guardrail backend.
  const client = new UpstreamClient();
  const inference = createInferenceHandler({
    client,
    snapshot: () => state.current(),
    upstream: opts.upstream,
    ...(opts.upstreams !== undefined ? { upstreams: opts.upstreams } : {}),
    sandbox: opts.sandbox,
    budget,
    ...(opts.defaultDailyTokens ? { defaultDailyTokens: opts.defaultDailyTokens } : {}),
    ...(opts.fetchTimeoutMs !== undefined ? { fetchTimeoutMs: opts.fetchTimeoutMs } : {}),
    ...(opts.guardrail !== undefined ? { guardrail: opts.guardrail } : {}),
    onDecision: (d) => routerMetrics.decision('inference', d.decision),
    decisions: recorder,
    clock,
  });
  const onToolDecision = (d: { kind: string; decision: string }): void => {
    if (d.kind === 'call') routerMetrics.decision('tools', d.decision);
  };
  const { gateways, listings } = createMcpGateways(opts, {
    snapshot: () => state.current(),
    client,
    clock,
    onDecision: onToolDecision,
    decisions: recorder,
  });
  let lastStaleLog = -Infinity;
  const gate = new AdmissionGate({
    ...(opts.maxInflightBodyBytes !== undefined ? { maxInflightBodyBytes: opts.maxInflightBodyBytes } : {}),
    ...(opts.maxConcurrentRequests !== undefined ? { maxConcurrent: opts.maxConcurrentRequests } : {}),
  });

  const main = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (path === '/readyz') {
      const ok = isReady();
      const blocked = echo?.blockedReason();
      res
        .writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' })
        .end(ok ? 'ok' : (blocked ?? `policy view not loaded or not fresh (age ${Math.round(viewAgeMs())} ms)`));
      return;
    }
    if (path === '/metrics') {
      void registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    // The front door's refusals are in the envelope of the API asked (MCP paths get OpenAI's).
    const isMcp = path !== undefined && gateways.has(path);
    const wire = isMcp ? 'openai' : wireOf(path ?? '/', req.headers['anthropic-version']);
    // One snapshot for the whole request: the handlers decide under it, its digests go in the
    // response header, and the decision record names them (ADR 0040).
    const snap = state.current();
    const requestId = recorder.nextRequestId();
    bindRequest(req, { requestId, snapshot: snap });
    res.setHeader(REQUEST_ID_HEADER, requestId);
    res.setHeader(
      POLICY_DIGEST_HEADER,
      isMcp ? (snap.policies?.header.tools ?? NO_TOOLS) : (snap.policies?.header.inference ?? NO_INFERENCE),
    );
    /** Record a refusal of the front door (before any handler) for its surface. */
    const recordAtDoor = (reason: string): void => {
      if (recorder.enabled) {
        const base = { requestId, snapshot: snap, decision: 'deny' as const, reason };
        if (isMcp) recorder.record({ ...base, kind: 'tool', target: { server: mcpServerOf(path), tool: '', action: 'call' } });
        else
          recorder.record({
            ...base,
            kind: 'inference',
            target: { api: path ?? '/', model: null, provider: null, deployment: null },
            tokens: null,
          });
      }
    };
    /** A refusal of the front door: sent, and recorded. */
    const refuseAtDoor = (refusal: InferenceRefusal): void => {
      sendRefusal(res, refusal, undefined, wire);
      recordAtDoor(refusal.body.error.code ?? 'refused');
    };
    // Not loaded, refused with nothing earlier, or stale: front-door.ts decides, in that order.
    const door = decideAtDoor({
      loaded: isLoaded(),
      snapshot: snap,
      mcp: isMcp,
      viewAgeMs,
      maxStalenessMs: opts.maxStalenessMs,
      onStale: opts.onStale ?? 'closed',
    });
    const stale = door.stale;
    if (stale !== undefined) {
      routerMetrics.staleRequest(stale.mode);
      if (clock.now() - lastStaleLog > 1000) {
        lastStaleLog = clock.now();
        log.warn(
          { ageMs: Math.round(stale.ageMs), maxStalenessMs: opts.maxStalenessMs, mode: stale.mode },
          stale.mode === 'closed' ? 'policy view is stale: failing closed' : 'policy view is stale: failing open',
        );
      }
    }
    if (door.kind === 'refuse') {
      refuseAtDoor(door.refusal);
      return;
    }
    // Bounded resources (issue 9 item 6): decided from the headers, before any body byte is read.
    if (!admitRequest(gate, req, res)) {
      const code = res.statusCode === 413 ? 'request_too_large' : 'router_busy';
      routerMetrics.admissionRefused(code);
      recordAtDoor(code);
      return;
    }
    const handle = async (): Promise<void> => {
      const mcp = path === undefined ? undefined : gateways.get(path);
      if (mcp && (await mcp(req, res))) return;
      // Every other path is the inference listener's: its route table, or a refusal listing it.
      await inference(req, res);
    };
    handle().catch((err: unknown) => {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'request failed');
      if (!res.headersSent) sendRefusal(res, internalError(), undefined, wire);
      else res.destroy();
    });
  });
  main.keepAliveTimeout = 65_000;
  const { url } = await listenOn(main, opts.listen, '--listen');

  let adminUrl: string | undefined;
  let admin: http.Server | undefined;
  if (opts.adminListen) {
    admin = createAdminServer({
      token: opts.adminToken,
      state,
      listings,
      decisionLog,
      staleness: api?.staleness,
      signal,
    });
    adminUrl = (await listenOn(admin, opts.adminListen, '--admin-listen')).url;
  }

  let egressUrl: string | undefined;
  let egressClose: (() => Promise<void>) | undefined;
  if (opts.egressListen) {
    const egress = await startEgressProxy({
      listen: opts.egressListen,
      snapshot: () => state.current(),
      sandbox: opts.sandbox,
      clock,
      onDecision: (d) => routerMetrics.decision('egress', d.decision),
      decisions: recorder,
    });
    egressUrl = egress.url;
    egressClose = () => egress.close();
  }

  const parts: Promise<void>[] = [];
  if (api) parts.push(api.run(signal));
  if (dir) parts.push(dir.run(signal));
  if (echo) parts.push(echo.run(signal));
  const closeServer = (s: http.Server | undefined): Promise<void> =>
    new Promise((resolve) => {
      if (!s) return resolve();
      s.close(() => resolve());
      s.closeAllConnections();
    });
  const done = (async () => {
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    await Promise.all([...parts, closeServer(main), closeServer(admin), egressClose?.()]);
    await decisionLog?.close();
    inference.close();
    await client.close();
  })();
  log.info(
    { url, adminUrl, egressUrl, sandbox: opts.sandbox, namespace: opts.namespace, source: opts.source.kind },
    'kars router listening',
  );
  return {
    url,
    adminUrl,
    egressUrl,
    state,
    isReady,
    echoBlocked: () => echo?.blockedReason(),
    echoHolder: echo?.holderIdentity(),
    viewAgeMs,
    stalenessSeconds: () => api?.staleness.stalenessSeconds(),
    done,
  };
}
