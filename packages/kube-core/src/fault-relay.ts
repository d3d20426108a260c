import net from 'node:net';
import { listenOn } from './http.js';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  frozen: boolean;
}

/**
 * A TCP relay in front of a TLS listener: kars apiserver's, when fault injection is on, or a real
 * kube-apiserver's in the kube-envtest fault suite (bytes pass through untouched). It can make a connection silent in both directions without FIN or RST (what a load balancer
 * does to a dropped idle flow), or reset connections with RST. Connections are identified by the
 * local port of the relay's upstream socket, which is the remote port the server sees.
 */
export class FaultRelay {
  private readonly pairs = new Map<number, Pair>();
  private server: net.Server | undefined;

  constructor(
    private readonly upstreamPort: number,
    private readonly upstreamHost = '127.0.0.1',
  ) {}

  /** How many connections are relayed now. */
  get size(): number {
    return this.pairs.size;
  }

  /** Listen on `address` (`HOST:PORT`, kube-core's `listenOn`); resolves with the port actually bound. */
  async listen(address: string): Promise<number> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    return (await listenOn(server, address, '--listen')).port;
  }

  private accept(client: net.Socket): void {
    client.setNoDelay(true);
    const upstream = net.connect(this.upstreamPort, this.upstreamHost);
    upstream.setNoDelay(true);
    let pair: Pair | undefined;
    upstream.once('connect', () => {
      pair = { client, upstream, frozen: false };
      this.pairs.set(upstream.localPort ?? -1, pair);
    });
    const pipe = (from: net.Socket, to: net.Socket): void => {
      from.on('data', (chunk: Buffer) => {
        if (pair?.frozen) return;
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
      });
    };
    pipe(client, upstream);
    pipe(upstream, client);
    const done = (): void => {
      if (upstream.localPort !== undefined) this.pairs.delete(upstream.localPort);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', done);
    upstream.on('close', () => {
      if (!pair?.frozen) done();
    });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  }

  /** Silence the connections the server sees from these remote ports (all when undefined). */
  freeze(serverSidePorts?: Iterable<number>): number {
    const ports = serverSidePorts ? [...serverSidePorts] : [...this.pairs.keys()];
    let n = 0;
    for (const p of ports) {
      const pair = this.pairs.get(p);
      if (pair && !pair.frozen) {
        pair.frozen = true;
        n++;
      }
    }
    return n;
  }

  /** Reset every relayed connection with RST. */
  resetAll(): number {
    const n = this.pairs.size;
    for (const pair of [...this.pairs.values()]) {
      // resetAndDestroy() on a socket that is already ending leaves a handle libuv will not close
      // (the process then spins at exit); such a socket just gets destroy().
      if (pair.client.destroyed || pair.client.writableEnded || pair.client.readyState !== 'open') pair.client.destroy();
      else pair.client.resetAndDestroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
    return n;
  }

  async close(): Promise<void> {
    this.resetAll();
    const s = this.server;
    this.server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
