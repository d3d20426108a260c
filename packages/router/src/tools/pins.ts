/**
 * Pinned tool definitions in the MCP gateway (issue 21 item 5, ADR 0043): what the gateway saw
 * listed ({@link SeenDefinitions}), and the verdicts a ToolPolicy's `toolPins` / `unpinnedTools`
 * give a listed tool ({@link listVerdict}) and a call ({@link callVerdict}).
 *
 * Rules, for the policy that governs the tool (`select.ts`: the most specific one):
 * - Its pin for a tool is the one naming the gateway's server, else one with no server, matched by
 *   the lower-cased name (as every rule matches names).
 * - A listed tool with a pin is shown only if its digest (`toolDefinitionDigest`: name, description,
 *   inputSchema in RFC 8785 form) equals the pin's. Else it is hidden: `tool_definition_changed`.
 * - A listed tool without a pin: shown under `unpinnedTools: Allow`, hidden under `Deny`
 *   (`tool_not_pinned`).
 * - A page listing one name (ignoring case) twice with different definitions: every copy hidden,
 *   when the tool is pinned or unpinned tools are denied (which one would a call run?).
 * - A listed entry whose keys spell `name`, `description` or `inputSchema` another way as well
 *   (`Description` beside `description`, which a lenient client might read instead): hidden.
 * - A call of a pinned tool is allowed only if it spells the pinned name exactly, and the definition
 *   the gateway last saw listed for that name on this session matches the pin. Never listed on the
 *   session: `tool_definition_unseen`; listed differently (or twice): `tool_definition_changed`.
 *   A call of an unpinned tool under `Deny`: `tool_not_pinned`.
 *
 * Guarantees: pure verdicts; the tables are bounded (sessions, tools a session, catalog entries),
 * and what falls out of them is "unseen", so a call is refused, never let through.
 *
 * Assumptions: the gateway re-serialises every answer it relays, so the client reads exactly the
 * JSON the digest was computed over (no duplicate keys, no second parse).
 *
 * Caveats: "last seen" is per session (the `Mcp-Session-Id`, or the gateway itself without one),
 * across pages and across messages: a later page or a later list replaces an earlier entry. A
 * `notifications/tools/list_changed` from the upstream forgets the session's entries.
 */
import { createHash } from 'node:crypto';
import { systemClock, type Clock } from '@kars/kube-core';
import { toolDefinitionDigest, PINNED_TOOL_MEMBERS } from '@kars/policy-api';
import type { ToolRules } from '../snapshot.js';
import { fold } from '../json/fold.js';
import { toolKey } from './names.js';

/** The refusal codes pinning adds (JSON-RPC codes in `decide.ts`). */
export type PinRefusalCode = 'tool_definition_changed' | 'tool_not_pinned' | 'tool_definition_unseen';

/** What the gateway last saw listed for one tool name (lower-cased) on one session. */
export type SeenEntry = { name: string; digest: string } | { conflict: true };

/** One tool definition as the gateway last saw it listed, for the admin listener. */
export interface CatalogEntry {
  name: string;
  description?: unknown;
  inputSchema?: unknown;
  digest: string;
  /** The same name (ignoring case) was listed twice with different definitions on one page. */
  conflict: boolean;
  /** Epoch ms of the listing. */
  seenAtMs: number;
}

/** One valid listed tool of a page, with its digest. */
export interface ListedTool {
  key: string;
  name: string;
  digest: string;
  tool: Record<string, unknown>;
}

/** Bounds of {@link SeenDefinitions}. */
export interface SeenLimits {
  /** Sessions remembered. */
  sessions: number;
  /** Tool names remembered per session. */
  toolsPerSession: number;
  /** Tool names remembered over all sessions together. */
  entries: number;
  /** Catalog entries (definitions shown on the admin listener). */
  catalog: number;
}

/** Session ids longer than this are keyed by their SHA-256, so a long header costs no more memory. */
const MAX_SESSION_KEY = 128;

/**
 * The definitions the gateway saw listed: per session, the last digest of each tool name, and for
 * the whole server the last definition of each (the catalog `kars tp pin` reads). Bounded: the
 * least recently used sessions (beyond `sessions`, or while all sessions together hold more than
 * `entries` names) and the oldest catalog entries go first.
 */
export class SeenDefinitions {
  readonly #sessions = new Map<string, Map<string, SeenEntry>>();
  readonly #catalog = new Map<string, CatalogEntry>();
  #entries = 0;
  constructor(
    private readonly limits: SeenLimits = { sessions: 1024, toolsPerSession: 4096, entries: 65_536, catalog: 4096 },
    private readonly clock: Clock = systemClock,
  ) {}

  #key(session: string): string {
    return session.length <= MAX_SESSION_KEY ? session : `sha256:${createHash('sha256').update(session).digest('hex')}`;
  }

  #drop(key: string): void {
    const s = this.#sessions.get(key);
    if (s === undefined) return;
    this.#entries -= s.size;
    this.#sessions.delete(key);
  }

  /** Record one listed page (the valid entries of one `tools` array) under `session`. */
  record(session: string, page: readonly ListedTool[]): void {
    const conflicts = pageConflicts(page);
    const key = this.#key(session);
    let s = this.#sessions.get(key);
    if (s === undefined) s = new Map();
    this.#sessions.delete(key);
    this.#sessions.set(key, s);
    const at = this.clock.wallNow();
    for (const t of page) {
      const conflict = conflicts.has(t.key);
      const known = s.has(t.key);
      if (known || s.size < this.limits.toolsPerSession) {
        s.set(t.key, conflict ? { conflict: true } : { name: t.name, digest: t.digest });
        if (!known) this.#entries++;
      }
      this.#catalog.delete(t.key);
      this.#catalog.set(t.key, {
        name: t.name,
        ...(Object.prototype.hasOwnProperty.call(t.tool, 'description') ? { description: t.tool['description'] } : {}),
        ...(Object.prototype.hasOwnProperty.call(t.tool, 'inputSchema') ? { inputSchema: t.tool['inputSchema'] } : {}),
        digest: t.digest,
        conflict,
        seenAtMs: at,
      });
      while (this.#catalog.size > this.limits.catalog) {
        const oldest = this.#catalog.keys().next();
        if (oldest.done === true) break;
        this.#catalog.delete(oldest.value);
      }
    }
    // Forget the least recently used sessions (never the one just recorded) until within bounds.
    while (this.#sessions.size > this.limits.sessions || this.#entries > this.limits.entries) {
      const oldest = this.#sessions.keys().next();
      if (oldest.done === true || oldest.value === key) break;
      this.#drop(oldest.value);
    }
  }

  /** What `session` last saw listed under `key` (a lower-cased name), or undefined. */
  get(session: string, key: string): SeenEntry | undefined {
    return this.#sessions.get(this.#key(session))?.get(key);
  }

  /** Forget what `session` saw (its server announced `notifications/tools/list_changed`, or it ended). */
  forget(session: string): void {
    this.#drop(this.#key(session));
  }

  /** The last definition seen of each tool, sorted by name. */
  catalog(): CatalogEntry[] {
    return [...this.#catalog.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}

/** Keys listed more than once on one page with different digests. */
export function pageConflicts(page: readonly ListedTool[]): Set<string> {
  const first = new Map<string, string>();
  const out = new Set<string>();
  for (const t of page) {
    const d = first.get(t.key);
    if (d === undefined) first.set(t.key, t.digest);
    else if (d !== t.digest) out.add(t.key);
  }
  return out;
}

/** The valid entry of a listed tool, with its digest (the caller has checked the name). */
export function listedTool(tool: Record<string, unknown>, name: string): ListedTool {
  return { key: toolKey(name), name, digest: toolDefinitionDigest(tool), tool };
}

/** The pin `policy` holds for `key` on `server`: the server's own first, else one for any server. */
export function pinFor(policy: ToolRules, server: string | undefined, key: string): ToolRules['toolPins'][number] | undefined {
  let any: ToolRules['toolPins'][number] | undefined;
  for (const p of policy.toolPins) {
    if (toolKey(p.name) !== key) continue;
    if (p.server === null) any ??= p;
    else if (server !== undefined && p.server === server) return p;
  }
  return any;
}

/** Whether pins decide this tool at all: it has a pin, or unpinned tools are denied. */
export function pinsGovern(policy: ToolRules, server: string | undefined, key: string): boolean {
  return policy.unpinnedTools === 'Deny' || pinFor(policy, server, key) !== undefined;
}

/** A key of the entry that is not one of the pinned members but reads as one to a lenient client. */
function ambiguousMember(tool: Record<string, unknown>): string | undefined {
  for (const k of Object.keys(tool)) {
    if ((PINNED_TOOL_MEMBERS as readonly string[]).includes(k)) continue;
    const f = fold(k);
    if (PINNED_TOOL_MEMBERS.some((m) => fold(m) === f)) return k;
  }
  return undefined;
}

export type PinVerdict = { ok: true } | { ok: false; code: PinRefusalCode; reason: string };

/** The verdict on one listed tool of a page under `policy` (the one that governs it). */
export function listVerdict(policy: ToolRules, server: string | undefined, t: ListedTool, conflicted: boolean): PinVerdict {
  if (!pinsGovern(policy, server, t.key)) return { ok: true };
  const pin = pinFor(policy, server, t.key);
  const code: PinRefusalCode = pin === undefined ? 'tool_not_pinned' : 'tool_definition_changed';
  if (conflicted) return { ok: false, code, reason: `${t.name} is listed more than once with different definitions` };
  const odd = ambiguousMember(t.tool);
  if (odd !== undefined)
    return { ok: false, code, reason: `${t.name} has a member ${JSON.stringify(odd)} that reads as another spelling of a pinned one` };
  if (pin === undefined) return { ok: false, code, reason: `${t.name} is not pinned by ToolPolicy ${policy.name} (unpinnedTools: Deny)` };
  if (pin.digest !== t.digest)
    return {
      ok: false,
      code,
      reason: `the listed definition of ${t.name} (${t.digest}) is not the one ToolPolicy ${policy.name} pins (${pin.digest})`,
    };
  return { ok: true };
}

export type CallPinVerdict = { ok: true } | { ok: false; code: PinRefusalCode; message: string; data: Record<string, unknown> };

/** The verdict on a call of `tool` under `policy`, given what this session last saw listed. */
export function callVerdict(policy: ToolRules, server: string | undefined, tool: string, seen: SeenEntry | undefined): CallPinVerdict {
  const key = toolKey(tool);
  const pin = pinFor(policy, server, key);
  const refuse = (code: PinRefusalCode, why: string, extra: Record<string, unknown> = {}): CallPinVerdict => ({
    ok: false,
    code,
    message: `${code}: ${tool} is refused by ToolPolicy ${policy.name}: ${why}`,
    data: { code, policy: policy.name, tool, reason: why, ...extra },
  });
  if (pin === undefined) {
    if (policy.unpinnedTools !== 'Deny') return { ok: true };
    return refuse('tool_not_pinned', 'the policy pins no definition of it and denies unpinned tools (unpinnedTools: Deny)');
  }
  const pinned = { pinnedName: pin.name, pinnedDigest: pin.digest };
  if (tool !== pin.name)
    return refuse('tool_definition_changed', `it is pinned as ${JSON.stringify(pin.name)}; call it by that exact name`, pinned);
  if (seen === undefined)
    return refuse(
      'tool_definition_unseen',
      'the gateway has not seen its definition listed on this session; list tools (tools/list) first',
      pinned,
    );
  if ('conflict' in seen) return refuse('tool_definition_changed', 'it was last listed more than once with different definitions', pinned);
  if (seen.digest !== pin.digest)
    return refuse('tool_definition_changed', `its definition last listed (${seen.digest}) is not the pinned one`, {
      ...pinned,
      listedDigest: seen.digest,
    });
  return { ok: true };
}
