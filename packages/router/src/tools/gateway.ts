/**
 * The MCP gateway: an HTTP handler for `/mcp` (MCP streamable HTTP, protocol versions 2024-11-05
 * to 2025-11-25) that enforces the sandbox's ToolPolicies in front of one upstream MCP server.
 *
 * - `POST` (JSON-RPC 2.0), decided message by message:
 *   - `tools/call`: decided by {@link decideToolCall}; a refusal is answered here as a JSON-RPC
 *     error (HTTP 200) and never reaches the upstream. An allowed call is forwarded and the
 *     upstream answer (status, headers, JSON or `text/event-stream`) is relayed, filtered.
 *   - Request ids must survive re-serialisation: a string or a safe integer (MCP forbids null ids).
 *     Others (null, 1e400, integers past 2^53, fractions, objects) are refused with -32600 and id
 *     null, and never forwarded (issue 25 item 4, ADR 0028).
 *   - A key or method another decoder reads as something else (`Method`, `params.Name`,
 *     `Tools/Call`; `envelope.ts`) is refused with -32600 `ambiguous_spelling` (ADR 0036).
 *   - Every other method, notifications and client responses are forwarded as parsed.
 *   - Batches (JSON arrays) exist only before 2025-06-18: later they are refused whole (400);
 *     earlier they are decided element by element, the allowed elements go upstream as one batch
 *     and the local refusals are added to its answer.
 * - `GET` (the server's stream; resumption with `Last-Event-ID`) and `DELETE` (end a session) are
 *   forwarded with the client's headers and no body.
 * - Every method: `MCP-Protocol-Version` must be a version the gateway knows and, on a session
 *   whose `initialize` answer it saw, the negotiated one (`protocol.ts`); else 400, nothing forwarded.
 *   An `initialize` answer negotiating a version the gateway does not know becomes -32602.
 * - The filter does not depend on ids or methods: EVERY upstream message (JSON, batch, SSE event,
 *   GET stream, replayed event; any status) that carries a `tools` array in `result`, `params` or
 *   `error.data` loses the tools AGT denies. Approval-required and rate-limited tools stay listed
 *   (their calls are refused). `cursor`/`nextCursor` pass as they are, so every page is filtered.
 * - Pinned definitions (ADR 0043, `pins.ts`): every listed tool is recorded, with its digest, as
 *   what its session last saw; a tool whose definition does not match its policy's pin (or that is
 *   unpinned under `unpinnedTools: Deny`) is hidden, and a call is judged by what the session last
 *   saw listed. A `notifications/tools/list_changed` forgets the session's listing; so does DELETE.
 *
 * Guarantees: a POST's snapshot is taken once and used for every decision and the filter of its
 * answer; a GET stream, which may last the whole session, filters each event under the snapshot of
 * the moment it passes. The handler never rejects: failures become JSON-RPC errors or a destroyed
 * response. A 2xx answer that cannot be read as JSON (or an SSE event whose data is not JSON) is
 * refused with -32004 (or dropped) rather than passed through unfiltered; so is an answer with a
 * content-encoding. An SSE event with empty data (a 2025-11-25 priming event) is kept with its id.
 *
 * Assumptions: the upstream is one MCP server, named by `server` for `appliesTo.mcpServer` and for
 * `server/tool` globs; without `server` only policies with no server selector apply, and only bare
 * tool-name globs can match.
 *
 * Caveats: if the upstream fails a mixed batch with a non-2xx status, its answer is returned
 * (filtered when it is JSON, verbatim when it is not) and the local refusals in that batch are
 * not. JSON answers are buffered (up to `maxResponseBytes`); SSE answers stream event by event.
 * A GET stream with no event for the upstream client's body timeout (300 s) is cut; MCP clients
 * then resume it with `Last-Event-ID`. The router's freshness checks (stale or refused policy) run
 * when a request starts, not during a GET stream. The session table is in memory and bounded: after
 * a router restart, or for a forgotten session, the header alone decides the version.
 * `approval.mode: aboveThreshold` is not enforced here (AP2 amounts are not evaluated). Requests
 * are asked upstream with `accept-encoding: identity`.
 */
import { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { SnapshotSource, ToolRules } from '../snapshot.js';
import { parseStrictJson } from '../json/strict.js';
import { decideToolCall, isToolListed, TOOL_ERROR_CODES, type ToolRefusalCode } from './decide.js';
import { checkToolName } from './names.js';
import { listedTool, pageConflicts, SeenDefinitions, type ListedTool } from './pins.js';
import { envelopeProblem } from './envelope.js';
import { fold } from '../json/fold.js';
import { batchesAllowed, isKnownVersion, KNOWN_PROTOCOL_VERSIONS, requestVersion, SessionVersions } from './protocol.js';
import {
  classify,
  isObject,
  rpcError,
  JSONRPC_INVALID_PARAMS,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_PARSE_ERROR,
  type JsonRpcResponse,
} from './jsonrpc.js';
import { ToolRateLimiter } from './ratelimit.js';
import type { Clock } from '@kars/kube-core';
import { SseEventSplitter, eventData, normaliseLineEnds } from '../http/sse.js';
import { endToEndHeaders } from '../http/headers.js';
import { UpstreamClient, type UpstreamResponse } from '../http/upstream.js';
import { readBody } from '@kars/kube-core';
import { cut } from '../decisions/record.js';
import { scopeOf, type DecisionRecorder, type RequestScope } from '../decisions/recorder.js';

/** One decision the gateway made, for logs and metrics. */
export interface ToolDecision {
  sandbox: string;
  server: string | undefined;
  tool: string;
  /** `call`: a tools/call; `list`: a tool hidden from a tools/list answer (always `decision: 'hidden'`). */
  kind: 'call' | 'list';
  allowed: boolean;
  /** `allowed`, the refusal code of a call, or `hidden` for a tool removed from a tools/list answer. */
  decision: 'allowed' | ToolRefusalCode | 'tool_name_invalid' | 'hidden';
  /** Name of the governing ToolPolicy; null when none applies. */
  policy: string | null;
  /** For a hidden tool: why (`tool_denied`, or a pin's `tool_definition_changed` / `tool_not_pinned`). */
  reason?: ToolRefusalCode;
  message?: string;
}

export interface McpGatewayOptions {
  snapshot: SnapshotSource;
  /** The upstream MCP endpoint (http: or https:), used as is. */
  upstream: URL;
  sandbox: string;
  /** The upstream MCP server's name, for `appliesTo.mcpServer` and `server/tool` globs. */
  server?: string;
  /** Time for the rate limiter (its monotonic `now()`). Default the system clock. */
  clock?: Clock;
  /** Called synchronously for each decision; exceptions it throws are swallowed. */
  onDecision?: (d: ToolDecision) => void;
  /** Where each decision's record goes (a call allowed or refused, a tool hidden from a list). */
  decisions?: DecisionRecorder;
  /** Path served; default `/mcp`. Other paths return `false`. */
  path?: string;
  /** Largest request body accepted; default 4 MiB (413 above). */
  maxRequestBytes?: number;
  /** Largest upstream answer buffered for rewriting (tools/list, mixed batches); default 16 MiB. */
  maxResponseBytes?: number;
  /** The router's shared upstream client (keep-alive pool, timeouts); by default one of its own. */
  client?: UpstreamClient;
  /** The tool definitions this gateway saw listed (pins judge calls by them; the admin listener shows them). Default: its own. */
  seen?: SeenDefinitions;
}

/** Handles one request; resolves `false` when the path is not the gateway's (nothing written). */
export type McpGatewayHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

function sendJson(res: ServerResponse, status: number, payload: unknown, extra: OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(payload);
  res.writeHead(status, { ...extra, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Whether a request id survives the gateway's re-serialisation unchanged and is one MCP allows: a
 * string, or an integer JSON numbers carry exactly (|id| <= 2^53 - 1). Null (forbidden by MCP),
 * 1e400 (Infinity, re-serialised as null), 2^53 + 1 (rounded), 1.5 are not.
 */
export function isForwardableId(id: unknown): id is string | number {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

/** One decided element of the incoming message (or batch). */
interface Plan {
  isBatch: boolean;
  /** Messages to forward, in order. */
  forward: unknown[];
  /** Answers made here. */
  local: JsonRpcResponse[];
  /** Whether every element was forwarded (nothing answered locally). */
  untouched: boolean;
  /** HTTP status when answering only locally. */
  localStatus: number;
}

export function createMcpGateway(opts: McpGatewayOptions): McpGatewayHandler {
  const path = opts.path ?? '/mcp';
  const maxRequest = opts.maxRequestBytes ?? 4 * 1024 * 1024;
  const maxResponse = opts.maxResponseBytes ?? 16 * 1024 * 1024;
  const limiter = new ToolRateLimiter(opts.clock === undefined ? {} : { clock: opts.clock });
  /** The dry-run policies' own buckets (ADR 0050): a would-be call never takes an enforced token. */
  const dryLimiter = new ToolRateLimiter(opts.clock === undefined ? {} : { clock: opts.clock });
  const { sandbox, server, upstream } = opts;
  const client = opts.client ?? new UpstreamClient();
  const sessions = new SessionVersions();
  const seen = opts.seen ?? new SeenDefinitions();

  /**
   * The request and snapshot of the decisions being made: set around each (synchronous) plan and
   * filter, so every record names the snapshot that decided it without each call restating it.
   */
  let current: RequestScope | undefined;
  function within<T>(scope: RequestScope, fn: () => T): T {
    const before = current;
    current = scope;
    try {
      return fn();
    } finally {
      current = before;
    }
  }

  function emit(d: ToolDecision): void {
    try {
      opts.onDecision?.(d);
    } catch {
      // a faulty observer must not change the decision
    }
    const rec = opts.decisions;
    if (rec?.enabled === true && current !== undefined)
      rec.record({
        kind: 'tool',
        requestId: current.requestId,
        snapshot: current.snapshot,
        target: { server: server ?? null, tool: cut(d.tool), action: d.kind },
        decision: d.allowed ? 'allow' : 'deny',
        // A hidden tool's record says why it was hidden (a deny, or a pin: tool_definition_changed, tool_not_pinned).
        reason: d.kind === 'list' ? (d.reason ?? d.decision) : d.decision,
      });
  }

  /**
   * Record what each dry-run ToolPolicy of the current snapshot would decide (ADR 0050), where it
   * applies: `decide` gets one policy alone, as if it were the sandbox's. Nothing it returns reaches
   * the answer.
   */
  function dryRun(
    tool: string,
    action: 'call' | 'list',
    decide: (rules: readonly ToolRules[]) => { decision: 'allow' | 'deny'; reason: string } | undefined,
  ): void {
    const scope = current;
    const policies = scope?.snapshot.dryRun?.tools;
    if (scope === undefined || policies === undefined || opts.decisions === undefined) return;
    for (const p of policies) {
      const d = decide([p.rules]);
      if (d === undefined) continue;
      opts.decisions.recordDryRun(
        {
          kind: 'tool',
          requestId: scope.requestId,
          snapshot: scope.snapshot,
          target: { server: server ?? null, tool: cut(tool), action },
          decision: d.decision,
          reason: d.reason,
        },
        p.refs,
      );
    }
  }

  /** The scope of a request: the one the front door bound, or a new one on the current snapshot. */
  function scopeFor(req: IncomingMessage): RequestScope {
    return scopeOf(req) ?? { requestId: opts.decisions?.nextRequestId() ?? '', snapshot: opts.snapshot() };
  }

  function plan(parsed: unknown, tools: readonly ToolRules[], session: string): Plan {
    const isBatch = Array.isArray(parsed);
    const items: unknown[] = isBatch ? (parsed as unknown[]) : [parsed];
    const p: Plan = { isBatch, forward: [], local: [], untouched: true, localStatus: 200 };
    if (isBatch && items.length === 0) {
      p.local.push(rpcError(null, JSONRPC_INVALID_REQUEST, 'Invalid Request: empty batch'));
      p.untouched = false;
      p.localStatus = 400;
      return p;
    }
    for (const item of items) {
      const c = classify(item);
      if (c.kind === 'invalid') {
        p.local.push(rpcError(c.id, JSONRPC_INVALID_REQUEST, `Invalid Request: ${c.why}`));
        p.untouched = false;
        if (!isBatch) p.localStatus = 400;
        continue;
      }
      const misspelt = envelopeProblem(item);
      if (misspelt !== undefined) {
        const id = c.kind === 'request' && isForwardableId(c.id) ? c.id : null;
        p.local.push(rpcError(id, JSONRPC_INVALID_REQUEST, `Invalid Request: ${misspelt}`, { code: 'ambiguous_spelling' }));
        p.untouched = false;
        if (!isBatch) p.localStatus = 400;
        continue;
      }
      if (c.kind === 'request' && !isForwardableId(c.id)) {
        p.local.push(
          rpcError(
            null,
            JSONRPC_INVALID_REQUEST,
            'Invalid Request: id must be a string or an integer of at most 2^53-1 in magnitude (MCP does not allow null ids)',
          ),
        );
        p.untouched = false;
        if (!isBatch) p.localStatus = 400;
        continue;
      }
      if (c.kind === 'response' || c.msg.method !== 'tools/call') {
        p.forward.push(item);
        continue;
      }
      // tools/call, as a request or (oddly) a notification
      const id = c.kind === 'request' ? c.id : null;
      const params = c.msg.params;
      const tool = isObject(params) ? params['name'] : undefined;
      if (typeof tool !== 'string' || tool === '') {
        if (c.kind === 'request')
          p.local.push(rpcError(id, JSONRPC_INVALID_PARAMS, 'Invalid params: tools/call needs params.name (a non-empty string)'));
        p.untouched = false;
        continue;
      }
      const named = checkToolName(tool);
      if (!named.ok) {
        emit({ sandbox, server, tool, kind: 'call', allowed: false, decision: 'tool_name_invalid', policy: null, message: named.reason });
        if (c.kind === 'request')
          p.local.push(
            rpcError(id, JSONRPC_INVALID_PARAMS, `Invalid params: ${named.reason}`, {
              code: 'tool_name_invalid',
              tool,
              reason: named.reason,
            }),
          );
        p.untouched = false;
        continue;
      }
      const seenEntry = seen.get(session, named.key);
      dryRun(tool, 'call', (rules) => {
        const w = decideToolCall(rules, { sandbox, server, tool, seen: seenEntry }, dryLimiter);
        if (w.policy === undefined) return undefined;
        return w.allowed ? { decision: 'allow', reason: 'allowed' } : { decision: 'deny', reason: w.code };
      });
      const d = decideToolCall(tools, { sandbox, server, tool, seen: seenEntry }, limiter);
      if (d.allowed) {
        emit({ sandbox, server, tool, kind: 'call', allowed: true, decision: 'allowed', policy: d.policy?.name ?? null });
        p.forward.push(item);
        continue;
      }
      emit({ sandbox, server, tool, kind: 'call', allowed: false, decision: d.code, policy: d.policy.name, message: d.message });
      if (c.kind === 'request') p.local.push(rpcError(id, TOOL_ERROR_CODES[d.code], d.message, d.data));
      p.untouched = false;
    }
    return p;
  }

  /**
   * Remove AGT-denied tools from any message carrying a tools array, whatever its id and kind:
   * `result.tools` (a tools/list answer, or one under an id the agent never sent), `params.tools`
   * (a server-initiated request or notification, e.g. `sampling/createMessage` with tools, or a
   * `notifications/tools/list_changed` padded with a list) and `error.data.tools`. Returns the
   * (possibly new) message. Entries without a string name are removed too. The keys are matched
   * as a lenient decoder would read them ({@link fold}: `Result`, `Tools`, `paramſ`; a client whose
   * JSON decoder matches keys case-insensitively, as Go's does, would read them), and a batch nested
   * in a batch is filtered too.
   */
  function filterMessage(msg: unknown, tools: readonly ToolRules[], session: string): unknown {
    if (Array.isArray(msg)) return msg.map((m) => filterMessage(m, tools, session));
    if (!isObject(msg)) return msg;
    // The server says its tools changed: what this session saw listed no longer vouches for a call.
    for (const k of Object.keys(msg)) {
      const m = msg[k];
      if (fold(k) === 'method' && typeof m === 'string' && fold(m) === 'notifications/tools/list_changed') seen.forget(session);
    }
    let out: Record<string, unknown> = msg;
    for (const rk of Object.keys(msg)) {
      const member = fold(rk);
      const value = msg[rk];
      if (!isObject(value)) continue;
      let kept: Record<string, unknown> | undefined;
      if (member === 'result' || member === 'params') kept = withoutDenied(value, tools, session);
      else if (member === 'error')
        for (const dk of Object.keys(value)) {
          const data = value[dk];
          if (fold(dk) !== 'data' || !isObject(data)) continue;
          const d = withoutDenied(data, tools, session);
          if (d !== data) kept = { ...(kept ?? value), [dk]: d };
        }
      if (kept !== undefined && kept !== value) out = { ...out, [rk]: kept };
    }
    return out;
  }

  /** `obj` with every `tools` array (any spelling of the key) reduced to the tools policy lets the agent see. */
  function withoutDenied(obj: Record<string, unknown>, tools: readonly ToolRules[], session: string): Record<string, unknown> {
    let kept = obj;
    for (const tk of Object.keys(obj)) {
      const list = obj[tk];
      if (fold(tk) === 'tools' && Array.isArray(list)) kept = { ...kept, [tk]: keptTools(list, tools, session) };
    }
    return kept;
  }

  /**
   * The entries of a listed `tools` array that policy lets the agent see. The valid entries are
   * recorded first (with their digests) as what this session last saw listed, hidden ones included.
   */
  function keptTools(list: unknown[], tools: readonly ToolRules[], session: string): unknown[] {
    const page = new Map<unknown, ListedTool>();
    for (const t of list)
      if (isObject(t) && typeof t['name'] === 'string' && checkToolName(t['name']).ok) page.set(t, listedTool(t, t['name']));
    const entries = [...page.values()];
    seen.record(session, entries);
    const conflicts = pageConflicts(entries);
    return list.filter((t) => {
      if (!isObject(t) || typeof t['name'] !== 'string') {
        emit({
          sandbox,
          server,
          tool: '',
          kind: 'list',
          allowed: false,
          decision: 'hidden',
          policy: null,
          message: 'a listed tool without a string name',
        });
        return false;
      }
      // A listed name the gateway would refuse to call is not shown either.
      const named = checkToolName(t['name']);
      if (!named.ok) {
        emit({ sandbox, server, tool: t['name'], kind: 'list', allowed: false, decision: 'hidden', policy: null, message: named.reason });
        return false;
      }
      const entry = page.get(t);
      const listed = entry === undefined ? undefined : { entry, conflicted: conflicts.has(entry.key) };
      const name = t['name'];
      dryRun(name, 'list', (rules) => {
        const w = isToolListed(rules, server, name, listed);
        return w.listed ? undefined : { decision: 'deny', reason: w.code };
      });
      const v = isToolListed(tools, server, name, listed);
      if (!v.listed)
        emit({
          sandbox,
          server,
          tool: t['name'],
          kind: 'list',
          allowed: false,
          decision: 'hidden',
          policy: v.policy.name,
          reason: v.code,
          message: v.reason,
        });
      return v.listed;
    });
  }

  function upstreamErrors(p: Plan, why: string): JsonRpcResponse[] {
    const message = `upstream_unavailable: MCP server ${upstream.origin} ${why}`;
    const out: JsonRpcResponse[] = [];
    for (const m of p.forward) {
      const c = classify(m);
      if (c.kind === 'request') out.push(rpcError(c.id, TOOL_ERROR_CODES.upstream_unavailable, message, { code: 'upstream_unavailable' }));
    }
    // A GET or DELETE carries no request: the failure is said with id null.
    if (p.forward.length === 0) out.push(rpcError(null, TOOL_ERROR_CODES.upstream_unavailable, message, { code: 'upstream_unavailable' }));
    return out;
  }

  function answerLocally(res: ServerResponse, p: Plan, extra: JsonRpcResponse[] = [], status?: number): void {
    const all = [...p.local, ...extra];
    if (all.length === 0) {
      if (!res.headersSent) res.writeHead(status ?? 202).end();
      return;
    }
    sendJson(res, status ?? p.localStatus, p.isBatch ? all : all[0]);
  }

  /**
   * The filter applied to every upstream message of one HTTP exchange: {@link filterMessage}, and
   * for the answer to a forwarded `initialize` (matched by id), the negotiated protocol version
   * recorded for the session, or the answer replaced by -32602 when the version is one the gateway
   * does not know (it cannot vouch for a filter of shapes it was not written for).
   */
  function messageFilter(p: Plan, scope: RequestScope, session: () => string | undefined): (m: unknown) => unknown {
    const inits = new Set<string | number>();
    for (const m of p.forward) if (isObject(m) && m['method'] === 'initialize' && isForwardableId(m['id'])) inits.add(m['id']);
    return (m: unknown): unknown => {
      if (inits.size > 0 && isObject(m) && isForwardableId(m['id']) && inits.has(m['id']) && isObject(m['result'])) {
        const v = m['result']['protocolVersion'];
        if (!isKnownVersion(v))
          return rpcError(m['id'], JSONRPC_INVALID_PARAMS, 'Unsupported protocol version', {
            code: 'protocol_version_unsupported',
            supported: KNOWN_PROTOCOL_VERSIONS,
            requested: typeof v === 'string' ? v : null,
          });
        const sid = session();
        if (sid !== undefined) sessions.set(sid, v);
      }
      return within(scope, () => filterMessage(m, scope.snapshot.tools, session() ?? ''));
    };
  }

  /**
   * Ask the upstream and relay its answer: an event stream event by event through `filter`, any
   * other answer buffered, parsed, filtered and re-serialised with the local refusals of `p` added.
   */
  async function relay(
    req: IncomingMessage,
    res: ServerResponse,
    p: Plan,
    ask: { method: 'POST' | 'GET' | 'DELETE'; body?: Buffer; retryStale: boolean },
    filterFor: (session: () => string | undefined) => (m: unknown) => unknown,
  ): Promise<void> {
    const headers = endToEndHeaders(req.headers, REQUEST_RECOMPUTED);
    if (ask.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      headers['content-length'] = ask.body.length;
    } else delete headers['content-type'];
    headers['accept-encoding'] = 'identity';

    const abort = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once('close', onClose);
    let up: UpstreamResponse;
    try {
      up = await client.request({
        origin: upstream.origin,
        path: `${upstream.pathname}${upstream.search}`,
        method: ask.method,
        headers,
        ...(ask.body !== undefined ? { body: ask.body } : {}),
        retryStale: ask.retryStale,
        signal: abort.signal,
      });
    } catch (err: unknown) {
      const code = (err as NodeJS.ErrnoException).code;
      answerLocally(res, p, upstreamErrors(p, `could not be reached (${code ?? (err instanceof Error ? err.message : String(err))})`), 502);
      return;
    }
    up.body.on('error', () => res.destroy());
    const status = up.status;
    const ok = status >= 200 && status < 300;
    // The session the answer belongs to: the upstream's header (set by initialize), else the request's.
    const sessionHeader = up.headers['mcp-session-id'] ?? req.headers['mcp-session-id'];
    const session = (): string | undefined => (Array.isArray(sessionHeader) ? sessionHeader.join(', ') : sessionHeader);
    const filter = filterFor(session);
    // Every answer is rewritten (filtered): the length and any encoding are the gateway's own.
    const outHeaders = copyHeaders(up.headers, true);
    const encoding = String(up.headers['content-encoding'] ?? '')
      .trim()
      .toLowerCase();
    if (encoding !== '' && encoding !== 'identity') {
      up.body.destroy();
      answerLocally(res, p, upstreamErrors(p, `answered with content-encoding ${encoding}, which the gateway cannot filter`), 502);
      return;
    }
    const contentType = String(up.headers['content-type'] ?? '').toLowerCase();

    if (contentType.startsWith('text/event-stream')) {
      // Streamed event by event (a tools/call may stream progress, a GET stream lasts the session), each event filtered.
      const tail = ok ? p.local.map((e) => `event: message\ndata: ${JSON.stringify(e)}\n\n`).join('') : '';
      res.writeHead(status, outHeaders);
      // Each event is sent as soon as it is filtered (no Nagle delay on a stream of small events).
      res.socket?.setNoDelay(true);
      up.body.pipe(new SseFilter(filter, tail)).pipe(res);
      await finished(res).catch(() => undefined);
      return;
    }

    const read = await readBody(up.body, maxResponse);
    if (!read.ok) {
      up.body.destroy();
      const why = read.reason === 'too_large' ? `answer exceeds ${maxResponse} bytes` : 'upstream closed the answer early';
      answerLocally(res, p, upstreamErrors(p, `answer could not be read: ${why}`), 502);
      return;
    }
    const text = read.body.toString('utf8');
    let parsed: unknown;
    if (text.trim() === '') parsed = undefined;
    else {
      try {
        parsed = JSON.parse(text);
      } catch {
        if (!ok) {
          // An HTTP error with a body that is not JSON (a proxy's text page): nothing to filter.
          res.writeHead(status, { ...outHeaders, 'content-length': read.body.length });
          res.end(read.body);
          return;
        }
        answerLocally(res, p, upstreamErrors(p, 'answered with a body that is not JSON'), 502);
        return;
      }
    }
    const upstreamBatch = Array.isArray(parsed);
    const messages = (parsed === undefined ? [] : upstreamBatch ? (parsed as unknown[]) : [parsed]).map(filter);
    const all = ok ? [...messages, ...p.local] : messages;
    if (all.length === 0) {
      res.writeHead(status, outHeaders).end();
      return;
    }
    const payload = JSON.stringify(p.isBatch || upstreamBatch ? all : all[0]);
    // a batch of notifications answered 202 upstream, plus local refusals, is an answer with a body
    res.writeHead(status === 202 ? 200 : status, {
      ...outHeaders,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
    });
    res.end(payload);
  }

  /** A POST: its decided messages, re-serialised (never the client's bytes), go upstream. */
  async function forward(req: IncomingMessage, res: ServerResponse, p: Plan, scope: RequestScope): Promise<void> {
    const body = Buffer.from(JSON.stringify(p.isBatch ? p.forward : p.forward[0]), 'utf8');
    // A repeat is harmless unless the message may act on something: never retry a tools/call.
    const retryStale = !p.forward.some((m) => isObject(m) && m['method'] === 'tools/call');
    await relay(req, res, p, { method: 'POST', body, retryStale }, (session) => messageFilter(p, scope, session));
  }

  /**
   * A GET (the stream of server-initiated messages, or a resumption with `Last-Event-ID`) or a
   * DELETE (session termination): forwarded with the client's headers and no body. A GET stream
   * may last the whole session, so each of its events is filtered under the policy in force when
   * it passes, not the one of the moment the stream opened.
   */
  async function forwardBodiless(req: IncomingMessage, res: ServerResponse, method: 'GET' | 'DELETE'): Promise<void> {
    req.resume();
    const p: Plan = { isBatch: false, forward: [], local: [], untouched: true, localStatus: 200 };
    const session = req.headers['mcp-session-id'];
    if (method === 'DELETE' && typeof session === 'string')
      res.once('finish', () => {
        sessions.delete(session);
        seen.forget(session);
      });
    const sid = sessionOf(req.headers);
    const requestId = scopeFor(req).requestId;
    await relay(req, res, p, { method, retryStale: true }, () => (m) => {
      const snapshot = opts.snapshot();
      return within({ requestId, snapshot }, () => filterMessage(m, snapshot.tools, sid));
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method;
    if (method !== 'POST' && method !== 'GET' && method !== 'DELETE') {
      sendJson(
        res,
        405,
        rpcError(
          null,
          JSONRPC_INVALID_REQUEST,
          `method ${method ?? ''} is not allowed on ${path}; MCP streamable HTTP uses POST (JSON-RPC 2.0), GET (the server's stream) and DELETE (end a session)`,
        ),
        { allow: 'GET, POST, DELETE' },
      );
      return;
    }
    const version = requestVersion(req.headers, sessions);
    if (!version.ok) {
      req.resume();
      sendJson(res, 400, rpcError(null, JSONRPC_INVALID_REQUEST, version.message, version.data));
      return;
    }
    if (method !== 'POST') {
      await forwardBodiless(req, res, method);
      return;
    }
    const read = await readBody(req, maxRequest, req.headers['content-length']);
    if (!read.ok) {
      if (read.reason === 'too_large')
        sendJson(res, 413, rpcError(null, JSONRPC_INVALID_REQUEST, `Invalid Request: request body exceeds ${maxRequest} bytes`), {
          connection: 'close',
        });
      else res.destroy();
      return;
    }
    const raw = read.body;
    const scope = scopeFor(req);
    const snapshot = scope.snapshot;
    const strict = parseStrictJson(raw.toString('utf8'));
    if (!strict.ok) {
      if (strict.code === 'invalid_json')
        sendJson(res, 400, rpcError(null, JSONRPC_PARSE_ERROR, 'Parse error: the request body is not valid JSON'));
      else sendJson(res, 400, rpcError(null, JSONRPC_INVALID_REQUEST, `Invalid Request: ${strict.message}`, { code: strict.code }));
      return;
    }
    if (Array.isArray(strict.value) && !batchesAllowed(version.version)) {
      sendJson(
        res,
        400,
        rpcError(
          null,
          JSONRPC_INVALID_REQUEST,
          `Invalid Request: MCP ${version.version} has no JSON-RPC batches (removed in 2025-06-18); send one message per POST`,
          { code: 'batch_not_allowed', protocolVersion: version.version },
        ),
      );
      return;
    }
    const p = within(scope, () => plan(strict.value, snapshot.tools, sessionOf(req.headers)));
    if (p.forward.length === 0) {
      answerLocally(res, p);
      return;
    }
    await forward(req, res, p, scope);
  }

  return async (req, res) => {
    const pathname = (req.url ?? '').split('?')[0];
    if (pathname !== path) return false;
    try {
      await handle(req, res);
    } catch (err: unknown) {
      if (!res.headersSent)
        sendJson(
          res,
          500,
          rpcError(null, -32603, `Internal error in the MCP gateway: ${err instanceof Error ? err.message : String(err)}`),
        );
      else res.destroy();
    }
    return true;
  };
}

/** The session a request belongs to, as the tables key it: its `Mcp-Session-Id` (joined when repeated), or `''`. */
function sessionOf(h: IncomingHttpHeaders): string {
  const v = h['mcp-session-id'];
  return Array.isArray(v) ? v.join(', ') : (v ?? '');
}

/** Request headers the gateway sets itself. */
const REQUEST_RECOMPUTED: ReadonlySet<string> = new Set(['host', 'content-length', 'accept-encoding']);
/** Response headers dropped when the gateway rewrites the body. */
const REWRITTEN: ReadonlySet<string> = new Set(['content-length', 'content-encoding']);

function copyHeaders(h: IncomingHttpHeaders, rewriting: boolean): OutgoingHttpHeaders {
  return endToEndHeaders(h, rewriting ? REWRITTEN : undefined);
}

/** SSE lines kept from an upstream event when its data is rewritten (comments start with `:`). */
const KEPT_SSE_FIELD = /^(event|id|retry):|^:/;

/**
 * One complete SSE event (line ends already `\n`, with its blank line) rewritten: `fn` applied to
 * its JSON data. An event whose data is not JSON is dropped (a lenient client might still read
 * it, e.g. `NaN`); one without data (a comment, a keep-alive) is kept. Only `event:`, `id:`,
 * `retry:` and comment lines are kept beside the new `data:` line.
 */
function rewriteEvent(event: string, fn: (msg: unknown) => unknown): string {
  const block = event.endsWith('\n\n') ? event.slice(0, -2) : event;
  const data = eventData(block);
  if (data === undefined) {
    // Nothing to filter: keep only the lines a client reads (a keep-alive comment, an id), never
    // one it might read differently, such as `\uFEFFdata: …` that a client dropping the BOM reads as data.
    const lines = block.split('\n').filter((l) => KEPT_SSE_FIELD.test(l));
    return lines.length === 0 ? '' : `${lines.join('\n')}\n\n`;
  }
  if (data === '') {
    // An event with empty data (the priming event a 2025-11-25 server sends, `id:` and `data:`):
    // clients skip it for its data and keep its id for resumption. Nothing in it to filter.
    const kept = block.split('\n').filter((l) => KEPT_SSE_FIELD.test(l));
    return `${[...kept, 'data:'].join('\n')}\n\n`;
  }
  let msg: unknown;
  try {
    msg = JSON.parse(data);
  } catch {
    return '';
  }
  const next = Array.isArray(msg) ? (msg as unknown[]).map(fn) : fn(msg);
  const kept = block.split('\n').filter((l) => KEPT_SSE_FIELD.test(l));
  return `${[...kept, `data: ${JSON.stringify(next)}`].join('\n')}\n\n`;
}

/**
 * A stream transform over an upstream SSE body: normalises line ends, rewrites each complete
 * event with {@link rewriteEvent}, drops an incomplete last event (as the SSE spec's clients do),
 * then writes `tail`.
 */
class SseFilter extends Transform {
  readonly #split = new SseEventSplitter();
  #cr = false;
  constructor(
    private readonly fn: (msg: unknown) => unknown,
    private readonly tail: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let b = this.#cr ? Buffer.concat([Buffer.from([0x0d]), chunk]) : chunk;
    // A CR at the end may be the first half of a CRLF: held for the next chunk.
    this.#cr = b.length > 0 && b[b.length - 1] === 0x0d;
    if (this.#cr) b = b.subarray(0, b.length - 1);
    this.#emit(normaliseLineEnds(b));
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (this.#cr) this.#emit(Buffer.from('\n'));
    this.#split.drain();
    if (this.tail !== '') this.push(this.tail);
    cb();
  }

  #emit(b: Buffer): void {
    let out = '';
    for (const ev of this.#split.push(b)) out += rewriteEvent(ev.toString('utf8'), this.fn);
    if (out !== '') this.push(out);
  }
}

/**
 * Apply `fn` to the JSON message of every complete SSE event of a whole body, as the gateway does
 * to a streamed answer: line ends normalised to `\n`, events whose data is not JSON dropped,
 * comments kept, an incomplete last event dropped.
 */
export function rewriteSse(text: string, fn: (msg: unknown) => unknown): string {
  const splitter = new SseEventSplitter();
  const events = splitter.push(Buffer.from(text.replace(/\r\n?/g, '\n'), 'utf8'));
  return events.map((ev) => rewriteEvent(ev.toString('utf8'), fn)).join('');
}
