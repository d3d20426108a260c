#!/usr/bin/env node
// Footprint and start-up of `kars router` (issue 23 item 2), beside a bare Node HTTP server in the
// same run: idle RSS with one InferencePolicy loaded, RSS at a paced 1,000 requests/s, and the time
// from process start to the first policy loaded and echoed. Each figure is the median of
// BENCH_RUNS runs (default 5); every run starts fresh processes, and the peers alternate order
// from run to run so load drift on the shared machine hits them alike.
//
//   npm run bench:router-footprint                           # build, then 5 runs (~3 min on the 2-core dev VM)
//   BENCH_RUNS=1 node bench/router-footprint/dist/main.js    # smoke test (needs a prior `npm run build`)
//
// Processes, each its own child so /proc/<pid> reads one of them only:
//   - kars apiserver (once), with the CRDs, namespace `bench`, KarsSandbox `sb` and the compiled
//     ConfigMap of one InferencePolicy (compileInferencePolicy, as the controller writes it);
//   - the OpenAI stub the router forwards to (bench/router/dist/main.js --stub, once);
//   - the open-loop load generator (bench/router/dist/main.js --loadgen, once: raw HTTP/1.1 keep-alive,
//     request k due at t0 + k/rate, so a slow peer cannot slow the offered load);
//   - per run and peer, a fresh peer process:
//       * `bare`: `node -e` with a node:http server answering the stub's JSON answer, the floor of
//         what a Node process serving HTTP costs;
//       * `router`: `kars router --kubeconfig … --instance run-N` (its own echo Lease per run), with
//         the node options of the router's container (ROUTER_NODE_OPTIONS in peers.ts; BENCH_ROUTER_NODE_OPTIONS
//         overrides);
//       * `before` (only with BENCH_BEFORE=<a built kars checkout>): that checkout's router, run
//         the same way (with BENCH_BEFORE_NODE_OPTIONS, default none), for before/after figures in
//         one run.
//
// Start-up of the router: from just before spawn() to the watch event, seen by this process, of
// its echo Lease carrying the ConfigMap's digest (loaded, enforced and published). For the bare
// server there is no policy: its row is spawn → `listening:`, which the router row also gives.
// Idle RSS: VmRSS after BENCH_IDLE_SECS (5) with no traffic, after the echo, and settled after
// BENCH_SETTLED_SECS (30: V8's memory reducer has run, ~8 s after start-up's allocation); the idle
// goal is judged on the settled sample (the 5 s one is a start-up transient; ADR 0059). RSS under load: the
// highest VmRSS sampled every 100 ms during BENCH_LOAD_SECS (10) at BENCH_RATE (1,000) req/s,
// after BENCH_WARMUP_SECS (2) of the same load; achieved rate, latency and errors are reported so
// a peer that fell behind shows. Goals are reported (met / missed), never asserted: the exit code
// is 1 only when something fails (a child dies, a request fails, no echo within 30 s).

import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import {
  KARS_BIN,
  ROOT,
  envInt,
  fmt1,
  fmtInt,
  httpsJsonClient,
  log,
  removeTempDir,
  runMain,
  spawnListening,
  startKarsApiserver,
} from '../../lib/dist/index.js';
import type { HttpsJsonClient, KarsApiserver, Listening } from '../../lib/dist/index.js';
import { compilePolicy, seed } from './cluster.js';
import { watchLeases } from './lease-watch.js';
import type { LeaseWatch } from './lease-watch.js';
import { startLoadgen } from './loadgen.js';
import type { Loadgen } from './loadgen.js';
import { measurePeer } from './measure.js';
import type { PeerRun, PeerSpec } from './measure.js';
import { BARE_SERVER, NS, ROUTER_BENCH, ROUTER_NODE_OPTIONS, SANDBOX } from './peers.js';
import { report } from './report.js';
import type { PeerName } from './report.js';

async function main(): Promise<number> {
  const tStart = performance.now();
  const env = process.env;
  const before = env['BENCH_BEFORE'];
  const cfg = {
    runs: envInt('BENCH_RUNS', 5),
    idleSecs: envInt('BENCH_IDLE_SECS', 5),
    settledSecs: envInt('BENCH_SETTLED_SECS', 30),
    loadSecs: envInt('BENCH_LOAD_SECS', 10),
    warmupSecs: envInt('BENCH_WARMUP_SECS', 2),
    rate: envInt('BENCH_RATE', 1000),
    maxConns: envInt('BENCH_MAX_CONNS', 64),
    routerNodeOptions: env['BENCH_ROUTER_NODE_OPTIONS'] ?? ROUTER_NODE_OPTIONS,
    beforeNodeOptions: env['BENCH_BEFORE_NODE_OPTIONS'] ?? '',
    before: before ? resolve(before) : undefined,
    goals: { idleMb: 55, loadMb: 100, startupMs: 250 },
  };
  // The router bundle too: without it `kars router` runs from dist/main.js, which is not what a build ships (ADR 0056).
  for (const f of [
    'apps/cli/dist/main.js',
    'apps/cli/dist/router.bundle.js',
    'packages/policy-compiler/dist/index.js',
    'packages/router/dist/stubs/openai.js',
  ])
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: build first (npm run build)`);
  const beforeBin = cfg.before ? join(cfg.before, 'apps/cli/bin/kars.js') : undefined;
  if (cfg.before && beforeBin && !existsSync(join(cfg.before, 'apps/cli/dist/main.js')))
    throw new Error(`BENCH_BEFORE=${cfg.before}: apps/cli/dist/main.js is missing (build that checkout first)`);
  const peers: PeerName[] = ['bare', 'router', ...(beforeBin ? (['before'] as const) : [])];

  const compiled = await compilePolicy();

  const tmp = mkdtempSync(join(os.tmpdir(), 'kars-bench-footprint-'));
  const failures: string[] = [];
  const loadavgStart = os.loadavg();
  let srv: KarsApiserver | undefined;
  let stub: Listening | undefined;
  let loadgen: Loadgen | undefined;
  let watch: LeaseWatch | undefined;
  let api: HttpsJsonClient | undefined;
  const results = Object.fromEntries(peers.map((p) => [p, [] as PeerRun[]])) as Record<PeerName, PeerRun[]>;
  try {
    const dataDir = join(tmp, 'apiserver');
    mkdirSync(dataDir);
    srv = await startKarsApiserver(dataDir, []);
    api = httpsJsonClient(srv.url, srv.ca, srv.token, { maxSockets: 4 });
    await seed(api, compiled);
    watch = watchLeases(srv.url, srv.ca, srv.token);
    stub = await spawnListening('stub', [ROUTER_BENCH, '--stub'], {});
    loadgen = startLoadgen();
    const { kubeconfig } = srv;
    const stubUrl = stub.url;
    log(
      `footprint: ${cfg.runs} runs of ${peers.join(', ')}; idle ${cfg.idleSecs} s, then ${cfg.warmupSecs} + ${cfg.loadSecs} s at ${cfg.rate} req/s; router NODE_OPTIONS "${cfg.routerNodeOptions}"`,
    );
    const routerEnv = (nodeOptions: string): NodeJS.ProcessEnv => {
      const e: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: nodeOptions };
      delete e['POD_NAME'];
      delete e['KUBERNETES_SERVICE_HOST'];
      return e;
    };
    for (let run = 1; run <= cfg.runs; run++) {
      // Rotate the order so no peer always runs first (or right after the load of another).
      const order = peers.map((_, k) => peers[(k + run - 1) % peers.length] as PeerName);
      for (const peer of order) {
        const instance = `${peer}-run-${run}`;
        const routerArgs = (bin: string): string[] => [
          bin,
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
          stubUrl,
          '--instance',
          instance,
        ];
        const spec: PeerSpec =
          peer === 'bare'
            ? { label: 'bare node', args: ['--input-type=module', '-e', BARE_SERVER], env: process.env }
            : {
                label: peer === 'router' ? 'kars router' : 'kars router (before)',
                args: routerArgs(peer === 'router' ? KARS_BIN : String(beforeBin)),
                env: routerEnv(peer === 'router' ? cfg.routerNodeOptions : cfg.beforeNodeOptions),
                echo: { watch, digest: compiled.compiledDigest, lease: `kars-router-${SANDBOX}-${instance}` },
              };
        log(`run ${run}/${cfg.runs}: ${spec.label}`);
        const r = await measurePeer({ ...spec, cfg, loadgen });
        results[peer].push(r);
        if (r.failure) failures.push(`run ${run}: ${r.failure}`);
        log(
          `  ${spec.label}: listening ${fmt1(r.listeningMs ?? NaN)} ms${r.echoMs !== undefined ? `, echoed ${fmt1(r.echoMs)} ms` : ''}; idle RSS ${fmt1(r.idle?.rss ?? NaN)} MB; under load max RSS ${fmt1(r.load?.maxRss ?? NaN)} MB at ${fmtInt(r.load?.achievedRate ?? NaN)} req/s (p99 ${fmt1(r.load?.p99 ?? NaN)} ms)`,
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

  return report(cfg, peers, results, failures, { loadavgStart, runtimeSec: (performance.now() - tStart) / 1000 });
}

runMain(main);
