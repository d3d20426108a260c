/**
 * The documented subset of the AGT profile YAML (`agt-profile.yaml`): parse it into
 * `ToolRules['agt']`, and evaluate it for one tool call. See `packages/router/AGT-SUBSET.md`.
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
 * Caveats: unknown top-level keys are ignored and reported as warnings, as the subset asks.
 * A profile written for the full AGT engine may therefore enforce less here than there; the
 * loader should surface the warnings. Unknown keys *inside a rule* are an error, because
 * ignoring a condition would silently widen or narrow the rule.
 */
import { parseDocument } from 'yaml';
import type { AgtRule, ToolRules } from '../snapshot.js';

/** The compiled AGT part of a ToolPolicy. */
export type AgtRules = NonNullable<ToolRules['agt']>;

/** Outcome of {@link parseAgtProfile}. */
export type AgtParseResult = { ok: true; agt: AgtRules; warnings: string[] } | { ok: false; error: string };

const KNOWN_TOP_LEVEL = new Set(['rules', 'default']);
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
    if (!KNOWN_TOP_LEVEL.has(key)) warnings.push(`unknown top-level key "${key}" ignored (the router enforces only "rules" and "default")`);
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
    if (!KNOWN_RULE_KEYS.has(key)) return `${at} has unknown key "${key}" (a rule has exactly one of "allow"/"deny" and an optional "reason")`;
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

/**
 * Glob match over the whole text, **case-insensitive**. `*` matches any run of characters (also
 * none), `/` included; `?` matches exactly one character, `/` included. Every other character
 * matches itself (ignoring case). There is no escaping and there are no character classes.
 *
 * So `*delete*` matches `delete_repo`, `github/delete_repo` and `DELETE_REPO`: a deny pattern
 * cannot be side-stepped by a namespaced or re-cased tool name (issue 9 item 4).
 *
 * Runs in O(|pattern| · |text|) at worst: no regular expressions, no exponential backtracking.
 */
export function globMatch(pattern: string, text: string): boolean {
  const p = pattern.toLowerCase();
  const t = text.toLowerCase();
  // The classic greedy wildcard match with one backtrack point (the last `*`).
  let pi = 0;
  let ti = 0;
  let star = -1;
  let mark = 0;
  while (ti < t.length) {
    const pc = p[pi];
    if (pc === '?' || (pc !== undefined && pc !== '*' && pc === t[ti])) {
      pi++;
      ti++;
    } else if (pc === '*') {
      star = pi++;
      mark = ti;
    } else if (star >= 0) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (p[pi] === '*') pi++;
  return pi === p.length;
}

/** What an AGT profile says about one tool. */
export interface AgtVerdict {
  effect: 'allow' | 'deny';
  /** The rule that matched; undefined when the default applied. */
  rule?: AgtRule;
  /** Index of that rule in `rules`. */
  index?: number;
}

/**
 * Evaluate the rules for `tool` on MCP server `server`: the first rule whose pattern matches the
 * bare tool name or `<server>/<tool>` wins; with no match the default applies. With `server`
 * undefined only the bare tool name is a candidate.
 */
export function evaluateAgt(agt: AgtRules, server: string | undefined, tool: string): AgtVerdict {
  const candidates = server === undefined ? [tool] : [tool, `${server}/${tool}`];
  for (const [index, rule] of agt.rules.entries()) {
    if (candidates.some((c) => globMatch(rule.pattern, c))) return { effect: rule.effect, rule, index };
  }
  return { effect: agt.defaultEffect };
}
