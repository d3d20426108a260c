/**
 * A small MCP server over HTTP (JSON-RPC 2.0 on `POST /mcp`, also `POST /`) for tests and local
 * runs: it answers `initialize`, `tools/list` and `tools/call`, records every call, and can be told
 * to fail.
 *
 * - `tools/call` answers `{content: [{type: 'text', text: 'called <name> with <json args>'}]}`, or
 *   the error set with `setToolError`, or -32602 for a tool it does not have.
 * - `setHttpFailure` makes every request answer with a fixed HTTP status and body instead.
 * - `responseMode: 'sse'` answers requests as one `text/event-stream` event, as a streamable-HTTP
 *   MCP server may.
 * - `initialize` sets an `mcp-session-id` response header.
 *
 * Caveats: no sessions, no server-to-client requests, no GET stream (GET answers 405).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOn, readBody } from '@kars/kube-core';

/** Largest request body the stub reads (413 above). */
const MAX_BODY = 64 * 1024 * 1024;
import {
  classify,
  rpcError,
  JSONRPC_INVALID_PARAMS,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_METHOD_NOT_FOUND,
  JSONRPC_PARSE_ERROR,
  type JsonRpcErrorObject,
  type JsonRpcId,
  type JsonRpcResponse,
} from '../tools/jsonrpc.js';

export interface McpStubTool {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
}

export interface McpStubOptions {
  /** `host:port`; default `127.0.0.1:0` (a free port). */
  listen?: string;
  tools?: McpStubTool[];
  /** JSON-RPC errors to answer for `tools/call` of these tools. */
  toolErrors?: Record<string, JsonRpcErrorObject>;
  responseMode?: 'json' | 'sse';
}

export interface McpStubCall {
  tool: string;
  arguments: unknown;
  id: JsonRpcId;
  headers: IncomingHttpHeaders;
}

export interface McpStub {
  /** `http://<host>:<port>/mcp`. */
  url: URL;
  port: number;
  /** Every `tools/call` received (also of unknown or failing tools), in order. */
  calls: McpStubCall[];
  /** How many HTTP requests (any method, any path) the stub has received. */
  readonly requests: number;
  /** Every JSON-RPC method received (requests and notifications), in order. */
  methods: string[];
  setToolError(tool: string, error: JsonRpcErrorObject | undefined): void;
  setHttpFailure(failure: { status: number; body?: string; contentType?: string } | undefined): void;
  setResponseMode(mode: 'json' | 'sse'): void;
  /** Replace the tools it lists (and answers calls of), e.g. to change a definition after it was pinned. */
  setTools(tools: McpStubTool[]): void;
  close(): Promise<void>;
}

const DEFAULT_TOOLS: McpStubTool[] = [{ name: 'echo', description: 'Echo the arguments' }];

export async function startMcpStub(opts: McpStubOptions = {}): Promise<McpStub> {
  let tools = (opts.tools ?? DEFAULT_TOOLS).map((t) => ({ ...t }));
  const toolErrors = new Map<string, JsonRpcErrorObject>(Object.entries(opts.toolErrors ?? {}));
  let failure: { status: number; body?: string; contentType?: string } | undefined;
  let mode: 'json' | 'sse' = opts.responseMode ?? 'json';
  let sessions = 0;
  const calls: McpStubCall[] = [];
  const methods: string[] = [];

  function answer(msg: unknown, headers: IncomingHttpHeaders, setHeader: (k: string, v: string) => void): JsonRpcResponse | undefined {
    const c = classify(msg);
    if (c.kind === 'invalid') return rpcError(c.id, JSONRPC_INVALID_REQUEST, `Invalid Request: ${c.why}`);
    if (c.kind === 'response') return undefined;
    methods.push(c.msg.method);
    if (c.kind === 'notification') return undefined;
    const id = c.id;
    const params = c.msg.params;
    switch (c.msg.method) {
      case 'initialize': {
        setHeader('mcp-session-id', `stub-session-${++sessions}`);
        const requested =
          typeof params === 'object' && params !== null ? (params as Record<string, unknown>)['protocolVersion'] : undefined;
        return {
          jsonrpc: '2.0',
          id,
          result: {
            protocolVersion: typeof requested === 'string' ? requested : '2025-06-18',
            capabilities: { tools: { listChanged: false } },
            serverInfo: { name: 'kars-mcp-stub', version: '0.1.0' },
          },
        };
      }
      case 'ping':
        return { jsonrpc: '2.0', id, result: {} };
      case 'tools/list':
        return {
          jsonrpc: '2.0',
          id,
          result: {
            tools: tools.map((t) => ({
              name: t.name,
              description: t.description ?? `stub tool ${t.name}`,
              inputSchema: t.inputSchema ?? { type: 'object', additionalProperties: true },
            })),
          },
        };
      case 'tools/call': {
        const p = typeof params === 'object' && params !== null ? (params as Record<string, unknown>) : {};
        const name = p['name'];
        const args = p['arguments'] ?? {};
        if (typeof name !== 'string') return rpcError(id, JSONRPC_INVALID_PARAMS, 'tools/call needs params.name');
        calls.push({ tool: name, arguments: args, id, headers });
        if (calls.length > 10_000) calls.splice(0, calls.length - 10_000);
        const err = toolErrors.get(name);
        if (err !== undefined) return { jsonrpc: '2.0', id, error: err };
        if (!tools.some((t) => t.name === name)) return rpcError(id, JSONRPC_INVALID_PARAMS, `unknown tool: ${name}`);
        return {
          jsonrpc: '2.0',
          id,
          result: { content: [{ type: 'text', text: `called ${name} with ${JSON.stringify(args)}` }], isError: false },
        };
      }
      default:
        return rpcError(id, JSONRPC_METHOD_NOT_FOUND, `Method not found: ${c.msg.method}`);
    }
  }

  function send(res: ServerResponse, status: number, payload: unknown): void {
    if (mode === 'sse' && status === 200) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end(`event: message\ndata: ${JSON.stringify(payload)}\n\n`);
      return;
    }
    const body = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/mcp' && path !== '/') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no route ${path ?? ''}` }));
      return;
    }
    if (req.method !== 'POST') {
      res
        .writeHead(405, { allow: 'POST', 'content-type': 'application/json' })
        .end(JSON.stringify({ error: 'MCP stub accepts POST only' }));
      return;
    }
    if (failure !== undefined) {
      res.writeHead(failure.status, { 'content-type': failure.contentType ?? 'application/json' }).end(failure.body ?? '');
      return;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(body);
    } catch {
      send(res, 400, rpcError(null, JSONRPC_PARSE_ERROR, 'Parse error'));
      return;
    }
    const setHeader = (k: string, v: string): void => {
      res.setHeader(k, v);
    };
    if (Array.isArray(msg)) {
      if (msg.length === 0) {
        send(res, 400, rpcError(null, JSONRPC_INVALID_REQUEST, 'Invalid Request: empty batch'));
        return;
      }
      const out = msg.map((m) => answer(m, req.headers, setHeader)).filter((r): r is JsonRpcResponse => r !== undefined);
      if (out.length === 0) res.writeHead(202).end();
      else send(res, 200, out);
      return;
    }
    const out = answer(msg, req.headers, setHeader);
    if (out === undefined) res.writeHead(202).end();
    else send(res, 'error' in out && out.error.code === JSONRPC_INVALID_REQUEST ? 400 : 200, out);
  }

  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    void readBody(req, MAX_BODY, req.headers['content-length']).then((r) => {
      if (r.ok) handle(req, res, r.body.toString('utf8'));
      else if (r.reason === 'too_large') res.writeHead(413, { connection: 'close' }).end();
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  const bound = await listenOn(server, opts.listen ?? '127.0.0.1:0', 'MCP stub listen address');

  return {
    url: new URL(`${bound.boundUrl}/mcp`),
    port: bound.port,
    calls,
    methods,
    get requests() {
      return requests;
    },
    setToolError(tool, error) {
      if (error === undefined) toolErrors.delete(tool);
      else toolErrors.set(tool, error);
    },
    setHttpFailure(f) {
      failure = f;
    },
    setResponseMode(m) {
      mode = m;
    },
    setTools(t) {
      tools = t.map((x) => ({ ...x }));
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
