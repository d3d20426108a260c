/**
 * Egress allowlists (kars-wire-contract.md §2.4): host canonicalisation, and the baseline and
 * merged-allowlist digests a router echoes under kind `EgressApproval`. The approval file and its
 * ConfigMap are the EgressApproval descriptor's (`kinds/egress-approval.ts`).
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

/** Format epoch milliseconds as RFC 3339 UTC with whole seconds and `Z` (20 characters), as the controller stamps times (kube-core's `kubeTime`). */
export const rfc3339Seconds: (ms: number) => string = kubeTime;
