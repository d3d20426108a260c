/**
 * Who may write a router's echo Lease (ADR 0024). Each router process has its own holder identity,
 * `<instance>/<random id>`, and records where it runs (boot id, pod uid, PID, process start time) in the
 * lease. A router takes a lease only when it is absent, expired, already its own, or held by a process
 * it can see is dead (same boot and pod, and that PID is gone or is another process now: a restart).
 * A lease held by any other process within its `leaseDurationSeconds` is a live duplicate: it is not
 * taken, and the router reports why until the lease is free.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HOLDER_PROCESS_ANNOTATION, instanceOfHolder, microTime } from '@kars/policy-api';

/** Where a holder process runs, as recorded in {@link HOLDER_PROCESS_ANNOTATION}. */
export interface HolderProcess {
  /** The kernel's boot id ('' when unknown): processes with the same boot id share a host. */
  boot: string;
  /** The pod uid (`POD_UID`, '' outside a pod or when not given). */
  pod: string;
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/PID/stat field 22; '' when unknown). */
  start: string;
}

/** This process: its holder identity and where it runs. */
export interface LeaseHolderSelf {
  identity: string;
  process: HolderProcess;
}

/** `/proc/<pid>/stat` start time, or '' (no such process, or no procfs). */
export function processStartTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: count fields after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? '';
  } catch {
    return '';
  }
}

function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The holder identity and process record of this router process for `instance`. */
export function leaseHolderSelf(instance: string, env: Readonly<Record<string, string | undefined>> = process.env): LeaseHolderSelf {
  return {
    identity: `${instance}/${randomBytes(6).toString('hex')}`,
    process: { boot: bootId(), pod: env['POD_UID'] ?? '', pid: process.pid, start: processStartTime(process.pid) },
  };
}

/** Parse {@link HOLDER_PROCESS_ANNOTATION}; undefined when absent or malformed. */
export function readHolderProcess(text: string | undefined): HolderProcess | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as Partial<HolderProcess>;
    if (typeof v.boot !== 'string' || typeof v.pod !== 'string' || typeof v.pid !== 'number' || typeof v.start !== 'string')
      return undefined;
    return { boot: v.boot, pod: v.pod, pid: v.pid, start: v.start };
  } catch {
    return undefined;
  }
}

/**
 * Whether `other` is a process on this host and in this pod that no longer runs: its PID is gone, or
 * belongs to a process that started at another time. False when that cannot be known (another host or
 * pod, no boot id, no start time), so an unknown holder is never taken for dead.
 */
export function isDeadHere(
  other: HolderProcess | undefined,
  self: HolderProcess,
  startOf: (pid: number) => string = processStartTime,
): boolean {
  if (!other || !self.boot || other.boot !== self.boot || other.pod !== self.pod || !other.start) return false;
  if (other.pid === self.pid) return other.start !== self.start;
  const now = startOf(other.pid);
  return now === '' || now !== other.start;
}

/** The lease as the router reads it before taking it. */
export interface ObservedLease {
  holderIdentity: string;
  renewedAtMs: number;
  leaseDurationSeconds: number;
  annotations: Record<string, string>;
}

/** What to do with an existing lease. */
export type ClaimDecision = { take: true; tookOverFrom?: string } | { take: false; reason: string; retryAtMs: number };

/**
 * Decide whether this process may take `lease` at `nowMs`: its own, expired, or held by a process
 * known dead here (a restart: `tookOverFrom` names it). Otherwise the reason, and when the lease expires.
 */
export function decideClaim(
  lease: ObservedLease,
  self: LeaseHolderSelf,
  nowMs: number,
  leaseName: string,
  startOf: (pid: number) => string = processStartTime,
): ClaimDecision {
  if (lease.holderIdentity === self.identity) return { take: true };
  const expiresAt = lease.renewedAtMs + lease.leaseDurationSeconds * 1000;
  if (!lease.holderIdentity || expiresAt <= nowMs) return { take: true };
  const other = readHolderProcess(lease.annotations[HOLDER_PROCESS_ANNOTATION]);
  if (isDeadHere(other, self.process, startOf)) return { take: true, tookOverFrom: lease.holderIdentity };
  const where = other
    ? `PID ${other.pid}${other.boot === self.process.boot && other.pod === self.process.pod ? ' on this host' : other.pod ? ` in pod ${other.pod}` : ' on another host'}`
    : 'a process this router cannot identify';
  return {
    take: false,
    reason:
      `another live router holds echo lease ${leaseName}: holder ${lease.holderIdentity} (${where}), renewed ${microTime(lease.renewedAtMs)}, ` +
      `valid until ${microTime(expiresAt)}. Two routers with the instance name "${instanceOfHolder(lease.holderIdentity)}" would merge into one echo, ` +
      `so this one does not publish and is not ready: give it another --instance (or POD_NAME), or stop the other; ` +
      `if that process is gone, this router takes the lease when it expires`,
    retryAtMs: expiresAt,
  };
}
