#!/usr/bin/env node
// Benchmark for the kars router (`kars router`): added latency at a fixed rate, throughput ratio,
// the cost of the policy decision per request, and how fast a policy change is enforced (from a
// mounted ConfigMap directory and from the API).
//
// Every peer is its own process, so the 2 cores are shared the same way in every comparison:
//   - the OpenAI stub (`startOpenAIStub` from `@kars/router/stubs`, in a tiny child: this file with
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
//   npm run bench:router                               # build, then defaults (~3–3.5 min on the 2-core dev VM)
//   BENCH_QUICK=1 node bench/router/dist/main.js       # smoke test, ~1 min (needs a prior `npx tsc -b`)
//
// Env: see bench/README.md ("Router"); BENCH_APIS picks the APIs of the latency and ttfb phases
// (chat, Responses, Anthropic Messages). Goals are reported (met / missed), never asserted: the exit
// code is 1 only on real errors (a child fails or dies, a request fails, a change is not enforced).
//
// Modules: config.ts (environment, peers found), setup.ts (the processes of the data plane),
// dataplane.ts (what the data-plane phases share), phases/*.ts (one per phase), report.ts (the
// tables and results files), children/*.ts (the `--stub`, `--proxy` and `--loadgen` children).

import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

import { ROOT, log, removeTempDir, runMain } from '../../lib/dist/index.js';
import type { ApiName } from './apis.js';
import { NS, POLICY, SANDBOX, configure } from './config.js';
import { dataPlane } from './dataplane.js';
import { apiPhase } from './phases/api.js';
import { dirPhase } from './phases/dir.js';
import { latencyPhase } from './phases/latency.js';
import { rssRow } from './phases/rss.js';
import { throughputPhase } from './phases/throughput.js';
import { ttfbPhase } from './phases/ttfb.js';
import { routerBuildId } from './procs.js';
import { report } from './report.js';
import type { Handle, Procs, Run } from './run.js';
import { startProcesses } from './setup.js';

/** The benchmark: configure, run the phases of BENCH_PHASES, stop every process, report. Resolves with the exit code. */
async function main(): Promise<number> {
  const tStart = performance.now();
  const setup = configure();
  const { cfg, phases, openGen, closedGen } = setup;
  for (const f of [
    'packages/router/dist/stubs/openai.js',
    'packages/router/dist/inference/handler.js',
    'packages/policy-compiler/dist/index.js',
    'apps/cli/dist/main.js',
  ]) {
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: build first (npx tsc -b)`);
  }
  const { compileInferencePolicy } = await import('@kars/policy-compiler');
  const build = routerBuildId();

  /**
   * The benchmark's InferencePolicy, for the router of `apiName`. Chat's carries the content-safety
   * floor; Responses and Messages answers cannot carry Azure's annotations, so a floor fails them
   * closed (ADR 0034) and their routers run the same policy without it, Messages on the Anthropic
   * provider (the only one that speaks it).
   */
  const compiled: Run['compiled'] = (cap: number, apiName: ApiName = 'chat') => {
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

  log(`router benchmark${cfg.quick ? ' (quick)' : ''}: phases ${cfg.phases.join(', ')}; open loop: ${openGen}; closed loop: ${closedGen}`);
  const tmp = mkdtempSync(join(os.tmpdir(), 'kars-bench-router-'));
  const procs: Procs = {
    stub: undefined,
    anthropicStub: undefined,
    proxy: undefined,
    nginx: undefined,
    portkey: undefined,
    bare: undefined,
    router: undefined,
    apiRouters: {},
    loadgen: undefined,
    srv: undefined,
    api: undefined,
  };
  const run: Run = {
    ...setup,
    tmp,
    failures: [],
    raw: { loadavgStart: os.loadavg() },
    sanity: undefined,
    dataRows: [],
    ctlRows: [],
    phaseTimes: {},
    procs,
    compiled,
    checkChildren: () => {
      const { stub, anthropicStub, proxy, nginx, portkey, bare, router, srv, apiRouters } = procs;
      for (const c of [stub, anthropicStub, proxy, nginx, portkey, bare, router, srv, ...Object.values(apiRouters)])
        if (c?.died) throw new Error(c.died);
    },
  };
  const { failures, raw } = run;

  try {
    // ---- 3. policy decision cost, in process (first, while the machine is otherwise idle) -----
    if (phases.has('decision')) (await import('./phases/decision.js')).decisionPhase(run);

    const { mount, apiSkipped } = await startProcesses(run);
    const dp = dataPlane(run, apiSkipped);

    // ---- 1. added latency at a fixed rate (open loop) -------------------------------------------
    if (phases.has('latency')) await latencyPhase(run, dp);
    // ---- 1b. added time to the first streamed byte -------------------------------------------------
    if (phases.has('ttfb')) await ttfbPhase(run, dp);
    // ---- 2. throughput ratio (closed loop) -------------------------------------------------------
    if (phases.has('throughput')) await throughputPhase(run, dp);
    if (phases.has('latency') || phases.has('throughput')) rssRow(run);

    // ---- 4a. ConfigMap volume swap → enforcement -------------------------------------------------
    if (phases.has('dir')) await dirPhase(run, mount);
    if (procs.router) {
      const router = procs.router;
      await router.stop();
      raw.routerDirStderr = {
        warn: router.stderr.warn,
        error: router.stderr.error,
        fatal: router.stderr.fatal,
        firstErrors: router.stderr.firstErrors,
      };
      procs.router = undefined;
    }

    // ---- 4b. ConfigMap PUT through the API → enforcement -----------------------------------------
    if (phases.has('api')) await apiPhase(run);
    run.checkChildren();
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    procs.loadgen?.stop();
    procs.api?.close();
    const { router, apiRouters, bare, proxy, nginx, portkey, srv, stub, anthropicStub } = procs;
    const all: Array<Handle | undefined> = [router, ...Object.values(apiRouters), bare, proxy, nginx, portkey, srv, stub, anthropicStub];
    for (const c of all) {
      if (!c) continue;
      const died = c.died;
      if (died && !failures.some((f) => f.includes(died.split('\n')[0] ?? ''))) failures.push(died);
      await c.stop();
      const errors = c.stderr.error + (c.stderr.fatal ?? 0); // pino error (50) and fatal (60) lines
      if (errors > 0) failures.push(`${c.label} logged ${errors} error(s): ${c.stderr.firstErrors.join(' | ')}`);
    }
    removeTempDir(tmp, '');
  }

  // ---- report ---------------------------------------------------------------------------------
  return report(run, tStart, build);
}

/** Print a child's fatal error and exit 1. */
const childFailed = (e: unknown): never => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
};

const mode = process.argv[2];
if (mode === '--proxy') {
  void import('./children/proxy.js').then((m) => m.proxyMain(process.argv[3] ?? '', process.argv[4])).catch(childFailed);
} else if (mode === '--stub') {
  void import('./children/stub.js').then((m) => m.stubMain(process.argv[3])).catch(childFailed);
} else if (mode === '--loadgen') {
  void import('./children/loadgen.js').then((m) => m.loadgenMain(), childFailed);
} else {
  runMain(main);
}
