/**
 * The documented subset of the AGT profile YAML (`agt-profile.yaml`): parse it into
 * {@link AgtRules}. Part of the router wire contract (see `router-view.ts`): the controller's test router
 * and the real router accept exactly the same profiles. Evaluation lives in the router
 * (`packages/router/src/tools/agt.ts`). See `packages/router/AGT-SUBSET.md`.
 *
 * ```yaml
 * default: deny            # allow | deny; absent means allow
 * rules:                   # first match wins
 *   - allow: "github/get_*"
 *   - deny: "*delete*"
 *     reason: deleting is not allowed from a sandbox
 * ```
 *
 * Guarantees: parsing is pure and never throws. A profile either parses completely or is
 * refused with one error naming the offending path, so a loader can keep its last good
 * policy (NACK) instead of enforcing half a profile.
 *
 * Caveats: descriptive top-level keys ({@link DESCRIPTIVE_TOP_LEVEL}: `apiVersion`, `kind`, `name`,
 * `version`, `description`) are ignored and reported as warnings. Any other unknown top-level key
 * is an error, like unknown keys *inside a rule*: ignoring `policies:` or a limit would enforce less
 * than the author wrote while the router still echoed the digest as enforced.
 */
import { parseDocument } from 'yaml';

/** One AGT rule of the documented subset: allow or deny tool names matching a glob (`*`, `?`). */
export interface AgtRule {
  effect: 'allow' | 'deny';
  /** Glob over `<tool>` or `<mcpServer>/<tool>`. */
  pattern: string;
  reason?: string;
}

/** The compiled AGT part of a ToolPolicy: rules in order (first match wins) and the default when nothing matches. */
export interface AgtRules {
  rules: AgtRule[];
  defaultEffect: 'allow' | 'deny';
}

/** Outcome of {@link parseAgtProfile}. */
export type AgtParseResult = { ok: true; agt: AgtRules; warnings: string[] } | { ok: false; error: string };

const KNOWN_TOP_LEVEL = new Set(['rules', 'default']);
/** Top-level keys that describe a profile and carry no rule: ignored with a warning. */
export const DESCRIPTIVE_TOP_LEVEL: ReadonlySet<string> = new Set(['apiVersion', 'kind', 'name', 'version', 'description']);
const KNOWN_RULE_KEYS = new Set(['allow', 'deny', 'reason']);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  return typeof v === 'object' ? 'a mapping' : `${typeof v} ${JSON.stringify(v)}`;
}

/**
 * Parse the documented AGT subset. Never throws.
 *
 * - An empty document is a valid profile with no rules and default `allow` (with a warning).
 * - `rules: null` and `default: null` read as absent.
 * - Malformed YAML, several documents, duplicate keys, a top level that is not a mapping, or a
 *   wrong type anywhere in `rules`/`default` give `{ ok: false, error }`.
 */
export function parseAgtProfile(text: string): AgtParseResult {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  const first = doc.errors[0];
  if (first !== undefined) return { ok: false, error: `AGT profile is not valid YAML: ${first.message}` };
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err: unknown) {
    return { ok: false, error: `AGT profile could not be read: ${err instanceof Error ? err.message : String(err)}` };
  }
  const warnings: string[] = [];
  if (data === null || data === undefined) {
    warnings.push('AGT profile is empty: no rules, default allow');
    return { ok: true, agt: { rules: [], defaultEffect: 'allow' }, warnings };
  }
  if (!isPlainObject(data)) return { ok: false, error: `AGT profile must be a mapping with "rules" and "default", got ${kindOf(data)}` };

  for (const key of Object.keys(data)) {
    if (KNOWN_TOP_LEVEL.has(key)) continue;
    if (!DESCRIPTIVE_TOP_LEVEL.has(key))
      return {
        ok: false,
        error: `unknown top-level key "${key}": this router enforces only "rules" and "default" (descriptive keys ${[...DESCRIPTIVE_TOP_LEVEL].join(', ')} are ignored)`,
      };
    warnings.push(`top-level key "${key}" ignored (descriptive; the router enforces only "rules" and "default")`);
  }

  let defaultEffect: 'allow' | 'deny' = 'allow';
  const def = data['default'];
  if (def !== undefined && def !== null) {
    if (def !== 'allow' && def !== 'deny') return { ok: false, error: `default must be "allow" or "deny", got ${kindOf(def)}` };
    defaultEffect = def;
  }

  const rules: AgtRule[] = [];
  const rawRules = data['rules'];
  if (rawRules !== undefined && rawRules !== null) {
    if (!Array.isArray(rawRules)) return { ok: false, error: `rules must be a list, got ${kindOf(rawRules)}` };
    for (const [i, raw] of rawRules.entries()) {
      const parsed = parseRule(raw, `rules[${i}]`);
      if (typeof parsed === 'string') return { ok: false, error: parsed };
      rules.push(parsed);
    }
  }
  return { ok: true, agt: { rules, defaultEffect }, warnings };
}

/** One rule, or an error message. */
function parseRule(raw: unknown, at: string): AgtRule | string {
  if (!isPlainObject(raw)) return `${at} must be a mapping like {deny: "<glob>", reason: "..."}, got ${kindOf(raw)}`;
  for (const key of Object.keys(raw)) {
    if (!KNOWN_RULE_KEYS.has(key))
      return `${at} has unknown key "${key}" (a rule has exactly one of "allow"/"deny" and an optional "reason")`;
  }
  const hasAllow = raw['allow'] !== undefined;
  const hasDeny = raw['deny'] !== undefined;
  if (hasAllow === hasDeny) return `${at} must have exactly one of "allow" or "deny"`;
  const effect = hasAllow ? 'allow' : 'deny';
  const pattern = raw[effect];
  if (typeof pattern !== 'string' || pattern.length === 0) return `${at}.${effect} must be a non-empty glob string, got ${kindOf(pattern)}`;
  const rule: AgtRule = { effect, pattern };
  const reason = raw['reason'];
  if (reason !== undefined && reason !== null) {
    if (typeof reason !== 'string') return `${at}.reason must be a string, got ${kindOf(reason)}`;
    rule.reason = reason;
  }
  return rule;
}
