/**
 * Tool names as the gateway accepts them (issue 9 item 4). An agent must not be able to reach a
 * denied tool under another spelling, so a name is checked before any rule sees it:
 *
 * 1. It must not change under Unicode NFKC normalisation (fullwidth letters, ligatures,
 *    superscripts and other compatibility forms are refused, not silently folded).
 * 2. It must be 1 to {@link MAX_TOOL_NAME_LENGTH} characters from `A–Z a–z 0–9 _ - . / :` — the
 *    MCP tool-name guidance (ASCII letters, digits, `_`, `-`, `.`) plus `/` and `:` for namespaced
 *    names such as `github/delete_repo`. So no whitespace, no control or format characters
 *    (zero-width space, bidi marks), and no non-ASCII look-alikes (a Cyrillic `о` in `drop_table`).
 * 3. Matching is case-insensitive: rules, `appliesTo.tool` and rate-limit buckets use the
 *    lower-cased name ({@link toolKey}), so `DELETE_REPO` is governed exactly as `delete_repo`.
 *
 * Guarantees: pure; an accepted name is NFKC-stable, ASCII and free of whitespace (property-tested).
 */

/** Longest accepted tool name. */
export const MAX_TOOL_NAME_LENGTH = 128;

const ALLOWED = /^[A-Za-z0-9_./:-]+$/;

export type ToolNameCheck = { ok: true; key: string } | { ok: false; reason: string };

function show(c: string): string {
  const cp = c.codePointAt(0) ?? 0;
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** Check a tool name; on success return its matching key (lower case). */
export function checkToolName(name: string): ToolNameCheck {
  if (name.length === 0) return { ok: false, reason: 'the tool name is empty' };
  if (name.length > MAX_TOOL_NAME_LENGTH) return { ok: false, reason: `the tool name is longer than ${MAX_TOOL_NAME_LENGTH} characters` };
  const nfkc = name.normalize('NFKC');
  if (nfkc !== name)
    return {
      ok: false,
      reason: `the tool name changes under Unicode NFKC normalisation (to ${JSON.stringify(nfkc)}); send the normalised name`,
    };
  if (!ALLOWED.test(name)) {
    const bad = [...name].find((c) => !ALLOWED.test(c)) ?? '';
    return {
      ok: false,
      reason: `the tool name contains ${show(bad)}; tool names use only A-Z a-z 0-9 _ - . / : (no spaces, control characters or non-ASCII letters)`,
    };
  }
  return { ok: true, key: toolKey(name) };
}

/** The key a valid tool name is matched and rate-limited by: its lower-case form. */
export function toolKey(name: string): string {
  return name.toLowerCase();
}
