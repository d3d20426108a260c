import type { AgtRule, EgressEntry, InferenceRules, Severity, ToolRules } from './snapshot.js';
import { parseAgtProfile } from './tools/agt.js';

/** The outcome of loading one kind, with xDS-like semantics. */
export type LoadOutcome<T> =
  | { kind: 'loaded'; value: T; digest: string | null; source: string; warning?: string }
  | { kind: 'none' } // nothing configured: clear (egress then fails closed)
  | { kind: 'error'; error: string; source: string }; // keep the last good value, report the error (NACK)

const SEVERITIES: readonly Severity[] = ['Safe', 'Low', 'Medium', 'High'];

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}
function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}
function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}
function sev(v: unknown): Severity | null {
  if (typeof v !== 'string') return null;
  return SEVERITIES.find((s) => s.toLowerCase() === v.toLowerCase()) ?? null;
}

/**
 * Parse `inference-policy.json` liberally, as the kars router does: a wrong type reads as absent,
 * unknown severities are dropped. Only bytes that are not a JSON object are an error.
 */
export function parseInferencePolicy(body: string): { ok: true; rules: InferenceRules } | { ok: false; error: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (err) {
    return { ok: false, error: `inference-policy.json is not JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  const p = obj(raw);
  if (!p) return { ok: false, error: 'inference-policy.json is not a JSON object' };
  const tb = obj(p['tokenBudget']);
  const cs = obj(p['contentSafety']);
  const mp = obj(p['modelPreference']);
  const primary = obj(mp?.['primary']);
  const modelRef = (v: unknown): { provider: string; deployment: string } | undefined => {
    const o = obj(v);
    const d = str(o?.['deployment']);
    return d ? { provider: str(o?.['provider']) ?? 'azure-openai', deployment: d } : undefined;
  };
  const primaryRef = modelRef(primary);
  return {
    ok: true,
    rules: {
      tokenBudget: tb ? { perRequestTokens: num(tb['perRequestTokens']), dailyTokens: num(tb['dailyTokens']), monthlyTokens: num(tb['monthlyTokens']) } : null,
      contentSafety: cs ? { hate: sev(cs['hate']), selfHarm: sev(cs['selfHarm']), sexual: sev(cs['sexual']), violence: sev(cs['violence']), requirePromptShields: typeof cs['requirePromptShields'] === 'boolean' ? cs['requirePromptShields'] : null } : null,
      modelPreference: primaryRef ? { primary: primaryRef, fallback: (Array.isArray(mp?.['fallback']) ? (mp['fallback'] as unknown[]) : []).map(modelRef).filter((m): m is { provider: string; deployment: string } => m !== undefined) } : null,
      provider: str(p['provider']),
      displayName: str(p['displayName']),
    },
  };
}

/** Parse a compiled ToolPolicy (`profile.json`, optional `agt-profile.yaml`). */
export function parseToolPolicy(name: string, profileJson: string, agtYaml: string | undefined): { ok: true; rules: ToolRules } | { ok: false; error: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(profileJson);
  } catch (err) {
    return { ok: false, error: `profile.json is not JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  const p = obj(raw);
  if (!p) return { ok: false, error: 'profile.json is not a JSON object' };
  const at = obj(p['appliesTo']);
  const rl = obj(p['rateLimit']);
  const ap = obj(p['approval']);
  let agt: ToolRules['agt'] = null;
  if (agtYaml !== undefined) {
    const parsed = parseAgtProfile(agtYaml);
    if (!parsed.ok) return { ok: false, error: `agt-profile.yaml: ${parsed.error}` };
    agt = parsed.agt;
  }
  const mode = str(ap?.['mode']);
  return {
    ok: true,
    rules: {
      name,
      appliesTo: { tool: str(at?.['tool']), mcpServer: str(at?.['mcpServer']) },
      rateLimit: rl ? { rps: num(rl['rps']), burst: num(rl['burst']) } : null,
      approval: ap ? { mode: mode === 'never' || mode === 'always' || mode === 'aboveThreshold' ? mode : null } : null,
      agt,
    },
  };
}

/**
 * Read the approval files (`approval-*.json`, sorted by key) into egress entries. A file that does
 * not parse is skipped and reported, never fatal; expired approvals are kept with their expiry so
 * the proxy refuses them itself.
 */
export function parseApprovals(files: Record<string, string>): { entries: EgressEntry[]; hosts: Array<Array<{ host: string; port: number }>>; errors: string[]; nextExpiryMs: number | undefined } {
  const entries: EgressEntry[] = [];
  const hosts: Array<Array<{ host: string; port: number }>> = [];
  const errors: string[] = [];
  let nextExpiryMs: number | undefined;
  for (const key of Object.keys(files).filter((k) => k.startsWith('approval-') && k.endsWith('.json')).sort()) {
    try {
      const a = obj(JSON.parse(files[key] ?? ''));
      const list = Array.isArray(a?.['hosts']) ? (a['hosts'] as unknown[]) : undefined;
      const expiresAtMs = Date.parse(str(a?.['expiresAt']) ?? '');
      if (!a || !list || Number.isNaN(expiresAtMs)) throw new Error('missing hosts or expiresAt');
      const name = str(a['approvalName']) ?? key.slice('approval-'.length, -'.json'.length);
      const hs = list.map(obj).filter((h): h is Record<string, unknown> => h !== undefined && typeof h['host'] === 'string').map((h) => ({ host: (h['host'] as string).toLowerCase(), port: num(h['port']) ?? 443 }));
      hosts.push(hs);
      for (const h of hs) entries.push({ ...h, approval: name, expiresAtMs });
      if (nextExpiryMs === undefined || expiresAtMs < nextExpiryMs) nextExpiryMs = expiresAtMs;
    } catch (err) {
      errors.push(`${key}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { entries, hosts, errors, nextExpiryMs };
}

/** AGT rules are re-exported for callers that build snapshots by hand (tests). */
export type { AgtRule };
