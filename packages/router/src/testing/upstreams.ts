/** Misbehaving upstreams for router tests. */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** An upstream whose connections each answer their first request and then drop the connection on the next. */
export interface StaleOnReuse {
  origin: string;
  /** Requests that reached the upstream. */
  received(): number;
  /** Connections the upstream accepted. */
  connections(): number;
  close(): void;
}

/**
 * Start an upstream on 127.0.0.1 that answers each connection's first request with `body` (JSON,
 * keep-alive) and drops the connection when the same connection brings a second one: the race
 * between an upstream's idle timeout and a client reusing a pooled connection.
 */
export async function startStaleOnReuse(body = '{"choices":[],"usage":{"total_tokens":1}}'): Promise<StaleOnReuse> {
  let received = 0;
  let connections = 0;
  const server = net.createServer((sock) => {
    connections++;
    let served = 0;
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      if (!d.toString().startsWith('POST ')) return;
      received++;
      if (served++ > 0) {
        sock.destroy();
        return;
      }
      sock.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: () => received,
    connections: () => connections,
    close: () => server.close(),
  };
}

/** What {@link startHeldUpstream} answers each chat request with, once released. */
export type HeldAnswer =
  /** A JSON completion with `usage.total_tokens = usage`. */
  | 'json'
  /** An SSE stream ending in a usage chunk (`usage`) and `[DONE]`. */
  | 'stream'
  /** An SSE stream without a usage chunk. */
  | 'stream-no-usage'
  /** Destroy the connection (TCP reset). */
  | 'reset'
  /** Never answer (the connection stays open until the upstream closes). */
  | 'never';

/** Settings of {@link startHeldUpstream}. */
export interface HeldUpstreamOptions {
  answer: HeldAnswer;
  /** `usage.total_tokens` of an answer that reports it (default 30). */
  usage?: number;
  /** Streams: send the headers and a first event at once, hold only the rest (default false: hold everything). */
  headFirst?: boolean;
  /** Content events of a stream after the release (default 3), each carrying `filler` bytes of text. */
  events?: number;
  /** Text bytes per content event (default 8). */
  filler?: number;
}

/** A chat upstream that holds every request until the test releases it. */
export interface HeldUpstream {
  url: URL;
  /** Requests whose whole body has arrived. */
  received(): number;
  /** Resolves once `n` requests have arrived in full. */
  arrived(n: number): Promise<void>;
  /** Answer every request held now and, from now on, every later one at once. */
  release(): void;
  /** Resolves once `n` answers have been finished, or their connections closed. */
  finished(n: number): Promise<void>;
  /** Bytes of the answer bodies written so far (all requests). */
  bodyBytes(): number;
  close(): Promise<void>;
}

/**
 * Start an http upstream on 127.0.0.1 that records each chat request once its body has arrived,
 * holds it (nothing sent, or with `headFirst` only the stream's head and first event) until
 * `release()`, then answers as `opts.answer` says. Tests wait on `arrived` and `finished`, never on
 * a timer.
 */
export async function startHeldUpstream(opts: HeldUpstreamOptions): Promise<HeldUpstream> {
  const usage = opts.usage ?? 30;
  let received = 0;
  let finished = 0;
  let bytes = 0;
  let released = false;
  const held: Array<() => void> = [];
  const waiters: Array<{ n: number; kind: 'arrived' | 'finished'; resolve: () => void }> = [];
  const wake = (): void => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]!;
      if ((w.kind === 'arrived' ? received : finished) >= w.n) {
        waiters.splice(i, 1);
        w.resolve();
      }
    }
  };
  const wait = (kind: 'arrived' | 'finished', n: number): Promise<void> =>
    new Promise((resolve) => {
      waiters.push({ n, kind, resolve });
      wake();
    });
  const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
  const delta = (content: string): string => frame({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received++;
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        finished++;
        wake();
      };
      res.on('close', finish);
      const write = (s: string): void => {
        bytes += Buffer.byteLength(s);
        res.write(s);
      };
      const stream = opts.answer === 'stream' || opts.answer === 'stream-no-usage';
      if (stream && opts.headFirst === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        write(delta(''));
      }
      const answer = (): void => {
        if (res.destroyed) return;
        switch (opts.answer) {
          case 'never':
            return;
          case 'reset':
            req.socket.destroy();
            return;
          case 'json': {
            const body = JSON.stringify({
              object: 'chat.completion',
              choices: [{ index: 0, message: { role: 'assistant', content: 'ok' } }],
              usage: { total_tokens: usage },
            });
            bytes += Buffer.byteLength(body);
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
            res.end(body);
            return;
          }
          default: {
            if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream' });
            for (let i = 0; i < (opts.events ?? 3); i++) write(delta('x'.repeat(opts.filler ?? 8)));
            if (opts.answer === 'stream') write(frame({ object: 'chat.completion.chunk', choices: [], usage: { total_tokens: usage } }));
            write('data: [DONE]\n\n');
            res.end();
          }
        }
      };
      if (released) answer();
      else held.push(answer);
      wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    received: () => received,
    arrived: (n) => wait('arrived', n),
    release: () => {
      released = true;
      for (const a of held.splice(0)) a();
    },
    finished: (n) => wait('finished', n),
    bodyBytes: () => bytes,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** An upstream whose keep-alive connections answer their first request and read the second in full, then drop. */
export interface DropsReused {
  origin: string;
  /** Complete requests that reached the upstream, by connection order. */
  received(): number;
  connections(): number;
  close(): void;
}

/**
 * Start a raw TCP upstream on 127.0.0.1: each connection answers its first complete POST (JSON,
 * keep-alive, `usage.total_tokens = usage`), and on the same connection reads the next POST to
 * the last byte of its body, then destroys the socket without a word: the upstream has the
 * request (it may be running it) and the router cannot know.
 */
export async function startDropsReused(usage = 7): Promise<DropsReused> {
  let received = 0;
  let connections = 0;
  const server = net.createServer((sock) => {
    connections++;
    let served = 0;
    let buf = Buffer.alloc(0);
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? '0');
        if (buf.length < end + 4 + len) return;
        buf = buf.subarray(end + 4 + len);
        received++;
        if (served++ > 0) {
          sock.destroy();
          return;
        }
        const body = JSON.stringify({ choices: [], usage: { total_tokens: usage } });
        sock.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`,
        );
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: () => received,
    connections: () => connections,
    close: () => server.close(),
  };
}
