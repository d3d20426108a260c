/** Misbehaving upstreams for router tests. */
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
