/**
 * The router wire contract, in one place: **what a router enforces and what it echoes** for one
 * sandbox, computed from the KarsSandbox and the compiled ConfigMaps. The real router
 * (`@kars/router`), the controller's test router (`@kars/policy-controller` testing) and any
 * offline tool use these functions, so "what a router will echo" cannot be computed two ways.
 *
 * What each kind compiles to, and which echo kinds and digests a router reports for it, is in that
 * kind's descriptor (`kinds/`). This module holds the strict readers those descriptors load with;
 * `echo-ledger.ts` holds what a router echoes of their outcomes. The egress echo is the merged allowlist: the sandbox's baseline
 * (`spec.networkPolicy.allowedEndpoints`) ∪ the hosts of its unexpired approval files.
 *
 * **Acceptance.** A compiled body is *accepted* only when the router can enforce every field in it
 * (see {@link parseInferenceBody}, {@link parseToolProfile}): an unknown field, a wrong type, a
 * guardrail stage whose provider has no backend on this router, a ToolPolicy scoped to an MCP server
 * the router does not front, or AP2 commerce rules (this router has no AP2 evaluator) are refused
 * with an error that names the field. A refused body is a NACK: the router keeps what it enforced
 * before, reports the error, and reports the digest it refused (`rejected`), so the controller can
 * say precisely which compiled digest which router refused and why.
 *
 * **Echo state.** {@link EchoLedger} holds, per kind, the digest being enforced, the last error and
 * the last refused digest, with xDS-like semantics: a load replaces; "none" clears; an error keeps
 * the last good digest. Both routers publish `ledger.echo()`.
 *
 * Guarantees: pure and synchronous (time comes in as an argument); never throws for any input.
 */
import type { EnforcementMode, KarsSandbox } from '@kars/policy-api';
import { ENFORCEMENT_MODES, INFERENCE_CONTENT_FIELDS, isToolDigest } from '@kars/policy-api';
import { parseAgtProfile, type AgtRules } from './agt-subset.js';
import { canonicalDigest } from './digest.js';
import { DEFAULT_EGRESS_PORT, mergedAllowlist } from './egress.js';
import { approvalOfFileKey } from './kinds/egress-approval.js';

export type Severity = 'Safe' | 'Low' | 'Medium' | 'High';
const SEVERITIES: readonly Severity[] = ['Safe', 'Low', 'Medium', 'High'];

/** Guardrail providers the contract knows (wire-contract §1.1). */
export const GUARDRAIL_PROVIDERS = ['openai-moderation'] as const;
export type GuardrailProvider = (typeof GUARDRAIL_PROVIDERS)[number];

/** One guardrail stage as the router evaluates it. */
export interface GuardrailStage {
  provider: GuardrailProvider;
  /** `null` in the compiled body means both. */
  applyTo: 'input' | 'output' | 'both';
}

/** The compiled InferencePolicy (`inference-policy.json`) as a router enforces it. */
export interface InferenceRules {
  /** `appliesTo.action`: the routes this policy governs (`*` or null: every route; `image`: none the router serves). */
  action: 'chat' | 'responses' | 'image' | 'embeddings' | '*' | null;
  tokenBudget: { perRequestTokens: number | null; dailyTokens: number | null; monthlyTokens: number | null } | null;
  contentSafety: {
    hate: Severity | null;
    selfHarm: Severity | null;
    sexual: Severity | null;
    violence: Severity | null;
    requirePromptShields: boolean | null;
  } | null;
  modelPreference: { primary: { provider: string; deployment: string }; fallback: Array<{ provider: string; deployment: string }> } | null;
  provider: string | null;
  /** Ordered guardrail stages; every provider here has a backend on the router that accepted the body. */
  guardrails: GuardrailStage[] | null;
  displayName: string | null;
  /** `enforcement` (ADR 0050): `DryRun` rules are only recorded; a router never enforces them. */
  enforcement: EnforcementMode;
}

/** The compiled ToolPolicy (`profile.json` + `agt-profile.yaml`) as a router enforces it. */
export interface ToolRules {
  name: string;
  /** `mcpServer` is null (any server) or a server this router fronts. */
  appliesTo: { tool: string | null; mcpServer: string | null };
  rateLimit: { rps: number | null; burst: number | null } | null;
  approval: { mode: 'never' | 'always' | null } | null;
  agt: AgtRules | null;
  /** Pinned tool definitions (ADR 0043), as compiled; empty when the policy pins nothing. */
  toolPins: ReadonlyArray<{ server: string | null; name: string; digest: string }>;
  /** What happens to a tool this policy governs and does not pin (`Allow` when the profile does not say). */
  unpinnedTools: 'Allow' | 'Deny';
  /** `enforcement` (ADR 0050): `DryRun` rules are only recorded; a router never enforces them. */
  enforcement: EnforcementMode;
}

/** One allowed egress endpoint, with the approval that granted it (if any) and its expiry. */
export interface EgressEntry {
  host: string;
  port: number;
  /** Undefined for the baseline; the approval name otherwise. */
  approval?: string;
  /** Epoch ms; undefined for the baseline. The router checks it itself, as defence in depth. */
  expiresAtMs?: number;
}

/** What the egress part of a view holds: baseline and active approval entries. */
export interface EgressParts {
  baseline: EgressEntry[];
  approvals: EgressEntry[];
}

/**
 * What a router can enforce beyond the always-present core. The router builds it from its flags;
 * anything compiled that needs a capability the router lacks is refused (NACK).
 */
export interface RouterCapabilities {
  /**
   * Names of the MCP servers this router fronts (`kars router --mcp-upstream NAME=URL`). An unnamed
   * upstream (`--mcp-upstream URL`) is not listed: no ToolPolicy can be scoped to it.
   */
  mcpServers: readonly string[];
  /** Guardrail providers with a configured backend (`openai-moderation` ⇔ a moderation backend flag). */
  guardrailProviders: readonly string[];
}

/** A router with no MCP servers and no guardrail backends. */
export const NO_CAPABILITIES: RouterCapabilities = Object.freeze({ mcpServers: Object.freeze([]), guardrailProviders: Object.freeze([]) });

/** The capability names a router advertises (sorted): `mcp-server:<name>` and `guardrail:<provider>`. */
export function capabilityNames(c: RouterCapabilities): string[] {
  return [...c.mcpServers.map((s) => `mcp-server:${s}`), ...c.guardrailProviders.map((p) => `guardrail:${p}`)].sort();
}

/**
 * The outcome of loading one kind (xDS-like). A loaded outcome's `name` is the policy's name when
 * the source knows it ({@link routerView}: the InferencePolicy the sandbox references).
 */
export type LoadOutcome<T> =
  | { kind: 'loaded'; value: T; digest: string | null; source: string; warning?: string; name?: string; generation?: number }
  | { kind: 'none' } // nothing configured: clear (egress then fails closed)
  | { kind: 'error'; error: string; source: string; rejectedDigest: string | null }; // keep the last good value (NACK)

// ---------------------------------------------------------------------------------------------------------------
// Strict readers: every field known, every type right, or an error naming the path.

class Refused extends Error {}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** An object with only `keys` (each optional), or a refusal naming the first unknown field. */
function strictObj(v: unknown, at: string, keys: readonly string[]): Record<string, unknown> {
  const o = obj(v);
  if (!o) throw new Refused(`${at}: must be an object, got ${describe(v)}`);
  for (const k of Object.keys(o)) {
    if (!keys.includes(k))
      throw new Refused(`${at === '' ? '' : `${at}.`}${k}: unknown field; this router does not know how to enforce it`);
  }
  return o;
}

function optObj(v: unknown, at: string, keys: readonly string[]): Record<string, unknown> | null {
  return v === undefined || v === null ? null : strictObj(v, at, keys);
}

function optStr(v: unknown, at: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new Refused(`${at}: must be a string, got ${describe(v)}`);
  return v;
}

function reqStr(v: unknown, at: string): string {
  const s = optStr(v, at);
  if (s === null || s === '') throw new Refused(`${at}: is required`);
  return s;
}

function optUint(v: unknown, at: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw new Refused(`${at}: must be a non-negative integer, got ${describe(v)}`);
  return v;
}

function optBool(v: unknown, at: string): boolean | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') throw new Refused(`${at}: must be a boolean, got ${describe(v)}`);
  return v;
}

function optEnum<T extends string>(v: unknown, at: string, values: readonly T[]): T | null {
  const s = optStr(v, at);
  if (s === null) return null;
  if (!values.includes(s as T)) throw new Refused(`${at}: must be one of ${values.join(', ')}, got ${JSON.stringify(s)}`);
  return s as T;
}

function optList(v: unknown, at: string): unknown[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new Refused(`${at}: must be a list, got ${describe(v)}`);
  return v;
}

function labelMap(v: unknown, at: string): void {
  if (v === undefined || v === null) return;
  const o = obj(v);
  if (!o) throw new Refused(`${at}: must be a map of strings, got ${describe(v)}`);
  for (const [k, x] of Object.entries(o)) if (typeof x !== 'string') throw new Refused(`${at}.${k}: must be a string, got ${describe(x)}`);
}

function parseJson(body: string, file: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch (err) {
    throw new Refused(`${file} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function run<T>(fn: () => T): { ok: true; value: T } | { ok: false; error: string } {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    if (err instanceof Refused) return { ok: false, error: err.message };
    return { ok: false, error: `internal error: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/**
 * Accept `inference-policy.json` only if this router can enforce every field of it. Refused: bytes
 * that are not a JSON object, an unknown field at any level, a wrong type, a severity outside
 * Safe/Low/Medium/High, and a guardrail stage whose provider has no backend here.
 */
export function parseInferenceBody(
  body: string,
  caps: RouterCapabilities,
): { ok: true; rules: InferenceRules } | { ok: false; error: string } {
  const r = run((): InferenceRules => {
    // The compiled body is the spec's selector plus its content fields (a bundle is resolved before).
    const p = strictObj(parseJson(body, 'inference-policy.json'), '', ['appliesTo', ...INFERENCE_CONTENT_FIELDS, 'enforcement']);
    // appliesTo's selector is the controller's; the router checks it is well formed, and enforces its action.
    const at = optObj(p['appliesTo'], 'appliesTo', ['sandboxName', 'sandboxMatchLabels', 'action']);
    let action: InferenceRules['action'] = null;
    if (at) {
      optStr(at['sandboxName'], 'appliesTo.sandboxName');
      labelMap(at['sandboxMatchLabels'], 'appliesTo.sandboxMatchLabels');
      action = optEnum(at['action'], 'appliesTo.action', ['chat', 'responses', 'image', 'embeddings', '*'] as const);
    }
    const tb = optObj(p['tokenBudget'], 'tokenBudget', ['perRequestTokens', 'dailyTokens', 'monthlyTokens']);
    const cs = optObj(p['contentSafety'], 'contentSafety', ['hate', 'selfHarm', 'sexual', 'violence', 'requirePromptShields']);
    const mp = optObj(p['modelPreference'], 'modelPreference', ['primary', 'fallback']);
    const modelRef = (v: unknown, where: string): { provider: string; deployment: string } => {
      const o = strictObj(v, where, ['provider', 'deployment']);
      return {
        provider: optStr(o['provider'], `${where}.provider`) ?? 'azure-openai',
        deployment: reqStr(o['deployment'], `${where}.deployment`),
      };
    };
    const guardrails = optList(p['guardrails'], 'guardrails')?.map((g, i): GuardrailStage => {
      const where = `guardrails[${i}]`;
      const o = strictObj(g, where, ['provider', 'applyTo']);
      const provider = reqStr(o['provider'], `${where}.provider`);
      if (!(GUARDRAIL_PROVIDERS as readonly string[]).includes(provider))
        throw new Refused(
          `${where}.provider: unknown guardrail provider ${JSON.stringify(provider)}; this router knows ${GUARDRAIL_PROVIDERS.join(', ')}`,
        );
      if (!caps.guardrailProviders.includes(provider))
        throw new Refused(
          `${where}.provider: guardrail ${provider} has no backend configured on this router (capability guardrail:${provider} missing)`,
        );
      return {
        provider: provider as GuardrailProvider,
        applyTo: optEnum(o['applyTo'], `${where}.applyTo`, ['input', 'output', 'both'] as const) ?? 'both',
      };
    });
    return {
      action,
      tokenBudget: tb
        ? {
            perRequestTokens: optUint(tb['perRequestTokens'], 'tokenBudget.perRequestTokens'),
            dailyTokens: optUint(tb['dailyTokens'], 'tokenBudget.dailyTokens'),
            monthlyTokens: optUint(tb['monthlyTokens'], 'tokenBudget.monthlyTokens'),
          }
        : null,
      contentSafety: cs
        ? {
            hate: optEnum(cs['hate'], 'contentSafety.hate', SEVERITIES),
            selfHarm: optEnum(cs['selfHarm'], 'contentSafety.selfHarm', SEVERITIES),
            sexual: optEnum(cs['sexual'], 'contentSafety.sexual', SEVERITIES),
            violence: optEnum(cs['violence'], 'contentSafety.violence', SEVERITIES),
            requirePromptShields: optBool(cs['requirePromptShields'], 'contentSafety.requirePromptShields'),
          }
        : null,
      modelPreference: mp
        ? {
            primary: modelRef(mp['primary'], 'modelPreference.primary'),
            fallback: (optList(mp['fallback'], 'modelPreference.fallback') ?? []).map((f, i) =>
              modelRef(f, `modelPreference.fallback[${i}]`),
            ),
          }
        : null,
      provider: optStr(p['provider'], 'provider'),
      guardrails: guardrails ?? null,
      displayName: optStr(p['displayName'], 'displayName'),
      enforcement: optEnum(p['enforcement'], 'enforcement', ENFORCEMENT_MODES) ?? 'Enforce',
    };
  });
  return r.ok ? { ok: true, rules: r.value } : r;
}

/**
 * `toolPins` of a compiled profile: each `{server: string|null, name, digest}` with a `sha256:`
 * digest, no unknown member, no two for the same (server, lower-cased name). A pin for a server
 * this router does not front is accepted: no tool of that server passes here, so it is enforced
 * vacuously.
 */
function parsePins(v: unknown): ToolRules['toolPins'] {
  const list = optList(v, 'toolPins') ?? [];
  const seen = new Set<string>();
  return list.map((e, i) => {
    const at = `toolPins[${i}]`;
    const o = strictObj(e, at, ['server', 'name', 'digest']);
    const server = optStr(o['server'], `${at}.server`);
    const name = reqStr(o['name'], `${at}.name`);
    const digest = reqStr(o['digest'], `${at}.digest`);
    if (!isToolDigest(digest)) throw new Refused(`${at}.digest: must be sha256: and 64 lower-case hex digits`);
    const key = `${server ?? ''}\u0000${name.toLowerCase()}`;
    if (seen.has(key)) throw new Refused(`${at}: a second pin for ${name} on the same server (names are matched ignoring case)`);
    seen.add(key);
    return { server, name, digest };
  });
}

/**
 * Accept a compiled ToolPolicy (`profile.json` and the optional `agt-profile.yaml`) only if this
 * router can enforce every field. Refused: an unknown field or wrong type; `appliesTo.mcpServer`
 * naming a server this router does not front; `commerce` or `approval.mode: aboveThreshold`
 * (AP2 spend rules, which this router does not evaluate); an AGT profile outside the subset.
 */
export function parseToolProfile(
  name: string,
  profileJson: string,
  agtYaml: string | undefined,
  caps: RouterCapabilities,
): { ok: true; rules: ToolRules; warnings: string[] } | { ok: false; error: string } {
  const r = run((): { rules: ToolRules; warnings: string[] } => {
    const p = strictObj(parseJson(profileJson, 'profile.json'), '', [
      'appliesTo',
      'commerce',
      'rateLimit',
      'approval',
      'displayName',
      'toolPins',
      'unpinnedTools',
      'enforcement',
    ]);
    const at = optObj(p['appliesTo'], 'appliesTo', ['tool', 'mcpServer', 'sandboxMatchLabels']);
    const tool = optStr(at?.['tool'], 'appliesTo.tool');
    const mcpServer = optStr(at?.['mcpServer'], 'appliesTo.mcpServer');
    labelMap(at?.['sandboxMatchLabels'], 'appliesTo.sandboxMatchLabels');
    if (mcpServer !== null && mcpServer !== '*' && !caps.mcpServers.includes(mcpServer)) {
      const fronted = caps.mcpServers.length > 0 ? `it fronts ${caps.mcpServers.join(', ')}` : 'it fronts no named MCP server';
      throw new Refused(
        `appliesTo.mcpServer: this router does not front MCP server ${JSON.stringify(mcpServer)} (${fronted}; capability mcp-server:${mcpServer} missing)`,
      );
    }
    const commerce = optObj(p['commerce'], 'commerce', ['dailyCap', 'monthlyCap', 'perTransferCap', 'counterpartyAllowlist']);
    if (commerce) throw new Refused('commerce: AP2 spend caps are not enforced by this router');
    const rl = optObj(p['rateLimit'], 'rateLimit', ['rps', 'burst', 'window']);
    if (rl) optStr(rl['window'], 'rateLimit.window');
    const ap = optObj(p['approval'], 'approval', ['mode', 'threshold', 'channel']);
    const mode = ap ? optEnum(ap['mode'], 'approval.mode', ['never', 'always', 'aboveThreshold'] as const) : null;
    if (mode === 'aboveThreshold')
      throw new Refused('approval.mode: aboveThreshold needs AP2 spend amounts, which this router does not evaluate');
    if (ap) {
      optStr(ap['threshold'], 'approval.threshold');
      optStr(ap['channel'], 'approval.channel');
    }
    optStr(p['displayName'], 'displayName');
    const toolPins = parsePins(p['toolPins']);
    const unpinnedTools = optEnum(p['unpinnedTools'], 'unpinnedTools', ['Allow', 'Deny'] as const) ?? 'Allow';
    const enforcement = optEnum(p['enforcement'], 'enforcement', ENFORCEMENT_MODES) ?? 'Enforce';
    let agt: AgtRules | null = null;
    let warnings: string[] = [];
    if (agtYaml !== undefined) {
      const parsed = parseAgtProfile(agtYaml);
      if (!parsed.ok) throw new Refused(`agt-profile.yaml: ${parsed.error}`);
      agt = parsed.agt;
      warnings = parsed.warnings;
    }
    return {
      rules: {
        name,
        appliesTo: { tool, mcpServer },
        rateLimit: rl ? { rps: optUint(rl['rps'], 'rateLimit.rps'), burst: optUint(rl['burst'], 'rateLimit.burst') } : null,
        approval: ap ? { mode } : null,
        agt,
        toolPins,
        unpinnedTools,
        enforcement,
      },
      warnings,
    };
  });
  return r.ok ? { ok: true, ...r.value } : r;
}

/**
 * Read the approval files (sorted by key) into egress entries. A file that does
 * not parse is skipped and reported, never fatal; expired approvals are kept with their expiry.
 */
export function parseApprovalFiles(files: Readonly<Record<string, string>>): { entries: EgressEntry[]; errors: string[] } {
  const entries: EgressEntry[] = [];
  const errors: string[] = [];
  for (const key of Object.keys(files)
    .filter((k) => approvalOfFileKey(k) !== undefined)
    .sort()) {
    try {
      const a = obj(JSON.parse(files[key] ?? ''));
      const list = Array.isArray(a?.['hosts']) ? (a['hosts'] as unknown[]) : undefined;
      const expiresAtMs = Date.parse(typeof a?.['expiresAt'] === 'string' ? a['expiresAt'] : '');
      if (!a || !list || Number.isNaN(expiresAtMs)) throw new Error('missing hosts or expiresAt');
      const name = typeof a['approvalName'] === 'string' ? a['approvalName'] : (approvalOfFileKey(key) ?? key);
      for (const h of list.map(obj)) {
        if (h === undefined || typeof h['host'] !== 'string') continue;
        const port = typeof h['port'] === 'number' && Number.isFinite(h['port']) ? h['port'] : DEFAULT_EGRESS_PORT;
        entries.push({ host: h['host'].toLowerCase(), port, approval: name, expiresAtMs });
      }
    } catch (err) {
      errors.push(`${key}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { entries, errors };
}

// ---------------------------------------------------------------------------------------------------------------
// Per-kind outcomes

/** The InferencePolicy outcome for one body (`undefined`: no body configured). `file` is the domain separator. */
export function inferenceOutcome(
  body: string | undefined,
  file: string,
  source: string,
  caps: RouterCapabilities,
): LoadOutcome<InferenceRules> {
  if (body === undefined) return { kind: 'none' };
  const digest = canonicalDigest(file, body);
  const parsed = parseInferenceBody(body, caps);
  return parsed.ok
    ? { kind: 'loaded', value: parsed.rules, digest, source }
    : { kind: 'error', error: parsed.error, source, rejectedDigest: digest };
}

/** Digests of a compiled ToolPolicy: `ToolPolicy` over profile.json, `AgtProfile` over the AGT bytes (null without). */
export interface ToolDigests {
  profile: string;
  agt: string | null;
}

/** A loaded ToolPolicy: the rules and both digests. */
export interface ToolLoad {
  rules: ToolRules;
  digests: ToolDigests;
}

/** The ToolPolicy outcome; a refusal carries both refused digests. */
export type ToolOutcome =
  Exclude<LoadOutcome<ToolLoad>, { kind: 'error' }> | (Extract<LoadOutcome<ToolLoad>, { kind: 'error' }> & { digests: ToolDigests });

/**
 * The ToolPolicy outcome: `value.rules` with both digests, which the caller computed for its layout
 * (the ToolPolicy descriptor for ConfigMaps; {@link directoryDigest} for a mounted AGT directory).
 */
export function toolOutcome(
  name: string,
  profileJson: string | undefined,
  agtYaml: string | undefined,
  digests: ToolDigests,
  source: string,
  caps: RouterCapabilities,
): ToolOutcome {
  if (profileJson === undefined) return { kind: 'none' };
  const parsed = parseToolProfile(name, profileJson, agtYaml, caps);
  if (!parsed.ok) return { kind: 'error', error: parsed.error, source, rejectedDigest: digests.profile, digests };
  return {
    kind: 'loaded',
    value: { rules: parsed.rules, digests },
    digest: digests.profile,
    source,
    ...(parsed.warnings.length > 0 ? { warning: parsed.warnings.join('; ') } : {}),
  };
}

/** The egress outcome: baseline ∪ unexpired approvals; always loaded (echoed even when empty, so expiries converge). */
export function egressOutcome(
  baseline: ReadonlyArray<{ host: string; port?: number | undefined }>,
  approvalFiles: Readonly<Record<string, string>>,
  nowMs: number,
  source: string,
): { outcome: LoadOutcome<EgressParts>; nextExpiryMs: number | undefined } {
  const parsed = parseApprovalFiles(approvalFiles);
  const base: EgressEntry[] = baseline.map((e) => ({ host: e.host.toLowerCase(), port: e.port ?? DEFAULT_EGRESS_PORT }));
  const active = parsed.entries.filter((e) => (e.expiresAtMs ?? Infinity) > nowMs);
  const merged = mergedAllowlist(base, [active.map((e) => ({ host: e.host, port: e.port }))]);
  const future = parsed.entries.map((e) => e.expiresAtMs ?? Infinity).filter((t) => t > nowMs);
  return {
    outcome: {
      kind: 'loaded',
      value: { baseline: base, approvals: active },
      digest: merged.digest,
      source,
      ...(parsed.errors.length > 0 ? { warning: parsed.errors.join('; ') } : {}),
    },
    nextExpiryMs: future.length > 0 ? Math.min(...future) : undefined,
  };
}

/**
 * The outcomes of one view, per kind (what {@link EchoLedger.applyView} records): the enforced
 * kinds, and the dry-run policies the router records beside them (ADR 0050).
 */
export interface ViewOutcomes {
  inference: LoadOutcome<InferenceRules>;
  tools: ToolOutcome;
  egress: LoadOutcome<EgressParts>;
  dryRun: DryRunOutcomes;
}

/** The dry-run policies of a view, each with its name and outcome (sorted by name). */
export interface DryRunOutcomes {
  inference: ReadonlyArray<{ name: string; outcome: LoadOutcome<InferenceRules> }>;
  tools: ReadonlyArray<{ name: string; outcome: ToolOutcome }>;
}

/** No dry-run policy. */
export const NO_DRY_RUN: DryRunOutcomes = Object.freeze({ inference: Object.freeze([]), tools: Object.freeze([]) });

/**
 * The merged digest a sandbox's routers must echo under `EgressApproval`: the sandbox's baseline
 * (`spec.networkPolicy.allowedEndpoints`) ∪ the hosts of every approval not yet expired at `nowMs`.
 * The controller (from its approval cache) and `kars compile` (from documents) both call this; the
 * router computes the same set from the approval files in {@link egressOutcome}.
 */
export function expectedEgressDigest(
  sandbox: Pick<KarsSandbox, 'spec'> | undefined,
  approvals: ReadonlyArray<{ hosts: ReadonlyArray<{ host: string; port?: number | undefined }>; expiresAtMs: number }>,
  nowMs: number,
): string {
  return mergedAllowlist(
    sandbox?.spec?.networkPolicy?.allowedEndpoints ?? [],
    approvals.filter((a) => a.expiresAtMs > nowMs).map((a) => a.hosts),
  ).digest;
}
