/** Sequential probe requests to the router, for the reload phases. */
import { HttpConn, chatRequest } from './http.js';

/** One answered probe: when it was sent and answered (performance.now()) and its status. */
export interface Probe {
  sendT: number;
  recvT: number;
  status: number;
}

/**
 * Sequential probes to the router, one every `intervalMs` (or as soon as the last one answered).
 * Each result is `{ sendT, recvT, status }`; `waitFor` resolves with the first result matching a
 * predicate, or undefined after a timeout.
 */
export class Prober {
  readonly results: Probe[] = [];
  readonly errors: string[] = [];
  private readonly host: string;
  private readonly port: number;
  private readonly req: Buffer;
  private readonly waiters = new Set<(r: Probe) => void>();
  private running = false;
  private conn: HttpConn | undefined = undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    url: string,
    body: string,
    private readonly intervalMs: number,
  ) {
    const u = new URL(url);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.req = chatRequest(url, body);
  }

  /** Start probing. */
  start(): void {
    this.running = true;
    this.next();
  }

  private next(): void {
    if (!this.running) return;
    if (!this.conn || this.conn.dead) this.conn = new HttpConn(this.host, this.port);
    const sendT = performance.now();
    this.conn.request(this.req, (e, status) => {
      const recvT = performance.now();
      if (e) {
        if (this.running) this.errors.push(`probe: ${e.message}`);
      } else {
        const r = { sendT, recvT, status };
        this.results.push(r);
        for (const w of this.waiters) w(r);
      }
      if (!this.running) return;
      this.timer = setTimeout(() => this.next(), Math.max(0, sendT + this.intervalMs - performance.now()));
    });
  }

  /** The first probe answered from now on that matches `pred`, or undefined after `timeoutMs`. */
  waitFor(pred: (r: Probe) => boolean, timeoutMs: number): Promise<Probe | undefined> {
    return new Promise((res) => {
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        res(undefined);
      }, timeoutMs);
      const w = (r: Probe): void => {
        if (!pred(r)) return;
        clearTimeout(timer);
        this.waiters.delete(w);
        res(r);
      };
      this.waiters.add(w);
    });
  }

  /** Stop probing and close the connection. */
  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.conn?.close();
  }
}
