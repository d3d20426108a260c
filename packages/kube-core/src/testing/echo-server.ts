import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A running {@link startTcpEchoServer}. */
export interface TcpEchoServer {
  port: number;
  /** How many connections it has accepted. */
  connections(): number;
  /** Destroy every open connection and stop listening. */
  close(): Promise<void>;
}

/**
 * A TCP server on `host` (default 127.0.0.1; `::1` for IPv6) that sends back what it gets: the
 * "external host" a test reaches through a proxy.
 */
export async function startTcpEchoServer(host = '127.0.0.1'): Promise<TcpEchoServer> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const srv = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => s.destroy());
    s.on('close', () => sockets.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => srv.listen(0, host, r));
  return {
    port: (srv.address() as AddressInfo).port,
    connections: () => accepted,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        srv.close(() => r());
      }),
  };
}
