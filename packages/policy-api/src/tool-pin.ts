/**
 * The digest of an MCP tool definition, as a ToolPolicy pins it (`spec.toolPins[].digest`, issue 21
 * item 5, ADR 0043). One function, used by the router's MCP gateway (to judge what an upstream
 * lists), by the CLI (`kars tp pin`, to show what it writes) and by validation (the digest's form).
 *
 * Canonical form: the JSON object `{name, description, inputSchema}` of the listed tool, a member
 * left out when the tool has none (absent is not `null`, and not `""`), serialised as RFC 8785 (JCS)
 * does it: object keys sorted by UTF-16 code units, no whitespace, strings and numbers as ECMAScript
 * `JSON.stringify` writes them. The digest is `sha256:` + the lower-case hex SHA-256 of its UTF-8
 * bytes. So the order of keys in a schema does not change the digest; any change to the name, the
 * description or the schema (a key, a value, an array's order, a number) does.
 *
 * Guarantees: pure and total over JSON values (what `JSON.parse` returns); never builds objects
 * from the input's keys, so `__proto__` or `constructor` keys in a schema are ordinary keys.
 *
 * Caveats: only name, description and inputSchema are covered (the issue's scope): `title`,
 * `annotations`, `outputSchema`, `icons` and `_meta` may change without changing the digest.
 * Lone UTF-16 surrogates are written as `\udxxx` escapes (as `JSON.stringify` does), where RFC 8785
 * would refuse the value; the result is still deterministic.
 */
import { createHash } from 'node:crypto';

/** The members of a listed tool the digest covers, in the order they are read. */
export const PINNED_TOOL_MEMBERS = ['name', 'description', 'inputSchema'] as const;

/** `sha256:` and 64 lower-case hex digits. */
export const TOOL_DIGEST_PATTERN = '^sha256:[0-9a-f]{64}$';
const DIGEST_RE = new RegExp(TOOL_DIGEST_PATTERN);

/** Whether `s` has the form of a tool definition digest. */
export function isToolDigest(s: unknown): s is string {
  return typeof s === 'string' && DIGEST_RE.test(s);
}

/** JSON text of `v` in RFC 8785 form (sorted keys, no whitespace). Undefined members and array holes follow `JSON.stringify`. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') {
    // Numbers (including -0 → 0, and non-finite → null), strings, booleans: as JSON.stringify writes them.
    const s = JSON.stringify(v);
    return s === undefined ? 'null' : s;
  }
  if (Array.isArray(v)) return `[${v.map((e) => (e === undefined ? 'null' : canonicalJson(e))).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort(compareUtf16);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

function compareUtf16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The canonical form of a listed tool: its name, description and inputSchema members (those present). */
export function toolDefinitionCanonical(tool: Readonly<Record<string, unknown>>): string {
  const picked: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const m of PINNED_TOOL_MEMBERS) if (Object.prototype.hasOwnProperty.call(tool, m)) picked[m] = tool[m];
  return canonicalJson(picked);
}

/** `sha256:<hex>` over {@link toolDefinitionCanonical}: the digest a `spec.toolPins[]` entry carries. */
export function toolDefinitionDigest(tool: Readonly<Record<string, unknown>>): string {
  return `sha256:${createHash('sha256').update(toolDefinitionCanonical(tool), 'utf8').digest('hex')}`;
}
