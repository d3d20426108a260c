/**
 * The router echo contract, shared by the controller and the router so the two cannot drift.
 *
 * Each router instance keeps one coordination.k8s.io/v1 Lease in its sandbox's namespace, named
 * {@link routerLeaseName}, labelled {@link ROUTER_LABEL}=true and {@link SANDBOX_LABEL}=<sandbox>,
 * written on every change and renewed every {@link ROUTER_RENEW_SECONDS}, deleted when the router stops. Its annotations say which digest it has loaded for each
 * kind and the last load error per kind. The controller watches these Leases: a change in what a
 * router has loaded reaches the controller as a watch event (no polling), and a router whose lease
 * is not renewed within `leaseDurationSeconds` stops counting.
 */
import { kubeMicroTime, sortedRecord } from '@kars/kube-core';
import type { WrittenObjectMeta } from '@kars/kube-core';
import { DRY_RUN_ANNOTATION, type DryRunEcho } from './dry-run.js';

/** The kinds a router echoes, spelled as the kars wire contract spells them. */
export type EchoKind = 'InferencePolicy' | 'ToolPolicy' | 'AgtProfile' | 'EgressApproval' | 'EgressAllowlist' | 'Memory';

export const ROUTER_LABEL = 'kars.azure.com/router';
export const SANDBOX_LABEL = 'kars.azure.com/sandbox';
export const LOADED_DIGESTS_ANNOTATION = 'kars.azure.com/loaded-digests';
export const LAST_ERRORS_ANNOTATION = 'kars.azure.com/last-errors';
/**
 * Seconds a router lease stays valid without renewal: three liveness beats, as node Leases
 * (renew 10 s, duration 40 s). A router that stops gracefully deletes its lease at once, and a
 * restarted router keeps its instance name, so only a router that vanishes for good lingers this long
 * (ADR 0011).
 */
export const ROUTER_LEASE_SECONDS = 90;
/**
 * The liveness beat: a router writes its lease on every change of what it has loaded (within
 * ~10 ms) and otherwise once per this many seconds, to stay within a node-lease-like write budget
 * (ADR 0011: at 10,000 sandboxes, 333 writes/s for echo liveness).
 */
export const ROUTER_RENEW_SECONDS = 30;
/** kars addition: per kind, the digest of the compiled bytes the router refused (NACKed), JSON. */
export const REJECTED_DIGESTS_ANNOTATION = 'kars.azure.com/rejected-digests';
/** kars addition: the capabilities the router has (`mcp-server:<name>`, `guardrail:<provider>`), JSON list. */
export const CAPABILITIES_ANNOTATION = 'kars.azure.com/capabilities';

/**
 * kars addition (ADR 0024): the process that holds the lease, JSON `{boot, pod, pid, start}`, so a
 * router restarted on the same host (or in the same pod) can tell its own dead predecessor from a live
 * duplicate that claims the same instance name.
 */
export const HOLDER_PROCESS_ANNOTATION = 'kars.azure.com/holder-process';
/**
 * kars addition (ADR 0024): set by a router that took over a lease whose previous holder was still
 * within its lease but is known dead (a restart): that holder's `holderIdentity`. A holder change
 * without it, while the previous holder's lease was valid, is two processes writing one lease.
 */
export const TOOK_OVER_ANNOTATION = 'kars.azure.com/took-over-from';

/** What one router reports. */
export interface RouterEcho {
  sandbox: string;
  /** The router instance (`holderIdentity` up to its first `/`). */
  instance: string;
  /**
   * The lease's full `holderIdentity`: `<instance>/<process id>`, one per router process (ADR 0024);
   * a lease from a router before that holds just the instance. Default `instance` when writing.
   */
  holder?: string;
  /**
   * Set by the controller when two processes were seen writing this lease (ADR 0024): until then the
   * echo does not count ({@link isLive} is false), whatever digests it carries.
   */
  contestedUntilMs?: number;
  /** Why it is contested (the two holder identities). */
  contested?: string;
  /** Loaded digest per kind (`null`: the kind is configured but nothing is loaded). */
  digests: Partial<Record<EchoKind, string | null>>;
  /** Last load error per kind (a NACK: the previous digest stays loaded). */
  errors: Partial<Record<EchoKind, string>>;
  /** Per kind, the digest the router refused with `errors[kind]` (absent: it refused nothing). */
  rejected?: Partial<Record<EchoKind, string>>;
  /** Capability names the router advertises (informational; acceptance already accounts for them). */
  capabilities?: string[];
  /** The dry-run policies the router records (ADR 0050), by slot `<Kind>/<name>`; absent: none. */
  dryRun?: DryRunEcho;
  /** When the lease was last renewed (ms since epoch), and for how long it is valid. */
  renewedAtMs: number;
  leaseDurationSeconds: number;
}

/** Lease name for one router instance: `kars-router-<sandbox>-<instance>`, cut to 253 characters. */
export function routerLeaseName(sandbox: string, instance: string): string {
  return `kars-router-${sandbox}-${instance}`.slice(0, 253);
}

/** Minimal Lease shape (coordination.k8s.io/v1) used by the contract. */
export interface EchoLease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: WrittenObjectMeta & { resourceVersion?: string };
  spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string; acquireTime?: string };
}

/** MicroTime as Kubernetes writes it (six fractional digits; kube-core's `kubeMicroTime`). */
export const microTime: (ms: number) => string = kubeMicroTime;

/** Build the Lease a router applies to publish its echo. */
export function echoLease(namespace: string, echo: RouterEcho): EchoLease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: routerLeaseName(echo.sandbox, echo.instance),
      namespace,
      labels: { [ROUTER_LABEL]: 'true', [SANDBOX_LABEL]: echo.sandbox },
      annotations: {
        [LOADED_DIGESTS_ANNOTATION]: JSON.stringify(sortedRecord(echo.digests)),
        [LAST_ERRORS_ANNOTATION]: JSON.stringify(sortedRecord(echo.errors)),
        [REJECTED_DIGESTS_ANNOTATION]: JSON.stringify(sortedRecord(echo.rejected ?? {})),
        [CAPABILITIES_ANNOTATION]: JSON.stringify([...(echo.capabilities ?? [])].sort()),
        ...(echo.dryRun !== undefined && hasSlots(echo.dryRun)
          ? {
              [DRY_RUN_ANNOTATION]: JSON.stringify({
                digests: sortedRecord(echo.dryRun.digests),
                errors: sortedRecord(echo.dryRun.errors),
                rejected: sortedRecord(echo.dryRun.rejected),
              }),
            }
          : {}),
      },
    },
    spec: {
      holderIdentity: echo.holder ?? echo.instance,
      leaseDurationSeconds: echo.leaseDurationSeconds,
      renewTime: microTime(echo.renewedAtMs),
    },
  };
}

function hasSlots(d: DryRunEcho): boolean {
  return Object.keys(d.digests).length + Object.keys(d.errors).length + Object.keys(d.rejected).length > 0;
}

/** The dry-run annotation read back: string (or null) digests, string errors and refusals; anything else dropped. */
function readDryRun(text: string | undefined): DryRunEcho | undefined {
  if (text === undefined) return undefined;
  const all = parseMap(text);
  const pick = <T>(v: unknown, ok: (x: unknown) => x is T): Record<string, T> => {
    const out: Record<string, T> = {};
    if (typeof v === 'object' && v !== null && !Array.isArray(v))
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (ok(x)) out[k] = x;
    return out;
  };
  const isStr = (x: unknown): x is string => typeof x === 'string';
  return {
    digests: pick(all['digests'], (x): x is string | null => typeof x === 'string' || x === null),
    errors: pick(all['errors'], isStr),
    rejected: pick(all['rejected'], isStr),
  };
}

function parseMap(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * Read a router's echo from its Lease. Returns undefined for a lease that is not a router lease.
 * Malformed annotations read as "nothing loaded" (never as a match).
 */
export function readEcho(lease: {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: unknown;
}): RouterEcho | undefined {
  const labels = lease.metadata.labels ?? {};
  const sandbox = labels[SANDBOX_LABEL];
  if (labels[ROUTER_LABEL] !== 'true' || !sandbox) return undefined;
  const spec = (typeof lease.spec === 'object' && lease.spec !== null ? lease.spec : {}) as Record<string, unknown>;
  const digests: Partial<Record<EchoKind, string | null>> = {};
  for (const [k, v] of Object.entries(parseMap(lease.metadata.annotations?.[LOADED_DIGESTS_ANNOTATION]))) {
    if (typeof v === 'string' || v === null) digests[k as EchoKind] = v;
  }
  const errors: Partial<Record<EchoKind, string>> = {};
  for (const [k, v] of Object.entries(parseMap(lease.metadata.annotations?.[LAST_ERRORS_ANNOTATION]))) {
    if (typeof v === 'string') errors[k as EchoKind] = v;
  }
  const rejected: Partial<Record<EchoKind, string>> = {};
  for (const [k, v] of Object.entries(parseMap(lease.metadata.annotations?.[REJECTED_DIGESTS_ANNOTATION]))) {
    if (typeof v === 'string') rejected[k as EchoKind] = v;
  }
  let capabilities: string[] = [];
  try {
    const c = JSON.parse(lease.metadata.annotations?.[CAPABILITIES_ANNOTATION] ?? '[]') as unknown;
    if (Array.isArray(c)) capabilities = c.filter((x): x is string => typeof x === 'string');
  } catch {
    capabilities = [];
  }
  const dryRun = readDryRun(lease.metadata.annotations?.[DRY_RUN_ANNOTATION]);
  const renew = typeof spec['renewTime'] === 'string' ? Date.parse(spec['renewTime']) : NaN;
  const duration = typeof spec['leaseDurationSeconds'] === 'number' ? spec['leaseDurationSeconds'] : ROUTER_LEASE_SECONDS;
  const holder = typeof spec['holderIdentity'] === 'string' ? spec['holderIdentity'] : '';
  return {
    sandbox,
    instance: instanceOfHolder(holder),
    holder,
    digests,
    errors,
    rejected,
    capabilities,
    ...(dryRun !== undefined ? { dryRun } : {}),
    renewedAtMs: Number.isNaN(renew) ? 0 : renew,
    leaseDurationSeconds: duration,
  };
}

/**
 * How the controller names a router whose echo does not count because two processes write its lease
 * (ADR 0024), in a policy's Ready condition; `kars policy status` finds it there with {@link contestedIn}.
 */
export function contestedDetail(sandbox: string, instance: string, why: string): string {
  return `${sandbox}: router ${instance}'s echo does not count (${why})`;
}

/** The reason `message` gives for `sandbox`'s router `instance` not counting (see {@link contestedDetail}), or undefined. */
export function contestedIn(message: string, sandbox: string, instance: string): string | undefined {
  const head = `${sandbox}: router ${instance}'s echo does not count (`;
  const at = message.indexOf(head);
  if (at < 0) return undefined;
  const end = message.indexOf(')', at + head.length);
  return message.slice(at + head.length, end < 0 ? undefined : end);
}

/** The instance part of a holder identity `<instance>/<process id>` (all of it when there is no `/`). */
export function instanceOfHolder(holder: string): string {
  const slash = holder.indexOf('/');
  return slash < 0 ? holder : holder.slice(0, slash);
}

/**
 * Whether a router's lease is still valid at `nowMs` and counts: an echo marked contested (two
 * processes wrote the lease, ADR 0024) does not count until `contestedUntilMs`.
 */
export function isLive(echo: RouterEcho, nowMs: number): boolean {
  if (echo.contestedUntilMs !== undefined && echo.contestedUntilMs > nowMs) return false;
  return expiresAtMs(echo) > nowMs;
}

/** When a live router's lease runs out (ms since epoch), so the controller can re-check then. */
export function expiresAtMs(echo: RouterEcho): number {
  return echo.renewedAtMs + echo.leaseDurationSeconds * 1000;
}
