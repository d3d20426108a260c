/**
 * The freshness heartbeat contract, shared by the controller (writer) and the router (reader).
 *
 * The leader controller keeps one ConfigMap {@link HEARTBEAT_CONFIGMAP} current in every namespace
 * that holds a KarsSandbox, rewriting it every {@link HEARTBEAT_INTERVAL_SECONDS}. It carries the
 * compiled-ConfigMap label (`app.kubernetes.io/managed-by=kars-controller`), so it travels the exact
 * watch path the compiled policies travel: routers see it through the ConfigMap watch they already
 * have, and no second path can look healthy while the policy path is dead. A router's staleness is
 * the time since it last saw the heartbeat change (ADR 0011).
 */

/** Name of the heartbeat ConfigMap in each sandbox namespace. */
export const HEARTBEAT_CONFIGMAP = 'kars-heartbeat';
/**
 * Label that marks the heartbeat, so the controller's own compiled-ConfigMap watch can leave it out
 * (`…,!kars.azure.com/heartbeat`) while routers, which select only on the managed-by label, get it.
 */
export const HEARTBEAT_LABEL = 'kars.azure.com/heartbeat';
/** Data keys: controller wall time (RFC 3339, ms), a per-writer sequence number, and the writer. */
export const HEARTBEAT_AT_KEY = 'at';
export const HEARTBEAT_SEQ_KEY = 'seq';
export const HEARTBEAT_HOLDER_KEY = 'holder';
/** Default heartbeat period (`KARS_HEARTBEAT_INTERVAL_SECS`); ADR 0011 sizes it for fleets. */
export const HEARTBEAT_INTERVAL_SECONDS = 15;

/** One heartbeat as a reader sees it. */
export interface Heartbeat {
  /** Controller wall time when it was written (ms since epoch; NaN when unreadable). */
  atMs: number;
  seq: number;
  holder: string;
  /** The ConfigMap's resourceVersion: every write changes it, whatever the clocks say. */
  resourceVersion: string;
}

/** The ConfigMap the controller applies (server-side apply) for one namespace. */
export function heartbeatConfigMap(
  namespace: string,
  atMs: number,
  seq: number,
  holder: string,
  labels: Record<string, string>,
): {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  data: Record<string, string>;
} {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: HEARTBEAT_CONFIGMAP, namespace, labels },
    data: { [HEARTBEAT_AT_KEY]: new Date(atMs).toISOString(), [HEARTBEAT_SEQ_KEY]: String(seq), [HEARTBEAT_HOLDER_KEY]: holder },
  };
}

/** Read a heartbeat from a ConfigMap; undefined when it is not the heartbeat. Malformed fields read as NaN/0/''. */
export function readHeartbeat(cm: {
  metadata: { name?: string; resourceVersion?: string };
  data?: Record<string, string> | null;
}): Heartbeat | undefined {
  if (cm.metadata.name !== HEARTBEAT_CONFIGMAP) return undefined;
  const data = cm.data ?? {};
  const at = Date.parse(data[HEARTBEAT_AT_KEY] ?? '');
  const seq = Number(data[HEARTBEAT_SEQ_KEY]);
  return {
    atMs: at,
    seq: Number.isSafeInteger(seq) ? seq : 0,
    holder: data[HEARTBEAT_HOLDER_KEY] ?? '',
    resourceVersion: cm.metadata.resourceVersion ?? '',
  };
}

/**
 * The heartbeat period from the environment (`KARS_HEARTBEAT_INTERVAL_SECS`, fractional allowed
 * for tests, at least 0.1 s); `0` turns the heartbeat off.
 */
export function heartbeatIntervalMsFromEnv(env: Record<string, string | undefined>): number {
  const raw = env['KARS_HEARTBEAT_INTERVAL_SECS'];
  if (raw === undefined || raw.trim() === '') return HEARTBEAT_INTERVAL_SECONDS * 1000;
  const n = Number(raw.trim());
  if (!Number.isFinite(n) || n < 0) return HEARTBEAT_INTERVAL_SECONDS * 1000;
  return n === 0 ? 0 : Math.max(100, n * 1000);
}

/**
 * Lease annotation a router adds to echo writes it makes anyway (changes, liveness beat): the
 * controller time of the newest heartbeat it had seen and its staleness at that moment. It is never
 * written on its own, so it adds no writes; it is as old as the lease's renewTime.
 */
export const HEARTBEAT_SEEN_ANNOTATION = 'kars.azure.com/heartbeat-seen';

/** The annotation value: `{"at":"<RFC 3339>|null","stalenessSeconds":n}`. */
export function heartbeatSeenAnnotation(atMs: number | undefined, stalenessSeconds: number): string {
  return JSON.stringify({
    at: atMs === undefined ? null : new Date(atMs).toISOString(),
    stalenessSeconds: Math.round(stalenessSeconds * 1000) / 1000,
  });
}

/** Read {@link HEARTBEAT_SEEN_ANNOTATION} from a router Lease; undefined when absent or malformed. */
export function readHeartbeatSeen(lease: {
  metadata: { annotations?: Record<string, string> };
}): { atMs: number | undefined; stalenessSeconds: number } | undefined {
  const raw = lease.metadata.annotations?.[HEARTBEAT_SEEN_ANNOTATION];
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as { at?: unknown; stalenessSeconds?: unknown };
    if (typeof v.stalenessSeconds !== 'number' || !Number.isFinite(v.stalenessSeconds)) return undefined;
    const at = typeof v.at === 'string' ? Date.parse(v.at) : NaN;
    return { atMs: Number.isNaN(at) ? undefined : at, stalenessSeconds: v.stalenessSeconds };
  } catch {
    return undefined;
  }
}
