#!/usr/bin/env node
// Benchmark for `kars apiserver`: create/update throughput, watch fan-out, and RSS with many
// stored objects. The server runs as a separate child process so its RSS and CPU are measured
// apart from the load generator. See bench/README.md for what each number means.
//
//   npm run bench                          # full scale (build first, then run)
//   BENCH_SCALE=0.05 node bench/apiserver.mjs   # smoke test, < 1 min
//
// Env: BENCH_SCALE (default 1) scales every object/update count; BENCH_WATCHERS (default 50,
// not scaled), BENCH_CREATES, BENCH_UPDATES, BENCH_FANOUT_UPDATES, BENCH_RSS_OBJECTS override a
// single count; BENCH_SERVER_NODE_ARGS passes extra flags to the server's node (e.g.
// "--cpu-prof --cpu-prof-dir=/tmp/prof"); BENCH_KEEP=1 keeps the data dir.
// Phase 0 compares one fsync per write (--commit-batch 1) with group commit at concurrency 64:
// BENCH_GC_OPS (default 4000 × scale) creates and as many updates per round, BENCH_GC_ROUNDS
// (default 3) alternating rounds, each after BENCH_GC_WARMUP (default 1000) unmeasured creates and
// as many updates; BENCH_ONLY=groupcommit stops after it; BENCH_GC_MODES=group (or single) runs one
// mode only, e.g. to compare server builds or flags (no ratio row then); BENCH_GC_SETTLE_MS
// (default 2000) syncs and waits before each server starts. BENCH_GC_BEFORE=<dir of a built kars
// checkout> adds a third mode, "before": that checkout's apiserver (e.g. the last commit before
// group commit; bench/README.md says how to make one), with the ratio group / before.

import { existsSync, mkdtempSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import https from 'node:https';
import tls from 'node:tls';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import {
  cpuLine,
  envInt,
  expectStatus,
  finishRun,
  fmt1,
  fmt2,
  fmtInt,
  fsTypeOf,
  httpsJsonClient,
  log,
  mb,
  mdRow,
  nowUs,
  percentile,
  procCpu,
  procStatus,
  removeTempDir,
  runMain,
  runPool,
  selfCpuSec,
  sleep,
  startKarsApiserver,
} from './lib.mjs';

// ---------------------------------------------------------------------------------------------
// Watch worker (runs in a worker thread so parsing 500k events does not stall the update sender)
// ---------------------------------------------------------------------------------------------

function watchWorker() {
  const { url, ca, token, path, watchers, capacity, canaryName } = workerData;
  const u = new URL(url);
  const agent = new https.Agent({ ca, keepAlive: false, maxSockets: Infinity });
  const states = [];
  let expected = Infinity;
  let canaryReported = false;
  let doneReported = false;
  let lastEventUs = nowUs();
  let stallTimer;

  const checkProgress = () => {
    if (!canaryReported && states.every((s) => s.canary)) {
      canaryReported = true;
      parentPort.postMessage({ ev: 'canary' });
    }
    if (!doneReported && expected !== Infinity && states.every((s) => s.count >= expected)) finish('complete');
  };

  const finish = (why) => {
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
    for (const s of states) s.req.destroy();
    agent.destroy();
    parentPort.postMessage({ ev: 'done', why, summary, lat }, [lat.buffer]);
  };

  const onLine = (s, line, recvUs) => {
    let e;
    try {
      e = JSON.parse(line);
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
    const s = {
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
        res.on('data', (chunk) => {
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

  parentPort.on('message', (m) => {
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

// ---------------------------------------------------------------------------------------------
// Main thread helpers
// ---------------------------------------------------------------------------------------------

function stats(latMs) {
  const s = Float64Array.from(latMs).sort();
  return { n: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99), max: s.length ? s[s.length - 1] : NaN };
}

/** Server CPU time (user+system) in seconds, from /proc/<pid>/stat (throws if the server is gone). */
const procCpuSec = (pid) => procCpu(pid).total;
const clientCpuSec = selfCpuSec;

/** Start `kars apiserver` as a child process; resolves once it prints its listening URL. */
async function startServer(dataDir, historyWindow) {
  const srv = await startKarsApiserver(dataDir, ['--history-window', String(historyWindow)]);
  srv.stderrTail = srv.stderr.tail;
  return srv;
}

/**
 * A cheap load generator for the group-commit phase: `conns` keep-alive TLS connections speaking
 * raw HTTP/1.1 (request bytes built by hand, responses framed by Content-Length), so the
 * benchmark process spends far less CPU per request than with `node:https` and does not compete
 * with the server for the shared cores. Same interface as {@link httpsJsonClient}. A request waits for
 * a free connection; the server must answer with Content-Length (kars apiserver always does).
 */
async function makeRawClient(url, ca, token, conns) {
  const u = new URL(url);
  const head = (method, path, len) =>
    `${method} ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nAccept: application/json\r\n` +
    (len === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${len}\r\n\r\n`);
  const free = [];
  const waiting = [];
  const all = [];
  const open = () =>
    new Promise((resolve, reject) => {
      const sock = tls.connect({ host: u.hostname, port: Number(u.port), ca, ALPNProtocols: ['http/1.1'] }, () => resolve(c));
      const c = { sock, buf: Buffer.alloc(0), pending: undefined };
      sock.setNoDelay(true);
      sock.on('error', (err) => {
        c.pending?.reject(err);
        c.pending = undefined;
        reject(err);
      });
      sock.on('close', () => {
        c.pending?.reject(new Error('connection closed'));
        c.pending = undefined;
      });
      sock.on('data', (chunk) => {
        c.buf = c.buf.length === 0 ? chunk : Buffer.concat([c.buf, chunk]);
        const p = c.pending;
        if (!p) return;
        const end = c.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const headText = c.buf.toString('latin1', 0, end);
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(headText);
        if (!m) {
          p.reject(new Error(`response without content-length: ${headText.slice(0, 200)}`));
          c.pending = undefined;
          sock.destroy();
          return;
        }
        const total = end + 4 + Number(m[1]);
        if (c.buf.length < total) return;
        const status = Number(headText.slice(9, 12));
        const text = c.buf.toString('utf8', end + 4, total);
        c.buf = c.buf.subarray(total);
        c.pending = undefined;
        release(c);
        p.resolve({ status, text });
      });
      all.push(c);
    });
  const release = (c) => {
    const w = waiting.shift();
    if (w) w(c);
    else free.push(c);
  };
  for (let i = 0; i < conns; i++) free.push(await open());
  function request(method, path, body) {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const send = (c) => {
        c.pending = { resolve, reject };
        const bytes = payload === undefined ? head(method, path) : head(method, path, Buffer.byteLength(payload)) + payload;
        c.sock.write(bytes);
      };
      const c = free.pop();
      if (c) send(c);
      else waiting.push(send);
    });
  }
  return { request, close: () => all.forEach((c) => c.sock.destroy()) };
}

/** Throw unless the response has one of the expected statuses; returns the parsed body. */
/**
 * Like runPool, but worker w only ever touches objects j with j % concurrency === w, so
 * updates carrying a resourceVersion never race each other (no 409s from the benchmark itself).
 * `op(i, obj)` performs operation i on object index `obj`.
 */
async function runPartitioned(count, concurrency, objects, op) {
  const lat = new Float64Array(count);
  const errors = [];
  const t0 = performance.now();
  const worker = async (w) => {
    const owned = [];
    for (let j = w; j < objects; j += concurrency) owned.push(j);
    if (owned.length === 0) return;
    let k = 0;
    for (let i = w; i < count; i += concurrency) {
      const obj = owned[k++ % owned.length];
      const s = performance.now();
      try {
        await op(i, obj);
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err));
      }
      lat[i] = performance.now() - s;
    }
  };
  const workers = Math.min(concurrency, objects);
  if (workers < concurrency)
    throw new Error(`need at least ${concurrency} objects for ${concurrency}-way partitioned updates, have ${objects}`);
  await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  return { lat, wallMs: performance.now() - t0, errors };
}

// ---------------------------------------------------------------------------------------------
// Group commit: one fsync per write (--commit-batch 1) against group commit, side by side
// ---------------------------------------------------------------------------------------------

/**
 * Flush dirty pages and let the disk go quiet before each server starts, so a round does not
 * inherit the previous round's writeback (the rounds alternate modes, so without this each mode
 * pays for the other's writes). BENCH_GC_SETTLE_MS (default 2000; 0 turns it off).
 */
async function settleDisk(ms) {
  if (ms <= 0) return;
  spawnSync('sync');
  await new Promise((r) => setTimeout(r, ms));
}

/**
 * The `before` mode: kars apiserver as built from another checkout (BENCH_GC_BEFORE, e.g. a
 * worktree of the last commit before group commit), so "before" is the code as it was, not
 * today's code with `--commit-batch 1`. Undefined when the variable is unset.
 */
function beforeMode(tree) {
  if (!tree) return undefined;
  const bin = join(tree, 'apps/cli/bin/kars.js');
  if (!existsSync(bin)) throw new Error(`BENCH_GC_BEFORE=${tree}: no ${bin} (a built kars checkout is needed)`);
  const git = spawnSync('git', ['-C', tree, 'log', '-1', '--format=%h %cs'], { encoding: 'utf8' });
  const rev = git.status === 0 ? git.stdout.trim() : tree;
  return { key: 'before', label: `before group commit (build of \`${rev}\`)`, args: [], bin };
}

/**
 * Create and update throughput at concurrency `conc` against a fresh server per mode and round.
 * Modes alternate (A B A B …) so drift in the shared machine's load hits both alike; the table
 * gives per-mode medians over rounds, and the ratios group/one (and group/before with
 * BENCH_GC_BEFORE).
 */
async function groupCommitPhase(cfg, dataRoot, failures) {
  const modes = [
    beforeMode(cfg.gcBefore),
    { key: 'single', label: 'one fsync per write (`--commit-batch 1`)', args: ['--commit-batch', '1'] },
    { key: 'group', label: 'group commit (default `--commit-batch 256`)', args: [] },
  ].filter((m) => m && (m.key === 'before' || cfg.gcModes.includes(m.key)));
  const runs = { before: [], single: [], group: [] };
  const conc = cfg.gcConcurrency;
  for (let round = 0; round < cfg.gcRounds; round++) {
    for (const mode of modes) {
      const dir = join(dataRoot, `gc-${mode.key}-${round}`);
      log(
        `group commit ${round + 1}/${cfg.gcRounds}, ${mode.key}: ${cfg.gcWarmup} + ${cfg.gcWarmup} warm-up, ${cfg.gcOps} creates + ${cfg.gcOps} updates, concurrency ${conc}`,
      );
      await settleDisk(cfg.gcSettleMs);
      const srv = await startKarsApiserver(dir, mode.args, { bin: mode.bin });
      const client = await makeRawClient(srv.url, srv.ca, srv.token, conc);
      try {
        const { request } = client;
        expectStatus(
          await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'gc' } }),
          [201],
          'create namespace gc',
        );
        // Warm-up, unmeasured: creates, then updates of those objects, so the JIT has compiled
        // both paths before the measured window (a fresh server's first thousand writes cost
        // about twice the CPU of later ones).
        const warmRvs = [];
        const warm = await runPool(cfg.gcWarmup, conc, async (i) => {
          warmRvs[i] = expectStatus(
            await request('POST', '/api/v1/namespaces/gc/configmaps', {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `warm-${i}` },
              data: { i: String(i) },
            }),
            [201],
            `warm-up create ${i}`,
          ).metadata.resourceVersion;
        });
        const warmUp = await runPartitioned(cfg.gcWarmup, conc, cfg.gcWarmup, async (i, j) => {
          warmRvs[j] = expectStatus(
            await request('PUT', `/api/v1/namespaces/gc/configmaps/warm-${j}`, {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `warm-${j}`, namespace: 'gc', resourceVersion: warmRvs[j] },
              data: { i: String(j), u: String(i) },
            }),
            [200],
            `warm-up update warm-${j}`,
          ).metadata.resourceVersion;
        });
        warm.errors.push(...warmUp.errors);
        const rvs = new Array(cfg.gcOps);
        let cpu0 = procCpuSec(srv.pid);
        let cli0 = clientCpuSec();
        const cr = await runPool(cfg.gcOps, conc, async (i) => {
          const body = {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: `cm-${i}` },
            data: { index: String(i), payload: 'x'.repeat(64) },
          };
          rvs[i] = expectStatus(
            await request('POST', '/api/v1/namespaces/gc/configmaps', body),
            [201],
            `create cm-${i}`,
          ).metadata.resourceVersion;
        });
        const createCpu = procCpuSec(srv.pid) - cpu0;
        const createCli = clientCpuSec() - cli0;
        cpu0 = procCpuSec(srv.pid);
        cli0 = clientCpuSec();
        const up = await runPartitioned(cfg.gcOps, conc, cfg.gcOps, async (i, j) => {
          const body = {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: `cm-${j}`, namespace: 'gc', resourceVersion: rvs[j] },
            data: { index: String(j), update: String(i), payload: 'y'.repeat(64) },
          };
          rvs[j] = expectStatus(
            await request('PUT', `/api/v1/namespaces/gc/configmaps/cm-${j}`, body),
            [200],
            `update cm-${j}`,
          ).metadata.resourceVersion;
        });
        const updateCpu = procCpuSec(srv.pid) - cpu0;
        const updateCli = clientCpuSec() - cli0;
        for (const [what, r] of [
          ['create', cr],
          ['update', up],
        ])
          if (r.errors.length) failures.push(`group commit ${what} (${mode.key}): ${r.errors.length} failed (first: ${r.errors[0]})`);
        const row = (r, cpuSec, cliSec) => ({
          opsPerSec: cfg.gcOps / (r.wallMs / 1000),
          ...stats(r.lat),
          cpuMsPerOp: (cpuSec * 1000) / cfg.gcOps,
          clientCpuMsPerOp: (cliSec * 1000) / cfg.gcOps,
        });
        runs[mode.key].push({ create: row(cr, createCpu, createCli), update: row(up, updateCpu, updateCli) });
        log(
          `  ${mode.key}: create ${fmtInt(runs[mode.key].at(-1).create.opsPerSec)} ops/s, update ${fmtInt(runs[mode.key].at(-1).update.opsPerSec)} ops/s`,
        );
      } finally {
        client.close();
        await srv.stop();
      }
    }
  }
  const med = (xs) => {
    const s = Float64Array.from(xs).sort();
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const lines = [
    `### Group commit: create and update at concurrency ${conc} (${fmtInt(cfg.gcOps)} ops each after ${fmtInt(cfg.gcWarmup)} + ${fmtInt(cfg.gcWarmup)} unmeasured, median of ${cfg.gcRounds} alternating rounds, fresh server per round)`,
    '',
    '| op | mode | throughput | p50 | p99 | server CPU / op | load generator CPU / op | every round (ops/s) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const summary = {};
  for (const op of ['create', 'update']) {
    for (const mode of modes) {
      const rs = runs[mode.key].map((r) => r[op]);
      const m = {
        opsPerSec: med(rs.map((r) => r.opsPerSec)),
        p50: med(rs.map((r) => r.p50)),
        p99: med(rs.map((r) => r.p99)),
        cpuMsPerOp: med(rs.map((r) => r.cpuMsPerOp)),
        clientCpuMsPerOp: med(rs.map((r) => r.clientCpuMsPerOp)),
      };
      summary[`${op}/${mode.key}`] = m;
      lines.push(
        mdRow([
          op,
          mode.label,
          `${fmtInt(m.opsPerSec)} ops/s`,
          `${fmt2(m.p50)} ms`,
          `${fmt2(m.p99)} ms`,
          `${fmt2(m.cpuMsPerOp)} ms`,
          `${fmt2(m.clientCpuMsPerOp)} ms`,
          rs.map((r) => fmtInt(r.opsPerSec)).join(', '),
        ]),
      );
    }
    const b = summary[`${op}/group`];
    for (const [base, label] of [
      ['before', '**group / before**'],
      ['single', '**group / one**'],
    ]) {
      const a = summary[`${op}/${base}`];
      if (a && b)
        lines.push(
          mdRow([
            op,
            label,
            `**${fmt2(b.opsPerSec / a.opsPerSec)}×** (goal ≥ 5×)`,
            `${fmt2(b.p50 / a.p50)}×`,
            `${fmt2(b.p99 / a.p99)}× (goal ≤ 1×)`,
            `${fmt2(b.cpuMsPerOp / a.cpuMsPerOp)}×`,
            '',
            '',
          ]),
        );
    }
  }
  // What the two cores could serve at all at the measured CPU per operation (server + load
  // generator, both cores fully busy): when 5× the one-fsync throughput is above it, no batching
  // reaches 5× on this machine; only less CPU per write does.
  const cores = os.availableParallelism();
  const ceiling = (op) => {
    const g = summary[`${op}/group`];
    return g ? (cores * 1000) / (g.cpuMsPerOp + g.clientCpuMsPerOp) : NaN;
  };
  lines.push(
    '',
    `CPU ceiling of this machine (${cores} cores fully busy at group commit's server + load generator CPU per op): ` +
      ['create', 'update']
        .map((op) => {
          const five = ['before', 'single']
            .filter((k) => summary[`${op}/${k}`])
            .map(
              (k) =>
                `5× ${k === 'before' ? 'before' : 'one fsync per write'} would be ${fmtInt(5 * summary[`${op}/${k}`].opsPerSec)} ops/s`,
            );
          return `${op} ≤ ${fmtInt(ceiling(op))} ops/s` + (five.length ? ` (${five.join(', ')})` : '');
        })
        .join('; ') +
      '.',
  );
  return { lines, runs, summary };
}

// ---------------------------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------------------------

/** Thrown to stop after the group-commit phase (BENCH_ONLY=groupcommit). */
class SkipRest extends Error {}

async function main() {
  const tStart = performance.now();
  const scale = Number(process.env.BENCH_SCALE ?? '1');
  if (!(scale > 0)) throw new Error(`BENCH_SCALE must be > 0, got "${process.env.BENCH_SCALE}"`);
  const sc = (n, min) => Math.max(min, Math.round(n * scale));
  const CONC = 16;
  const RSS_CONC = 32;
  const NS_COUNT = 10;
  const cfg = {
    scale,
    creates: envInt('BENCH_CREATES', sc(2000, CONC)),
    updates: envInt('BENCH_UPDATES', sc(2000, CONC)),
    watchers: envInt('BENCH_WATCHERS', 50),
    fanoutUpdates: envInt('BENCH_FANOUT_UPDATES', sc(10_000, CONC)),
    rssObjects: envInt('BENCH_RSS_OBJECTS', sc(100_000, NS_COUNT)),
    concurrency: CONC,
    rssConcurrency: RSS_CONC,
    listLimit: 500,
    gcOps: envInt('BENCH_GC_OPS', sc(4000, 64)),
    gcRounds: envInt('BENCH_GC_ROUNDS', 3),
    gcWarmup: envInt('BENCH_GC_WARMUP', 1000),
    gcBefore: process.env.BENCH_GC_BEFORE || undefined,
    gcSettleMs: envInt('BENCH_GC_SETTLE_MS', 2000, { min: 0 }),
    gcModes: (process.env.BENCH_GC_MODES ?? 'single,group').split(','),
    gcConcurrency: 64,
    only: process.env.BENCH_ONLY ?? '',
  };
  cfg.historyWindow = Math.max(20_000, cfg.fanoutUpdates + 1000);
  if (cfg.creates < CONC) throw new Error(`BENCH_CREATES must be >= ${CONC}`);

  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-bench-'));
  const dataDir = join(dataRoot, 'apiserver');
  const fsType = fsTypeOf(dataRoot);
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir} (${fsType})`);

  const metrics = [];
  const raw = {};
  const add = (metric, value, unit, display, notes = '') => metrics.push({ metric, value, unit, display, notes });
  const failures = [];
  let srv;
  let client;
  let worker;
  let gc;

  try {
    // ---- 0. group commit, side by side --------------------------------------------------------
    gc = await groupCommitPhase(cfg, dataRoot, failures);
    raw.groupCommit = { runs: gc.runs, summary: gc.summary };
    if (cfg.only === 'groupcommit') throw new SkipRest();
    // ---- start ------------------------------------------------------------------------------
    const tBoot = performance.now();
    srv = await startServer(dataDir, cfg.historyWindow);
    const bootMs = performance.now() - tBoot;
    log(`server pid ${srv.pid} at ${srv.url} (started in ${bootMs.toFixed(0)} ms)`);
    client = httpsJsonClient(srv.url, srv.ca, srv.token, { maxSockets: RSS_CONC });
    const { request } = client;
    expectStatus(await request('GET', '/version'), [200], 'GET /version');
    await sleep(1000);
    const base = procStatus(srv.pid);
    add(
      'Server RSS at start (idle)',
      mb(base.rssKb),
      'MB',
      `${fmt1(mb(base.rssKb))} MB`,
      `child process VmRSS after 1 s idle; startup ${bootMs.toFixed(0)} ms (incl. PKI generation)`,
    );

    const cpuMark = () => ({ srv: procCpuSec(srv.pid), cli: clientCpuSec(), t: performance.now() });
    const cpuNote = (m0, ops) => {
      const s = procCpuSec(srv.pid) - m0.srv;
      const c = clientCpuSec() - m0.cli;
      const wall = (performance.now() - m0.t) / 1000;
      return {
        srvCpuSec: s,
        cliCpuSec: c,
        wallSec: wall,
        note: `server CPU ${fmt1(s)} s (${fmt2((s * 1000) / ops)} ms/op, ${Math.round((100 * s) / wall)}% of a core); client CPU ${fmt1(c)} s`,
      };
    };

    const NS = 'bench';
    expectStatus(
      await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
      [201, 409],
      'create namespace',
    );

    // ---- warm-up (unmeasured): JIT and connection setup, so phase 1 is not a cold start --------
    const WARM = Math.min(200, cfg.creates);
    expectStatus(
      await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'warmup' } }),
      [201, 409],
      'create namespace warmup',
    );
    const wu = await runPool(WARM, CONC, async (i) => {
      const o = expectStatus(
        await request('POST', '/api/v1/namespaces/warmup/configmaps', {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `w-${i}` },
          data: { i: String(i) },
        }),
        [201],
        `warm-up create w-${i}`,
      );
      expectStatus(
        await request('PUT', `/api/v1/namespaces/warmup/configmaps/w-${i}`, { ...o, data: { i: String(i), u: '1' } }),
        [200],
        `warm-up update w-${i}`,
      );
    });
    if (wu.errors.length) failures.push(`warm-up: ${wu.errors.length} failed (first: ${wu.errors[0]})`);

    // ---- 1. create throughput ---------------------------------------------------------------
    log(`1/4 create: ${cfg.creates} ConfigMaps, concurrency ${CONC}`);
    const rvs = new Array(cfg.creates);
    let m0 = cpuMark();
    const cr = await runPool(cfg.creates, CONC, async (i) => {
      const body = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${i}`, labels: { bench: 'true' } },
        data: { index: String(i), payload: 'x'.repeat(64) },
      };
      const o = expectStatus(await request('POST', `/api/v1/namespaces/${NS}/configmaps`, body), [201], `create cm-${i}`);
      rvs[i] = o.metadata.resourceVersion;
    });
    let cpu = cpuNote(m0, cfg.creates);
    let st = stats(cr.lat);
    raw.create = { ...st, wallMs: cr.wallMs, errors: cr.errors.length, ...cpu };
    add(
      'Create throughput',
      cfg.creates / (cr.wallMs / 1000),
      'ops/s',
      `${fmtInt(cfg.creates / (cr.wallMs / 1000))} ops/s`,
      `${fmtInt(cfg.creates)} POSTs, concurrency ${CONC}, HTTP/1.1 keep-alive; ${cpu.note}`,
    );
    add('Create latency p50 / p99', [st.p50, st.p99], 'ms', `${fmt2(st.p50)} / ${fmt2(st.p99)} ms`, `max ${fmt1(st.max)} ms`);
    if (cr.errors.length) failures.push(`create: ${cr.errors.length} failed (first: ${cr.errors[0]})`);

    // ---- 2. update throughput ---------------------------------------------------------------
    log(`2/4 update: ${cfg.updates} PUTs, concurrency ${CONC}`);
    m0 = cpuMark();
    const up = await runPartitioned(cfg.updates, CONC, cfg.creates, async (i, j) => {
      if (rvs[j] === undefined) throw new Error(`cm-${j} was not created`);
      const body = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${j}`, namespace: NS, labels: { bench: 'true' }, resourceVersion: rvs[j] },
        data: { index: String(j), update: String(i), payload: 'y'.repeat(64) },
      };
      const o = expectStatus(await request('PUT', `/api/v1/namespaces/${NS}/configmaps/cm-${j}`, body), [200], `update cm-${j}`);
      rvs[j] = o.metadata.resourceVersion;
    });
    cpu = cpuNote(m0, cfg.updates);
    st = stats(up.lat);
    raw.update = { ...st, wallMs: up.wallMs, errors: up.errors.length, ...cpu };
    add(
      'Update throughput',
      cfg.updates / (up.wallMs / 1000),
      'ops/s',
      `${fmtInt(cfg.updates / (up.wallMs / 1000))} ops/s`,
      `${fmtInt(cfg.updates)} PUTs with resourceVersion, concurrency ${CONC}; ${cpu.note}`,
    );
    add('Update latency p50 / p99', [st.p50, st.p99], 'ms', `${fmt2(st.p50)} / ${fmt2(st.p99)} ms`, `max ${fmt1(st.max)} ms`);
    if (up.errors.length) failures.push(`update: ${up.errors.length} failed (first: ${up.errors[0]})`);

    // ---- 3. watch fan-out -------------------------------------------------------------------
    log(`3/4 fan-out: ${cfg.watchers} watches, ${cfg.fanoutUpdates} updates, concurrency ${CONC}`);
    const canaryName = 'fanout-canary';
    const canary = expectStatus(
      await request('POST', `/api/v1/namespaces/${NS}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: canaryName },
        data: { canary: 'true' },
      }),
      [201],
      'create canary',
    );
    const startRv = expectStatus(await request('GET', `/api/v1/namespaces/${NS}/configmaps?limit=1`), [200], 'list for rv').metadata
      .resourceVersion;
    worker = new Worker(fileURLToPath(import.meta.url), {
      workerData: {
        url: srv.url,
        ca: srv.ca,
        token: srv.token,
        path: `/api/v1/namespaces/${NS}/configmaps?watch=true&resourceVersion=${startRv}&allowWatchBookmarks=true`,
        watchers: cfg.watchers,
        capacity: cfg.fanoutUpdates,
        canaryName,
      },
    });
    const workerMsgs = [];
    let workerWaiter;
    const workerError = new Promise((_, rej) => {
      worker.on('error', rej);
      worker.on('exit', (code) => rej(new Error(`watch worker exited early (code ${code})`)));
    });
    workerError.catch(() => undefined);
    worker.on('message', (m) => {
      workerMsgs.push(m);
      workerWaiter?.();
    });
    const waitWorker = async (ev, timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = workerMsgs.find((x) => x.ev === ev);
        if (m) return m;
        if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for watch worker "${ev}"`);
        await Promise.race([new Promise((r) => (workerWaiter = r)), sleep(200), workerError]);
      }
    };
    // One update of the canary (after startRv) proves every watch is subscribed and streaming.
    const tWatchOpen = performance.now();
    expectStatus(
      await request('PUT', `/api/v1/namespaces/${NS}/configmaps/${canaryName}`, { ...canary, data: { canary: 'ping' } }),
      [200],
      'update canary',
    );
    await waitWorker('canary', 30_000);
    const watchOpenMs = performance.now() - tWatchOpen;
    const rssWatches = procStatus(srv.pid);
    log(`  all ${cfg.watchers} watches streaming after ${watchOpenMs.toFixed(0)} ms; sending updates`);

    m0 = cpuMark();
    let firstSendUs = Infinity;
    const fo = await runPartitioned(cfg.fanoutUpdates, CONC, cfg.creates, async (i, j) => {
      const sentUs = nowUs();
      if (sentUs < firstSendUs) firstSendUs = sentUs;
      const body = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${j}`, namespace: NS, labels: { bench: 'true' }, resourceVersion: rvs[j] },
        data: { index: String(j), seq: String(i), sentUs: String(sentUs) },
      };
      const o = expectStatus(await request('PUT', `/api/v1/namespaces/${NS}/configmaps/cm-${j}`, body), [200], `fan-out update cm-${j}`);
      rvs[j] = o.metadata.resourceVersion;
    });
    const sendsOk = cfg.fanoutUpdates - fo.errors.length;
    worker.postMessage({ cmd: 'expect', n: sendsOk, stallMs: 15_000 });
    const done = await waitWorker('done', 600_000);
    cpu = cpuNote(m0, cfg.fanoutUpdates);
    const rssFanout = procStatus(srv.pid);
    await worker.terminate();
    worker = undefined;

    const sum = done.summary;
    const delivered = sum.reduce((a, s) => a + s.count, 0);
    const expectedTotal = cfg.watchers * sendsOk;
    const lastRecvUs = Math.max(...sum.map((s) => s.lastRecvUs));
    const complete = sum.filter((s) => s.count === sendsOk && s.outOfOrder === 0 && s.other === 0 && s.errors.length === 0).length;
    const outOfOrder = sum.reduce((a, s) => a + s.outOfOrder, 0);
    const fst = stats(Array.from(done.lat, (us) => us / 1000));
    const spanSec = (lastRecvUs - firstSendUs) / 1e6;
    raw.fanout = {
      watchers: cfg.watchers,
      updates: cfg.fanoutUpdates,
      updateErrors: fo.errors.length,
      updateWallMs: fo.wallMs,
      updateLatency: stats(fo.lat),
      delivered,
      expected: expectedTotal,
      outOfOrder,
      completeWatchers: complete,
      workerFinish: done.why,
      spanSec,
      latency: fst,
      watchOpenMs,
      rssWithWatchesKb: rssWatches.rssKb,
      rssAfterFanoutKb: rssFanout.rssKb,
      perWatcher: sum.map((s) => ({
        count: s.count,
        outOfOrder: s.outOfOrder,
        other: s.other,
        bookmarks: s.bookmarks,
        status: s.status,
        errors: s.errors,
        ended: s.ended,
      })),
      ...cpu,
    };
    const ust = raw.fanout.updateLatency;
    add(
      'Fan-out: updates sent',
      cfg.fanoutUpdates / (fo.wallMs / 1000),
      'ops/s',
      `${fmtInt(cfg.fanoutUpdates / (fo.wallMs / 1000))} ops/s`,
      `${fmtInt(cfg.fanoutUpdates)} PUTs (concurrency ${CONC}) while ${cfg.watchers} watches are open; PUT p50/p99 ${fmt2(ust.p50)} / ${fmt2(ust.p99)} ms`,
    );
    add(
      'Fan-out: events delivered',
      delivered,
      'events',
      `${fmtInt(delivered)} / ${fmtInt(expectedTotal)}`,
      delivered === expectedTotal
        ? 'all events delivered'
        : `**LOST ${fmtInt(expectedTotal - delivered)} EVENTS** (worker finished: ${done.why})`,
    );
    add(
      'Fan-out: delivered events/s',
      delivered / spanSec,
      'events/s',
      `${fmtInt(delivered / spanSec)} events/s`,
      `first send to last receive: ${fmt2(spanSec)} s; ${cpu.note}`,
    );
    add(
      'Fan-out: delivery latency p50 / p99',
      [fst.p50, fst.p99],
      'ms',
      `${fmt2(fst.p50)} / ${fmt2(fst.p99)} ms`,
      `receive time − client send time, per event per watcher; max ${fmt1(fst.max)} ms`,
    );
    add(
      'Fan-out: watchers complete & in order',
      complete,
      'watchers',
      `${complete} / ${cfg.watchers}`,
      complete === cfg.watchers
        ? `every watcher got all ${fmtInt(sendsOk)} events, strictly increasing resourceVersion`
        : `**${cfg.watchers - complete} watchers incomplete or out of order** (out-of-order events: ${outOfOrder})`,
    );
    add(
      'Server RSS with watches open',
      mb(rssFanout.rssKb),
      'MB',
      `${fmt1(mb(rssFanout.rssKb))} MB`,
      `after fan-out (${fmt1(mb(rssWatches.rssKb))} MB when the ${cfg.watchers} watches opened)`,
    );
    if (fo.errors.length) failures.push(`fan-out updates: ${fo.errors.length} failed (first: ${fo.errors[0]})`);
    if (delivered !== expectedTotal) failures.push(`fan-out: lost events: delivered ${delivered} of ${expectedTotal}`);
    if (complete !== cfg.watchers) {
      const bad = sum.find((s) => !(s.count === sendsOk && s.outOfOrder === 0 && s.other === 0 && s.errors.length === 0));
      failures.push(`fan-out: ${cfg.watchers - complete} watchers incomplete/out of order (e.g. ${JSON.stringify(bad)})`);
    }

    // ---- 4. RSS with many stored objects ----------------------------------------------------
    log(`4/4 rss: creating ${cfg.rssObjects} ConfigMaps over ${NS_COUNT} namespaces, concurrency ${RSS_CONC}`);
    for (let n = 0; n < NS_COUNT; n++) {
      expectStatus(
        await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `rss-${n}` } }),
        [201, 409],
        `create namespace rss-${n}`,
      );
    }
    const perNs = Math.ceil(cfg.rssObjects / NS_COUNT);
    let nextPct = 10;
    const tRss = performance.now();
    m0 = cpuMark();
    const rc = await runPool(
      cfg.rssObjects,
      RSS_CONC,
      async (i) => {
        const ns = `rss-${i % NS_COUNT}`;
        const name = `obj-${Math.floor(i / NS_COUNT)}`;
        const body = {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, labels: { app: 'bench', shard: String(i % NS_COUNT) } },
          data: { key: `value-${i}` },
        };
        expectStatus(await request('POST', `/api/v1/namespaces/${ns}/configmaps`, body), [201], `create ${ns}/${name}`);
      },
      (doneCount) => {
        if ((doneCount * 100) / cfg.rssObjects >= nextPct) {
          const secs = (performance.now() - tRss) / 1000;
          log(
            `  ${nextPct}% (${fmtInt(doneCount)}) in ${secs.toFixed(1)} s, ${fmtInt(doneCount / secs)} ops/s, server RSS ${fmt1(mb(procStatus(srv.pid).rssKb))} MB`,
          );
          nextPct += 10;
        }
      },
    );
    cpu = cpuNote(m0, cfg.rssObjects);
    st = stats(rc.lat);
    raw.rssCreate = { ...st, wallMs: rc.wallMs, errors: rc.errors.length, perNs, ...cpu };
    add(
      `Bulk create ${fmtInt(cfg.rssObjects)} objects`,
      cfg.rssObjects / (rc.wallMs / 1000),
      'ops/s',
      `${fmtInt(cfg.rssObjects / (rc.wallMs / 1000))} ops/s`,
      `${fmt1(rc.wallMs / 1000)} s total, ${NS_COUNT} namespaces, concurrency ${RSS_CONC}; p50/p99 ${fmt2(st.p50)} / ${fmt2(st.p99)} ms; ${cpu.note}`,
    );
    if (rc.errors.length) failures.push(`bulk create: ${rc.errors.length} failed (first: ${rc.errors[0]})`);

    await sleep(1000);
    const full = procStatus(srv.pid);
    const totalStored = WARM + cfg.creates + 1 + cfg.rssObjects;
    raw.rss = { baselineKb: base.rssKb, fullKb: full.rssKb, peakKb: full.hwmKb, storedConfigMaps: totalStored };
    add(
      `Server RSS with ${fmtInt(cfg.rssObjects)} objects stored`,
      mb(full.rssKb),
      'MB',
      `${fmt1(mb(full.rssKb))} MB`,
      `after 1 s idle; ${fmt2(full.rssKb / base.rssKb)}× baseline; peak (VmHWM) ${fmt1(mb(full.hwmKb))} MB; ${fmtInt(totalStored)} ConfigMaps in total`,
    );

    log(`  paginated list of all configmaps (limit=${cfg.listLimit})`);
    const pageMs = [];
    let items = 0;
    let cont = '';
    const tList = performance.now();
    m0 = cpuMark();
    for (;;) {
      const ps = performance.now();
      const path = `/api/v1/configmaps?limit=${cfg.listLimit}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const l = expectStatus(await request('GET', path), [200], 'paginated list');
      pageMs.push(performance.now() - ps);
      items += l.items.length;
      cont = l.metadata.continue ?? '';
      if (!cont) break;
      if (pageMs.length > 10 * Math.ceil(totalStored / cfg.listLimit) + 10) throw new Error('paginated list does not terminate');
    }
    const listMs = performance.now() - tList;
    cpu = cpuNote(m0, pageMs.length);
    const afterList = procStatus(srv.pid);
    const third = Math.max(1, Math.floor(pageMs.length / 10));
    const avg = (a) => a.reduce((x, y) => x + y, 0) / a.length;
    const firstPages = avg(pageMs.slice(0, third));
    const lastPages = avg(pageMs.slice(-third));
    raw.list = {
      items,
      pages: pageMs.length,
      totalMs: listMs,
      pageMs,
      firstTenthAvgMs: firstPages,
      lastTenthAvgMs: lastPages,
      rssAfterKb: afterList.rssKb,
      ...cpu,
    };
    add(
      `Full paginated list (limit=${cfg.listLimit})`,
      listMs,
      'ms',
      `${fmtInt(listMs)} ms`,
      `${fmtInt(items)} items in ${pageMs.length} pages (all namespaces); avg page: first tenth ${fmt1(firstPages)} ms, last tenth ${fmt1(lastPages)} ms; RSS after ${fmt1(mb(afterList.rssKb))} MB`,
    );
    if (items !== totalStored) failures.push(`paginated list returned ${items} items, expected ${totalStored}`);
  } catch (err) {
    if (!(err instanceof SkipRest)) failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.stderrTail.length) failures.push(`server stderr tail:\n${srv.stderrTail.slice(-15).join('\n')}`);
  } finally {
    if (worker) await worker.terminate().catch(() => undefined);
    client?.close();
    if (srv) await srv.stop();
    removeTempDir(dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  const runtimeSec = (performance.now() - tStart) / 1000;
  const lines = [
    `## kars apiserver benchmark`,
    ``,
    `${new Date().toISOString()} · scale ${scale} · node ${process.version} · ${cpuLine()} · data dir on ${fsType} · runtime ${fmt1(runtimeSec)} s`,
    ``,
    `| metric | value | notes |`,
    `|---|---|---|`,
    ...metrics.map((m) => mdRow([m.metric, m.display, m.notes])),
  ];
  if (gc) lines.push('', ...gc.lines);
  return finishRun('apiserver', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: quote medians and ratios, not single runs. Server = separate child process; client CPU includes the watch worker thread.',
    config: cfg,
    runtimeSec,
    machine: { dataDirFs: fsType },
    json: { metrics: metrics.map(({ metric, value, unit, display, notes }) => ({ metric, value, unit, display, notes })), raw },
  });
}

if (isMainThread) {
  runMain(main);
} else {
  watchWorker();
}
