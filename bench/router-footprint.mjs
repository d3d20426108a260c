#!/usr/bin/env node
// Footprint and start-up of `kars router` (issue 23 item 2), beside a bare Node HTTP server in the
// same run: idle RSS with one InferencePolicy loaded, RSS at a paced 1,000 requests/s, and the time
// from process start to the first policy loaded and echoed. Each figure is the median of
// BENCH_RUNS runs (default 5); every run starts fresh processes, and the peers alternate order
// from run to run so load drift on the shared machine hits them alike.
//
//   npm run bench:router-footprint                 # build, then 5 runs (~3 min on the 2-core dev VM)
//   BENCH_RUNS=1 node bench/router-footprint.mjs   # smoke test (needs a prior `npm run build`)
//
// Processes, each its own child so /proc/<pid> reads one of them only:
//   - kars apiserver (once), with the CRDs, namespace `bench`, KarsSandbox `sb` and the compiled
//     ConfigMap of one InferencePolicy (compileInferencePolicy, as the controller writes it);
//   - the OpenAI stub the router forwards to (bench/router.mjs --stub, once);
//   - the open-loop load generator (bench/router.mjs --loadgen, once: raw HTTP/1.1 keep-alive,
//     request k due at t0 + k/rate, so a slow peer cannot slow the offered load);
//   - per run and peer, a fresh peer process:
//       * `bare`: `node -e` with a node:http server answering the stub's JSON answer, the floor of
//         what a Node process serving HTTP costs;
//       * `router`: `kars router --kubeconfig … --instance run-N` (its own echo Lease per run), with
//         the node options of the router's container (ROUTER_NODE_OPTIONS below; BENCH_ROUTER_NODE_OPTIONS
//         overrides);
//       * `before` (only with BENCH_BEFORE=<a built kars checkout>): that checkout's router, run
//         the same way (with BENCH_BEFORE_NODE_OPTIONS, default none), for before/after figures in
//         one run.
//
// Start-up of the router: from just before spawn() to the watch event, seen by this process, of
// its echo Lease carrying the ConfigMap's digest (loaded, enforced and published). For the bare
// server there is no policy: its row is spawn → `listening:`, which the router row also gives.
// Idle RSS: VmRSS after BENCH_IDLE_SECS (5) with no traffic, after the echo. RSS under load: the
// highest VmRSS sampled every 100 ms during BENCH_LOAD_SECS (10) at BENCH_RATE (1,000) req/s,
// after BENCH_WARMUP_SECS (2) of the same load; achieved rate, latency and errors are reported so
// a peer that fell behind shows. Goals are reported (met / missed), never asserted: the exit code
// is 1 only when something fails (a child dies, a request fails, no echo within 30 s).

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import { join, resolve } from 'node:path';

import {
  KARS_BIN,
  ROOT,
  cpuLine,
  dist,
  envInt,
  expectStatus,
  finishRun,
  fmt1,
  fmtInt,
  httpsJsonClient,
  log,
  mdRow,
  percentile,
  pinoStderr,
  procCpu,
  removeTempDir,
  runMain,
  sleep,
  spawnListening,
  splitArgs,
  startKarsApiserver,
} from './lib.mjs';

const ROUTER_BENCH = join(ROOT, 'bench/router.mjs');
const NS = 'bench';
const SANDBOX = 'sb';
const POLICY = 'footprint';

/**
 * The node options the router's container runs with: none. deploy/examples/sandbox-router and the
 * Helm chart's sandboxes set no NODE_OPTIONS, so the benchmark runs the router without any either.
 * ADR 0037 has the V8 flags that were measured and why none is set (a 1 MB semi-space saved ~2 MB
 * idle and cost +15 MB RSS and +33% CPU per request at 1,000 req/s). BENCH_ROUTER_NODE_OPTIONS
 * tries others.
 */
const ROUTER_NODE_OPTIONS = '';

/** The stub's answer to the chat body below, for the bare server (byte for byte what the router relays). */
const ANSWER =
  '{"id":"chatcmpl-stub-1","object":"chat.completion","created":1796008007,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the kars OpenAI stub."},"finish_reason":"stop","content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}],"usage":{"prompt_tokens":15,"completion_tokens":15,"total_tokens":30},"system_fingerprint":null,"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}]}';

/** The bare peer: node:http only, reads the body and answers ANSWER. */
const BARE_SERVER = `
import http from 'node:http';
const answer = Buffer.from(${JSON.stringify(ANSWER)});
const server = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write('listening: http://127.0.0.1:' + server.address().port + '\\n'));
process.once('SIGTERM', () => { server.close(() => process.exit(0)); server.closeAllConnections(); });
`;

const CHAT_BODY = JSON.stringify({
  model: 'gpt-4o',
  max_tokens: 256,
  temperature: 0.2,
  messages: [
    { role: 'system', content: 'You are a concise assistant working inside a kars sandbox.' },
    { role: 'user', content: 'Summarise the last build log in one sentence.' },
  ],
});

/** The raw HTTP/1.1 request the load generator sends (what bench/router.mjs sends too). */
function chatRequest(url) {
  const u = new URL(url);
  const payload = Buffer.from(CHAT_BODY);
  const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-kars-bench\r\nContent-Length: ${payload.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), payload]);
}

const median = (values) =>
  percentile(
    values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b),
    0.5,
  );

/** VmRSS, RssAnon and RssFile of a process in MB (NaN once it is gone). */
function rss(pid) {
  try {
    const txt = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mb = (k) => Number(txt.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN) / 1024;
    return { rss: mb('VmRSS'), anon: mb('RssAnon'), file: mb('RssFile'), hwm: mb('VmHWM') };
  } catch {
    return { rss: NaN, anon: NaN, file: NaN, hwm: NaN };
  }
}

/**
 * A watch on the router echo Leases of the bench namespace. `waitFor(name, digest, deadline)`
 * resolves with performance.now() of the first event showing Lease `name` with `digest` among its
 * loaded digests (events that arrived before the call count too).
 */
function watchLeases(url, ca, token) {
  const seen = new Map(); // lease name → [{ t, digests }]
  const waiters = [];
  const u = new URL(url);
  let buf = '';
  let failed;
  const req = https.request(
    {
      host: u.hostname,
      port: u.port,
      method: 'GET',
      path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases?watch=true&labelSelector=${encodeURIComponent(`kars.azure.com/sandbox=${SANDBOX}`)}`,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      ca,
      agent: false,
    },
    (res) => {
      if (res.statusCode !== 200) failed = new Error(`lease watch: HTTP ${res.statusCode}`);
      res.setEncoding('utf8');
      res.on('data', (c) => {
        const t = performance.now();
        buf += c;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim() === '') continue;
          const ev = JSON.parse(line);
          if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED') continue;
          const name = ev.object.metadata.name;
          let digests = {};
          try {
            digests = JSON.parse(ev.object.metadata.annotations?.['kars.azure.com/loaded-digests'] ?? '{}');
          } catch {
            digests = {};
          }
          const list = seen.get(name) ?? [];
          list.push({ t, digests });
          seen.set(name, list);
          for (const w of [...waiters]) w.check();
        }
      });
      res.on('end', () => (failed ??= new Error('lease watch ended')));
    },
  );
  req.on('error', (e) => (failed ??= e));
  req.end();
  return {
    waitFor(name, digest, timeoutMs) {
      return new Promise((res, rej) => {
        const w = {
          check() {
            const hit = (seen.get(name) ?? []).find((e) => Object.values(e.digests).includes(digest));
            if (hit) {
              done();
              res(hit.t);
            } else if (failed) {
              done();
              rej(failed);
            }
          },
        };
        const timer = setTimeout(() => {
          done();
          rej(new Error(`no echo of ${digest} on Lease ${name} within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          const k = waiters.indexOf(w);
          if (k >= 0) waiters.splice(k, 1);
        };
        waiters.push(w);
        w.check();
      });
    },
    close: () => req.destroy(),
  };
}

/** The load generator of bench/router.mjs (`--loadgen`), driven over IPC; `run(job, onMark)` resolves with its result. */
function startLoadgen() {
  const child = spawn(process.execPath, [ROUTER_BENCH, '--loadgen'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let handler;
  let exitErr;
  child.on('message', (m) => handler?.(m));
  child.once('exit', (code, signal) => {
    exitErr = new Error(`load generator exited (code ${code}, signal ${signal})`);
    handler?.({ type: 'result', ok: false, error: exitErr.message });
  });
  return {
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

/**
 * Start one peer process and measure it: start-up, idle RSS, RSS under the paced load.
 * `echo` (routers only) is `{ watch, digest, lease }`.
 */
async function measurePeer({ label, args, env, echo, cfg, loadgen }) {
  const t0 = performance.now();
  const h = await spawnListening(label, args, {
    env,
    collectStderr: (child) => pinoStderr(child, { tailMax: 40, lineChars: 400 }),
    diedMessage: (code, signal, hh) =>
      `${label} exited unexpectedly (code ${code}, signal ${signal})\n${hh.stderr.tail.slice(-10).join('\n')}`,
  });
  const out = { label, pid: h.pid };
  try {
    out.listeningMs = performance.now() - t0;
    out.listeningCpuMs = procCpu(h.pid).total * 1000;
    if (echo) {
      out.echoMs = (await echo.watch.waitFor(echo.lease, echo.digest, 30_000)) - t0;
      out.echoCpuMs = procCpu(h.pid).total * 1000;
    }
    out.startupRss = rss(h.pid);
    await sleep(cfg.idleSecs * 1000);
    if (h.died) throw new Error(h.died);
    out.idle = rss(h.pid);
    const samples = [];
    let sampler;
    let cpu0 = NaN;
    let cpu1 = NaN;
    const result = await loadgen.run(
      {
        kind: 'open',
        host: '127.0.0.1',
        port: Number(new URL(h.url).port),
        rate: cfg.rate,
        warmupMs: cfg.warmupSecs * 1000,
        durationMs: cfg.loadSecs * 1000,
        maxConns: cfg.maxConns,
        expectStatus: 200,
        req: chatRequest(h.url).toString('base64'),
      },
      (mark) => {
        if (mark === 'start') {
          cpu0 = procCpu(h.pid).total;
          sampler = setInterval(() => samples.push(rss(h.pid)), 100);
        } else if (mark === 'end') {
          cpu1 = procCpu(h.pid).total;
          clearInterval(sampler);
        }
      },
    );
    clearInterval(sampler);
    if (h.died) throw new Error(h.died);
    out.load = {
      maxRss: Math.max(...samples.map((s) => s.rss)),
      maxAnon: Math.max(...samples.map((s) => s.anon)),
      lastRss: samples.at(-1)?.rss ?? NaN,
      samples: samples.length,
      hwm: rss(h.pid).hwm,
      achievedRate: result.achievedRate,
      cpuUsPerReq: ((cpu1 - cpu0) * 1e6) / result.completed,
      completed: result.completed,
      requests: result.requests,
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors,
    };
    const errs = result.errors.transport + Object.values(result.errors.status).reduce((a, b) => a + b, 0);
    if (errs > 0) out.failure = `${label}: ${errs} failed requests under load (${result.errors.first.join('; ')})`;
    if (result.completed < result.requests) out.failure ??= `${label}: ${result.requests - result.completed} requests never answered`;
  } finally {
    await h.stop();
    out.errorLines = h.stderr.error + h.stderr.fatal;
    if (out.errorLines > 0) out.failure ??= `${label} logged ${out.errorLines} error line(s): ${h.stderr.firstErrors.join(' | ')}`;
  }
  return out;
}

async function main() {
  const tStart = performance.now();
  const cfg = {
    runs: envInt('BENCH_RUNS', 5),
    idleSecs: envInt('BENCH_IDLE_SECS', 5),
    loadSecs: envInt('BENCH_LOAD_SECS', 10),
    warmupSecs: envInt('BENCH_WARMUP_SECS', 2),
    rate: envInt('BENCH_RATE', 1000),
    maxConns: envInt('BENCH_MAX_CONNS', 64),
    routerNodeOptions: process.env.BENCH_ROUTER_NODE_OPTIONS ?? ROUTER_NODE_OPTIONS,
    beforeNodeOptions: process.env.BENCH_BEFORE_NODE_OPTIONS ?? '',
    before: process.env.BENCH_BEFORE ? resolve(process.env.BENCH_BEFORE) : undefined,
    goals: { idleMb: 55, loadMb: 100, startupMs: 250 },
  };
  for (const f of ['apps/cli/dist/main.js', 'packages/policy-compiler/dist/index.js', 'packages/router/dist/stubs/openai.js'])
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: build first (npm run build)`);
  const beforeBin = cfg.before ? join(cfg.before, 'apps/cli/bin/kars.js') : undefined;
  if (beforeBin && !existsSync(join(cfg.before, 'apps/cli/dist/main.js')))
    throw new Error(`BENCH_BEFORE=${cfg.before}: apps/cli/dist/main.js is missing (build that checkout first)`);
  const peers = ['bare', 'router', ...(beforeBin ? ['before'] : [])];

  const { compileInferencePolicy } = await import(dist('policy-compiler'));
  const compiled = compileInferencePolicy({
    metadata: { name: POLICY, namespace: NS },
    spec: {
      appliesTo: { sandboxName: SANDBOX },
      tokenBudget: { perRequestTokens: 1024, dailyTokens: 1_000_000_000_000, monthlyTokens: 10_000_000_000_000 },
      contentSafety: { hate: 'Medium', selfHarm: 'Low', sexual: 'Medium', violence: 'Medium', requirePromptShields: true },
      modelPreference: { primary: { provider: 'azure-openai', deployment: 'gpt-4o' } },
    },
  });
  if (!compiled.ok) throw new Error(`compileInferencePolicy: ${JSON.stringify(compiled)}`);

  const tmp = mkdtempSync(join(os.tmpdir(), 'kars-bench-footprint-'));
  const failures = [];
  const loadavgStart = os.loadavg();
  let srv;
  let stub;
  let loadgen;
  let watch;
  let api;
  const results = Object.fromEntries(peers.map((p) => [p, []]));
  try {
    const dataDir = join(tmp, 'apiserver');
    mkdirSync(dataDir);
    srv = await startKarsApiserver(dataDir, []);
    api = httpsJsonClient(srv.url, srv.ca, srv.token, { maxSockets: 4 });
    const YAML = (await import('yaml')).default;
    for (const crd of YAML.parseAllDocuments(readFileSync(join(ROOT, 'deploy/crds/all.yaml'), 'utf8'))
      .map((d) => d.toJSON())
      .filter((d) => d?.kind === 'CustomResourceDefinition'))
      expectStatus(
        await api.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd),
        [201],
        `create CRD ${crd.metadata.name}`,
      );
    expectStatus(
      await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
      [201],
      `create namespace ${NS}`,
    );
    for (let i = 0; ; i++) {
      const r = await api.request('POST', `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/karssandboxes`, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'KarsSandbox',
        metadata: { name: SANDBOX },
        spec: { inferenceRef: { name: POLICY } },
      });
      if (r.status === 201) break;
      // The CRD's resource is served a moment after its create returns.
      if (r.status !== 404 || i > 100) throw new Error(`create KarsSandbox: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
      await sleep(100);
    }
    expectStatus(
      await api.request('POST', `/api/v1/namespaces/${NS}/configmaps`, compiled.configMap),
      [201],
      'create the compiled ConfigMap',
    );
    watch = watchLeases(srv.url, srv.ca, srv.token);
    stub = await spawnListening('stub', [ROUTER_BENCH, '--stub'], {});
    loadgen = startLoadgen();
    log(
      `footprint: ${cfg.runs} runs of ${peers.join(', ')}; idle ${cfg.idleSecs} s, then ${cfg.warmupSecs} + ${cfg.loadSecs} s at ${cfg.rate} req/s; router NODE_OPTIONS "${cfg.routerNodeOptions}"`,
    );
    const routerEnv = (nodeOptions) => {
      const env = { ...process.env, NODE_OPTIONS: nodeOptions };
      delete env.POD_NAME;
      delete env.KUBERNETES_SERVICE_HOST;
      return env;
    };
    for (let run = 1; run <= cfg.runs; run++) {
      // Rotate the order so no peer always runs first (or right after the load of another).
      const order = peers.map((_, k) => peers[(k + run - 1) % peers.length]);
      for (const peer of order) {
        const instance = `${peer}-run-${run}`;
        const routerArgs = (bin) => [
          bin,
          'router',
          '--kubeconfig',
          srv.kubeconfig,
          '--sandbox',
          SANDBOX,
          '--namespace',
          NS,
          '--listen',
          '127.0.0.1:0',
          '--upstream',
          stub.url,
          '--instance',
          instance,
        ];
        const spec =
          peer === 'bare'
            ? { label: 'bare node', args: ['--input-type=module', '-e', BARE_SERVER], env: process.env }
            : {
                label: peer === 'router' ? 'kars router' : 'kars router (before)',
                args: routerArgs(peer === 'router' ? KARS_BIN : beforeBin),
                env: routerEnv(peer === 'router' ? cfg.routerNodeOptions : cfg.beforeNodeOptions),
                echo: { watch, digest: compiled.compiledDigest, lease: `kars-router-${SANDBOX}-${instance}` },
              };
        log(`run ${run}/${cfg.runs}: ${spec.label}`);
        const r = await measurePeer({ ...spec, cfg, loadgen });
        results[peer].push(r);
        if (r.failure) failures.push(`run ${run}: ${r.failure}`);
        log(
          `  ${spec.label}: listening ${fmt1(r.listeningMs)} ms${r.echoMs !== undefined ? `, echoed ${fmt1(r.echoMs)} ms` : ''}; idle RSS ${fmt1(r.idle?.rss)} MB; under load max RSS ${fmt1(r.load?.maxRss)} MB at ${fmtInt(r.load?.achievedRate)} req/s (p99 ${fmt1(r.load?.p99)} ms)`,
        );
      }
    }
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    loadgen?.stop();
    watch?.close();
    api?.close();
    for (const c of [stub, srv]) await c?.stop();
    removeTempDir(tmp, '');
  }

  const col = (peer, f) => results[peer].map(f);
  const cell = (peer, f, digits = fmt1) => {
    const v = col(peer, f);
    return v.length ? `${digits(median(v))}` : '';
  };
  const runsOf = (peer, f) =>
    col(peer, f)
      .map((v) => fmt1(v))
      .join(', ');
  const goal = (v, limit, unit) =>
    Number.isFinite(v) ? `≤ ${limit} ${unit}: ${v <= limit ? 'met' : '**missed**'}` : `≤ ${limit} ${unit}: n/a`;
  const head = [
    'metric (median of runs)',
    'bare node',
    'kars router',
    ...(peers.includes('before') ? ['router (before)'] : []),
    'goal (router)',
    'runs (router; bare)',
  ];
  const row = (metric, f, g, { bare = true } = {}) =>
    mdRow([
      metric,
      bare ? cell('bare', f) : '–',
      cell('router', f),
      ...(peers.includes('before') ? [cell('before', f)] : []),
      g ? g(median(col('router', f))) : '–',
      `${runsOf('router', f)}${bare ? `; ${runsOf('bare', f)}` : ''}`,
    ]);
  const lines = [
    `## kars router footprint and start-up`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load average ${loadavgStart.map((x) => x.toFixed(2)).join(' ')} at start, ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )} at end · ${cfg.runs} runs · router NODE_OPTIONS "${cfg.routerNodeOptions}"${cfg.before ? ` · before: ${cfg.before}, NODE_OPTIONS "${cfg.beforeNodeOptions}"` : ''}`,
    ``,
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---|').join('')}`,
    row(
      'start-up: spawn → policy loaded and echoed (ms)',
      (r) => r.echoMs,
      (v) => goal(v, cfg.goals.startupMs, 'ms'),
      { bare: false },
    ),
    row('start-up CPU: user + system until the echo (ms)', (r) => r.echoCpuMs, undefined, { bare: false }),
    row('start-up: spawn → `listening:` (ms)', (r) => r.listeningMs),
    row('start-up CPU: user + system until `listening:` (ms)', (r) => r.listeningCpuMs),
    row(
      `idle RSS, ${cfg.idleSecs} s after the echo (MB)`,
      (r) => r.idle?.rss,
      (v) => goal(v, cfg.goals.idleMb, 'MB'),
    ),
    row('idle RssAnon (MB)', (r) => r.idle?.anon),
    row('idle RssFile (MB)', (r) => r.idle?.file),
    row(
      `RSS at ${fmtInt(cfg.rate)} req/s, highest 100 ms sample (MB)`,
      (r) => r.load?.maxRss,
      (v) => goal(v, cfg.goals.loadMb, 'MB'),
    ),
    row(`peak RSS of the whole run, VmHWM (MB)`, (r) => r.load?.hwm),
    row('achieved rate (req/s)', (r) => r.load?.achievedRate),
    row('CPU per request under load (µs)', (r) => r.load?.cpuUsPerReq),
    row('latency p50 (ms)', (r) => r.load?.p50),
    row('latency p99 (ms)', (r) => r.load?.p99),
  ];
  return finishRun('router-footprint', {
    lines,
    failures,
    footer: `Shared ${os.cpus().length}-core machine; every run starts fresh peer processes. Command: ${cfg.before ? `BENCH_BEFORE=${cfg.before} ` : ''}node bench/router-footprint.mjs`,
    config: cfg,
    runtimeSec: (performance.now() - tStart) / 1000,
    json: { results },
    markdown: true,
  });
}

runMain(main);
