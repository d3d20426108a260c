import http2 from 'node:http2';
import type { Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { badRequest, FaultRelay, formatHostPort, listenOn, parseListen, silentLogger, type Logger } from '@kars/kube-core';
import { bootstrapPolicy } from './auth/api.js';
import { Auth } from './auth/authorizer.js';
import type { AuditRecord, AuthorizationMode } from './auth/authorizer.js';
import { ServiceAccountTokens } from './auth/tokens.js';
import { createHandler } from './http/handler.js';
import { installHeadLimits, refuseLargeHead } from './http/head-limits.js';
import type { Req } from './http/compat.js';
import type { WatchStream } from './http/watch.js';
import { builtinResources } from './registry/builtins.js';
import { Registry } from './registry/registry.js';
import { Lifecycle } from './lifecycle.js';
import { ObjectService } from './service.js';
import { DataDirLock } from './storage/dir-lock.js';
import { DEFAULT_MAX_BATCH, Store } from './storage/store.js';
import { writeKubeconfig } from './tls/kubeconfig.js';
import { ensurePki, ensureToken } from './tls/pki.js';
import { WatchCache } from './watch/cache.js';

/** Structured log sink; the CLI passes pino, tests pass nothing. */

export interface ApiServerOptions {
  /** HOST:PORT to listen on; port 0 picks a free port. Default 127.0.0.1:6443. */
  listen?: string;
  /** Where state, certificates and the token live. Default .kars/apiserver. */
  dataDir?: string;
  /** Where to write the kubeconfig. Default <dataDir>/kubeconfig. */
  kubeconfigOut?: string;
  /** Seconds between watch bookmarks. Default 60, as kube-apiserver. */
  bookmarkIntervalSeconds?: number;
  /** How many past changes a watch can resume from; older resourceVersions get 410. Default 10000. */
  historyWindow?: number;
  /**
   * Most writes that share one transaction and one fsync (group commit, ADR 0002). Default 256;
   * 1 commits every write on its own (the behaviour before group commit, kept for benchmarks).
   */
  maxCommitBatch?: number;
  /** Watch lifetime when the client sends no timeoutSeconds: random in [t, 2t). Default 1800. */
  minRequestTimeoutSeconds?: number;
  /** Put the fault relay in front of the listener and serve /debug/faults/* (tests only). */
  faultInjection?: boolean;
  /** `AlwaysAllow` (default: every authenticated request is allowed) or `RBAC`. */
  authorizationMode?: AuthorizationMode;
  /** Called with every authorization decision (user, attributes, allowed): an audit hook for tests. */
  audit?: (r: AuditRecord) => void;
  /** Where the server logs (kube-core's Logger; pino satisfies it). Default: silent. */
  log?: Logger;
  /** Stops the server when aborted (as {@link ApiServer.stop}); {@link ApiServer.done} resolves once it has. */
  signal?: AbortSignal;
}

/** Faults a test can inject into a running server. */
export interface FaultInjector {
  /** Silence every open watch stream and its connection: no bytes, no FIN, no RST. */
  freezeWatches(): number;
  /** Reset every open client connection with RST. */
  resetConnections(): number;
  /** Forget all history up to now: the next watch resume from an older resourceVersion gets 410. */
  compact(): number;
  /** Stop hard (as a crash would) and start again on the same port and data dir. */
  restart(): Promise<void>;
}

interface Running {
  store: Store;
  service: ObjectService;
  lifecycle: Lifecycle;
  cache: WatchCache;
  registry: Registry;
  server: http2.Http2SecureServer;
  relay: FaultRelay | undefined;
  sockets: Set<Socket>;
  watches: Set<{ stream: WatchStream; port: number | undefined }>;
  auth: Auth;
}

/**
 * `kars apiserver`: a Kubernetes-compatible API server over HTTPS (HTTP/2 and HTTP/1.1),
 * with bearer-token auth, durable SQLite storage and optional fault injection.
 */
export class ApiServer {
  readonly url: string;
  readonly kubeconfigPath: string;
  readonly token: string;
  readonly caCert: string;
  readonly dataDir: string;
  /** Present when started with `faultInjection: true`. */
  readonly faults: FaultInjector | undefined;
  private running: Running | undefined;
  /** The data directory's lock, held from start to stop (a fault restart keeps it). */
  private lock: DataDirLock | undefined;

  private constructor(
    private readonly opts: Required<Omit<ApiServerOptions, 'log' | 'kubeconfigOut' | 'listen' | 'audit' | 'signal'>> & {
      log: Logger;
      audit?: (r: AuditRecord) => void;
    },
    private readonly host: string,
    private port: number,
    private readonly pki: { caCert: string; serverCert: string; serverKey: string },
    token: string,
    kubeconfigPath: string,
  ) {
    this.token = token;
    this.caCert = pki.caCert;
    this.dataDir = opts.dataDir;
    this.kubeconfigPath = kubeconfigPath;
    this.url = '';
    this.faults = opts.faultInjection ? this.makeFaults() : undefined;
  }

  /** Start a server; resolves once it accepts requests and the kubeconfig is written. */
  static async start(options: ApiServerOptions = {}): Promise<ApiServer> {
    const { host, port } = parseListen(options.listen ?? '127.0.0.1:6443', '--listen');
    const dataDir = resolve(options.dataDir ?? '.kars/apiserver');
    // Before anything in the directory is read or written (ADR 0024): a second process refuses here.
    const lock = DataDirLock.acquire(dataDir, { what: 'kars apiserver', flag: '--data-dir' });
    try {
      return await ApiServer.startLocked(options, host, port, dataDir, lock);
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  private static async startLocked(
    options: ApiServerOptions,
    host: string,
    port: number,
    dataDir: string,
    lock: DataDirLock,
  ): Promise<ApiServer> {
    const pki = ensurePki(join(dataDir, 'pki'), [host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host]);
    const token = ensureToken(join(dataDir, 'token'));
    const kubeconfigPath = resolve(options.kubeconfigOut ?? join(dataDir, 'kubeconfig'));
    const log: Logger = options.log ?? silentLogger;
    const srv = new ApiServer(
      {
        dataDir,
        bookmarkIntervalSeconds: options.bookmarkIntervalSeconds ?? 60,
        historyWindow: options.historyWindow ?? 10_000,
        maxCommitBatch: options.maxCommitBatch ?? DEFAULT_MAX_BATCH,
        minRequestTimeoutSeconds: options.minRequestTimeoutSeconds ?? 1800,
        faultInjection: options.faultInjection ?? false,
        authorizationMode: options.authorizationMode ?? 'AlwaysAllow',
        ...(options.audit ? { audit: options.audit } : {}),
        log,
      },
      host,
      port,
      pki,
      token,
      kubeconfigPath,
    );
    srv.lock = lock;
    await srv.boot();
    const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
    (srv as { url: string }).url = `https://${urlHost}:${srv.port}`;
    writeKubeconfig(kubeconfigPath, srv.url, pki.caCert, token);
    const signal = options.signal;
    if (signal !== undefined) {
      const onAbort = (): void => void srv.stop().catch((err: unknown) => log.error({ err }, 'stopping failed'));
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    return srv;
  }

  private async boot(): Promise<void> {
    const store = new Store(join(this.opts.dataDir, 'db'), { historyWindow: this.opts.historyWindow, maxBatch: this.opts.maxCommitBatch });
    // A failed WAL sync leaves a batch's fate unknown: exit, and recover from the log on restart.
    store.onFatal = (err) => {
      this.opts.log.error({ err }, 'syncing the storage write-ahead log failed; exiting');
      process.exit(1);
    };
    const cache = new WatchCache(store.changesAfter(store.oldestResumableRv()), store.oldestResumableRv());
    const registry = new Registry(builtinResources());
    const onError = (err: unknown, what: string): void => this.opts.log.error({ err }, what);
    const service = new ObjectService(store, registry, cache, onError);
    await service.bootstrap();
    const lifecycle = new Lifecycle(service, store, registry, onError);
    lifecycle.start();
    if (this.opts.authorizationMode === 'RBAC') await bootstrapPolicy(service, registry);
    const auth = new Auth(this.opts.authorizationMode, this.token, this.saTokens(), service, registry, cache, this.opts.audit);
    const sockets = new Set<Socket>();
    const watches = new Set<{ stream: WatchStream; port: number | undefined }>();
    const handler = createHandler({
      registry,
      service,
      cache,
      auth,
      serverAddress: `${this.host}:${this.port}`,
      bookmarkIntervalMs: this.opts.bookmarkIntervalSeconds * 1000,
      minRequestTimeoutSeconds: this.opts.minRequestTimeoutSeconds,
      onWatch: (stream: WatchStream, req: Req) => {
        const entry = { stream, port: req.socket?.remotePort };
        watches.add(entry);
        stream.onClose(() => watches.delete(entry));
      },
      ...(this.opts.faultInjection ? { faults: (action: string) => this.runFault(action) } : {}),
      log: this.opts.log,
    });
    const server = http2.createSecureServer(
      { allowHTTP1: true, cert: this.pki.serverCert, key: this.pki.serverKey, settings: { maxConcurrentStreams: 1000 } },
      (req, res) => {
        if (!refuseLargeHead(req, res)) handler(req, res);
      },
    );
    installHeadLimits(server);
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    server.on('sessionError', () => undefined);
    server.on('tlsClientError', () => undefined);
    server.setTimeout(0);
    let relay: FaultRelay | undefined;
    if (this.opts.faultInjection) {
      relay = new FaultRelay((await listenOn(server, '127.0.0.1:0', 'the fault relay upstream')).port);
      this.port = await relay.listen(formatHostPort(this.host, this.port));
    } else {
      this.port = (await listenOn(server, formatHostPort(this.host, this.port), '--listen')).port;
    }
    this.running = { store, service, lifecycle, cache, registry, server, relay, sockets, watches, auth };
  }

  #stopped: (() => void) | undefined;
  /** Resolves once the server has stopped (by {@link stop} or its `signal`). */
  readonly done: Promise<void> = new Promise<void>((resolve) => (this.#stopped = resolve));

  /** Stop accepting requests, end watches and connections, close storage, let the data directory go. */
  async stop(): Promise<void> {
    try {
      await this.halt();
    } finally {
      this.lock?.release();
      this.lock = undefined;
      this.#stopped?.();
    }
  }

  /** Stop serving and close storage; the data directory stays locked. */
  private async halt(): Promise<void> {
    const r = this.running;
    if (!r) return;
    this.running = undefined;
    r.auth.close();
    r.lifecycle.close();
    if (r.relay) await r.relay.close();
    for (const w of [...r.watches]) w.stream.end();
    for (const s of r.sockets) s.destroy();
    await new Promise<void>((res) => r.server.close(() => res()));
    r.store.close();
  }

  private tokens: ServiceAccountTokens | undefined;
  private saTokens(): ServiceAccountTokens {
    return (this.tokens ??= ServiceAccountTokens.load(join(this.opts.dataDir, 'pki', 'sa.key')));
  }

  private makeFaults(): FaultInjector {
    return {
      freezeWatches: () => {
        const r = this.requireRunning();
        const ports = new Set<number>();
        let n = 0;
        for (const w of r.watches) {
          if (w.stream.isFrozen()) continue;
          w.stream.freeze();
          n++;
          if (w.port !== undefined) ports.add(w.port);
        }
        r.relay?.freeze(ports);
        this.opts.log.warn({ streams: n, connections: ports.size }, 'fault: froze watch streams');
        return n;
      },
      resetConnections: () => {
        const r = this.requireRunning();
        const n = r.relay ? r.relay.resetAll() : 0;
        for (const s of r.sockets) s.destroy();
        this.opts.log.warn({ connections: n }, 'fault: reset connections');
        return n;
      },
      compact: () => {
        const r = this.requireRunning();
        const rv = r.store.currentRv();
        r.store.compact(rv);
        r.cache.compact(rv);
        this.opts.log.warn({ rv }, 'fault: compacted history');
        return rv;
      },
      restart: async () => {
        this.opts.log.warn({}, 'fault: restarting');
        await this.halt();
        await this.boot();
        // Said once the server serves again: a fault suite measures detection from here, not the restart.
        this.opts.log.warn({}, 'fault: restarted');
      },
    };
  }

  private async runFault(action: string): Promise<unknown> {
    const f = this.faults;
    if (!f) throw badRequest('fault injection is off');
    switch (action) {
      case 'freeze':
        return { frozen: f.freezeWatches() };
      case 'reset':
        return { reset: f.resetConnections() };
      case 'compact':
        return { compactedTo: f.compact() };
      case 'restart':
        setImmediate(() => void f.restart().catch((err: unknown) => this.opts.log.error({ err }, 'restart failed')));
        return { restarting: true };
      default:
        throw badRequest(`unknown fault "${action}": use freeze, reset, compact or restart`);
    }
  }

  private requireRunning(): Running {
    if (!this.running) throw new Error('kars apiserver is not running');
    return this.running;
  }
}
