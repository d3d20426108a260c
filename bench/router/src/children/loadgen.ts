/**
 * Child: the Node load generator (`main.js --loadgen`). It takes jobs over IPC, runs them on raw
 * HTTP/1.1 connections ({@link HttpConn}) and sends back marks (`start`, `end` of the measured
 * window) and the result.
 */
import { HttpConn } from '../http.js';
import type { ClosedJob, ClosedResult, ErrorTally, Job, LoadgenMessage, Mark, OpenJob, OpenResult } from '../jobs.js';
import { summarize } from '../stats.js';

/** A stall episode being merged: requests slower than 10 ms, due within 50 ms of each other. */
interface Episode {
  startMs: number;
  endMs: number;
  requests: number;
  maxMs: number;
}

/**
 * Open loop: request k is due at t0 + k/rate whatever happened before (no coordinated omission).
 * A free keep-alive connection is taken (LIFO) or opened, up to maxConns; past that the request
 * waits in a FIFO and its latency still counts from its dispatch. Latency = response − dispatch;
 * `fromIntended` also counts the generator's own scheduling lag.
 */
export function openLoop(job: OpenJob, mark: (m: Mark) => void): Promise<OpenResult> {
  const { host, port, rate, warmupMs, durationMs, maxConns, expectStatus } = job;
  const req = Buffer.from(job.req, 'base64');
  const interval = 1000 / rate;
  const nWarm = Math.round((warmupMs * rate) / 1000);
  const total = nWarm + Math.round((durationMs * rate) / 1000);
  const nMeas = total - nWarm;
  const lat = new Float64Array(nMeas).fill(NaN);
  const latIntended = new Float64Array(nMeas).fill(NaN);
  const lag = new Float64Array(nMeas).fill(NaN);
  const free: HttpConn[] = [];
  const waiting: Array<[k: number, intended: number, disp: number]> = [];
  let open = 0;
  let maxOpen = 0;
  let done = 0;
  let dispatched = 0;
  const err: ErrorTally = { transport: 0, status: {}, first: [] };
  const note = (m: string): void => {
    if (err.first.length < 5) err.first.push(m);
  };
  let cpu0: NodeJS.CpuUsage | undefined;
  let tFirst = NaN;
  let tLast = NaN;

  return new Promise((resolveJob) => {
    const t0 = performance.now() + 20;
    let finished = false;
    const finish = (why: string): void => {
      if (finished) return;
      finished = true;
      clearTimeout(watchdog);
      const cpu = process.cpuUsage(cpu0);
      for (const c of free) c.close();
      mark('end');
      const measured = Array.from(lat).filter(Number.isFinite);
      // Stall episodes: requests slower than 10 ms, merged when due within 50 ms of each other.
      const episodes: Episode[] = [];
      for (let m = 0; m < nMeas; m++) {
        const li = latIntended[m] ?? NaN;
        if (!(li > 10)) continue;
        const at = m * interval;
        const last = episodes[episodes.length - 1];
        if (last && at - last.endMs <= 50) {
          last.endMs = at;
          last.requests++;
          last.maxMs = Math.max(last.maxMs, li);
        } else episodes.push({ startMs: at, endMs: at, requests: 1, maxMs: li });
      }
      resolveJob({
        why,
        requests: nMeas,
        completed: measured.length,
        durationMs: tLast - tFirst,
        achievedRate: (measured.length / (tLast - tFirst)) * 1000,
        latency: summarize(measured),
        latencyFromIntended: summarize(Array.from(latIntended).filter(Number.isFinite)),
        scheduleLag: summarize(Array.from(lag).filter(Number.isFinite)),
        maxConnections: maxOpen,
        stalls: {
          episodes: episodes.length,
          worst: [...episodes]
            .sort((x, y) => y.maxMs - x.maxMs)
            .slice(0, 5)
            .map((e) => ({
              atS: Math.round(e.startMs) / 1000,
              spanMs: Math.round(e.endMs - e.startMs),
              requests: e.requests,
              maxMs: Math.round(e.maxMs * 10) / 10,
            })),
        },
        errors: err,
        loadgenCpuSec: (cpu.user + cpu.system) / 1e6,
      });
    };
    const watchdog = setTimeout(
      () => finish('timeout: responses still missing 30 s after the last send'),
      warmupMs + durationMs + 30_000 + 20,
    );

    const complete = (): void => {
      done++;
      if (done === total) finish('complete');
    };
    const fire = (conn: HttpConn, k: number, intended: number, disp: number): void => {
      conn.request(req, (e, status) => {
        const t = performance.now();
        const m = k - nWarm;
        if (e) {
          open--;
          if (m >= 0) {
            err.transport++;
            note(`transport: ${e.message}`);
          }
        } else {
          if (status !== expectStatus && m >= 0) {
            err.status[status] = (err.status[status] ?? 0) + 1;
            note(`HTTP ${status}`);
          }
          if (m >= 0) {
            lat[m] = t - disp;
            latIntended[m] = t - intended;
            tLast = t;
          }
        }
        let live: HttpConn | undefined;
        if (e) live = undefined;
        else if (conn.dead) {
          open--;
          live = undefined;
        } else live = conn;
        const nextWaiting = waiting.shift();
        if (nextWaiting) {
          const c = live ?? newConn();
          if (c) fire(c, ...nextWaiting);
          else waiting.unshift(nextWaiting);
        } else if (live) free.push(live);
        complete();
      });
    };
    const newConn = (): HttpConn | undefined => {
      if (open >= maxConns) return undefined;
      open++;
      if (open > maxOpen) maxOpen = open;
      return new HttpConn(host, port);
    };
    const dispatch = (k: number, intended: number): void => {
      const disp = performance.now();
      if (k === nWarm) {
        cpu0 = process.cpuUsage();
        tFirst = disp;
        mark('start');
      }
      if (k >= nWarm) lag[k - nWarm] = disp - intended;
      const conn = free.pop() ?? newConn();
      if (conn) fire(conn, k, intended, disp);
      else waiting.push([k, intended, disp]);
    };
    const tick = (): void => {
      const now = performance.now();
      while (dispatched < total) {
        const intended = t0 + dispatched * interval;
        if (intended > now) break;
        dispatch(dispatched, intended);
        dispatched++;
      }
      if (dispatched < total) setTimeout(tick, Math.max(0, t0 + dispatched * interval - performance.now()));
    };
    setTimeout(tick, 20);
  });
}

/** Closed loop: `concurrency` connections, each sends its next request when the last one answered. */
export function closedLoop(job: ClosedJob, mark: (m: Mark) => void): Promise<ClosedResult> {
  const { host, port, concurrency, warmupMs, durationMs, expectStatus } = job;
  const req = Buffer.from(job.req, 'base64');
  const lat: number[] = [];
  const err: ErrorTally = { transport: 0, status: {}, first: [] };
  let cpu0: NodeJS.CpuUsage | undefined;
  return new Promise((resolveJob) => {
    const tStart = performance.now();
    const tw0 = tStart + warmupMs;
    const tw1 = tw0 + durationMs;
    let live = concurrency;
    let started = false;
    const conns: HttpConn[] = [];
    const startMark = setTimeout(() => {
      started = true;
      cpu0 = process.cpuUsage();
      mark('start');
    }, warmupMs);
    const loop = (conn: HttpConn): void => {
      const s = performance.now();
      conn.request(req, (e, status) => {
        const t = performance.now();
        const inWindow = s >= tw0 && t <= tw1;
        if (e) {
          if (inWindow || (t >= tw0 && t <= tw1)) {
            err.transport++;
            if (err.first.length < 5) err.first.push(`transport: ${e.message}`);
          }
          const c = t < tw1 ? new HttpConn(host, port) : undefined;
          if (c) {
            conns.push(c);
            loop(c);
          } else if (--live === 0) end();
          return;
        }
        if (inWindow) {
          lat.push(t - s);
          if (status !== expectStatus) {
            err.status[status] = (err.status[status] ?? 0) + 1;
            if (err.first.length < 5) err.first.push(`HTTP ${status}`);
          }
        }
        if (t < tw1) loop(conn);
        else if (--live === 0) end();
      });
    };
    const end = (): void => {
      clearTimeout(startMark);
      const cpu = process.cpuUsage(cpu0);
      mark('end');
      for (const c of conns) c.close();
      resolveJob({
        requests: lat.length,
        durationMs,
        throughput: (lat.length / durationMs) * 1000,
        latency: summarize(lat),
        errors: err,
        loadgenCpuSec: started ? (cpu.user + cpu.system) / 1e6 : NaN,
      });
    };
    for (let i = 0; i < concurrency; i++) {
      const c = new HttpConn(host, port);
      conns.push(c);
      loop(c);
    }
  });
}

/** The child's main: run each job received over IPC; exit when the parent disconnects. */
export function loadgenMain(): void {
  const send = (m: LoadgenMessage): void => {
    process.send?.(m);
  };
  process.on('message', (msg) => {
    const job = msg as Job;
    const mark = (name: Mark): void => send({ type: 'mark', name });
    const run: Promise<OpenResult | ClosedResult> = job.kind === 'open' ? openLoop(job, mark) : closedLoop(job, mark);
    void run.then(
      (result) => send({ type: 'result', ok: true, result }),
      (e: unknown) => send({ type: 'result', ok: false, error: e instanceof Error ? e.stack : String(e) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
