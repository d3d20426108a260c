/**
 * The MCP gateway: an HTTP handler for `POST /mcp` (JSON-RPC 2.0, MCP streamable HTTP) that
 * enforces the sandbox's ToolPolicies in front of one upstream MCP server.
 *
 * - `tools/call`: decided by {@link decideToolCall}; a refusal is answered here as a JSON-RPC
 *   error (HTTP 200) and never reaches the upstream. An allowed call is forwarded and the upstream
 *   answer (status, headers, body, JSON or `text/event-stream`) is streamed back verbatim.
 * - `tools/list`: forwarded, then the tools that AGT denies are removed from `result.tools`.
 *   Approval-required and rate-limited tools stay listed (their calls are refused).
 * - Every other method, notifications and client responses are forwarded verbatim.
 * - Batches (JSON arrays) are decided element by element; the allowed elements go upstream as one
 *   batch and the local refusals are added to its answer.
 *
 * Guarantees: the snapshot is taken once per HTTP request and used for every decision in it. The
 * handler never rejects: failures become JSON-RPC errors or a destroyed response. A `tools/list`
 * answer that cannot be read is refused with -32004 rather than passed through unfiltered.
 *
 * Assumptions: the upstream is one MCP server, named by `server` for `appliesTo.mcpServer` and for
 * `server/tool` globs; without `server` only policies with no server selector apply, and only bare
 * tool-name globs can match.
 *
 * Caveats: if the upstream fails a mixed batch with a non-2xx status, its answer is returned as is
 * and the local refusals in that batch are not. `approval.mode: aboveThreshold` is not enforced here
 * (AP2 amounts are not evaluated). Requests are asked upstream with `accept-encoding: identity`.
 */
import { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { finished } from 'node:stream/promises';
import type { SnapshotSource, ToolRules } from '../snapshot.js';
import { parseStrictJson } from '../json/strict.js';
import { decideToolCall, isToolListed, TOOL_ERROR_CODES, type ToolRefusalCode } from './decide.js';
import { checkToolName } from './names.js';
import {
  classify,
  isObject,
  rpcError,
  JSONRPC_INVALID_PARAMS,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_PARSE_ERROR,
  type JsonRpcId,
  type JsonRpcResponse,
} from './jsonrpc.js';
import { ToolRateLimiter } from './ratelimit.js';
import type { Clock } from '@kars/kube-core';
import { SseEventSplitter, eventData } from '../http/sse.js';
import { endToEndHeaders } from '../http/headers.js';
import { UpstreamClient, type UpstreamResponse } from '../http/upstream.js';
import { readBody } from '@kars/kube-core';

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
  /** Path served; default `/mcp`. Other paths return `false`. */
  path?: string;
  /** Largest request body accepted; default 4 MiB (413 above). */
  maxRequestBytes?: number;
  /** Largest upstream answer buffered for rewriting (tools/list, mixed batches); default 16 MiB. */
  maxResponseBytes?: number;
  /** The router's shared upstream client (keep-alive pool, timeouts); by default one of its own. */
  client?: UpstreamClient;
}

/** Handles one request; resolves `false` when the path is not the gateway's (nothing written). */
export type McpGatewayHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

function sendJson(res: ServerResponse, status: number, payload: unknown, extra: OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(payload);
  res.writeHead(status, { ...extra, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function idKey(id: JsonRpcId): string {
  return `${typeof id}:${String(id)}`;
}

/** One decided element of the incoming message (or batch). */
interface Plan {
  isBatch: boolean;
  /** Messages to forward, in order. */
  forward: unknown[];
  /** Answers made here. */
  local: JsonRpcResponse[];
  /** Ids of forwarded tools/list requests, whose answers get filtered. */
  listIds: Set<string>;
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
  const { sandbox, server, upstream } = opts;
  const client = opts.client ?? new UpstreamClient();

  function emit(d: ToolDecision): void {
    try {
      opts.onDecision?.(d);
    } catch {
      // a faulty observer must not change the decision
    }
  }

  function plan(parsed: unknown, tools: readonly ToolRules[]): Plan {
    const isBatch = Array.isArray(parsed);
    const items: unknown[] = isBatch ? (parsed as unknown[]) : [parsed];
    const p: Plan = { isBatch, forward: [], local: [], listIds: new Set(), untouched: true, localStatus: 200 };
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
      if (c.kind === 'response' || c.msg.method !== 'tools/call') {
        if (c.kind === 'request' && c.msg.method === 'tools/list') p.listIds.add(idKey(c.id));
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
      const d = decideToolCall(tools, { sandbox, server, tool }, limiter);
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

  /** Remove AGT-denied tools from a tools/list answer; returns the (possibly new) message. */
  function filterMessage(msg: unknown, listIds: Set<string>, tools: readonly ToolRules[]): unknown {
    if (!isObject(msg) || !('result' in msg)) return msg;
    const id = msg['id'];
    if ((typeof id !== 'string' && typeof id !== 'number') || !listIds.has(idKey(id))) return msg;
    const result = msg['result'];
    if (!isObject(result) || !Array.isArray(result['tools'])) return msg;
    const kept = (result['tools'] as unknown[]).filter((t) => {
      if (!isObject(t) || typeof t['name'] !== 'string') return true;
      // A listed name the gateway would refuse to call is not shown either.
      const named = checkToolName(t['name']);
      if (!named.ok) {
        emit({ sandbox, server, tool: t['name'], kind: 'list', allowed: false, decision: 'hidden', policy: null, message: named.reason });
        return false;
      }
      const v = isToolListed(tools, server, t['name']);
      if (!v.listed)
        emit({
          sandbox,
          server,
          tool: t['name'],
          kind: 'list',
          allowed: false,
          decision: 'hidden',
          policy: v.policy.name,
          message: v.reason,
        });
      return v.listed;
    });
    return { ...msg, result: { ...result, tools: kept } };
  }

  function upstreamErrors(p: Plan, why: string): JsonRpcResponse[] {
    const message = `upstream_unavailable: MCP server ${upstream.origin} ${why}`;
    const out: JsonRpcResponse[] = [];
    for (const m of p.forward) {
      const c = classify(m);
      if (c.kind === 'request') out.push(rpcError(c.id, TOOL_ERROR_CODES.upstream_unavailable, message, { code: 'upstream_unavailable' }));
    }
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

  async function forward(req: IncomingMessage, res: ServerResponse, p: Plan, tools: readonly ToolRules[]): Promise<void> {
    // Always the router's re-serialisation of what it decided on, never the client's bytes.
    const body = Buffer.from(JSON.stringify(p.isBatch ? p.forward : p.forward[0]), 'utf8');
    const headers = endToEndHeaders(req.headers, REQUEST_RECOMPUTED);
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = body.length;
    headers['accept-encoding'] = 'identity';

    const rewrite = p.listIds.size > 0 || p.local.length > 0;
    // A repeat is harmless unless the message may act on something: never retry a tools/call.
    const retryStale = !p.forward.some((m) => isObject(m) && m['method'] === 'tools/call');
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
        method: 'POST',
        headers,
        body,
        retryStale,
        signal: abort.signal,
      });
    } catch (err: unknown) {
      const code = (err as NodeJS.ErrnoException).code;
      answerLocally(res, p, upstreamErrors(p, `could not be reached (${code ?? (err instanceof Error ? err.message : String(err))})`), 502);
      return;
    }
    up.body.on('error', () => res.destroy());
    const status = up.status;
    const outHeaders = copyHeaders(up.headers, rewrite);

    if (!rewrite || status < 200 || status >= 300) {
      res.writeHead(status, outHeaders);
      up.body.pipe(res);
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
    const contentType = String(up.headers['content-type'] ?? '').toLowerCase();
    if (contentType.startsWith('text/event-stream')) {
      const rewritten =
        rewriteSse(text, (m) => filterMessage(m, p.listIds, tools)) +
        p.local.map((e) => `event: message\ndata: ${JSON.stringify(e)}\n\n`).join('');
      res.writeHead(status, { ...outHeaders, 'content-length': Buffer.byteLength(rewritten) });
      res.end(rewritten);
      return;
    }
    let parsed: unknown;
    if (text.trim() === '') parsed = undefined;
    else {
      try {
        parsed = JSON.parse(text);
      } catch {
        answerLocally(res, p, upstreamErrors(p, 'answered with a body that is not JSON'), 502);
        return;
      }
    }
    const messages = (parsed === undefined ? [] : Array.isArray(parsed) ? (parsed as unknown[]) : [parsed]).map((m) =>
      filterMessage(m, p.listIds, tools),
    );
    const all = [...messages, ...p.local];
    if (all.length === 0) {
      res.writeHead(status, outHeaders).end();
      return;
    }
    const payload = JSON.stringify(p.isBatch ? all : all[0]);
    // a batch of notifications answered 202 upstream, plus local refusals, is an answer with a body
    res.writeHead(status === 202 ? 200 : status, {
      ...outHeaders,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
    });
    res.end(payload);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') {
      sendJson(
        res,
        405,
        { error: `method ${req.method ?? ''} is not allowed on ${path}; MCP requests are POSTed JSON-RPC 2.0` },
        { allow: 'POST' },
      );
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
    const snapshot = opts.snapshot();
    const strict = parseStrictJson(raw.toString('utf8'));
    if (!strict.ok) {
      if (strict.code === 'invalid_json')
        sendJson(res, 400, rpcError(null, JSONRPC_PARSE_ERROR, 'Parse error: the request body is not valid JSON'));
      else sendJson(res, 400, rpcError(null, JSONRPC_INVALID_REQUEST, `Invalid Request: ${strict.message}`, { code: strict.code }));
      return;
    }
    const p = plan(strict.value, snapshot.tools);
    if (p.forward.length === 0) {
      answerLocally(res, p);
      return;
    }
    await forward(req, res, p, snapshot.tools);
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

/** Request headers the gateway sets itself. */
const REQUEST_RECOMPUTED: ReadonlySet<string> = new Set(['host', 'content-length', 'accept-encoding']);
/** Response headers dropped when the gateway rewrites the body. */
const REWRITTEN: ReadonlySet<string> = new Set(['content-length', 'content-encoding']);

function copyHeaders(h: IncomingHttpHeaders, rewriting: boolean): OutgoingHttpHeaders {
  return endToEndHeaders(h, rewriting ? REWRITTEN : undefined);
}

/**
 * Apply `fn` to the JSON message of every complete SSE event; events whose data is not JSON, and
 * an incomplete last event, are kept verbatim. Line endings are normalised to `\n`.
 */
export function rewriteSse(text: string, fn: (msg: unknown) => unknown): string {
  const splitter = new SseEventSplitter();
  const events = splitter.push(Buffer.from(text.replace(/\r\n?/g, '\n'), 'utf8'));
  let out = '';
  for (const ev of events) {
    const block = ev.toString('utf8', 0, ev.length - 2);
    const data = eventData(block);
    let msg: unknown;
    try {
      msg = data === undefined ? undefined : JSON.parse(data);
    } catch {
      msg = undefined;
    }
    if (msg === undefined) {
      out += `${block}\n\n`;
      continue;
    }
    const next = Array.isArray(msg) ? (msg as unknown[]).map(fn) : fn(msg);
    const kept = block.split('\n').filter((l) => !l.startsWith('data:'));
    out += `${[...kept, `data: ${JSON.stringify(next)}`].join('\n')}\n\n`;
  }
  return out + splitter.drain().toString('utf8');
}
