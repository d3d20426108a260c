#!/usr/bin/env node
// Benchmark for the kars router (`kars router`): added latency at a fixed rate, throughput ratio,
// the cost of the policy decision per request, and how fast a policy change is enforced (from a
// mounted ConfigMap directory and from the API).
//
// Every peer is its own process, so the 2 cores are shared the same way in every comparison:
//   - the OpenAI stub (`startOpenAIStub` from packages/router/dist, in a tiny child: this file with
//     `--stub`), one instance for the whole run; "direct" and "through the router" hit the same one;
//     for the Anthropic Messages rows, the Anthropic stub likewise (`--stub anthropic`);
//   - the router (`node apps/cli/bin/kars.js router --policy-dir … | --kubeconfig …`);
//   - a plain node:http pass-through proxy (this file with `--proxy`), the baseline for what one
//     Node HTTP hop costs before any kars code runs;
//   - the load generator: a Node child (this file with `--loadgen`, raw HTTP/1.1 over net.Socket)
//     for open-loop constant-rate load, and `wrk` for closed-loop load when it is on PATH
//     (`apt-get install -y wrk`), else the same Node child;
//   - for the API phase, `kars apiserver`.
//
//   npm run bench:router                    # build, then defaults (~3–3.5 min on the 2-core dev VM)
//   BENCH_QUICK=1 node bench/router.mjs     # smoke test, ~1 min (needs a prior `npx tsc -b`)
//
// Env: see bench/README.md ("Router"); BENCH_APIS picks the APIs of the latency and ttfb phases
// (chat, Responses, Anthropic Messages). Goals are reported (met / missed), never asserted: the exit
// code is 1 only on real errors (a child fails or dies, a request fails, a change is not enforced).

import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  KARS_BIN,
  ROOT,
  cpuLine,
  dist,
  envInt,
  errMsg,
  expectStatus,
  finishRun,
  fmt1,
  fmt2,
  fmtInt,
  freePort,
  httpsJsonClient,
  log,
  mdRow,
  percentile,
  pinoStderr,
  procCpu as procCpuBase,
  procStatus,
  removeTempDir,
  runMain,
  selfCpuSec,
  sleep,
  spawnListening,
  splitArgs,
  stopChild,
} from './lib.mjs';

const SELF = fileURLToPath(import.meta.url);
const KARS = KARS_BIN;

const fmt3 = (n) => (Number.isFinite(n) ? n.toFixed(3) : String(n));
const signed3 = (n) => (Number.isFinite(n) ? `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(3)}` : String(n));

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

function stats(values) {
  const s = Float64Array.from(values)
    .filter((v) => Number.isFinite(v))
    .sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p90: percentile(s, 0.9),
    p99: percentile(s, 0.99),
    p999: percentile(s, 0.999),
    max: s.length ? s[s.length - 1] : NaN,
    min: s.length ? s[0] : NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}

const median = (a) => stats(a).p50;

/**
 * A minimal HTTP/1.1 keep-alive client connection: one request in flight, the request bytes
 * prebuilt, the response parsed only as far as status and length. It costs the load generator a
 * fraction of what node:http does, which matters when 3 processes share 2 cores.
 */
class HttpConn {
  constructor(host, port) {
    this.dead = false;
    this.cb = undefined;
    this.buf = undefined;
    this.hdrLen = -1;
    this.bodyLen = -1;
    this.chunked = false;
    this.closeAfter = false;
    this.status = 0;
    this.sock = net.connect({ host, port });
    this.sock.setNoDelay(true);
    this.sock.on('data', (c) => this.onData(c));
    this.sock.on('error', (e) => this.fail(e));
    this.sock.on('close', () => this.fail(new Error('connection closed by peer')));
  }

  /** Send `reqBuf`; `cb(err, status, body)` once the whole response has arrived. */
  request(reqBuf, cb) {
    if (this.dead) {
      cb(new Error('connection is dead'));
      return;
    }
    this.cb = cb;
    this.buf = undefined;
    this.hdrLen = -1;
    this.sock.write(reqBuf);
  }

  onData(c) {
    this.buf = this.buf === undefined ? c : Buffer.concat([this.buf, c]);
    const b = this.buf;
    if (this.hdrLen < 0) {
      const he = b.indexOf('\r\n\r\n');
      if (he < 0) return;
      this.hdrLen = he + 4;
      const head = b.toString('latin1', 0, he);
      this.status = Number(head.slice(9, 12));
      const cl = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
      this.chunked = /\r\ntransfer-encoding:[ \t]*chunked/i.test(head);
      this.bodyLen = cl ? Number(cl[1]) : this.chunked || this.status === 204 || this.status === 304 ? (this.chunked ? -1 : 0) : -2;
      this.closeAfter = /\r\nconnection:[ \t]*close/i.test(head);
      if (this.bodyLen === -2) {
        this.fail(new Error(`response without content-length or chunked encoding (status ${this.status})`));
        return;
      }
    }
    let end;
    if (this.chunked) {
      // Good enough for these servers: the body ends with the zero-length chunk and no trailers.
      if (b.length < this.hdrLen + 5 || b.toString('latin1', b.length - 5) !== '0\r\n\r\n') return;
      end = b.length;
    } else {
      end = this.hdrLen + this.bodyLen;
      if (b.length < end) return;
    }
    const cb = this.cb;
    const body = b.subarray(this.hdrLen, end);
    const status = this.status;
    this.cb = undefined;
    this.buf = undefined;
    this.hdrLen = -1;
    if (this.closeAfter) {
      this.dead = true;
      this.sock.destroy();
    }
    cb?.(null, status, body);
  }

  fail(e) {
    const wasDead = this.dead;
    this.dead = true;
    const cb = this.cb;
    this.cb = undefined;
    if (!wasDead) this.sock.destroy();
    cb?.(e);
  }

  close() {
    this.dead = true;
    this.cb = undefined;
    this.sock.destroy();
  }
}

/** The request bytes for one request of `api` (default chat completions; see {@link APIS}). */
function chatRequest(url, body, extraHeaders = {}, api = APIS.chat) {
  const u = new URL(url);
  const payload = Buffer.from(body);
  const extra = Object.entries({ ...api.auth, ...extraHeaders })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const head = `POST ${api.path} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n${extra}Content-Length: ${payload.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), payload]);
}

const SYSTEM_PROMPT = 'You are a concise assistant working inside a kars sandbox.';
const USER_PROMPT = 'Summarise the last build log in one sentence.';

const chatBody = (maxTokens) =>
  JSON.stringify({
    model: 'gpt-4o',
    max_tokens: maxTokens,
    temperature: 0.2,
    messages: [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: USER_PROMPT },
    ],
  });

/**
 * The inference APIs the latency and time-to-first-byte phases measure (`BENCH_APIS`), each with
 * the same prompt: its path, the body for a token limit, the auth headers a client sends, which
 * stub serves it, and how to tell an error frame in its stream (Responses objects carry
 * `"error":null`, so the chat test of `"error"` would misfire there).
 */
const APIS = {
  chat: {
    name: 'chat',
    label: 'chat completions',
    path: '/v1/chat/completions',
    upstream: 'openai',
    auth: { Authorization: 'Bearer sk-kars-bench' },
    body: chatBody,
    streamError: (text) => text.includes('"error"'),
  },
  responses: {
    name: 'responses',
    label: 'Responses',
    path: '/v1/responses',
    upstream: 'openai',
    auth: { Authorization: 'Bearer sk-kars-bench' },
    body: (maxTokens) =>
      JSON.stringify({
        model: 'gpt-4o',
        max_output_tokens: maxTokens,
        temperature: 0.2,
        instructions: SYSTEM_PROMPT,
        input: [{ role: 'user', content: USER_PROMPT }],
      }),
    streamError: (text) => /^event: (error|response\.failed)$/m.test(text),
  },
  messages: {
    name: 'messages',
    label: 'Anthropic Messages',
    path: '/v1/messages',
    upstream: 'anthropic',
    auth: { 'x-api-key': 'sk-ant-kars-bench', 'anthropic-version': '2023-06-01' },
    body: (maxTokens) =>
      JSON.stringify({
        model: 'claude-sonnet-4-5',
        max_tokens: maxTokens,
        temperature: 0.2,
        system: SYSTEM_PROMPT,
        messages: [{ role: 'user', content: USER_PROMPT }],
      }),
    streamError: (text) => /^event: error$/m.test(text),
  },
};

// ---------------------------------------------------------------------------------------------
// Child: the OpenAI stub
// ---------------------------------------------------------------------------------------------

async function stubMain(kind = 'openai') {
  const stubs = await import(dist('router', 'stubs/index.js'));
  const start = kind === 'anthropic' ? stubs.startAnthropicStub : stubs.startOpenAIStub;
  const stub = await start({ listen: '127.0.0.1:0' });
  // The stub records every request it receives in `requests` (tests read it) and never drops
  // them. Nothing here reads them: make the push a no-op, so the stub's heap does not grow by
  // ~1–2 KB per request (and old-space GC pauses do not land in the "direct" numbers).
  stub.requests.push = () => 0;
  process.stdout.write(`listening: ${stub.url.toString()}\n`);
  const stop = () => {
    void stub.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

// ---------------------------------------------------------------------------------------------
// Child: a plain node:http pass-through proxy (the baseline for "what one Node HTTP hop costs")
// ---------------------------------------------------------------------------------------------

/** Hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

async function proxyMain(upstreamUrl, anthropicUrl) {
  const http = (await import('node:http')).default;
  const openaiUp = new URL(upstreamUrl);
  const anthropicUp = anthropicUrl ? new URL(anthropicUrl) : undefined;
  // The same agent settings as the router's inference handler.
  const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      // The Anthropic routes go to the Anthropic stub, everything else to the OpenAI stub.
      const up = anthropicUp && req.url?.startsWith('/v1/messages') ? anthropicUp : openaiUp;
      const headers = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
      headers.host = up.host;
      headers['content-length'] = body.length;
      const r = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent }, (ur) => {
        const h = {};
        for (const [k, v] of Object.entries(ur.headers)) if (!HOP.has(k)) h[k] = v;
        res.writeHead(ur.statusCode ?? 502, h);
        ur.pipe(res);
      });
      r.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"bench proxy: upstream failed","type":"proxy_error"}}');
      });
      r.end(body);
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  process.stdout.write(`listening: http://127.0.0.1:${server.address().port}\n`);
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

// ---------------------------------------------------------------------------------------------
// Child: the Node load generator
// ---------------------------------------------------------------------------------------------

function summarize(lat) {
  const s = stats(lat);
  return { n: s.n, p50: s.p50, p90: s.p90, p99: s.p99, p999: s.p999, max: s.max, mean: s.mean };
}

/**
 * Open loop: request k is due at t0 + k/rate whatever happened before (no coordinated omission).
 * A free keep-alive connection is taken (LIFO) or opened, up to maxConns; past that the request
 * waits in a FIFO and its latency still counts from its dispatch. Latency = response − dispatch;
 * `fromIntended` also counts the generator's own scheduling lag.
 */
function openLoop(job, mark) {
  const { host, port, rate, warmupMs, durationMs, maxConns, expectStatus } = job;
  const req = Buffer.from(job.req, 'base64');
  const interval = 1000 / rate;
  const nWarm = Math.round((warmupMs * rate) / 1000);
  const total = nWarm + Math.round((durationMs * rate) / 1000);
  const nMeas = total - nWarm;
  const lat = new Float64Array(nMeas).fill(NaN);
  const latIntended = new Float64Array(nMeas).fill(NaN);
  const lag = new Float64Array(nMeas).fill(NaN);
  const free = [];
  const waiting = [];
  let open = 0;
  let maxOpen = 0;
  let done = 0;
  let dispatched = 0;
  const err = { transport: 0, status: {}, first: [] };
  const note = (m) => {
    if (err.first.length < 5) err.first.push(m);
  };
  let cpu0;
  let tFirst = NaN;
  let tLast = NaN;

  return new Promise((resolveJob) => {
    const t0 = performance.now() + 20;
    let finished = false;
    const finish = (why) => {
      if (finished) return;
      finished = true;
      clearTimeout(watchdog);
      const cpu = process.cpuUsage(cpu0);
      for (const c of free) c.close();
      mark('end');
      const measured = Array.from(lat).filter(Number.isFinite);
      // Stall episodes: requests slower than 10 ms, merged when due within 50 ms of each other.
      const episodes = [];
      for (let m = 0; m < nMeas; m++) {
        if (!(latIntended[m] > 10)) continue;
        const at = m * interval;
        const last = episodes[episodes.length - 1];
        if (last && at - last.endMs <= 50) {
          last.endMs = at;
          last.requests++;
          last.maxMs = Math.max(last.maxMs, latIntended[m]);
        } else episodes.push({ startMs: at, endMs: at, requests: 1, maxMs: latIntended[m] });
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

    const complete = () => {
      done++;
      if (done === total) finish('complete');
    };
    const fire = (conn, k, intended, disp) => {
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
        const live = e ? undefined : conn.dead ? (open--, undefined) : conn;
        const nextWaiting = waiting.shift();
        if (nextWaiting) {
          const c = live ?? newConn();
          if (c) fire(c, ...nextWaiting);
          else waiting.unshift(nextWaiting);
        } else if (live) free.push(live);
        complete();
      });
    };
    const newConn = () => {
      if (open >= maxConns) return undefined;
      open++;
      if (open > maxOpen) maxOpen = open;
      return new HttpConn(host, port);
    };
    const dispatch = (k, intended) => {
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
    const tick = () => {
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
function closedLoop(job, mark) {
  const { host, port, concurrency, warmupMs, durationMs, expectStatus } = job;
  const req = Buffer.from(job.req, 'base64');
  const lat = [];
  const err = { transport: 0, status: {}, first: [] };
  let cpu0;
  return new Promise((resolveJob) => {
    const tStart = performance.now();
    const tw0 = tStart + warmupMs;
    const tw1 = tw0 + durationMs;
    let live = concurrency;
    let started = false;
    const conns = [];
    const startMark = setTimeout(() => {
      started = true;
      cpu0 = process.cpuUsage();
      mark('start');
    }, warmupMs);
    const loop = (conn) => {
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
    const end = () => {
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

function loadgenMain() {
  process.on('message', (job) => {
    const mark = (name) => process.send({ type: 'mark', name });
    const run = job.kind === 'open' ? openLoop(job, mark) : closedLoop(job, mark);
    run.then(
      (result) => process.send({ type: 'result', ok: true, result }),
      (e) => process.send({ type: 'result', ok: false, error: e instanceof Error ? e.stack : String(e) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------
// Main process helpers
// ---------------------------------------------------------------------------------------------

function envNum(name, def) {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${v}"`);
  return n;
}

/** CPU time of a process in seconds, from /proc/<pid>/stat (10 ms resolution): `{ total, sys }`; NaNs once it is gone. */
const procCpu = (pid) => procCpuBase(pid, { safe: true });
const procCpuSec = (pid) => procCpu(pid).total;

/** VmRSS of a process in MB; NaN once it is gone. */
const procRssMb = (pid) => procStatus(pid, { safe: true }).rssKb / 1024;

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat. */
function machineBusySec() {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - f[3] - f[4]) / 100;
  } catch {
    return NaN;
  }
}

/** CPU snapshot of the named processes, this process and the whole machine. */
function cpuSnap(pids) {
  const procs = {};
  const sys = {};
  for (const [k, pid] of Object.entries(pids)) {
    if (!pid) continue;
    const c = procCpu(pid);
    procs[k] = c.total;
    sys[k] = c.sys;
  }
  return { t: performance.now(), machine: machineBusySec(), self: selfCpuSec(), procs, sys };
}

/**
 * Per process: CPU seconds, % of one core and µs per request between two snapshots; `otherPct` is
 * the rest of the machine's busy time (other jobs on the shared VM), in % of one core.
 */
function cpuDelta(a, b, requests, override = {}) {
  const wallS = (b.t - a.t) / 1000;
  const out = { wallS, sec: {}, pctCore: {}, usPerReq: {}, sysUsPerReq: {} };
  let ours = b.self - a.self;
  for (const k of new Set([...Object.keys(b.procs), ...Object.keys(override)])) {
    const s = override[k] ?? b.procs[k] - a.procs[k];
    out.sec[k] = s;
    out.pctCore[k] = (s / wallS) * 100;
    out.usPerReq[k] = requests > 0 ? (s * 1e6) / requests : NaN;
    out.sysUsPerReq[k] = requests > 0 && override[k] === undefined ? ((b.sys[k] - a.sys[k]) * 1e6) / requests : NaN;
    if (Number.isFinite(s)) ours += s;
  }
  out.otherPct = Math.max(0, ((b.machine - a.machine - ours) / wallS) * 100);
  return out;
}

/**
 * Spawn a node child that prints `listening: <url>` (and maybe `kubeconfig: <path>`) on stdout.
 * `died` is set when it exits before `stop()`.
 */
async function startChild(label, args, { nodeArgs = [], env = process.env, timeoutMs = 30_000 } = {}) {
  const h = await spawnListening(label, [...nodeArgs, ...args], {
    env,
    timeoutMs,
    collectStderr: (child) => pinoStderr(child, { tailMax: 40, lineChars: 400 }),
    diedMessage: (code, signal, h) =>
      `${label} exited unexpectedly (code ${code}, signal ${signal})\n${h.stderr.tail.slice(-10).join('\n')}`,
  });
  h.label = label;
  h.url = h.url.replace(/\/$/, '');
  return h;
}

/** The Node load generator child; `run(job, onMark)` resolves with its result. */
function startLoadgen() {
  const child = spawn(process.execPath, [...splitArgs(process.env.BENCH_LOADGEN_NODE_ARGS), SELF, '--loadgen'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let handler;
  let exitErr;
  child.on('message', (m) => handler?.(m));
  child.once('exit', (code, signal) => {
    exitErr = new Error(`load generator exited (code ${code}, signal ${signal})`);
    handler?.({ type: 'result', ok: false, error: exitErr.message });
  });
  return {
    pid: child.pid,
    run(job, onMark) {
      if (exitErr) return Promise.reject(exitErr);
      return new Promise((res, rej) => {
        handler = (m) => {
          if (m.type === 'mark') onMark?.(m.name);
          else if (m.type === 'result') {
            handler = undefined;
            if (m.ok) res(m.result);
            else rej(new Error(m.error));
          }
        };
        child.send(job);
      });
    },
    stop() {
      if (child.connected) child.disconnect();
      if (child.exitCode === null) setTimeout(() => child.kill('SIGKILL'), 2000).unref();
    },
  };
}

/** wrk 4.x on PATH (`wrk --version` exits 1 but prints its banner). */
function findWrk() {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (r.error) return undefined;
  const v = `${r.stdout}${r.stderr}`.match(/wrk\s+(\S+)/)?.[1];
  return v ? { version: v } : undefined;
}

/**
 * One closed-loop wrk run (`-t1`): POST the chat body on `concurrency` keep-alive connections.
 * A Lua `done` hook prints the summary as JSON. wrk's CPU is read from /proc while it runs.
 */
async function runWrk(tmp, url, body, concurrency, durationS, onMark, extraHeaders = {}) {
  const script = join(tmp, 'wrk-post.lua');
  writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      `wrk.body = [==[${body}]==]`,
      'wrk.headers["Content-Type"] = "application/json"',
      'wrk.headers["Authorization"] = "Bearer sk-kars-bench"',
      ...Object.entries(extraHeaders).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`),
      'done = function(summary, latency, requests)',
      '  local e = summary.errors',
      '  io.write(string.format(\'WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%f}\\n\',',
      '    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,',
      '    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))',
      'end',
      '',
    ].join('\n'),
  );
  const args = [
    '-t1',
    `-c${concurrency}`,
    `-d${Math.max(1, Math.round(durationS))}s`,
    '--timeout',
    '10s',
    '-s',
    script,
    `${url}/v1/chat/completions`,
  ];
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  onMark?.('start');
  let wrkCpu = 0;
  const poll = setInterval(() => {
    const c = procCpuSec(child.pid);
    if (Number.isFinite(c)) wrkCpu = c;
  }, 100);
  let out = '';
  let errOut = '';
  let json;
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c) => (errOut += c));
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c) => {
    out += c;
    const m = out.match(/WRKJSON (\{.*\})/);
    if (m && !json) {
      json = JSON.parse(m[1]);
      const c2 = procCpuSec(child.pid);
      if (Number.isFinite(c2)) wrkCpu = c2;
      onMark?.('end');
    }
  });
  const code = await new Promise((res) => child.once('exit', (c) => res(c)));
  clearInterval(poll);
  if (!json) throw new Error(`wrk failed (exit ${code}): ${errOut || out}`.slice(0, 800));
  const durationMs = json.duration_us / 1000;
  const errorsTotal = json.connect + json.read + json.write + json.timeout;
  return {
    requests: json.requests,
    durationMs,
    throughput: (json.requests / durationMs) * 1000,
    latency: {
      n: json.requests,
      p50: json.p50 / 1000,
      p90: json.p90 / 1000,
      p99: json.p99 / 1000,
      p999: json.p999 / 1000,
      max: json.max / 1000,
      mean: json.mean / 1000,
    },
    errors: {
      transport: errorsTotal,
      status: json.status > 0 ? { 'non-2xx/3xx': json.status } : {},
      first:
        errorsTotal || json.status
          ? [`wrk: connect ${json.connect}, read ${json.read}, write ${json.write}, timeout ${json.timeout}, status ${json.status}`]
          : [],
    },
    loadgenCpuSec: wrkCpu,
    raw: out.trim(),
  };
}

/** Which build of the router was measured: a digest of every .js file under packages/router/dist and the newest mtime. */
function routerBuildId() {
  const dir = join(ROOT, 'packages/router/dist');
  const h = createHash('sha256');
  let newest = 0;
  for (const f of readdirSync(dir, { recursive: true })
    .filter((f) => String(f).endsWith('.js'))
    .sort()) {
    h.update(String(f)).update(readFileSync(join(dir, String(f))));
    newest = Math.max(newest, statSync(join(dir, String(f))).mtimeMs);
  }
  return { distSha256: h.digest('hex').slice(0, 16), newestMtime: new Date(newest).toISOString() };
}

/** One request on a fresh connection (sanity checks). */
function oneRequest(url, body, headers = {}, api = APIS.chat) {
  const u = new URL(url);
  const c = new HttpConn(u.hostname, Number(u.port));
  return new Promise((res, rej) => {
    c.request(chatRequest(url, body, headers, api), (e, status, b) => {
      c.close();
      if (e) rej(e);
      else res({ status, text: b.toString('utf8') });
    });
  });
}

/**
 * Sequential probes to the router, one every `intervalMs` (or as soon as the last one answered).
 * Each result is `{ sendT, recvT, status }`; `waitFor` resolves with the first result matching a
 * predicate, or undefined after a timeout.
 */
class Prober {
  constructor(url, body, intervalMs) {
    const u = new URL(url);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.req = chatRequest(url, body);
    this.intervalMs = intervalMs;
    this.results = [];
    this.errors = [];
    this.waiters = new Set();
    this.running = false;
    this.conn = undefined;
  }

  start() {
    this.running = true;
    this.next();
  }

  next() {
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

  waitFor(pred, timeoutMs) {
    return new Promise((res) => {
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        res(undefined);
      }, timeoutMs);
      const w = (r) => {
        if (!pred(r)) return;
        clearTimeout(timer);
        this.waiters.delete(w);
        res(r);
      };
      this.waiters.add(w);
    });
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.conn?.close();
  }
}

/**
 * A kubelet-style ConfigMap volume: `<dir>/..<timestamp>/inference-policy.json`, `..data` → that
 * directory, `inference-policy.json` → `..data/inference-policy.json`. An update writes a new
 * timestamped directory, points `..data_tmp` at it, renames it over `..data` (the atomic step),
 * then removes the old directory — the order kubelet's AtomicWriter uses.
 */
class KubeletMount {
  constructor(dir) {
    this.dir = dir;
    this.seq = 0;
    this.current = undefined;
    mkdirSync(dir, { recursive: true });
  }

  /** Write `body`; returns performance.now() right after the atomic rename. */
  write(body) {
    const ts = `..${new Date().toISOString().replace(/[-:.TZ]/g, '_')}${String(++this.seq).padStart(4, '0')}`;
    mkdirSync(join(this.dir, ts));
    writeFileSync(join(this.dir, ts, 'inference-policy.json'), body);
    const tmp = join(this.dir, '..data_tmp');
    symlinkSync(ts, tmp);
    renameSync(tmp, join(this.dir, '..data'));
    const t = performance.now();
    if (this.current === undefined) symlinkSync('..data/inference-policy.json', join(this.dir, 'inference-policy.json'));
    else rmSync(join(this.dir, this.current), { recursive: true, force: true });
    this.current = ts;
    return t;
  }
}

// ---------------------------------------------------------------------------------------------
// Peers from outside the repo: nginx (Debian package) and the Portkey AI gateway (npm, scratch dir)
// ---------------------------------------------------------------------------------------------

/** Where the Portkey gateway is installed for the benchmark (a git-ignored scratch folder, not a repo dependency). */
const PORTKEY_DIR = process.env.BENCH_PORTKEY_DIR ?? join(ROOT, 'bench', 'peers', 'node_modules', '@portkey-ai', 'gateway');

/** nginx on PATH, or undefined (`nginx -v` prints `nginx version: nginx/1.22.1` on stderr). */
function findNginx() {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (r.error) return undefined;
  return { version: `${r.stdout}${r.stderr}`.match(/nginx\/(\S+)/)?.[1] ?? '?' };
}

/** The Portkey gateway's start script and version, or undefined. */
function findPortkey() {
  const script = join(PORTKEY_DIR, 'build', 'start-server.js');
  if (!existsSync(script)) return undefined;
  const version = JSON.parse(readFileSync(join(PORTKEY_DIR, 'package.json'), 'utf8')).version;
  return { script, version };
}

/** The headers that make the Portkey gateway forward to the stub (an OpenAI-compatible custom host, or the Anthropic stub as provider anthropic). */
function portkeyHeaders(stubUrl, provider = 'openai') {
  return { 'x-portkey-provider': provider, 'x-portkey-custom-host': `${stubUrl}/v1` };
}

/** Resolve once `url` answers GET / (any status), or throw after `timeoutMs`. */
async function waitForHttp(url, timeoutMs, child) {
  const t0 = performance.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`exited (code ${child.exitCode}) before answering ${url}`);
    const ok = await fetch(url).then(
      (r) => r.arrayBuffer().then(() => true),
      () => false,
    );
    if (ok) return;
    if (performance.now() - t0 > timeoutMs) throw new Error(`no answer from ${url} within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** Wrap a spawned child as the same handle `startChild` returns (pid, url, died, stderr, stop). */
function externalHandle(label, child, url) {
  const tail = [];
  const stderr = { tail, error: 0, firstErrors: [] };
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c) => {
    tail.push(...c.split('\n').filter(Boolean));
    if (tail.length > 50) tail.splice(0, tail.length - 50);
  });
  child.stdout?.resume();
  const exited = new Promise((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let stopping = false;
  const h = {
    label,
    child,
    pid: child.pid,
    url,
    stderr,
    died: undefined,
    async stop() {
      stopping = true;
      await stopChild(child, exited, 5000);
    },
  };
  void exited.then(({ code, signal }) => {
    if (!stopping) h.died = `${label} exited unexpectedly (code ${code}, signal ${signal})\n${tail.slice(-10).join('\n')}`;
  });
  return h;
}

/**
 * nginx as a plain reverse proxy to the stub, as the issue measured it: one process doing the
 * work (`master_process off`, one worker's worth, like the single-threaded Node peers), upstream
 * keep-alive (`keepalive 64`, HTTP/1.1, `Connection: ""`), no access log, and `proxy_buffering
 * off` so streams are passed on as they arrive.
 */
async function startNginx(tmp, stubUrl, anthropicUrl) {
  const dir = join(tmp, 'nginx');
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const port = await freePort();
  const up = new URL(stubUrl);
  const anthropicUp = anthropicUrl ? new URL(anthropicUrl) : undefined;
  const pass = 'proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off;';
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    [
      'daemon off;',
      'master_process off;',
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'logs', 'error.log')} warn;`,
      'events { worker_connections 4096; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${join(dir, 'body')};`,
      `  proxy_temp_path ${join(dir, 'proxy')};`,
      `  fastcgi_temp_path ${join(dir, 'fastcgi')};`,
      `  uwsgi_temp_path ${join(dir, 'uwsgi')};`,
      `  scgi_temp_path ${join(dir, 'scgi')};`,
      '  keepalive_requests 1000000;',
      `  upstream stub { server ${up.host}; keepalive 64; }`,
      ...(anthropicUp ? [`  upstream anthropic { server ${anthropicUp.host}; keepalive 64; }`] : []),
      `  server { listen 127.0.0.1:${port};`,
      `    location / { proxy_pass http://stub; ${pass} }`,
      ...(anthropicUp ? [`    location /v1/messages { proxy_pass http://anthropic; ${pass} }`] : []),
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  const child = spawn('nginx', ['-p', dir, '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = `http://127.0.0.1:${port}`;
  const h = externalHandle('nginx', child, url);
  await waitForHttp(url, 10_000, child);
  return h;
}

/** The Portkey AI gateway (`start-server.js --port=N --headless`, NODE_ENV=production: no UI, no log stream). */
async function startPortkey(script) {
  const port = await freePort();
  const child = spawn(process.execPath, [script, `--port=${port}`, '--headless'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  const url = `http://127.0.0.1:${port}`;
  const h = externalHandle('portkey', child, url);
  await waitForHttp(url, 30_000, child);
  return h;
}

/**
 * Time to the first streamed byte: `n` streamed chat completions, one at a time on one keep-alive
 * connection, `gapMs` apart; each sample is from writing the request to receiving the first `data:`
 * byte of the body. Resolves with the samples (ms); rejects on a non-200 answer or an error frame.
 */
async function ttfbRun(url, body, headers, n, gapMs, api = APIS.chat) {
  const u = new URL(url);
  const sock = net.connect(Number(u.port), u.hostname);
  await new Promise((res, rej) => {
    sock.once('connect', res);
    sock.once('error', rej);
  });
  sock.setNoDelay(true);
  const req = chatRequest(url, body, headers, api);
  const out = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      let first = -1;
      let buf = '';
      await new Promise((res, rej) => {
        const onData = (c) => {
          buf += c.toString('latin1');
          if (first < 0 && buf.indexOf('data:') >= 0) first = performance.now();
          const he = buf.indexOf('\r\n\r\n');
          if (he < 0) return;
          const cl = /\r\ncontent-length:\s*(\d+)/i.exec(buf.slice(0, he));
          const done = cl ? buf.length - he - 4 >= Number(cl[1]) : buf.endsWith('\r\n0\r\n\r\n');
          if (!done) return;
          sock.off('data', onData);
          sock.off('error', rej);
          if (!buf.startsWith('HTTP/1.1 200')) rej(new Error(`ttfb ${url}: ${buf.slice(0, 200)}`));
          else if (api.streamError(buf.slice(he)))
            rej(new Error(`ttfb ${url}: the stream carried an error frame: ${buf.slice(he, he + 300)}`));
          else res();
        };
        sock.on('data', onData);
        sock.once('error', rej);
        sock.write(req);
      });
      out.push(first - t0);
      if (gapMs > 0) await sleep(gapMs);
    }
  } finally {
    sock.destroy();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------------------------

const PEER_LABEL = { direct: 'direct', proxy: 'proxy', nginx: 'nginx', bare: 'bare router', router: 'router', portkey: 'portkey' };
const PEER_HEAD = {
  direct: 'direct → stub',
  proxy: 'node:http proxy → stub',
  nginx: 'nginx → stub',
  bare: 'kars router, no policy → stub',
  router: 'kars router → stub',
  portkey: 'Portkey gateway → stub',
};
const SANDBOX = 'sb';
const NS = 'bench';
const POLICY = 'bench-policy';
/** The realistic policy's per-request cap; the traffic asks for fewer tokens. */
const REALISTIC_CAP = 1024;
const TRAFFIC_MAX_TOKENS = 256;
/** Reload phases: probes ask for PROBE_TOKENS; the cap alternates HIGH (→ 200) and LOW (→ 429). */
const PROBE_TOKENS = 512;
const CAP_HIGH = 1024;
const CAP_LOW = 256;

/** A byte-for-byte copy of what the stub answers to the benchmark's body (for the in-process phase). */
const STUB_RESPONSE =
  '{"id":"chatcmpl-stub-1","object":"chat.completion","created":1796008007,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the kars OpenAI stub."},"finish_reason":"stop","content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}],"usage":{"prompt_tokens":15,"completion_tokens":15,"total_tokens":30},"system_fingerprint":null,"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}]}';

async function main() {
  const tStart = performance.now();
  const quick = process.env.BENCH_QUICK === '1';
  const phases = new Set(splitArgs((process.env.BENCH_PHASES ?? 'decision,latency,ttfb,throughput,dir,api').replace(/,/g, ' ')));
  for (const p of phases)
    if (!['decision', 'latency', 'ttfb', 'throughput', 'dir', 'api'].includes(p)) throw new Error(`BENCH_PHASES: unknown phase "${p}"`);
  const cfg = {
    quick,
    phases: [...phases],
    rate: envInt('BENCH_RATE', 1000),
    openSecs: envNum('BENCH_OPEN_SECS', quick ? 4 : 5),
    closedSecs: envNum('BENCH_CLOSED_SECS', quick ? 3 : 5),
    // A fresh router needs ~2–3 s of traffic before its code is optimized enough to keep up
    // with 1,000 req/s on the 2-core VM (see README), so the first warm-up is 3 s.
    warmupSecs: envNum('BENCH_WARMUP_SECS', 3),
    rewarmSecs: envNum('BENCH_REWARM_SECS', 1),
    rounds: envInt('BENCH_ROUNDS', quick ? 1 : 4),
    concurrency: envInt('BENCH_CONCURRENCY', 32),
    maxConns: envInt('BENCH_MAX_CONNS', 64),
    decisionIters: envInt('BENCH_DECISION_ITERS', quick ? 50_000 : 200_000),
    decisionRuns: envInt('BENCH_DECISION_RUNS', quick ? 3 : 7),
    changes: envInt('BENCH_CHANGES', quick ? 15 : 50),
    probeMs: envNum('BENCH_PROBE_MS', 2),
    changeTimeoutMs: envInt('BENCH_CHANGE_TIMEOUT_MS', 5000),
    upstreamDelayMs:
      process.env.BENCH_UPSTREAM_DELAY_MS && process.env.BENCH_UPSTREAM_DELAY_MS !== '0' ? envInt('BENCH_UPSTREAM_DELAY_MS', 0) : 0,
    loadgen: process.env.BENCH_LOADGEN ?? 'auto',
    peers: splitArgs((process.env.BENCH_PEERS ?? 'direct,proxy,nginx,router,portkey').replace(/,/g, ' ')),
    ttfbRequests: envInt('BENCH_TTFB_REQUESTS', quick ? 300 : 1000),
    // The APIs the latency and ttfb phases measure; throughput and the reload phases use chat.
    apis: splitArgs((process.env.BENCH_APIS ?? 'chat,responses,messages').replace(/,/g, ' ')),
    goals: { addedP50Ms: 0.5, addedP99Ms: 1, throughputRatio: 0.8, nginxRatio: 0.6, portkeyRatio: 5, ttfbAddedP99Ms: 1, decisionUs: 20 },
  };
  for (const a of cfg.apis) if (!(a in APIS)) throw new Error(`BENCH_APIS: unknown API "${a}" (${Object.keys(APIS).join(', ')})`);
  if (!cfg.apis.includes('chat')) cfg.apis.unshift('chat');
  const anthropicWanted = cfg.apis.includes('messages');
  for (const p of cfg.peers)
    if (!(p in PEER_LABEL)) throw new Error(`BENCH_PEERS: unknown peer "${p}" (${Object.keys(PEER_LABEL).join(', ')})`);
  // Peers from outside the repo are skipped, with a message, when they are not installed.
  const nginxBin = cfg.peers.includes('nginx') ? findNginx() : undefined;
  const portkeyPkg = cfg.peers.includes('portkey') ? findPortkey() : undefined;
  const skipped = [];
  if (cfg.peers.includes('nginx') && !nginxBin) skipped.push('nginx: not on PATH (apt-get install -y nginx)');
  if (cfg.peers.includes('portkey') && !portkeyPkg)
    skipped.push(
      `portkey: ${PORTKEY_DIR} not found (npm install --prefix bench/peers @portkey-ai/gateway@1.15.2, or set BENCH_PORTKEY_DIR)`,
    );
  for (const m of skipped) log(`skipping peer ${m}`);
  cfg.peers = cfg.peers.filter((p) => (p !== 'nginx' || nginxBin) && (p !== 'portkey' || portkeyPkg));
  cfg.skipped = skipped;
  const peers = cfg.peers;
  if (!['auto', 'wrk', 'node'].includes(cfg.loadgen)) throw new Error(`BENCH_LOADGEN must be auto, wrk or node, got "${cfg.loadgen}"`);
  const wrk = cfg.loadgen === 'node' ? undefined : findWrk();
  if (cfg.loadgen === 'wrk' && !wrk) throw new Error('BENCH_LOADGEN=wrk but wrk is not on PATH (apt-get install -y wrk)');
  const closedGen = wrk
    ? `wrk ${wrk.version} (-t1, separate process)`
    : `Node raw-HTTP/1.1 generator (separate process; ${cfg.loadgen === 'node' ? 'BENCH_LOADGEN=node' : 'wrk not on PATH'})`;
  const openGen = 'Node raw-HTTP/1.1 generator (separate process; wrk has no constant-rate mode)';
  for (const f of [
    'packages/router/dist/stubs/openai.js',
    'packages/router/dist/inference/handler.js',
    'packages/policy-compiler/dist/index.js',
    'apps/cli/dist/main.js',
  ]) {
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: build first (npx tsc -b)`);
  }
  const { compileInferencePolicy } = await import(dist('policy-compiler'));
  const build = routerBuildId();

  /**
   * The benchmark's InferencePolicy, for the router of `apiName`. Chat's carries the content-safety
   * floor; Responses and Messages answers cannot carry Azure's annotations, so a floor fails them
   * closed (ADR 0034) and their routers run the same policy without it, Messages on the Anthropic
   * provider (the only one that speaks it).
   */
  const compiled = (cap, apiName = 'chat') => {
    const r = compileInferencePolicy({
      metadata: { name: POLICY, namespace: NS },
      spec: {
        appliesTo: { sandboxName: SANDBOX },
        displayName: 'router benchmark policy',
        tokenBudget: { perRequestTokens: cap, dailyTokens: 1_000_000_000_000, monthlyTokens: 10_000_000_000_000 },
        ...(apiName === 'chat'
          ? { contentSafety: { hate: 'Medium', selfHarm: 'Low', sexual: 'Medium', violence: 'Medium', requirePromptShields: true } }
          : {}),
        modelPreference:
          apiName === 'messages'
            ? { primary: { provider: 'anthropic', deployment: 'claude-sonnet-4-5' }, fallback: [] }
            : {
                primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
                fallback: [{ provider: 'azure-openai', deployment: 'gpt-4o-mini' }],
              },
      },
    });
    if (!r.ok) throw new Error(`compileInferencePolicy failed: ${JSON.stringify(r)}`);
    return r;
  };

  log(`router benchmark${quick ? ' (quick)' : ''}: phases ${cfg.phases.join(', ')}; open loop: ${openGen}; closed loop: ${closedGen}`);
  const tmp = mkdtempSync(join(os.tmpdir(), 'kars-bench-router-'));
  const failures = [];
  const raw = { loadavgStart: os.loadavg() };
  const dataRows = [];
  const ctlRows = [];
  const phaseTimes = {};
  const goalCell = (v, limit, unit, cmp = 'le') => {
    if (!Number.isFinite(v)) return `${cmp === 'le' ? '≤' : '≥'} ${limit} ${unit}: n/a`;
    const met = cmp === 'le' ? v <= limit : v >= limit;
    return `${cmp === 'le' ? '≤' : '≥'} ${limit} ${unit}: ${met ? 'met' : '**missed**'}`;
  };
  let stub;
  let anthropicStub;
  let proxy;
  let nginx;
  let portkey;
  let bare;
  let router;
  /** The routers of the other APIs (BENCH_APIS), each on its own policy (see `compiled`). */
  const apiRouters = {};
  let loadgen;
  let srv;
  let api;
  const checkChildren = () => {
    for (const c of [stub, anthropicStub, proxy, nginx, portkey, bare, router, srv, ...Object.values(apiRouters)])
      if (c?.died) throw new Error(c.died);
  };

  try {
    // ---- 3. policy decision cost, in process (first, while the machine is otherwise idle) -----
    if (phases.has('decision')) {
      const t0 = performance.now();
      log(`decision: ${fmtInt(cfg.decisionIters)} iterations × ${cfg.decisionRuns} runs, in process`);
      raw.decision = await decisionPhase(cfg, compiled(REALISTIC_CAP).body);
      const d = raw.decision;
      ctlRows.push({
        metric: 'inference pipeline per request (pure)',
        display: `${fmt3(d.pure.medianUs)} µs`,
        goal: goalCell(d.pure.medianUs, cfg.goals.decisionUs, 'µs'),
        notes: `median of ${cfg.decisionRuns} runs × ${fmtInt(cfg.decisionIters)} (runs ${fmt3(d.pure.minUs)}–${fmt3(d.pure.maxUs)} µs; ${fmtInt(1 / (d.pure.medianUs / 1e6))} decisions/s on one core). Per request, as the proxy runs inference/pipeline.ts: snapshot, decideHead, decideRequest (strict parse of the ${d.reqBytes}-byte request, token limits, re-serialisation, route plan, floor), budget reserve, judgeAnswer on the parsed stub answer (1 prompt block, 4 categories + jailbreak), settle`,
      });
      ctlRows.push({
        metric: 'pipeline + parsing the answer',
        display: `${fmt3(d.withParse.medianUs)} µs`,
        goal: '–',
        notes: `the same plus Buffer.concat + JSON.parse of the ${d.respBytes}-byte answer (the floor makes the proxy buffer and parse every 2xx body); median of ${cfg.decisionRuns} runs × ${fmtInt(d.withParse.iters)} (${fmt3(d.withParse.minUs)}–${fmt3(d.withParse.maxUs)} µs)`,
      });
      phaseTimes.decision = (performance.now() - t0) / 1000;
    }

    const needDataPlane = phases.has('latency') || phases.has('throughput') || phases.has('ttfb') || phases.has('dir');
    if (needDataPlane || phases.has('api')) {
      stub = await startChild('stub', [SELF, '--stub'], { nodeArgs: splitArgs(process.env.BENCH_STUB_NODE_ARGS) });
      log(`stub (pid ${stub.pid}) at ${stub.url}`);
    }
    const apiPhases = phases.has('latency') || phases.has('ttfb');
    if (anthropicWanted && apiPhases) {
      anthropicStub = await startChild('anthropic stub', [SELF, '--stub', 'anthropic'], {
        nodeArgs: splitArgs(process.env.BENCH_STUB_NODE_ARGS),
      });
      log(`Anthropic stub (pid ${anthropicStub.pid}) at ${anthropicStub.url}`);
    }
    /** The router's upstream flags: the OpenAI stub as the default, the Anthropic stub by name (issue 20's `--upstream NAME=URL`). */
    const upstreamArgs = () => ['--upstream', stub.url, ...(anthropicStub ? ['--upstream', `anthropic=${anthropicStub.url}`] : [])];

    // ---- the router from a kubelet-style policy directory --------------------------------------
    const mount = new KubeletMount(join(tmp, 'policy', 'inference'));
    if (needDataPlane) {
      mount.write(compiled(REALISTIC_CAP).body);
      router = await startChild(
        'router (dir)',
        [KARS, 'router', '--policy-dir', join(tmp, 'policy'), '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
        {
          nodeArgs: splitArgs(process.env.BENCH_ROUTER_NODE_ARGS),
          // No kubeconfig: the router serves from the directory alone, without an echo lease.
          env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') },
        },
      );
      log(`router (pid ${router.pid}) at ${router.url}, policy from ${join(tmp, 'policy')}`);
      // Sanity: the same body answers 200 both ways, and the policy is enforced (over-cap → 429).
      const body = chatBody(TRAFFIC_MAX_TOKENS);
      const d = await oneRequest(stub.url, body);
      const r = await oneRequest(router.url, body);
      const over = await oneRequest(router.url, chatBody(REALISTIC_CAP * 2));
      raw.sanity = {
        direct: d.status,
        router: r.status,
        overCap: over.status,
        directBytes: d.text.length,
        routerBytes: r.text.length,
        overCapBody: over.text.slice(0, 300),
      };
      if (d.status !== 200 || r.status !== 200)
        throw new Error(`sanity: expected 200 direct and through the router, got ${d.status} / ${r.status}: ${r.text.slice(0, 200)}`);
      if (over.status !== 429)
        throw new Error(`sanity: the policy is not enforced: max_tokens ${REALISTIC_CAP * 2} answered ${over.status}, expected 429`);
      if (peers.includes('proxy') && (phases.has('latency') || phases.has('throughput'))) {
        proxy = await startChild('proxy', [SELF, '--proxy', stub.url, ...(anthropicStub ? [anthropicStub.url] : [])], {
          nodeArgs: splitArgs(process.env.BENCH_PROXY_NODE_ARGS),
        });
        const pr = await oneRequest(proxy.url, body);
        if (pr.status !== 200 || pr.text.length !== d.text.length)
          throw new Error(`sanity: the pass-through proxy answered ${pr.status} with ${pr.text.length} bytes`);
        log(`node:http pass-through proxy (pid ${proxy.pid}) at ${proxy.url}`);
      }
      const dataPhases = phases.has('latency') || phases.has('throughput') || phases.has('ttfb');
      if (peers.includes('nginx') && dataPhases) {
        nginx = await startNginx(tmp, stub.url, anthropicStub?.url);
        const nr = await oneRequest(nginx.url, body);
        if (nr.status !== 200 || nr.text.length !== d.text.length)
          throw new Error(`sanity: nginx answered ${nr.status} with ${nr.text.length} bytes`);
        log(`nginx ${nginxBin.version} (pid ${nginx.pid}) at ${nginx.url}`);
      }
      if (peers.includes('portkey') && dataPhases) {
        portkey = await startPortkey(portkeyPkg.script);
        const kr = await oneRequest(portkey.url, body, portkeyHeaders(stub.url));
        if (kr.status !== 200) throw new Error(`sanity: the Portkey gateway answered ${kr.status}: ${kr.text.slice(0, 300)}`);
        log(`Portkey gateway ${portkeyPkg.version} (pid ${portkey.pid}) at ${portkey.url}`);
      }
      if (peers.includes('bare') && (phases.has('latency') || phases.has('throughput'))) {
        // The same router with an empty policy directory: no InferencePolicy, so no floor (the
        // response is relayed as it streams, only parsed at the end for usage).
        mkdirSync(join(tmp, 'empty-policy'));
        bare = await startChild(
          'router (no policy)',
          [KARS, 'router', '--policy-dir', join(tmp, 'empty-policy'), '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
          {
            nodeArgs: splitArgs(process.env.BENCH_ROUTER_NODE_ARGS),
            env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') },
          },
        );
        const br = await oneRequest(bare.url, chatBody(REALISTIC_CAP * 2));
        if (br.status !== 200) throw new Error(`sanity: the router without a policy answered ${br.status}: ${br.text.slice(0, 200)}`);
        log(`router without a policy (pid ${bare.pid}) at ${bare.url}`);
      }
      loadgen = startLoadgen();
    }

    // Sanity for the other APIs (issue 20): 200 direct and through the router, the cap enforced
    // by the router; a peer that cannot carry an API (nginx, the proxy, Portkey) is left out of
    // that API's rows with the reason, as the ttfb phase does for chat.
    /** Per API, the peers left out of its rows and why. */
    const apiSkipped = Object.fromEntries(cfg.apis.map((n) => [n, {}]));
    /** The kars router that serves `a`: chat's, or the one started for that API. */
    const routerOf = (a) => (a === APIS.chat ? router : apiRouters[a.name]);
    const urlOf = (peer, a) =>
      peer === 'direct' && a.upstream === 'anthropic' ? anthropicStub.url : peer === 'router' ? routerOf(a).url : url0[peer]();
    const stubOf = (a) => (a.upstream === 'anthropic' ? anthropicStub.url : stub.url);
    if (needDataPlane && apiPhases)
      for (const name of cfg.apis.filter((n) => n !== 'chat')) {
        const a = APIS[name];
        const dir = join(tmp, `policy-${name}`);
        new KubeletMount(join(dir, 'inference')).write(compiled(REALISTIC_CAP, name).body);
        apiRouters[name] = await startChild(
          `router (${a.label})`,
          [KARS, 'router', '--policy-dir', dir, '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
          { nodeArgs: splitArgs(process.env.BENCH_ROUTER_NODE_ARGS), env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') } },
        );
        log(`router for ${a.label} (pid ${apiRouters[name].pid}) at ${apiRouters[name].url}, its policy without the floor`);
        const b = a.body(TRAFFIC_MAX_TOKENS);
        const d = await oneRequest(stubOf(a), b, {}, a);
        const r = await oneRequest(apiRouters[name].url, b, {}, a);
        const over = await oneRequest(apiRouters[name].url, a.body(REALISTIC_CAP * 2), {}, a);
        raw.sanity[name] = {
          direct: d.status,
          router: r.status,
          overCap: over.status,
          routerBody: r.text.slice(0, 300),
          overCapBody: over.text.slice(0, 300),
        };
        if (d.status !== 200 || r.status !== 200)
          throw new Error(
            `sanity ${a.label}: expected 200 direct and through the router on ${a.path}, got ${d.status} / ${r.status}: ${r.text.slice(0, 200)} (issue 20 brings the router's ${a.path} route${a.upstream === 'anthropic' ? ' and --upstream anthropic=URL' : ''}; BENCH_APIS=chat measures chat alone)`,
          );
        if (over.status !== 429)
          throw new Error(
            `sanity ${a.label}: the policy is not enforced: a limit of ${REALISTIC_CAP * 2} answered ${over.status}, expected 429: ${over.text.slice(0, 200)}`,
          );
        for (const peer of peers.filter((p) => p !== 'direct' && p !== 'router')) {
          const handle = { proxy, nginx, bare, portkey }[peer];
          if (!handle) continue;
          const headers = peer === 'portkey' ? portkeyHeaders(stubOf(a), a.upstream) : {};
          const pr = await oneRequest(handle.url, b, headers, a).catch((e) => ({ status: 0, text: errMsg(e) }));
          if (pr.status !== 200) {
            apiSkipped[name][peer] = `answered ${pr.status}`;
            log(`${a.label}: leaving ${peer} out (it answered ${pr.status}: ${pr.text.slice(0, 120)})`);
          }
        }
      }

    const url0 = {
      direct: () => stub.url,
      proxy: () => proxy.url,
      nginx: () => nginx.url,
      bare: () => bare.url,
      router: () => router.url,
      portkey: () => portkey.url,
    };
    /** The processes whose CPU is counted; `stub` is the stub that serves `a` (the Anthropic one for Messages). */
    const pids = (a = APIS.chat) => ({
      stub: a.upstream === 'anthropic' ? anthropicStub?.pid : stub?.pid,
      proxy: proxy?.pid,
      nginx: nginx?.pid,
      bare: bare?.pid,
      router: (a === APIS.chat ? router : apiRouters[a.name])?.pid,
      portkey: portkey?.pid,
      loadgen: loadgen?.pid,
    });
    const body = chatBody(TRAFFIC_MAX_TOKENS);
    // Optional simulated upstream latency (the stub's x-stub-delay-ms; the router and the proxy pass it on).
    const delayHeaders = cfg.upstreamDelayMs > 0 ? { 'x-stub-delay-ms': String(cfg.upstreamDelayMs) } : {};
    /** The request headers a peer needs (Portkey: which provider, and the stub as its custom host). */
    const headersOf = (peer, a = APIS.chat) =>
      peer === 'portkey' ? { ...delayHeaders, ...portkeyHeaders(stubOf(a), a.upstream) } : delayHeaders;
    /** The process that does the hop for a peer (none for direct). */
    const hopOf = (peer) => (peer === 'direct' ? undefined : peer);
    /** Round r runs the peers in order, reversed on odd rounds, so no peer always goes first. */
    const orderOf = (round) => (round % 2 === 0 ? [...peers] : [...peers].reverse());
    const errCount = (r) => r.errors.transport + Object.values(r.errors.status).reduce((x, y) => x + y, 0);
    /** Run `fn(round, peer, warmSecs)` for every round and every peer in that round's order, children checked first. */
    const eachRun = async (fn) => {
      for (let round = 0; round < cfg.rounds; round++) {
        const warm = round === 0 ? cfg.warmupSecs : cfg.rewarmSecs;
        for (const peer of orderOf(round)) {
          checkChildren();
          await fn(round, peer, warm);
        }
      }
    };
    /** CPU snapshots at the load generator's `start` and `end` marks; `delta(...)` is `cpuDelta` between them. */
    const cpuMarks = (api = APIS.chat) => {
      let a;
      let b;
      return {
        onMark: (m) => {
          if (m === 'start') a = cpuSnap(pids(api));
          else b = cpuSnap(pids(api));
        },
        delta: (requests, override) => (a && b ? cpuDelta(a, b, requests, override) : undefined),
      };
    };
    /** Over a peer's rounds, the median of: µs (and kernel µs) per request and % of a core per process, and other load on the VM. */
    const cpuOf = (runs) => {
      const agg = (f) => median(runs.map(f));
      return {
        us: (k) => agg((r) => r.cpu?.usPerReq[k] ?? NaN),
        sysUs: (k) => agg((r) => r.cpu?.sysUsPerReq[k] ?? NaN),
        pct: (k) => agg((r) => r.cpu?.pctCore[k] ?? NaN),
        other: agg((r) => r.cpu?.otherPct ?? NaN),
      };
    };
    const has = (p) => peers.includes(p);
    /** A table row's cells: `f(peer)` for each peer. */
    const cells = (f) => Object.fromEntries(peers.map((p) => [p, f(p)]));
    /** `f(peer)` for each peer, joined with ` / `. */
    const list = (f) => peers.map((p) => f(p)).join(' / ');
    const cpuCell = (peer, S) => {
      const hop = hopOf(peer);
      const parts = [];
      if (hop) parts.push(`${PEER_LABEL[hop]} ${fmt1(S[peer].us(hop))} µs (sys ${fmt1(S[peer].sysUs(hop))})`);
      parts.push(`stub ${fmt1(S[peer].us('stub'))} µs`);
      return parts.join(' + ');
    };

    // ---- 1. added latency at a fixed rate (open loop) -------------------------------------------
    // Once per API of BENCH_APIS (chat first, with the rows' historical names; the others' rows
    // name their API). A peer that cannot carry an API is left out of its rows (apiSkipped).
    if (phases.has('latency'))
      for (const apiName of cfg.apis) {
        const API = APIS[apiName];
        const apiBody = apiName === 'chat' ? body : API.body(TRAFFIC_MAX_TOKENS);
        const skippedHere = apiSkipped[apiName];
        const peers = cfg.peers.filter((p) => !skippedHere[p]);
        const has = (p) => peers.includes(p);
        const cells = (f) => Object.fromEntries(cfg.peers.map((p) => [p, skippedHere[p] ? `n/a (${skippedHere[p]})` : f(p)]));
        const list = (f) => peers.map((p) => f(p)).join(' / ');
        const tag = apiName === 'chat' ? '' : ` — ${API.label}`;
        const t0 = performance.now();
        const per = Object.fromEntries(peers.map((p) => [p, []]));
        await eachRun(async (round, peer, warm) => {
          if (skippedHere[peer]) return;
          const url = urlOf(peer, API);
          const u = new URL(url);
          log(
            `latency${tag}: round ${round + 1}/${cfg.rounds}, ${peer}: ${cfg.rate} req/s open loop, ${warm} s warm-up + ${cfg.openSecs} s`,
          );
          const cpu = cpuMarks(API);
          const res = await loadgen.run(
            {
              kind: 'open',
              host: u.hostname,
              port: Number(u.port),
              req: chatRequest(url, apiBody, headersOf(peer, API), API).toString('base64'),
              rate: cfg.rate,
              warmupMs: warm * 1000,
              durationMs: cfg.openSecs * 1000,
              maxConns: cfg.maxConns,
              expectStatus: 200,
            },
            cpu.onMark,
          );
          res.cpu = cpu.delta(res.completed);
          per[peer].push(res);
          const nErr = errCount(res) + (res.requests - res.completed);
          if (nErr > 0)
            failures.push(`latency${tag} ${peer} round ${round + 1}: ${nErr} failed requests (${res.errors.first.join('; ')}; ${res.why})`);
          log(
            `  p50 ${fmt3(res.latency.p50)} ms, p99 ${fmt3(res.latency.p99)} ms, ${fmtInt(res.achievedRate)} req/s, ${nErr} errors; other load on the VM ${fmt1(res.cpu?.otherPct)}% of a core`,
          );
        });
        raw[apiName === 'chat' ? 'latency' : `latency_${apiName}`] = per;
        // Over the rounds (equal-sized): the median of the per-round percentiles.
        const S = {};
        for (const p of peers) {
          const agg = (f) => median(per[p].map(f));
          S[p] = {
            p50: agg((r) => r.latency.p50),
            p99: agg((r) => r.latency.p99),
            p999: agg((r) => r.latency.p999),
            max: Math.max(...per[p].map((r) => r.latency.max)),
            i99: agg((r) => r.latencyFromIntended.p99),
            rate: agg((r) => r.achievedRate),
            errors: per[p].reduce((x, r) => x + errCount(r) + (r.requests - r.completed), 0),
            n: per[p].reduce((x, r) => x + r.completed, 0),
            lagP99: Math.max(...per[p].map((r) => r.scheduleLag.p99)),
            conns: Math.max(...per[p].map((r) => r.maxConnections)),
            stallEpisodes: per[p].reduce((x, r) => x + r.stalls.episodes, 0),
            worstStallMs: Math.max(0, ...per[p].flatMap((r) => r.stalls.worst.map((w) => w.maxMs))),
            ...cpuOf(per[p]),
          };
        }
        const added = (p, q) => (has('direct') && has(p) ? S[p][q] - S.direct[q] : NaN);
        const summary = Object.fromEntries(
          peers.map((p) => [
            p,
            {
              p50: S[p].p50,
              p99: S[p].p99,
              p999: S[p].p999,
              max: S[p].max,
              intendedP99: S[p].i99,
              rate: S[p].rate,
              errors: S[p].errors,
              n: S[p].n,
              otherPct: S[p].other,
            },
          ]),
        );
        for (const p of peers) if (p !== 'direct') summary[p].addedMs = { p50: added(p, 'p50'), p99: added(p, 'p99') };
        raw[apiName === 'chat' ? 'latencySummary' : `latencySummary_${apiName}`] = summary;
        const addedCell = (q) =>
          has('direct')
            ? peers
                .filter((p) => p !== 'direct')
                .map((p) => `${PEER_LABEL[p]} ${signed3(added(p, q))} ms`)
                .join('; ')
            : '';
        const roundsNote = `${cfg.rounds} round(s) of ${cfg.openSecs} s per peer (order reversed every other round; ${cfg.warmupSecs} s warm-up in round 1, ${cfg.rewarmSecs} s after); median of the per-round percentiles`;
        const nList = list((p) => fmtInt(S[p].n));
        dataRows.push({
          metric: `latency p50 @ ${fmtInt(cfg.rate)} req/s (open loop)${tag}`,
          ...cells((p) => `${fmt3(S[p].p50)} ms`),
          diff: addedCell('p50'),
          goal: goalCell(added('router', 'p50'), cfg.goals.addedP50Ms, 'ms added (router)'),
          notes: `${nList} measured requests; ${roundsNote}; latency = dispatch → last response byte`,
        });
        dataRows.push({
          metric: `latency p99 @ ${fmtInt(cfg.rate)} req/s (open loop)${tag}`,
          ...cells((p) => `${fmt3(S[p].p99)} ms`),
          diff: addedCell('p99'),
          goal: goalCell(added('router', 'p99'), cfg.goals.addedP99Ms, 'ms added (router)'),
          notes: `p99.9 ${list((p) => fmt3(S[p].p999))} ms; max ${list((p) => fmt1(S[p].max))} ms; p99 from the intended send time (incl. generator lag) ${list((p) => fmt3(S[p].i99))} ms; generator schedule lag p99 ≤ ${fmt2(Math.max(...peers.map((p) => S[p].lagP99)))} ms; ≤ ${Math.max(...peers.map((p) => S[p].conns))} connections; stall episodes (requests > 10 ms, merged within 50 ms) ${list((p) => S[p].stallEpisodes)}, worst ${list((p) => fmt1(S[p].worstStallMs))} ms`,
        });
        dataRows.push({
          metric: `achieved rate / errors${tag}`,
          ...cells((p) => `${fmtInt(S[p].rate)} req/s, ${S[p].errors} errors`),
          diff: '',
          goal: '–',
          notes: `non-streaming POST ${API.path}, ${Buffer.byteLength(apiBody)}-byte body, ${apiName === 'responses' ? 'max_output_tokens' : 'max_tokens'} ${TRAFFIC_MAX_TOKENS} (policy cap ${REALISTIC_CAP}); ${apiName === 'chat' ? `${raw.sanity.routerBytes}-byte answers with prompt_filter_results` : `${API.upstream === 'anthropic' ? 'the Anthropic stub' : 'the OpenAI stub'}'s ${API.label} answers; the router's policy is chat's without the content-safety floor (${API.label} answers cannot carry Azure's annotations, so a floor refuses it, ADR 0034)`}${cfg.upstreamDelayMs > 0 ? `; upstream delay ${cfg.upstreamDelayMs} ms (x-stub-delay-ms)` : ''}`,
        });
        dataRows.push({
          metric: `CPU per request @ ${fmtInt(cfg.rate)} req/s${tag}`,
          ...cells((p) => cpuCell(p, S)),
          diff: has('router') ? `router ${fmt1(S.router.pct('router'))}% of a core` : '',
          goal: '–',
          notes: `/proc utime+stime (10 ms ticks), sys = kernel part; load generator ${list((p) => fmt1(S[p].us('loadgen')))} µs/req; other work on the VM during the windows ${list((p) => fmt1(S[p].other))}% of a core`,
        });
        phaseTimes[apiName === 'chat' ? 'latency' : `latency_${apiName}`] = (performance.now() - t0) / 1000;
      }

    // ---- 1b. added time to the first streamed byte -------------------------------------------------
    // Once per API of BENCH_APIS, as the latency phase.
    if (phases.has('ttfb'))
      for (const apiName of cfg.apis) {
        const API = APIS[apiName];
        const skippedHere = apiSkipped[apiName];
        const peers = cfg.peers;
        const has = (p) => peers.includes(p);
        const tag = apiName === 'chat' ? '' : ` — ${API.label}`;
        const t0 = performance.now();
        const streamBody = JSON.stringify({ ...JSON.parse(apiName === 'chat' ? body : API.body(TRAFFIC_MAX_TOKENS)), stream: true });
        const per = Object.fromEntries(peers.map((p) => [p, []]));
        const ttfbFailed = Object.fromEntries(Object.entries(skippedHere).map(([p, why]) => [p, `left out: ${why}`]));
        const gapMs = 2;
        await eachRun(async (round, peer) => {
          if (ttfbFailed[peer]) return;
          log(
            `ttfb${tag}: round ${round + 1}/${cfg.rounds}, ${peer}: ${cfg.ttfbRequests} streamed requests one at a time, ${gapMs} ms apart`,
          );
          let samples;
          try {
            // Unmeasured warm-up on the same path (JIT, pooled upstream connection).
            await ttfbRun(urlOf(peer, API), streamBody, headersOf(peer, API), Math.min(200, cfg.ttfbRequests), 0, API);
            samples = await ttfbRun(urlOf(peer, API), streamBody, headersOf(peer, API), cfg.ttfbRequests, gapMs, API);
          } catch (err) {
            // A peer that cannot stream the stub's answer is a result, not a benchmark failure
            // (the kars router and direct must stream: their failure is reported below).
            const why = errMsg(err).split('\n')[0];
            if (peer === 'router' || peer === 'direct') failures.push(`ttfb${tag} ${peer}: ${why}`);
            ttfbFailed[peer] = why;
            log(`  failed: ${why}`);
            return;
          }
          per[peer].push(stats(samples));
          log(`  first data byte p50 ${fmt3(stats(samples).p50)} ms, p99 ${fmt3(stats(samples).p99)} ms`);
        });
        const S = Object.fromEntries(
          peers.map((p) => [p, { p50: median(per[p].map((r) => r.p50)), p99: median(per[p].map((r) => r.p99)) }]),
        );
        const added = (p, q) => (has('direct') && has(p) ? S[p][q] - S.direct[q] : NaN);
        raw[apiName === 'chat' ? 'ttfb' : `ttfb_${apiName}`] = { per, summary: S, failed: ttfbFailed };
        dataRows.push({
          metric: `time to first streamed byte p50 / p99${tag}`,
          ...Object.fromEntries(
            peers.map((p) => [p, ttfbFailed[p] ? `failed: ${ttfbFailed[p]}` : `${fmt3(S[p].p50)} / ${fmt3(S[p].p99)} ms`]),
          ),
          diff: has('direct')
            ? peers
                .filter((p) => p !== 'direct')
                .map((p) => `${PEER_LABEL[p]} ${signed3(added(p, 'p50'))} / ${signed3(added(p, 'p99'))} ms`)
                .join('; ')
            : '',
          goal: goalCell(added('router', 'p99'), cfg.goals.ttfbAddedP99Ms, 'ms added p99 (router)'),
          notes: `${apiName === 'chat' ? "stream: true (the stub's Azure-shaped stream: prompt_filter_results first, so the router's content-safety gate judges the first event before anything is sent)" : `stream: true on POST ${API.path} (the stub's ${API.label} events, \`event:\` + \`data:\` frames)`}; from writing the request to the first \`data:\` byte; ${cfg.ttfbRequests} requests per peer per round, one at a time on one keep-alive connection, ${gapMs} ms apart, after an unmeasured warm-up; median over ${cfg.rounds} round(s) of each round's percentile`,
        });
        phaseTimes[apiName === 'chat' ? 'ttfb' : `ttfb_${apiName}`] = (performance.now() - t0) / 1000;
      }

    // ---- 2. throughput ratio (closed loop) -------------------------------------------------------
    if (phases.has('throughput')) {
      const t0 = performance.now();
      const per = Object.fromEntries(peers.map((p) => [p, []]));
      await eachRun(async (round, peer, warm) => {
        const url = url0[peer]();
        const u = new URL(url);
        log(
          `throughput: round ${round + 1}/${cfg.rounds}, ${peer}: closed loop, ${cfg.concurrency} connections, ${warm} s warm-up + ${cfg.closedSecs} s (${wrk ? 'wrk' : 'node'})`,
        );
        let res;
        const cpu = cpuMarks();
        if (wrk) {
          await runWrk(tmp, url, body, cfg.concurrency, warm, undefined, headersOf(peer));
          res = await runWrk(tmp, url, body, cfg.concurrency, cfg.closedSecs, cpu.onMark, headersOf(peer));
          res.cpu = cpu.delta(res.requests, { loadgen: res.loadgenCpuSec });
        } else {
          res = await loadgen.run(
            {
              kind: 'closed',
              host: u.hostname,
              port: Number(u.port),
              req: chatRequest(url, body, headersOf(peer)).toString('base64'),
              concurrency: cfg.concurrency,
              warmupMs: warm * 1000,
              durationMs: cfg.closedSecs * 1000,
              expectStatus: 200,
            },
            cpu.onMark,
          );
          res.cpu = cpu.delta(res.requests);
        }
        per[peer].push(res);
        const nErr = errCount(res);
        if (nErr > 0) failures.push(`throughput ${peer} round ${round + 1}: ${nErr} failed requests (${res.errors.first.join('; ')})`);
        log(
          `  ${fmtInt(res.throughput)} req/s, p50 ${fmt2(res.latency.p50)} ms, p99 ${fmt2(res.latency.p99)} ms, ${nErr} errors; other load on the VM ${fmt1(res.cpu?.otherPct)}% of a core`,
        );
      });
      raw.throughput = per;
      const S = {};
      for (const p of peers) {
        const agg = (f) => median(per[p].map(f));
        S[p] = {
          rps: agg((r) => r.throughput),
          p50: agg((r) => r.latency.p50),
          p99: agg((r) => r.latency.p99),
          errors: per[p].reduce((x, r) => x + errCount(r), 0),
          ...cpuOf(per[p]),
        };
      }
      const ratio = (p) => (has('direct') && has(p) ? S[p].rps / S.direct.rps : NaN);
      raw.throughputSummary = {
        ...Object.fromEntries(
          peers.map((p) => [p, { rps: S[p].rps, p50: S[p].p50, p99: S[p].p99, errors: S[p].errors, otherPct: S[p].other }]),
        ),
        ratios: Object.fromEntries(peers.filter((p) => p !== 'direct').map((p) => [p, ratio(p)])),
      };
      dataRows.push({
        metric: `max throughput (closed loop, ${cfg.concurrency} connections)`,
        ...cells((p) => `${fmtInt(S[p].rps)} req/s`),
        diff: has('direct')
          ? peers
              .filter((p) => p !== 'direct')
              .map((p) => `${PEER_LABEL[p]} ${fmt2(ratio(p))}×`)
              .join('; ')
          : '',
        goal: goalCell(ratio('router'), cfg.goals.throughputRatio, '(router/direct)', 'ge'),
        notes: `${closedGen}; ${cfg.rounds} round(s) × ${cfg.closedSecs} s per peer (order reversed every other round), median; errors ${list((p) => S[p].errors)}${cfg.upstreamDelayMs > 0 ? `; upstream delay ${cfg.upstreamDelayMs} ms (x-stub-delay-ms)` : '; upstream answers at once (BENCH_UPSTREAM_DELAY_MS=0)'}`,
      });
      const vs = (peer) => (has(peer) && has('router') ? S.router.rps / S[peer].rps : NaN);
      raw.throughputSummary.routerOverNginx = vs('nginx');
      raw.throughputSummary.routerOverPortkey = vs('portkey');
      dataRows.push({
        metric: 'router throughput ÷ nginx',
        ...cells((p) => (p === 'router' && has('nginx') ? `${fmt2(vs('nginx'))}×` : '')),
        diff: '',
        goal: goalCell(vs('nginx'), cfg.goals.nginxRatio, '× nginx', 'ge'),
        notes: has('nginx')
          ? `nginx: plain reverse proxy, one process, upstream keep-alive`
          : `nginx skipped: ${cfg.skipped.find((m) => m.startsWith('nginx')) ?? 'not in BENCH_PEERS'}`,
      });
      dataRows.push({
        metric: 'router throughput ÷ Portkey',
        ...cells((p) => (p === 'router' && has('portkey') ? `${fmt2(vs('portkey'))}×` : '')),
        diff: '',
        goal: goalCell(vs('portkey'), cfg.goals.portkeyRatio, '× Portkey', 'ge'),
        notes: has('portkey')
          ? `Portkey AI gateway ${portkeyPkg.version} (node build/start-server.js --headless, NODE_ENV=production), provider openai with the stub as x-portkey-custom-host; no policy`
          : `Portkey skipped: ${cfg.skipped.find((m) => m.startsWith('portkey')) ?? 'not in BENCH_PEERS'}`,
      });
      dataRows.push({
        metric: 'closed-loop latency p50 / p99',
        ...cells((p) => `${fmt2(S[p].p50)} / ${fmt2(S[p].p99)} ms`),
        diff: '',
        goal: '–',
        notes: 'Little’s law: p50 ≈ connections ÷ throughput',
      });
      dataRows.push({
        metric: 'CPU per request at max throughput',
        ...cells((p) => cpuCell(p, S)),
        diff: has('router') ? `router alone ≈ ${fmtInt(1e6 / S.router.us('router'))} req/s per core` : '',
        goal: '–',
        notes: `% of one core used (200% = both): ${peers
          .map(
            (p) =>
              `${p}: ${[hopOf(p), 'stub', 'loadgen']
                .filter(Boolean)
                .map((k) => `${k} ${fmt1(S[p].pct(k))}%`)
                .join(', ')}`,
          )
          .join('; ')}; other work on the VM ${list((p) => fmt1(S[p].other))}%`,
      });
      phaseTimes.throughput = (performance.now() - t0) / 1000;
    }

    if (phases.has('latency') || phases.has('throughput')) {
      const rss = {
        stub: procRssMb(stub.pid),
        proxy: proxy ? procRssMb(proxy.pid) : NaN,
        nginx: nginx ? procRssMb(nginx.pid) : NaN,
        portkey: portkey ? procRssMb(portkey.pid) : NaN,
        bare: bare ? procRssMb(bare.pid) : NaN,
        router: procRssMb(router.pid),
      };
      raw.rssAfterLoadMb = rss;
      dataRows.push({
        metric: 'RSS after the load phases',
        ...Object.fromEntries(peers.map((p) => [p, `${fmt1(p === 'direct' ? rss.stub : rss[p])} MB`])),
        diff: '',
        goal: '–',
        notes: `VmRSS of the process doing the hop (direct: the stub itself); the router is the full \`kars\` CLI process`,
      });
    }

    // ---- 4a. ConfigMap volume swap → enforcement -------------------------------------------------
    if (phases.has('dir')) {
      const t0 = performance.now();
      checkChildren();
      log(`dir: ${cfg.changes} ..data symlink swaps, probe every ${cfg.probeMs} ms`);
      raw.dir = await reloadPhase({
        cfg,
        prober: new Prober(router.url, chatBody(PROBE_TOKENS), cfg.probeMs),
        currentCap: REALISTIC_CAP,
        change: async (cap) => ({ t: mount.write(compiled(cap).body) }),
        failures,
        label: 'dir',
        checkChildren,
      });
      const s = raw.dir.stats;
      ctlRows.push({
        metric: '--policy-dir: ..data swap → enforced p50 / p99',
        display: `${fmt1(s.p50)} / ${fmt1(s.p99)} ms`,
        goal: '–',
        notes: `${s.n} of ${cfg.changes} changes (per-request cap ${CAP_HIGH} ↔ ${CAP_LOW}, random 50–250 ms apart): from the atomic rename of ..data until the first probe answered with the new decision; max ${fmt1(s.max)} ms, min ${fmt1(s.min)} ms; probe every ${cfg.probeMs} ms (resolution ≈ interval + probe RTT ${fmt2(raw.dir.probeRtt.p50)} ms); ${raw.dir.samplesMs.filter((x) => x < 250).length} within 250 ms (fs.watch), ${raw.dir.samplesMs.filter((x) => x >= 250).length} later (the 500 ms mtime poll); ${raw.dir.flipBacks} probes saw the old decision after the new one`,
      });
      phaseTimes.dir = (performance.now() - t0) / 1000;
    }
    if (router) {
      await router.stop();
      raw.routerDirStderr = {
        warn: router.stderr.warn,
        error: router.stderr.error,
        fatal: router.stderr.fatal,
        firstErrors: router.stderr.firstErrors,
      };
      router = undefined;
    }

    // ---- 4b. ConfigMap PUT through the API → enforcement -----------------------------------------
    if (phases.has('api')) {
      const t0 = performance.now();
      const dataDir = join(tmp, 'apiserver');
      mkdirSync(dataDir);
      srv = await startChild('kars apiserver', [KARS, 'apiserver', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        nodeArgs: splitArgs(process.env.BENCH_SERVER_NODE_ARGS),
      });
      const kubeconfig = srv.kubeconfig ?? join(dataDir, 'kubeconfig');
      api = httpsJsonClient(
        srv.url,
        readFileSync(join(dataDir, 'pki', 'ca.crt'), 'utf8'),
        readFileSync(join(dataDir, 'token'), 'utf8').trim(),
        { maxSockets: 4 },
      );
      log(`api: kars apiserver (pid ${srv.pid}) at ${srv.url}; applying deploy/crds/all.yaml`);
      const YAML = (await import('yaml')).default;
      const crds = YAML.parseAllDocuments(readFileSync(join(ROOT, 'deploy/crds/all.yaml'), 'utf8'))
        .map((d) => d.toJSON())
        .filter((d) => d?.kind === 'CustomResourceDefinition');
      for (const crd of crds)
        expectStatus(
          await api.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd),
          [201, 409],
          `create CRD ${crd.metadata.name}`,
        );
      expectStatus(
        await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
        [201, 409],
        `create namespace ${NS}`,
      );
      const sbPath = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`;
      for (let i = 0; ; i++) {
        const r = await api.request('POST', sbPath, {
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'KarsSandbox',
          metadata: { name: SANDBOX },
          spec: { inferenceRef: { name: POLICY } },
        });
        if (r.status === 201 || r.status === 409) break;
        if (r.status !== 404 || i > 100) throw new Error(`create KarsSandbox: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
        await sleep(100);
      }
      const cm = compiled(CAP_HIGH).configMap;
      const cmPath = `/api/v1/namespaces/${NS}/configmaps`;
      let rv = expectStatus(await api.request('POST', cmPath, cm), [201], `create ConfigMap ${cm.metadata.name}`).metadata.resourceVersion;
      router = await startChild(
        'router (api)',
        [
          KARS,
          'router',
          '--kubeconfig',
          kubeconfig,
          '--sandbox',
          SANDBOX,
          '--namespace',
          NS,
          '--listen',
          '127.0.0.1:0',
          '--upstream',
          stub.url,
        ],
        { nodeArgs: splitArgs(process.env.BENCH_ROUTER_NODE_ARGS) },
      );
      log(`api: router (pid ${router.pid}) at ${router.url}, watching ${NS}/${SANDBOX} and its ConfigMaps`);
      const deadline = Date.now() + 30_000;
      for (;;) {
        checkChildren();
        const over = await oneRequest(router.url, chatBody(CAP_HIGH * 2)).catch(() => ({ status: 0 }));
        if (over.status === 429) break;
        if (Date.now() > deadline)
          throw new Error(
            `api: the router did not enforce the ConfigMap's policy within 30 s (max_tokens ${CAP_HIGH * 2} → ${over.status})`,
          );
        await sleep(50);
      }
      const putSend = [];
      raw.api = await reloadPhase({
        cfg,
        prober: new Prober(router.url, chatBody(PROBE_TOKENS), cfg.probeMs),
        currentCap: CAP_HIGH,
        change: async (cap) => {
          const next = compiled(cap).configMap;
          next.metadata.resourceVersion = rv;
          const tSend = performance.now();
          const o = expectStatus(await api.request('PUT', `${cmPath}/${next.metadata.name}`, next), [200], 'update ConfigMap');
          const t = performance.now();
          putSend.push(t - tSend);
          rv = o.metadata.resourceVersion;
          return { t, tSend };
        },
        failures,
        label: 'api',
        checkChildren,
      });
      raw.api.putMs = stats(putSend);
      const s = raw.api.stats;
      const ss = raw.api.statsFromSend;
      ctlRows.push({
        metric: 'API: ConfigMap PUT response → enforced p50 / p99',
        display: `${fmt1(s.p50)} / ${fmt1(s.p99)} ms`,
        goal: '–',
        notes: `${s.n} of ${cfg.changes} PUTs of inferencepolicy-${POLICY}-profile (compiled with compileInferencePolicy, cap ${CAP_HIGH} ↔ ${CAP_LOW}, random 50–250 ms apart) on kars apiserver, router with --kubeconfig (watch on KarsSandbox + managed ConfigMaps); max ${fmt1(s.max)} ms, min ${fmt1(s.min)} ms (negative = enforced before the PUT response arrived); from the PUT's send: p50 ${fmt1(ss.p50)} / p99 ${fmt1(ss.p99)} ms; PUT itself p50 ${fmt1(raw.api.putMs.p50)} ms; ${raw.api.flipBacks} probes saw the old decision after the new one`,
      });
      phaseTimes.api = (performance.now() - t0) / 1000;
    }
    checkChildren();
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    loadgen?.stop();
    api?.close();
    for (const c of [router, ...Object.values(apiRouters), bare, proxy, nginx, portkey, srv, stub, anthropicStub]) {
      if (!c) continue;
      if (c.died && !failures.some((f) => f.includes(c.died.split('\n')[0]))) failures.push(c.died);
      await c.stop();
      const errors = c.stderr.error + (c.stderr.fatal ?? 0); // pino error (50) and fatal (60) lines
      if (errors > 0) failures.push(`${c.label} logged ${errors} error(s): ${c.stderr.firstErrors.join(' | ')}`);
    }
    removeTempDir(tmp, '');
  }

  // ---- report ---------------------------------------------------------------------------------
  raw.loadavgEnd = os.loadavg();
  const runtimeSec = (performance.now() - tStart) / 1000;
  const la = (a) => a.map((x) => x.toFixed(2)).join(' ');
  const lines = [
    `## kars router benchmark${quick ? ' (quick)' : ''}`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load average ${la(raw.loadavgStart)} at start, ${la(raw.loadavgEnd)} at end · runtime ${fmt1(runtimeSec)} s (${Object.entries(
      phaseTimes,
    )
      .map(([k, v]) => `${k} ${fmt1(v)} s`)
      .join(', ')})`,
    ``,
    `Router build: packages/router/dist sha256 ${build.distSha256}… (newest file ${build.newestMtime}). Load generators: open loop — ${openGen}; closed loop — ${closedGen}. Stub, pass-through proxy, router, load generator (and apiserver) are separate processes sharing the same ${os.cpus().length} cores; "direct" sends the same requests to the stub itself.${nginxBin ? ` nginx ${nginxBin.version} (Debian package).` : ''}${portkeyPkg ? ` Portkey AI gateway ${portkeyPkg.version} from ${PORTKEY_DIR}.` : ''}${cfg.skipped.length ? ` Skipped peers: ${cfg.skipped.join('; ')}.` : ''}`,
  ];
  if (dataRows.length) {
    lines.push(
      '',
      `| metric | ${cfg.peers.map((p) => PEER_HEAD[p]).join(' | ')} | vs direct | goal | notes |`,
      `|---|${cfg.peers.map(() => '---|').join('')}---|---|---|`,
      ...dataRows.map((m) => mdRow([m.metric, ...cfg.peers.map((p) => m[p] ?? ''), m.diff, m.goal, m.notes])),
    );
  }
  if (ctlRows.length) {
    lines.push(
      '',
      `| metric | value | goal | notes |`,
      `|---|---|---|---|`,
      ...ctlRows.map((m) => mdRow([m.metric, m.display, m.goal, m.notes])),
    );
  }
  return finishRun('router', {
    lines,
    failures,
    footer: `Shared ${os.cpus().length}-core machine: quote medians over several runs, and the added latency / ratio rather than absolute numbers.`,
    config: cfg,
    runtimeSec,
    json: {
      loadGenerators: { open: openGen, closed: closedGen },
      routerBuild: build,
      phaseTimes,
      rows: { dataPlane: dataRows, controlPlane: ctlRows },
      raw,
    },
    markdown: true,
  });
}

/**
 * Change the policy `cfg.changes` times, alternating the per-request cap between CAP_LOW and
 * CAP_HIGH, and time each change until a probe (max_tokens PROBE_TOKENS) gets the new decision.
 * `change(cap)` makes the change and returns `{ t, tSend? }` (performance.now() when it took effect
 * from the writer's point of view, and when it was sent).
 */
async function reloadPhase({ cfg, prober, currentCap, change, failures, label, checkChildren }) {
  const lat = [];
  const latFromSend = [];
  let flipBacks = 0;
  let missed = 0;
  let cap = currentCap;
  prober.start();
  // Warm-up: wait until probes see the current decision.
  const want = (c) => (PROBE_TOKENS > c ? 429 : 200);
  const ok0 = await prober.waitFor((r) => r.status === want(cap), cfg.changeTimeoutMs);
  if (!ok0) {
    prober.stop();
    throw new Error(`${label}: probes never saw the initial decision (${want(cap)})`);
  }
  await sleep(100);
  for (let i = 0; i < cfg.changes; i++) {
    checkChildren();
    cap = cap === CAP_LOW ? CAP_HIGH : CAP_LOW;
    const expect = want(cap);
    const idx0 = prober.results.length;
    const { t, tSend } = await change(cap);
    // A probe answered before the change was made cannot carry the new decision. With the API the
    // router may enforce before the PUT response is read, so look at what arrived meanwhile too.
    const pred = (x) => x.status === expect && x.recvT > (tSend ?? t);
    const r = prober.results.slice(idx0).find(pred) ?? (await prober.waitFor(pred, cfg.changeTimeoutMs));
    if (!r) {
      missed++;
      failures.push(`${label}: change ${i + 1} (cap → ${cap}) not enforced within ${cfg.changeTimeoutMs} ms`);
      continue;
    }
    lat.push(r.recvT - t);
    if (tSend !== undefined) latFromSend.push(r.recvT - tSend);
    const fromIdx = prober.results.indexOf(r);
    await sleep(50 + Math.random() * 200);
    // Every probe answered after the first new decision (until now) must carry the new decision.
    for (const x of prober.results.slice(fromIdx + 1)) if (x.status !== expect) flipBacks++;
  }
  prober.stop();
  const bad = prober.results.filter((x) => x.status !== 200 && x.status !== 429).length;
  if (bad > 0) failures.push(`${label}: ${bad} probes answered neither 200 nor 429`);
  if (prober.errors.length > 0) failures.push(`${label}: ${prober.errors.length} probe errors (${prober.errors.slice(0, 3).join('; ')})`);
  if (flipBacks > 0) failures.push(`${label}: ${flipBacks} probes saw the old decision after the new one had been enforced`);
  const rtt = stats(prober.results.map((x) => x.recvT - x.sendT));
  return {
    stats: stats(lat),
    statsFromSend: stats(latFromSend),
    samplesMs: lat,
    samplesFromSendMs: latFromSend,
    missed,
    flipBacks,
    probes: prober.results.length,
    probeRtt: rtt,
  };
}

/**
 * Time the router's decision path in process, with the compiled modules the router runs and the
 * policy parsed as the router parses it. Two variants: the decisions alone (request and response
 * already parsed), and the decisions plus the JSON parsing the handler does for them.
 */
async function decisionPhase(cfg, policyBody) {
  const { TokenBudgetTracker } = await import(dist('router', 'inference/budget.js'));
  const { decideHead, decideRequest, judgeAnswer, settleTokens } = await import(dist('router', 'inference/pipeline.js'));
  const { usageTotal } = await import(dist('router', 'inference/sse.js'));
  const { parseInferenceBody, NO_CAPABILITIES } = await import(dist('policy-compiler', 'index.js'));
  const { PolicyState } = await import(dist('router', 'state.js'));

  const parsed = parseInferenceBody(policyBody, NO_CAPABILITIES);
  if (!parsed.ok) throw new Error(`parseInferenceBody: ${parsed.error}`);
  const state = new PolicyState();
  state.setInference({ kind: 'loaded', value: parsed.rules, digest: 'sha256:bench', source: 'bench' });
  const budget = new TokenBudgetTracker();
  const reqRaw = Buffer.from(chatBody(TRAFFIC_MAX_TOKENS));
  const respRaw = Buffer.from(STUB_RESPONSE);
  const respDoc0 = JSON.parse(respRaw.toString('utf8'));
  const ctx = { basePath: '', defaultDailyTokens: null, guardrailConfigured: false };
  const route = { kind: 'openai', query: '' };

  /**
   * One request through the inference pipeline (inference/pipeline.ts), as the proxy runs it:
   * snapshot, head checks, strict parse + limits + re-serialisation + route plan, budget reserve,
   * the floor's verdict on the answer, settle. 0 = allowed.
   */
  const decide = (respDoc) => {
    const rules = state.current().inference;
    if (decideHead('POST', undefined, 'sb') !== undefined) return 1;
    const d = decideRequest(reqRaw, route, rules, ctx);
    if (d.kind !== 'forward') return 2;
    const r = budget.reserve('sb', d.reserve.caps, d.reserve.tokens);
    if (!r.ok) return 3;
    const blocked = judgeAnswer(200, respDoc, d.floor);
    r.reservation.settle(settleTokens({ status: 200, usage: usageTotal(respDoc), bytes: respRaw.length }, d.promptBytes));
    if (blocked !== undefined) return 4;
    return d.candidates.length === 2 ? 0 : 5;
  };
  const pure = () => decide(respDoc0);
  const withParse = () => decide(JSON.parse(Buffer.concat([respRaw], respRaw.length).toString('utf8')));
  if (pure() !== 0 || withParse() !== 0) throw new Error('decision phase: the typical request was not allowed');

  const time = (fn, iters) => {
    let acc = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) acc += fn();
    const ns = Number(process.hrtime.bigint() - t0);
    if (acc !== 0) throw new Error('decision phase: a decision changed during the run');
    return ns / iters / 1000;
  };
  const runSet = (fn, iters) => {
    time(fn, Math.max(1000, Math.round(iters / 10)));
    const us = [];
    for (let r = 0; r < cfg.decisionRuns; r++) us.push(time(fn, iters));
    const s = stats(us);
    return { iters, runsUs: us, medianUs: s.p50, minUs: s.min, maxUs: s.max };
  };
  const parseIters = Math.max(1000, Math.round(cfg.decisionIters / 5));
  return {
    pure: runSet(pure, cfg.decisionIters),
    withParse: runSet(withParse, parseIters),
    reqBytes: reqRaw.length,
    respBytes: respRaw.length,
  };
}

const mode = process.argv[2];
if (mode === '--proxy') {
  proxyMain(process.argv[3], process.argv[4]).catch((e) => {
    console.error(e instanceof Error ? e.stack : String(e));
    process.exit(1);
  });
} else if (mode === '--stub') {
  stubMain(process.argv[3]).catch((e) => {
    console.error(e instanceof Error ? e.stack : String(e));
    process.exit(1);
  });
} else if (mode === '--loadgen') {
  loadgenMain();
} else {
  runMain(main);
}
