/**
 * The one watch configuration shared by every primary and secondary watch of a process (the
 * controller and the router build it once, from the environment, and pass it everywhere), so
 * that no two watches can drift apart in how they stay fresh.
 */
export interface WatchConfig {
  /** Server-side watch lifetime (timeoutSeconds) before jitter: 30..600, default 200. */
  timeoutSeconds: number;
  /** Up to this many seconds are added at random to each watch's timeoutSeconds. */
  timeoutJitterSeconds: number;
  /** Client-side idle deadline: abort and resume when no byte arrives for this long. Default 90 s. */
  idleTimeoutMs: number;
  /** HTTP/2 PING period on the API connection; 0 disables periodic pings. Default 5 s (ADR 0038). */
  pingIntervalMs: number;
  /** A PING unanswered for this long declares the connection dead. Default 3 s (ADR 0038). */
  pingTimeoutMs: number;
  /** Period of the last-resort full relist-and-diff; 0 disables it. Default 600 s. */
  relistIntervalMs: number;
  /** Reconnect backoff: first delay (jittered ×0.5..1), cap, and the healthy time that resets it. */
  backoffInitialMs: number;
  backoffMaxMs: number;
  backoffResetMs: number;
  /** Page size of every list. */
  pageSize: number;
}

export const DEFAULT_WATCH_CONFIG: Readonly<WatchConfig> = Object.freeze({
  timeoutSeconds: 200,
  timeoutJitterSeconds: 10,
  idleTimeoutMs: 90_000,
  pingIntervalMs: 5_000,
  pingTimeoutMs: 3_000,
  relistIntervalMs: 600_000,
  backoffInitialMs: 1_000,
  backoffMaxMs: 30_000,
  backoffResetMs: 60_000,
  pageSize: 500,
});

function num(v: string | undefined): number | undefined {
  if (v === undefined || v.trim() === '') return undefined;
  const n = Number(v.trim());
  return Number.isFinite(n) ? n : undefined;
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}

/**
 * Read the shared configuration from environment variables:
 * `KARS_WATCH_TIMEOUT_SECS` (clamped to 30..600; unparseable means 200),
 * `KARS_WATCH_IDLE_TIMEOUT_SECS` (default 90, at least 1),
 * `KARS_HTTP2_PING_INTERVAL_SECS` (default 5; 0 disables), `KARS_HTTP2_PING_TIMEOUT_SECS` (default 3),
 * `KARS_RELIST_INTERVAL_SECS` (default 600; 0 disables).
 * Seconds may be fractional, for tests. The caller's object is never modified.
 */
export function watchConfigFromEnv(env: Record<string, string | undefined>, base: Partial<WatchConfig> = {}): WatchConfig {
  const cfg: WatchConfig = { ...DEFAULT_WATCH_CONFIG, ...base };
  const timeout = num(env['KARS_WATCH_TIMEOUT_SECS']);
  if (env['KARS_WATCH_TIMEOUT_SECS'] !== undefined) cfg.timeoutSeconds = timeout === undefined ? 200 : clamp(Math.round(timeout), 30, 600);
  const idle = num(env['KARS_WATCH_IDLE_TIMEOUT_SECS']);
  if (idle !== undefined && idle > 0) cfg.idleTimeoutMs = Math.max(1, idle) * 1000;
  const pingInterval = num(env['KARS_HTTP2_PING_INTERVAL_SECS']);
  if (pingInterval !== undefined && pingInterval >= 0) cfg.pingIntervalMs = pingInterval * 1000;
  const pingTimeout = num(env['KARS_HTTP2_PING_TIMEOUT_SECS']);
  if (pingTimeout !== undefined && pingTimeout > 0) cfg.pingTimeoutMs = pingTimeout * 1000;
  const relist = num(env['KARS_RELIST_INTERVAL_SECS']);
  if (relist !== undefined && relist >= 0) cfg.relistIntervalMs = relist * 1000;
  return cfg;
}

/** The timeoutSeconds one watch asks for: the configured value plus jitter, never above 600. */
export function watchTimeoutSeconds(cfg: WatchConfig, random: () => number = Math.random): number {
  return Math.min(600, cfg.timeoutSeconds + Math.floor(random() * (cfg.timeoutJitterSeconds + 1)));
}

/**
 * The worst-case time for a silently dropped connection to be noticed under this configuration:
 * pingInterval + pingTimeout with pings on, otherwise the idle deadline plus one PING probe.
 */
export function detectionBoundMs(cfg: WatchConfig): number {
  return cfg.pingIntervalMs > 0
    ? Math.min(cfg.pingIntervalMs + cfg.pingTimeoutMs, cfg.idleTimeoutMs + cfg.pingTimeoutMs)
    : cfg.idleTimeoutMs + cfg.pingTimeoutMs;
}
