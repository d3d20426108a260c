/**
 * Strict JSON for bodies a policy decision is made on: `JSON.parse` plus a refusal of duplicate
 * object keys (at any depth) and of nesting deeper than a bound.
 *
 * Why: `JSON.parse` keeps the last of two equal keys, other parsers keep the first or fail. If the
 * router decided on one value and forwarded bytes an upstream reads differently, the check would be
 * bypassed. Refusing duplicates (compared after unescaping, so `"a"` and `"\u0061"` are the same
 * key) and forwarding the re-serialised parse closes that gap (issue 9 item 4). No maintained npm
 * library reports duplicate keys without building its own slower parser, so this module scans the
 * text once after `JSON.parse` has validated it (ADR 0015).
 *
 * Guarantees: pure and synchronous; never throws; O(n) in the text length (strings are skipped
 * with `indexOf`), with an explicit stack
 * (no recursion), so a deeply nested body cannot overflow the call stack.
 */

/** Default maximum nesting depth of arrays and objects. */
export const DEFAULT_MAX_JSON_DEPTH = 128;

/** Why a body was refused. */
export type StrictJsonErrorCode = 'invalid_json' | 'duplicate_key' | 'too_deep';

export type StrictJsonResult = { ok: true; value: unknown } | { ok: false; code: StrictJsonErrorCode; message: string };

/** Parse `text` as JSON, refusing duplicate keys and nesting deeper than `maxDepth`. */
export function parseStrictJson(text: string, maxDepth = DEFAULT_MAX_JSON_DEPTH): StrictJsonResult {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (e) {
    return { ok: false, code: 'invalid_json', message: e instanceof Error ? e.message : String(e) };
  }
  const problem = scan(text, maxDepth);
  return problem === undefined ? { ok: true, value } : { ok: false, ...problem };
}

/** Scan valid JSON text for duplicate keys and depth; undefined when neither occurs. */
function scan(text: string, maxDepth: number): { code: 'duplicate_key' | 'too_deep'; message: string } | undefined {
  // One entry per open container: a key set for objects, null for arrays.
  const stack: Array<Set<string> | null> = [];
  const path: string[] = [];
  const n = text.length;
  let quote = -2; // not searched yet
  let backslash = -2;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length >= maxDepth) return { code: 'too_deep', message: `JSON nesting is deeper than ${maxDepth} levels` };
      stack.push(c === 0x7b ? new Set() : null);
      path.push(c === 0x7b ? '{}' : '[]');
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      path.pop();
      i++;
    } else if (c === 0x22 /* " */) {
      // The closing quote: the first `"` not taken by a backslash escape. Found with indexOf, so
      // a long string (a prompt) costs a native search, not a JS loop over its characters.
      // `quote` and `backslash` cache the next `"` and `\` at or after the scan position (-1: none
      // left): each is searched for once per occurrence, so the scan stays linear even for a
      // string of a million escapes or a million short strings.
      let j = i + 1;
      let escaped = false;
      for (;;) {
        if (quote !== -1 && quote < j) quote = text.indexOf('"', j);
        if (backslash !== -1 && backslash < j) backslash = text.indexOf('\\', j);
        if (quote === -1) {
          j = n; // unreachable for text JSON.parse accepted
          break;
        }
        if (backslash === -1 || backslash > quote) {
          j = quote;
          break;
        }
        escaped = true;
        j = backslash + 2; // the backslash and the character it escapes
      }
      const end = j + 1; // one past the closing quote
      const top = stack.at(-1);
      if (top !== undefined && top !== null) {
        let k = end;
        while (k < n && isWs(text.charCodeAt(k))) k++;
        if (text.charCodeAt(k) === 0x3a /* : */) {
          const key = escaped ? (JSON.parse(text.slice(i, end)) as string) : text.slice(i + 1, j);
          if (top.has(key))
            return {
              code: 'duplicate_key',
              message: `duplicate key ${JSON.stringify(key)} in an object at depth ${stack.length}; send each key once`,
            };
          top.add(key);
        }
      }
      i = end;
    } else i++;
  }
  return undefined;
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
