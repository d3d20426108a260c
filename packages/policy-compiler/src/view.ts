/**
 * The view one router enforces (and records) for its sandbox, composed from the KarsSandbox and
 * the compiled ConfigMaps of its namespace with the per-kind readers of `router-view.ts`. The real
 * router and the controller's test router both call {@link routerView}, so "what a router will
 * echo" cannot be computed two ways.
 *
 * Dry-run policies (ADR 0050): a sandbox's references name what it enforces; a referenced policy
 * whose body says `enforcement: DryRun` is refused (a NACK: the router keeps what it enforced). Every
 * compiled DryRun policy of the namespace whose `appliesTo` selects the sandbox is recorded beside
 * the enforced ones, in the view's `dryRun`; a router never enforces it. A DryRun body holding an
 * answer-side field (policy-api `dryRunUnrecordedField`) is refused in its slot: the router records
 * a dry-run policy on the request only.
 *
 * Guarantees: pure and synchronous (time comes in as an argument); never throws for any input.
 */
import type { KarsSandbox } from '@kars/policy-api';
import { dryRunReaches, dryRunReferencedError, dryRunUnrecordedField } from '@kars/policy-api';
import { egressApprovalsConfigMapName } from './kinds/egress-approval.js';
import { INFERENCE_POLICY_KIND } from './kinds/inference-policy.js';
import { TOOL_POLICY_KIND } from './kinds/tool-policy.js';
import {
  egressOutcome,
  NO_DRY_RUN,
  type DryRunOutcomes,
  type InferenceRules,
  type LoadOutcome,
  type RouterCapabilities,
  type ToolOutcome,
  type ViewOutcomes,
} from './router-view.js';

/** Reads a ConfigMap's data by name in the sandbox's namespace (from a watch cache, the API, or a fixture). */
export type DataReader = (configMapName: string) => Readonly<Record<string, string>> | undefined;

/** Everything one router enforces and records for its sandbox, per kind. */
export interface RouterView extends ViewOutcomes {
  /** When the next approval expires (epoch ms): recompute the view then. */
  nextExpiryMs: number | undefined;
}

/** What {@link routerView} reads besides the data of named ConfigMaps. */
export interface ViewOptions {
  nowMs: number;
  capabilities: RouterCapabilities;
  /** Prefixes the `source` of each outcome (for status pages). */
  sourcePrefix?: string;
  /**
   * The names of the compiled ConfigMaps of the namespace, to find the dry-run policies that select
   * the sandbox. Without it no dry-run policy is recorded (a mounted directory holds only the
   * sandbox's own policies).
   */
  list?: () => Iterable<string>;
  /** The policy generation a compiled ConfigMap was written from (its annotation), when known. */
  generationOf?: (configMapName: string) => number | undefined;
}

/**
 * The view a router enforces for `sandbox`, from its compiled ConfigMaps. With no sandbox every
 * kind is "none" (cleared).
 */
export function routerView(sandbox: KarsSandbox | undefined, read: DataReader, opts: ViewOptions): RouterView {
  if (!sandbox)
    return { inference: { kind: 'none' }, tools: { kind: 'none' }, egress: { kind: 'none' }, dryRun: NO_DRY_RUN, nextExpiryMs: undefined };
  const prefix = opts.sourcePrefix ?? '';
  const ip = INFERENCE_POLICY_KIND.referencedBy(sandbox);
  const inference = ip ? enforcedOnly(inferenceOf(ip, read, opts, prefix), 'InferencePolicy', ip) : { kind: 'none' as const };
  const tp = TOOL_POLICY_KIND.referencedBy(sandbox);
  const tools = tp ? enforcedOnly(toolOf(tp, read, opts, prefix), 'ToolPolicy', tp) : { kind: 'none' as const };
  const cm = egressApprovalsConfigMapName(sandbox.metadata.name ?? '');
  const egress = egressOutcome(sandbox.spec?.networkPolicy?.allowedEndpoints ?? [], read(cm) ?? {}, opts.nowMs, `${prefix}${cm}`);
  const dryRun = opts.list === undefined ? NO_DRY_RUN : dryRunOf(sandbox, read, opts, prefix);
  return { inference, tools, egress: egress.outcome, dryRun, nextExpiryMs: egress.nextExpiryMs };
}

function inferenceOf(name: string, read: DataReader, opts: ViewOptions, prefix: string): LoadOutcome<InferenceRules> {
  const cm = INFERENCE_POLICY_KIND.configMap.name(name);
  const o = INFERENCE_POLICY_KIND.load(name, read(cm), `${prefix}${cm}`, opts.capabilities);
  return o.kind === 'loaded' ? withGeneration(o, opts.generationOf?.(cm)) : o;
}

function toolOf(name: string, read: DataReader, opts: ViewOptions, prefix: string): ToolOutcome {
  const cm = TOOL_POLICY_KIND.configMap.name(name);
  const o = TOOL_POLICY_KIND.load(name, read(cm), `${prefix}${cm}`, opts.capabilities);
  return o.kind === 'loaded' ? withGeneration(o, opts.generationOf?.(cm)) : o;
}

function withGeneration<T extends { generation?: number }>(o: T, generation: number | undefined): T {
  return generation === undefined ? o : { ...o, generation };
}

/** A referenced policy must be an enforced one: a DryRun body there is refused (NACK), never enforced. */
function enforcedOnly<T extends LoadOutcome<InferenceRules> | ToolOutcome>(o: T, kind: 'InferencePolicy' | 'ToolPolicy', name: string): T {
  if (o.kind !== 'loaded') return o;
  const mode = 'rules' in o.value ? o.value.rules.enforcement : (o.value as InferenceRules).enforcement;
  if (mode !== 'DryRun') return o;
  const error = dryRunReferencedError(kind, name);
  if ('rules' in o.value) {
    const digests = o.value.digests;
    return { kind: 'error', error, source: o.source, rejectedDigest: digests.profile, digests } as T;
  }
  return { kind: 'error', error, source: o.source, rejectedDigest: o.digest } as T;
}

/**
 * A dry-run InferencePolicy must hold only what a router records: a body with an answer-side field
 * (one the compiler would have refused, written some other way) is refused in its slot, so its
 * echo never says "recording" for a verdict the router never reaches.
 */
function recordableOnly(o: LoadOutcome<InferenceRules>): LoadOutcome<InferenceRules> {
  if (o.kind !== 'loaded') return o;
  const u = dryRunUnrecordedField(o.value);
  return u === undefined ? o : { kind: 'error', error: `${u.field}: ${u.message}`, source: o.source, rejectedDigest: o.digest };
}

/**
 * The selector and mode of a compiled body, read leniently (a body the strict reader refuses is
 * still placed, so its refusal is echoed in its slot); undefined when it is not a DryRun body.
 */
function dryRunSelector(body: string | undefined): { sandboxName?: unknown; sandboxMatchLabels?: unknown } | undefined {
  // Cheap test first: a namespace holds many enforced policies, and their bodies never say it.
  if (body === undefined || !body.includes('"DryRun"')) return undefined;
  try {
    const v = JSON.parse(body) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
    const o = v as Record<string, unknown>;
    if (o['enforcement'] !== 'DryRun') return undefined;
    const at = o['appliesTo'];
    return typeof at === 'object' && at !== null && !Array.isArray(at) ? (at as Record<string, unknown>) : {};
  } catch {
    return undefined;
  }
}

function selects(
  kind: 'InferencePolicy' | 'ToolPolicy',
  at: { sandboxName?: unknown; sandboxMatchLabels?: unknown },
  sandbox: KarsSandbox,
): boolean {
  const name = typeof at.sandboxName === 'string' ? at.sandboxName : undefined;
  const labels = at.sandboxMatchLabels;
  if (labels !== undefined && labels !== null && (typeof labels !== 'object' || Array.isArray(labels))) return false;
  const pairs: Record<string, string> = {};
  for (const [k, v] of Object.entries((labels ?? {}) as Record<string, unknown>)) {
    if (typeof v !== 'string') return false; // a selector it cannot read selects nothing
    pairs[k] = v;
  }
  return dryRunReaches(kind, { sandboxName: name, sandboxMatchLabels: pairs }, sandbox);
}

/** The DryRun policies of the namespace whose `appliesTo` selects `sandbox`, sorted by name. */
function dryRunOf(sandbox: KarsSandbox, read: DataReader, opts: ViewOptions, prefix: string): DryRunOutcomes {
  const inference: Array<DryRunOutcomes['inference'][number]> = [];
  const tools: Array<DryRunOutcomes['tools'][number]> = [];
  for (const cm of [...(opts.list?.() ?? [])].sort()) {
    const ip = INFERENCE_POLICY_KIND.configMap.policyOf(cm);
    if (ip !== undefined) {
      const at = dryRunSelector(read(cm)?.[INFERENCE_POLICY_KIND.configMap.bodyKey]);
      if (at !== undefined && selects('InferencePolicy', at, sandbox))
        inference.push({ name: ip, outcome: recordableOnly(inferenceOf(ip, read, opts, prefix)) });
      continue;
    }
    const tp = TOOL_POLICY_KIND.configMap.policyOf(cm);
    if (tp === undefined) continue;
    const at = dryRunSelector(read(cm)?.[TOOL_POLICY_KIND.configMap.bodyKey]);
    if (at !== undefined && selects('ToolPolicy', at, sandbox)) tools.push({ name: tp, outcome: toolOf(tp, read, opts, prefix) });
  }
  return { inference, tools };
}
