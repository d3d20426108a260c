/**
 * `kars policy status [NAME]`: the `istioctl proxy-status` of kars. For each InferencePolicy and ToolPolicy, and each
 * router that should enforce it (every live or recently seen router of every sandbox that references it), whether
 * that router enforces the compiled digest: SYNCED, STALE (how long behind) or NACK (its last load error). Sources:
 * the policy status (compiled digest, generations, edit → enforced times) and the routers' echo Leases — the same
 * facts the controller decides Ready from, read directly, so the view does not depend on the controller being up.
 * MODE says whether the policy is enforced or only recorded (`DryRun`, ADR 0050); a DryRun policy's routers are
 * those of the sandboxes its `appliesTo` selects, and SYNCED means they record its digest.
 */
import { Command } from 'commander';
import { Resources } from '@kars/kube-client';
import type { KubeObject } from '@kars/kube-core';
import {
  contestedIn,
  isLive,
  readEcho,
  readHeartbeatSeen,
  ROUTER_LABEL,
  KARS_SANDBOX,
  dryRunReaches,
  dryRunSlot,
  enforcementModeOf,
} from '@kars/policy-api';
import type { DryRunKind, EchoKind, EnforcementMode, InferencePolicy, KarsSandbox, RouterEcho, ToolPolicy } from '@kars/policy-api';
import { INFERENCE_POLICY_KIND, TOOL_POLICY_KIND } from '@kars/policy-compiler';
import type { EchoExpectation, ProfileKind } from '@kars/policy-compiler';
import { addKubeOptions, withKube } from '../lib/kube.js';
import type { KubeFlags } from '../lib/kube.js';
import { CliError, outputFormat, render, shortDigest, shortDuration, table } from '../lib/output.js';

/** One router's state for one policy. */
export type SyncState = 'SYNCED' | 'STALE' | 'NACK' | 'CONTESTED' | 'NOT-APPLICABLE' | 'NO-ROUTER' | 'NO-SANDBOX';

export interface RouterRow {
  sandbox: string | null;
  instance: string | null;
  state: SyncState;
  /** STALE: how long the router has been behind (since the compile, or since its lease expired). */
  ageSeconds: number | null;
  /** Why, in words: the NACK error, "lease expired", "loaded an older digest". */
  detail: string | null;
  loadedDigest: string | null;
  /** The router's last lease renewal (RFC 3339), when it has a lease. */
  leaseRenewedAt: string | null;
  live: boolean | null;
  /**
   * The router's policy staleness (ADR 0011) as it reported it at its last echo write (routers add it only to writes
   * they make anyway, so it is as old as {@link RouterRow.leaseRenewedAt}). Null when the router reports none.
   */
  stalenessSeconds: number | null;
  /** Seconds since that report (now − the lease's renewTime). */
  stalenessReportAgeSeconds: number | null;
}

export interface PolicyStatusRow {
  kind: 'InferencePolicy' | 'ToolPolicy';
  namespace: string;
  name: string;
  /** `Enforce`, or `DryRun`: recorded by the routers of the sandboxes `appliesTo` selects, never enforced (ADR 0050). */
  mode: EnforcementMode;
  generation: number;
  observedGeneration: number | null;
  phase: string | null;
  compiledDigest: string | null;
  lastMs: number | null;
  maxMs: number | null;
  routers: RouterRow[];
}

type Policy = (InferencePolicy | ToolPolicy) & KubeObject;

/**
 * What every router of a referring sandbox must echo for `obj`: its kind descriptor's expectation of a
 * compile of the stored object, the very computation the controller awaits (for a ToolPolicy:
 * profile.json under `ToolPolicy` and the AGT profile under `AgtProfile`). When the stored spec does
 * not compile, routers keep the last good policy, whose digest the status records. The kind the
 * status's digest names comes first, so LOADED beside COMPILED compares like with like.
 */
export function expectedEchoes<P extends { metadata: { name?: string; namespace?: string }; spec?: unknown }, C, L>(
  d: ProfileKind<P, C, L>,
  obj: P,
  compiledDigest: string | null,
): EchoExpectation[] {
  const c = d.compile(obj);
  const expect = c.ok ? d.status(c).expect : compiledDigest === null ? [] : [{ kind: d.statusDigestKind, digest: compiledDigest }];
  const first = (e: EchoExpectation): number => (e.kind === d.statusDigestKind ? 0 : 1);
  return [...expect].sort((a, b) => first(a) - first(b));
}

/**
 * Decide one router's state for a policy from what it must echo (`expect`, see {@link expectedEchoes}).
 * Pure: `nowMs` and the compile time come in, so tests can pin every branch.
 * - SYNCED: the lease is live, it has loaded every expected digest, and it reports no load error for their kinds.
 * - NACK: it reports a load error for one of the kinds (it keeps enforcing the previous digest).
 * - STALE: its lease expired (age since the last renewal), or it has loaded another digest for a kind (age since the compile).
 */
export function routerState(
  echo: RouterEcho,
  expect: readonly EchoExpectation[],
  compiledAtMs: number | null,
  nowMs: number,
): Pick<RouterRow, 'state' | 'ageSeconds' | 'detail' | 'loadedDigest'> {
  const loadedOf = (kind: EchoKind): string | null => echo.digests[kind] ?? null;
  const first = expect[0];
  const loaded = first === undefined ? null : loadedOf(first.kind);
  if (!isLive(echo, nowMs))
    return {
      state: 'STALE',
      ageSeconds: Math.max(0, Math.floor((nowMs - echo.renewedAtMs) / 1000)),
      detail: `lease not renewed for ${shortDuration(nowMs - echo.renewedAtMs)} (router gone, or its API path stalled)`,
      loadedDigest: loaded,
    };
  if (first === undefined) return { state: 'NOT-APPLICABLE', ageSeconds: null, detail: 'nothing compiled to echo', loadedDigest: loaded };
  for (const e of expect) {
    const error = echo.errors[e.kind];
    if (error !== undefined) return { state: 'NACK', ageSeconds: null, detail: error, loadedDigest: loadedOf(e.kind) };
  }
  const behind = expect.find((e) => loadedOf(e.kind) !== e.digest);
  if (behind === undefined) return { state: 'SYNCED', ageSeconds: null, detail: null, loadedDigest: loaded };
  const age = compiledAtMs === null ? null : Math.max(0, Math.floor((nowMs - compiledAtMs) / 1000));
  const which = expect.length > 1 ? ` (${behind.kind})` : '';
  return {
    state: 'STALE',
    ageSeconds: age,
    detail: loadedOf(behind.kind) === null ? `has not loaded the policy${which}` : `enforces an older digest${which}`,
    loadedDigest: loadedOf(behind.kind),
  };
}

/** Gather the rows for a namespace (optionally one policy name). */
export async function collectPolicyStatus(
  client: import('@kars/kube-client').KubeClient,
  namespace: string,
  name: string | undefined,
  nowMs = Date.now(),
): Promise<PolicyStatusRow[]> {
  const [ips, tps, sbs, leases] = await Promise.all([
    client.list<Policy>(INFERENCE_POLICY_KIND.resource, { namespace }),
    client.list<Policy>(TOOL_POLICY_KIND.resource, { namespace }),
    client.list<KarsSandbox & KubeObject>(KARS_SANDBOX, { namespace }),
    client.list(Resources.leases, { namespace, labelSelector: `${ROUTER_LABEL}=true` }),
  ]);
  const echoes = new Map<string, RouterEcho[]>();
  const staleness = new Map<RouterEcho, { reported: number; ageSeconds: number }>();
  for (const l of leases.items) {
    const e = readEcho(l);
    if (!e) continue;
    echoes.set(e.sandbox, [...(echoes.get(e.sandbox) ?? []), e]);
    const hb = readHeartbeatSeen(l);
    if (hb) staleness.set(e, { reported: hb.stalenessSeconds, ageSeconds: Math.max(0, Math.floor((nowMs - e.renewedAtMs) / 1000)) });
  }
  const rows: PolicyStatusRow[] = [];
  const policies: Array<{ kind: PolicyStatusRow['kind']; obj: Policy }> = [
    ...ips.items.map((obj) => ({ kind: 'InferencePolicy' as const, obj })),
    ...tps.items.map((obj) => ({ kind: 'ToolPolicy' as const, obj })),
  ];
  for (const { kind, obj } of policies) {
    const pname = obj.metadata.name ?? '';
    if (name !== undefined && pname !== name) continue;
    const status = (obj.status ?? {}) as {
      observedGeneration?: number;
      phase?: string;
      conditions?: Array<{ type?: string; message?: string }>;
      compiledDigest?: string | null;
      lastCompiledAt?: string;
      propagation?: { lastMs?: number; maxMs?: number };
    };
    const compiled = status.compiledDigest ?? null;
    const readyMessage = status.conditions?.find((c) => c.type === 'Ready')?.message ?? '';
    const compiledAt = status.lastCompiledAt ? Date.parse(status.lastCompiledAt) : NaN;
    const mode = enforcementModeOf(obj.spec);
    // A DryRun policy reaches the sandboxes its appliesTo selects, and is echoed in its own slot (ADR 0050).
    const appliesTo = obj.spec?.appliesTo as { sandboxName?: string; sandboxMatchLabels?: Record<string, string> } | undefined;
    const descriptor = kind === 'InferencePolicy' ? INFERENCE_POLICY_KIND : TOOL_POLICY_KIND;
    const referrers = sbs.items.filter((s) =>
      mode === 'DryRun' ? dryRunReaches(kind, appliesTo, s) : descriptor.referencedBy(s) === pname,
    );
    const expect =
      kind === 'InferencePolicy'
        ? expectedEchoes(INFERENCE_POLICY_KIND, obj as InferencePolicy, compiled)
        : expectedEchoes(TOOL_POLICY_KIND, obj as ToolPolicy, compiled);
    const slotOf = (e: RouterEcho): RouterEcho => (mode === 'DryRun' ? dryRunEchoOf(e, expect, pname) : e);
    const routers: RouterRow[] = [];
    for (const sb of referrers) {
      const sbName = sb.metadata.name ?? '';
      const mine = (echoes.get(sbName) ?? []).sort((a, b) => a.instance.localeCompare(b.instance));
      if (mine.length === 0)
        routers.push({
          sandbox: sbName,
          instance: null,
          state: 'NO-ROUTER',
          ageSeconds: null,
          detail: 'no router has published an echo Lease for this sandbox',
          loadedDigest: null,
          leaseRenewedAt: null,
          live: null,
          stalenessSeconds: null,
          stalenessReportAgeSeconds: null,
        });
      for (const e of mine) {
        // The controller saw two processes write this router's lease (ADR 0024): whatever the lease says,
        // it is not what one router enforces, so it is never SYNCED.
        const contested = contestedIn(readyMessage, sbName, e.instance);
        const state = routerState(slotOf(e), expect, Number.isNaN(compiledAt) ? null : compiledAt, nowMs);
        routers.push({
          sandbox: sbName,
          instance: e.instance,
          ...(contested !== undefined && state.state === 'SYNCED' ? { ...state, state: 'CONTESTED', detail: contested } : state),
          leaseRenewedAt: e.renewedAtMs > 0 ? new Date(e.renewedAtMs).toISOString() : null,
          live: isLive(e, nowMs),
          stalenessSeconds: staleness.get(e)?.reported ?? null,
          stalenessReportAgeSeconds: staleness.get(e)?.ageSeconds ?? null,
        });
      }
    }
    if (referrers.length === 0)
      routers.push({
        sandbox: null,
        instance: null,
        state: 'NO-SANDBOX',
        ageSeconds: null,
        detail: mode === 'DryRun' ? 'appliesTo selects no KarsSandbox' : 'no KarsSandbox references this policy',
        loadedDigest: null,
        leaseRenewedAt: null,
        live: null,
        stalenessSeconds: null,
        stalenessReportAgeSeconds: null,
      });
    rows.push({
      kind,
      namespace,
      name: pname,
      mode,
      generation: obj.metadata.generation ?? 1,
      observedGeneration: status.observedGeneration ?? null,
      phase: status.phase ?? null,
      compiledDigest: compiled,
      lastMs: status.propagation?.lastMs ?? null,
      maxMs: status.propagation?.maxMs ?? null,
      routers,
    });
  }
  return rows;
}

/** A router's echo as it concerns the DryRun policy `name`: its dry-run slots read as the expected kinds' entries. */
function dryRunEchoOf(e: RouterEcho, expect: readonly EchoExpectation[], name: string): RouterEcho {
  const digests: Partial<Record<EchoKind, string | null>> = {};
  const errors: Partial<Record<EchoKind, string>> = {};
  for (const { kind } of expect) {
    const slot = dryRunSlot(kind as DryRunKind, name);
    digests[kind] = e.dryRun?.digests[slot] ?? null;
    const error = e.dryRun?.errors[slot];
    if (error !== undefined) errors[kind] = error;
  }
  return { ...e, digests, errors };
}

function ms(v: number | null): string {
  return v === null ? '-' : `${v}ms`;
}

/** The table `kars policy status` prints: one line per (policy, router). */
export function statusTable(rows: PolicyStatusRow[]): string {
  const out: string[][] = [];
  for (const p of rows) {
    for (const r of p.routers) {
      const state = r.state === 'STALE' && r.ageSeconds !== null ? `STALE (${shortDuration(r.ageSeconds * 1000)})` : r.state;
      out.push([
        `${p.kind === 'InferencePolicy' ? 'ip' : 'tp'}/${p.name}`,
        p.mode,
        r.sandbox ?? '-',
        r.instance ?? '-',
        state,
        shortDigest(p.compiledDigest),
        shortDigest(r.loadedDigest),
        String(p.generation),
        p.observedGeneration === null ? '-' : String(p.observedGeneration),
        ms(p.lastMs),
        ms(p.maxMs),
        r.stalenessSeconds === null
          ? '-'
          : `${Math.round(r.stalenessSeconds * 10) / 10}s (${shortDuration((r.stalenessReportAgeSeconds ?? 0) * 1000)} ago)`,
        r.state === 'SYNCED' ? '' : (r.detail ?? ''),
      ]);
    }
  }
  return table(
    ['POLICY', 'MODE', 'SANDBOX', 'ROUTER', 'STATUS', 'COMPILED', 'LOADED', 'GEN', 'OBSERVED', 'LAST', 'MAX', 'STALENESS', 'DETAIL'],
    out,
  );
}

/** `kars policy status`. */
export function policyCommand(): Command {
  const cmd = new Command('policy').description('inspect how policies are enforced');
  addKubeOptions(
    cmd
      .command('status')
      .argument('[name]', 'only this policy (InferencePolicy or ToolPolicy name)')
      .description(
        "per policy and per router: SYNCED, STALE (with age) or NACK (with the router's error); compiled and loaded digests; generations; edit → enforced times",
      )
      .option('-o, --output <format>', 'table or json', 'table'),
  ).action(async (name: string | undefined, f: KubeFlags & { output: string }) => {
    const format = outputFormat(f.output, ['table', 'json'] as const, 'table');
    await withKube(f, async (ctx) => {
      const rows = await collectPolicyStatus(ctx.client, ctx.namespace, name);
      if (name !== undefined && rows.length === 0)
        throw new CliError(`no InferencePolicy or ToolPolicy named "${name}" in namespace "${ctx.namespace}"`);
      if (format === 'json') return void process.stdout.write(render(rows, 'json'));
      if (rows.length === 0) return void process.stderr.write(`No policies found in ${ctx.namespace} namespace.\n`);
      process.stdout.write(statusTable(rows));
    });
  });
  return cmd;
}
