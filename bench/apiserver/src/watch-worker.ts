/**
 * Watch worker (runs in a worker thread so parsing 500k events does not stall the update sender):
 * opens the watches of phase 3, records each event's delivery latency, and reports to the main
 * thread. Its protocol: `canary` once every watch has seen the canary update; after `expect`,
 * `done` once every watch has `n` events (or nothing arrived for `stallMs`, or on `abort`).
 */
import https from 'node:https';
import type { ClientRequest } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import { nowUs } from '../../lib/dist/index.js';

/** What the main thread passes as `workerData`. */
export interface WatchWorkerData {
  url: string;
  ca: string;
  token: string;
  /** The watch request's path and query. */
  path: string;
  watchers: number;
  /** Latencies kept per watcher (the expected number of events). */
  capacity: number;
  canaryName: string;
}

/** What one watch saw. */
export interface WatcherSummary {
  status: number;
  count: number;
  outOfOrder: number;
  bookmarks: number;
  other: number;
  ended: boolean;
  errors: string[];
  firstRecvUs: number;
  lastRecvUs: number;
}

/** A message from the worker. */
export type WorkerEvent =
  { ev: 'canary' } | { ev: 'done'; why: string; summary: WatcherSummary[]; /** µs, every watcher's in turn. */ lat: Float64Array };

/** A message to the worker. */
export type WorkerCommand = { cmd: 'expect'; n: number; stallMs: number } | { cmd: 'abort' };

/** One watch's running state. */
interface WatchState extends WatcherSummary {
  k: number;
  lastRv: number;
  canary: boolean;
  lat: Float64Array;
  req: ClientRequest | undefined;
}

/** The part of a watch event the worker reads. */
interface WatchEvent {
  type?: string;
  object?: { metadata?: { name?: string; resourceVersion?: string }; data?: { sentUs?: string } };
}

/** The body of the worker thread: open the watches and answer the main thread's commands. */
export function watchWorker(): void {
  const port = parentPort;
  if (!port) throw new Error('watchWorker runs in a worker thread only');
  const { url, ca, token, path, watchers, capacity, canaryName } = workerData as WatchWorkerData;
  const post = (m: WorkerEvent, transfer?: ArrayBuffer[]): void => port.postMessage(m, transfer);
  const u = new URL(url);
  const agent = new https.Agent({ ca, keepAlive: false, maxSockets: Infinity });
  const states: WatchState[] = [];
  let expected = Infinity;
  let canaryReported = false;
  let doneReported = false;
  let lastEventUs = nowUs();
  let stallTimer: NodeJS.Timeout | undefined;

  const checkProgress = (): void => {
    if (!canaryReported && states.every((s) => s.canary)) {
      canaryReported = true;
      post({ ev: 'canary' });
    }
    if (!doneReported && expected !== Infinity && states.every((s) => s.count >= expected)) finish('complete');
  };

  const finish = (why: string): void => {
    if (doneReported) return;
    doneReported = true;
    clearInterval(stallTimer);
    let total = 0;
    for (const s of states) total += Math.min(s.count, capacity);
    const lat = new Float64Array(total);
    let off = 0;
    for (const s of states) {
      const n = Math.min(s.count, capacity);
      lat.set(s.lat.subarray(0, n), off);
      off += n;
    }
    const summary = states.map((s) => ({
      status: s.status,
      count: s.count,
      outOfOrder: s.outOfOrder,
      bookmarks: s.bookmarks,
      other: s.other,
      ended: s.ended,
      errors: s.errors.slice(0, 3),
      firstRecvUs: s.firstRecvUs,
      lastRecvUs: s.lastRecvUs,
    }));
    for (const s of states) s.req?.destroy();
    agent.destroy();
    post({ ev: 'done', why, summary, lat }, [lat.buffer]);
  };

  const onLine = (s: WatchState, line: string, recvUs: number): void => {
    let e: WatchEvent;
    try {
      e = JSON.parse(line) as WatchEvent;
    } catch (err) {
      s.errors.push(`bad JSON line: ${String(err)}: ${line.slice(0, 200)}`);
      return;
    }
    if (e.type === 'BOOKMARK') {
      s.bookmarks++;
      return;
    }
    if (e.type === 'ERROR') {
      s.errors.push(`ERROR event: ${JSON.stringify(e.object).slice(0, 300)}`);
      return;
    }
    const md = e.object?.metadata ?? {};
    const rv = Number(md.resourceVersion);
    if (!(rv > s.lastRv)) s.outOfOrder++;
    s.lastRv = rv;
    if (md.name === canaryName) {
      s.canary = true;
      return;
    }
    const sent = e.object?.data?.sentUs;
    if (sent === undefined) {
      s.other++;
      return;
    }
    if (s.count < capacity) s.lat[s.count] = recvUs - Number(sent);
    s.count++;
    if (s.firstRecvUs === 0) s.firstRecvUs = recvUs;
    s.lastRecvUs = recvUs;
  };

  for (let k = 0; k < watchers; k++) {
    const s: WatchState = {
      k,
      status: 0,
      count: 0,
      lastRv: 0,
      outOfOrder: 0,
      bookmarks: 0,
      other: 0,
      canary: false,
      ended: false,
      errors: [],
      lat: new Float64Array(capacity),
      firstRecvUs: 0,
      lastRecvUs: 0,
      req: undefined,
    };
    states.push(s);
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: 'GET',
        agent,
        headers: { accept: 'application/json', authorization: `Bearer ${token}` },
      },
      (res) => {
        s.status = res.statusCode ?? 0;
        if (s.status !== 200) s.errors.push(`watch HTTP ${s.status}`);
        res.setEncoding('utf8');
        let buf = '';
        res.on('data', (chunk: string) => {
          const recvUs = nowUs();
          lastEventUs = recvUs;
          buf += chunk;
          let i;
          let start = 0;
          while ((i = buf.indexOf('\n', start)) >= 0) {
            if (i > start) onLine(s, buf.slice(start, i), recvUs);
            start = i + 1;
          }
          buf = buf.slice(start);
          checkProgress();
        });
        res.on('end', () => {
          s.ended = true;
          checkProgress();
        });
        res.on('error', (err) => s.errors.push(`response error: ${err.message}`));
      },
    );
    req.on('error', (err) => {
      if (!doneReported) s.errors.push(`request error: ${err.message}`);
    });
    req.end();
    s.req = req;
  }

  port.on('message', (m: WorkerCommand) => {
    if (m.cmd === 'expect') {
      expected = m.n;
      lastEventUs = nowUs();
      // Give up when nothing has arrived for stallMs after the last update was acknowledged.
      stallTimer = setInterval(() => {
        if (nowUs() - lastEventUs > m.stallMs * 1000) finish('stalled');
      }, 250);
      checkProgress();
    } else if (m.cmd === 'abort') {
      finish('aborted');
    }
  });
}
