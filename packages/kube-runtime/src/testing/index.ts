/**
 * Test support for code built on kube-runtime (`@kars/kube-runtime/testing`; not part of the main
 * entry point): a watch configuration that notices faults in well under a second, a client whose
 * HTTP/2 PING matches it, and the polling helper {@link until}.
 */
import { KubeClient } from '@kars/kube-client';
import { DEFAULT_WATCH_CONFIG } from '../watch-config.js';
import type { WatchConfig } from '../watch-config.js';

export { until } from '@kars/kube-core/testing';
export type { UntilOptions } from '@kars/kube-core/testing';

/** The knobs tests vary; everything else can be overridden through `over`. */
export interface FastWatchKnobs {
  /** HTTP/2 PING period and answer deadline, ms (default 500); 0 turns periodic PINGs off. */
  pingMs?: number;
  /** First reconnect delay, ms (default 100). */
  backoffMs?: number;
  /** Longest reconnect delay, ms (default 1000). */
  backoffMaxMs?: number;
  /** Client-side idle deadline, ms (default 3000). */
  idleMs?: number;
}

/**
 * A {@link WatchConfig} for tests against a real apiserver: faults are noticed and recovered in
 * about a second (PING 500 ms, backoff from 100 ms to 1 s, idle deadline 3 s) and the periodic
 * relist is off, so a test sees the freshness mechanisms themselves. `over` wins over the knobs.
 */
export function fastWatchConfig(knobs: FastWatchKnobs = {}, over: Partial<WatchConfig> = {}): WatchConfig {
  const pingMs = knobs.pingMs ?? 500;
  return {
    ...DEFAULT_WATCH_CONFIG,
    idleTimeoutMs: knobs.idleMs ?? 3000,
    pingIntervalMs: pingMs,
    pingTimeoutMs: pingMs > 0 ? pingMs : 500,
    backoffInitialMs: knobs.backoffMs ?? 100,
    backoffMaxMs: knobs.backoffMaxMs ?? 1000,
    relistIntervalMs: 0,
    ...over,
  };
}

/** A {@link KubeClient} for `kubeconfig` whose HTTP/2 PING follows `cfg` (as a watch under `cfg` expects). */
export function clientFor(kubeconfig: string, cfg: Pick<WatchConfig, 'pingIntervalMs' | 'pingTimeoutMs'>): KubeClient {
  return KubeClient.fromKubeconfig({ kubeconfig, pingIntervalMs: cfg.pingIntervalMs, pingTimeoutMs: cfg.pingTimeoutMs });
}
