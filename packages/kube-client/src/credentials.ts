import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';
import { KubeConfig } from './kubeconfig.js';
import type { RequestOptions } from 'node:https';
import { KubeconfigError } from './errors.js';

/** How long {@link Credentials.headers} reuses its answer. */
export const HEADERS_TTL_MS = 1000;
/** TLS material for connecting to the API server. */
export interface TlsOptions {
  ca?: Buffer | string;
  cert?: Buffer | string;
  key?: Buffer | string;
  rejectUnauthorized?: boolean;
  servername?: string;
}

/**
 * Where the API server is and how to authenticate to it, from a kubeconfig. Loading and auth
 * (tokens, client certificates, exec plugins, in-cluster service accounts) are delegated to
 * @kubernetes/client-node's KubeConfig; we only take the results.
 */
export class Credentials {
  private constructor(
    private readonly kc: KubeConfig,
    readonly server: URL,
  ) {}

  /** Times the header cache (monotonic); the system clock unless a test sets another. */
  clock: Clock = systemClock;

  /**
   * Load from `file` when given; otherwise from `KUBECONFIG`, then ~/.kube/config, then the
   * in-cluster service account (client-node's loadFromDefault order).
   */
  static load(file?: string): Credentials {
    const kc = new KubeConfig();
    try {
      if (file) kc.loadFromFile(file);
      else kc.loadFromDefault();
    } catch (err) {
      throw new KubeconfigError(
        `cannot load kubeconfig${file ? ` from ${file}` : ''}: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err },
      );
    }
    return Credentials.fromKubeConfig(kc);
  }

  /** Use an already loaded client-node KubeConfig. */
  static fromKubeConfig(kc: KubeConfig): Credentials {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new KubeconfigError('the kubeconfig has no current cluster: set current-context or pass --kubeconfig');
    let server: URL;
    try {
      server = new URL(cluster.server);
    } catch (err) {
      throw new KubeconfigError(`the cluster "${cluster.name}" has an invalid server URL "${cluster.server}"`, { cause: err });
    }
    return new Credentials(kc, server);
  }

  /** The current context's namespace, when the kubeconfig sets one (kubectl's default for `-n`). */
  get namespace(): string | undefined {
    const ns = this.kc.getContextObject(this.kc.getCurrentContext())?.namespace;
    return ns !== undefined && ns !== '' ? ns : undefined;
  }

  /** TLS options for a new connection. */
  async tls(): Promise<TlsOptions> {
    const opts: RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const out: TlsOptions = {};
    if (opts.ca) out.ca = opts.ca as Buffer;
    if (opts.cert) out.cert = opts.cert as Buffer;
    if (opts.key) out.key = opts.key as Buffer;
    if (opts.rejectUnauthorized === false) out.rejectUnauthorized = false;
    if (opts.servername) out.servername = opts.servername;
    return out;
  }

  private cachedHeaders: { atMs: number; value: Promise<Record<string, string>> } | undefined;

  /**
   * Authentication headers for one request (refreshed by client-node when credentials rotate).
   * The answer is reused for up to {@link HEADERS_TTL_MS}: client-node rebuilds an HTTPS agent on
   * every call, which cost a controller a few percent of its CPU at one call per request. Rotated
   * credentials are picked up within that second. The returned record must not be modified.
   */
  headers(): Promise<Record<string, string>> {
    const now = this.clock.now();
    const c = this.cachedHeaders;
    if (c && now - c.atMs < HEADERS_TTL_MS && now >= c.atMs) return c.value;
    const value = this.loadHeaders();
    this.cachedHeaders = { atMs: now, value };
    value.catch(() => {
      if (this.cachedHeaders?.value === value) this.cachedHeaders = undefined;
    });
    return value;
  }

  private async loadHeaders(): Promise<Record<string, string>> {
    const opts: RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      // Trimmed: client-node passes a token file's trailing newline through, which no HTTP header may carry
      // (client-go trims it too).
      if (typeof v === 'string') out[k.toLowerCase()] = v.trim();
      else if (typeof v === 'number') out[k.toLowerCase()] = String(v);
    }
    if (opts.auth) out['authorization'] = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
    return out;
  }
}
