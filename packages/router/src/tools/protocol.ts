/**
 * The MCP protocol versions the gateway governs, the `MCP-Protocol-Version` header, and the
 * version each session negotiated (MCP streamable HTTP, 2025-03-26 to 2025-11-25; ADR 0036).
 *
 * - {@link KNOWN_PROTOCOL_VERSIONS}: the published versions whose message shapes the gateway's
 *   filter was written for. A header naming another version (or several, or a malformed one) is
 *   refused with HTTP 400, as the spec says a server must answer an invalid or unsupported one.
 * - A session's version is the one its `initialize` answer negotiated; a later request of that
 *   session whose header names another version is refused (the header must be the negotiated one).
 * - Without a header and without a known session the version is 2025-03-26, the spec's default.
 * - JSON-RPC batches exist in 2025-03-26 and earlier; 2025-06-18 removed them, so a batch on a
 *   later version is refused before any element is decided.
 *
 * Guarantees: the session table is bounded ({@link SessionVersions}, oldest forgotten first); a
 * forgotten session falls back to its header, which is still checked against the known versions.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Protocol versions the gateway understands, oldest first. */
export const KNOWN_PROTOCOL_VERSIONS: readonly string[] = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];

/** The version assumed when a request says nothing (spec: "SHOULD assume 2025-03-26"). */
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26';

/** The first version without JSON-RPC batching. */
const NO_BATCHES_FROM = '2025-06-18';

/** Whether the gateway understands `v`. */
export function isKnownVersion(v: unknown): v is string {
  return typeof v === 'string' && KNOWN_PROTOCOL_VERSIONS.includes(v);
}

/** Whether JSON-RPC batches (arrays) are part of protocol version `v`. */
export function batchesAllowed(v: string): boolean {
  // Versions are ISO dates: string order is time order.
  return v < NO_BATCHES_FROM;
}

/** The single value of a request header (a repeated header or a comma list is returned as is, and fails any check). */
function single(v: string | string[] | undefined): string | undefined {
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : v;
}

export type VersionCheck =
  { ok: true; version: string; session: string | undefined } | { ok: false; message: string; data: Record<string, unknown> };

/**
 * The protocol version a request speaks: its `MCP-Protocol-Version` header, else its session's
 * negotiated version, else {@link DEFAULT_PROTOCOL_VERSION}. Refused when the header is not one of
 * {@link KNOWN_PROTOCOL_VERSIONS} or differs from the version its session negotiated.
 */
export function requestVersion(headers: IncomingHttpHeaders, sessions: SessionVersions): VersionCheck {
  const header = single(headers['mcp-protocol-version']);
  const session = single(headers['mcp-session-id']);
  const negotiated = session === undefined ? undefined : sessions.get(session);
  if (header !== undefined) {
    if (!isKnownVersion(header))
      return {
        ok: false,
        message: `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(header)}; the gateway supports ${KNOWN_PROTOCOL_VERSIONS.join(', ')}`,
        data: { code: 'protocol_version_unsupported', requested: header, supported: KNOWN_PROTOCOL_VERSIONS },
      };
    if (negotiated !== undefined && negotiated !== header)
      return {
        ok: false,
        message: `Bad Request: MCP-Protocol-Version ${header} is not the version this session negotiated (${negotiated})`,
        data: { code: 'protocol_version_mismatch', requested: header, negotiated },
      };
    return { ok: true, version: header, session };
  }
  return { ok: true, version: negotiated ?? DEFAULT_PROTOCOL_VERSION, session };
}

/** Session id to negotiated protocol version, bounded (the oldest entry is forgotten first). */
export class SessionVersions {
  readonly #map = new Map<string, string>();
  constructor(private readonly max = 4096) {}

  get(session: string): string | undefined {
    return this.#map.get(session);
  }

  set(session: string, version: string): void {
    this.#map.delete(session);
    this.#map.set(session, version);
    while (this.#map.size > this.max) {
      const oldest = this.#map.keys().next();
      if (oldest.done === true) break;
      this.#map.delete(oldest.value);
    }
  }

  delete(session: string): void {
    this.#map.delete(session);
  }

  get size(): number {
    return this.#map.size;
  }
}
