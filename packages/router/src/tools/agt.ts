/**
 * Evaluation of the documented AGT subset for one tool call. Parsing lives in the wire contract
 * (`@kars/policy-compiler` `parseAgtProfile`), so the router and the controller's test router accept
 * exactly the same profiles; it is re-exported here for callers of the router package.
 */
import type { AgtRule, AgtRules } from '@kars/policy-compiler/runtime';

export { parseAgtProfile } from '@kars/policy-compiler/runtime';
export type { AgtParseResult, AgtRules } from '@kars/policy-compiler/runtime';

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
