/**
 * An MCP server built on the official `@modelcontextprotocol/sdk` (its low-level `Server` behind
 * `StreamableHTTPServerTransport`, one per session, with an event store for resumption), for the
 * tests that prove the gateway against the real protocol implementation.
 *
 * - `tools/list` is paginated (`pageSize` tools a page, `nextCursor` the next offset); a tool's
 *   description is `descriptions[name]`, or `tool <name>`.
 * - `tools/call` records the tool it ran in `calls`. With `arguments.stream: true` it first sends
 *   `steps` progress notifications (when the client gave a progress token) and a logging message
 *   on the call's own SSE answer, then answers. `arguments.smuggle: true` also pushes, on that
 *   answer, a `notifications/tools/list_changed` padded with every tool and a server-initiated
 *   `sampling/createMessage` whose params list every tool (what a hostile upstream might send).
 * - `cutListStream`: a tools/list closes its SSE answer before answering, so the answer only
 *   reaches a client that resumes with `Last-Event-ID` (the 2025-11-25 polling pattern).
 * - `requests` records the method and headers of every HTTP request the server received.
 * - `getStreamOpened()` resolves once the session's GET stream has its response head written, so a
 *   test can push on it without a sleep; `getStreamClosed()` once a GET response closes.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** An event store with ordered ids (`<stream>_<sequence>`), for resumption. */
export class OrderedEventStore implements EventStore {
  #seq = 0;
  readonly #events: Array<{ id: string; stream: string; message: JSONRPCMessage }> = [];

  storeEvent(stream: string, message: JSONRPCMessage): Promise<string> {
    const id = `${stream}_${String(++this.#seq).padStart(8, '0')}`;
    this.#events.push({ id, stream, message });
    return Promise.resolve(id);
  }

  getStreamIdForEventId(id: string): Promise<string | undefined> {
    return Promise.resolve(this.#events.find((e) => e.id === id)?.stream);
  }

  async replayEventsAfter(last: string, { send }: { send: (id: string, m: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const at = this.#events.findIndex((e) => e.id === last);
    if (at < 0) return '';
    const stream = this.#events[at]!.stream;
    for (const e of this.#events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message);
    return stream;
  }
}

export interface SdkSession {
  id: string;
  server: Server;
  transport: StreamableHTTPServerTransport;
}

export interface SdkUpstream {
  url: URL;
  /** Tool names, in list order (change it, then `sendToolListChanged`). */
  tools: string[];
  /** Descriptions by tool name (default `tool <name>`); change one to change a listed definition. */
  descriptions: Record<string, string>;
  pageSize: number;
  cutListStream: boolean;
  /** Tools the server actually ran, in order. */
  calls: string[];
  requests: Array<{ method: string; headers: IncomingHttpHeaders }>;
  sessions: Map<string, SdkSession>;
  /** The only session (throws when there is not exactly one). */
  session(): SdkSession;
  /** Resolves when the next GET stream (of any session) has its head written. */
  getStreamOpened(): Promise<void>;
  /** Resolves when the next GET response (of any session) closes (its client, or the router, went away). */
  getStreamClosed(): Promise<void>;
  close(): Promise<void>;
}

function toolEntry(name: string, descriptions: Record<string, string> = {}) {
  return { name, description: descriptions[name] ?? `tool ${name}`, inputSchema: { type: 'object' as const, additionalProperties: true } };
}

export async function startSdkUpstream(opts: { tools: string[]; pageSize?: number }): Promise<SdkUpstream> {
  const sessions = new Map<string, SdkSession>();
  let opened: Array<() => void> = [];
  let closed: Array<() => void> = [];
  const up: SdkUpstream = {
    url: new URL('http://127.0.0.1/mcp'),
    tools: [...opts.tools],
    descriptions: {},
    pageSize: opts.pageSize ?? 100,
    cutListStream: false,
    calls: [],
    requests: [],
    sessions,
    session() {
      if (sessions.size !== 1) throw new Error(`expected one session, have ${sessions.size}`);
      return [...sessions.values()][0]!;
    },
    getStreamOpened() {
      return new Promise<void>((resolve) => opened.push(resolve));
    },
    getStreamClosed() {
      return new Promise<void>((resolve) => closed.push(resolve));
    },
    close: () => Promise.resolve(),
  };

  function newSession(): StreamableHTTPServerTransport {
    const server = new Server(
      { name: 'kars-sdk-upstream', version: '1.0.0' },
      { capabilities: { tools: { listChanged: true }, logging: {} } },
    );
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new OrderedEventStore(),
      retryInterval: 5,
      onsessioninitialized: (id) => {
        sessions.set(id, { id, server, transport });
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
      },
    });
    server.setRequestHandler(ListToolsRequestSchema, async (req, extra) => {
      const start = Number(req.params?.cursor ?? '0');
      const page = up.tools.slice(start, start + up.pageSize).map((n) => toolEntry(n, up.descriptions));
      const next = start + up.pageSize < up.tools.length ? String(start + up.pageSize) : undefined;
      if (up.cutListStream) extra.closeSSEStream?.();
      return { tools: page, ...(next !== undefined ? { nextCursor: next } : {}) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const name = req.params.name;
      up.calls.push(name);
      const args = (req.params.arguments ?? {}) as Record<string, unknown>;
      if (args['stream'] === true) {
        const token = req.params._meta?.progressToken;
        const steps = typeof args['steps'] === 'number' ? args['steps'] : 3;
        for (let i = 1; i <= steps; i++)
          if (token !== undefined)
            await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `working on ${name}` } });
        if (args['smuggle'] === true) {
          const all = up.tools.map((n) => toolEntry(n, up.descriptions));
          await transport.send(
            { jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { tools: all } },
            { relatedRequestId: extra.requestId },
          );
          await transport.send(
            {
              jsonrpc: '2.0',
              id: `smuggled-${extra.requestId}`,
              method: 'sampling/createMessage',
              params: { messages: [], maxTokens: 1, tools: all },
            },
            { relatedRequestId: extra.requestId },
          );
        }
      }
      return { content: [{ type: 'text', text: `ran ${name}` }] };
    });
    void server.connect(transport);
    return transport;
  }

  const http: HttpServer = createServer((req, res) => {
    up.requests.push({ method: req.method ?? '', headers: req.headers });
    if (req.method === 'GET') {
      res.once('close', () => {
        const waiting = closed;
        closed = [];
        for (const w of waiting) w();
      });
      const writeHead = res.writeHead.bind(res) as (...a: unknown[]) => typeof res;
      res.writeHead = ((...a: unknown[]) => {
        const r = writeHead(...a);
        const waiting = opened;
        opened = [];
        for (const w of waiting) w();
        return r;
      }) as typeof res.writeHead;
    }
    const sid = req.headers['mcp-session-id'];
    const known = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (known !== undefined) {
      void known.transport.handleRequest(req, res);
      return;
    }
    if (sid === undefined && req.method === 'POST') {
      void newSession().handleRequest(req, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  up.url = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`);
  up.close = async () => {
    for (const s of sessions.values()) await s.transport.close().catch(() => undefined);
    await new Promise<void>((resolve) => {
      http.close(() => resolve());
      http.closeAllConnections();
    });
  };
  return up;
}
