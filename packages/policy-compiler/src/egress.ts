/**
 * EgressApproval compilation (kars-wire-contract.md §2.4): host canonicalisation, the per-approval
 * file, and the merged-allowlist digest a router echoes under kind `EgressApproval`.
 *
 * Guarantees: pure and deterministic. The merged digest depends only on the *set* of endpoints,
 * never on the order of baseline or approvals.
 *
 * Caveats: canonicalisation follows the reference compiler byte for byte: hosts are trimmed and
 * ASCII-lowercased (non-ASCII letters keep their case), blank hosts are dropped, and endpoints
 * sort by the UTF-8 bytes of the host, then by port.
 */
import { kubeTime } from '@kars/kube-core';
import { canonicalDigest } from './digest.js';

/** Domain separator of the baseline allowlist digest. */
export const EGRESS_ALLOWLIST_FILENAME = 'allowlist.json';
/** Domain separator of the merged (baseline ∪ approvals) digest. Not a real file. */
export const EGRESS_MERGED_FILENAME = 'merged-allowlist.json';
/** `schemaVersion` of both the allowlist body and each approval file. */
export const EGRESS_SCHEMA_VERSION = 1;
/** Port an endpoint without one gets in compiled form. */
export const DEFAULT_EGRESS_PORT = 443;

/** An endpoint as a spec carries it: the port is optional. */
export interface EndpointInput {
  host: string;
  port?: number | undefined;
}

/** An endpoint in compiled form. */
export interface Endpoint {
  host: string;
  port: number;
}

/** A compiled allowlist body and its digest. */
export interface CompiledAllowlist {
  /** Compact JSON `{"schemaVersion":1,"endpoints":[...]}`, the exact bytes that are hashed. */
  body: string;
  digest: string;
  endpoints: Endpoint[];
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

function compareEndpoints(a: Endpoint, b: Endpoint): number {
  const byHost = Buffer.compare(Buffer.from(a.host, 'utf8'), Buffer.from(b.host, 'utf8'));
  return byHost !== 0 ? byHost : a.port - b.port;
}

/** Trim and ASCII-lowercase hosts, default the port to 443, drop blank hosts, sort by (host, port), dedupe. */
export function canonicalHosts(hosts: readonly EndpointInput[]): Endpoint[] {
  const normalized: Endpoint[] = [];
  for (const h of hosts) {
    const host = asciiLower(h.host.trim());
    if (host === '') continue;
    normalized.push({ host, port: h.port ?? DEFAULT_EGRESS_PORT });
  }
  normalized.sort(compareEndpoints);
  const out: Endpoint[] = [];
  for (const e of normalized) {
    const last = out[out.length - 1];
    if (last === undefined || compareEndpoints(last, e) !== 0) out.push(e);
  }
  return out;
}

function allowlistBody(endpoints: readonly Endpoint[]): string {
  return JSON.stringify({ schemaVersion: EGRESS_SCHEMA_VERSION, endpoints: endpoints.map((e) => ({ host: e.host, port: e.port })) });
}

/** The baseline `allowlist.json` body and its digest (domain separator `allowlist.json`). */
export function baselineAllowlist(endpoints: readonly EndpointInput[]): CompiledAllowlist {
  const canonical = canonicalHosts(endpoints);
  const body = allowlistBody(canonical);
  return { body, digest: canonicalDigest(EGRESS_ALLOWLIST_FILENAME, body), endpoints: canonical };
}

/**
 * The merged allowlist `baseline ∪ every approval's hosts`, canonicalised, and its digest
 * (domain separator `merged-allowlist.json`). This is what the sandbox's router echoes under
 * kind `EgressApproval`, and what `EgressApproval.status.mergedDigest` carries.
 */
export function mergedAllowlist(
  baseline: readonly EndpointInput[],
  approvalHosts: ReadonlyArray<readonly EndpointInput[]>,
): CompiledAllowlist {
  const canonical = canonicalHosts([...baseline, ...approvalHosts.flat()]);
  const body = allowlistBody(canonical);
  return { body, digest: canonicalDigest(EGRESS_MERGED_FILENAME, body), endpoints: canonical };
}

/** ConfigMap key of one approval's file: `approval-<approvalName>.json`. */
export function approvalFileKey(approvalName: string): string {
  return `approval-${approvalName}.json`;
}

/** What {@link approvalFile} needs from an EgressApproval. */
export interface ApprovalFileInput {
  metadata: { name: string };
  spec: { sandbox: string; hosts: readonly EndpointInput[]; reason: string; ticket?: string | undefined };
}

/** One approval's ConfigMap entry. */
export interface ApprovalFile {
  key: string;
  /** Compact JSON; `ticket` is omitted, not null, when unset. */
  body: string;
}

/**
 * The per-approval file: `{schemaVersion, approvalName, sandbox, hosts, reason, ticket?, effectiveAt, expiresAt}`
 * in that key order, with hosts canonicalised. `effectiveAt`/`expiresAt` are written as given
 * (callers pass RFC 3339 UTC with whole seconds, see {@link rfc3339Seconds}).
 */
export function approvalFile(approval: ApprovalFileInput, effectiveAt: string, expiresAt: string): ApprovalFile {
  const { spec } = approval;
  const doc: Record<string, unknown> = {
    schemaVersion: EGRESS_SCHEMA_VERSION,
    approvalName: approval.metadata.name,
    sandbox: spec.sandbox,
    hosts: canonicalHosts(spec.hosts),
    reason: spec.reason,
  };
  if (spec.ticket !== undefined) doc['ticket'] = spec.ticket;
  doc['effectiveAt'] = effectiveAt;
  doc['expiresAt'] = expiresAt;
  return { key: approvalFileKey(approval.metadata.name), body: JSON.stringify(doc) };
}

/** Format epoch milliseconds as RFC 3339 UTC with whole seconds and `Z` (20 characters), as the controller stamps times (kube-core's `kubeTime`). */
export const rfc3339Seconds: (ms: number) => string = kubeTime;
