#!/usr/bin/env node
// Benchmark for the kars policy controller (`kars controller`): edit → compiled ConfigMap,
// edit → Ready by router echo, and a cold start over many InferencePolicies (time and RSS).
//
// `kars apiserver` and `kars controller` each run as a separate child process, so the controller's
// RSS and CPU are read from /proc apart from everything else. The benchmark process hosts the
// observers (Reflectors that time what the controller writes) and an auto-echo router simulator:
// a Reflector on the controller's ConfigMaps that, on every change, recomputes the digest of each
// sandbox's InferencePolicy ConfigMap and at once applies that sandbox's echo Lease, as a router
// does when it loads a ConfigMap (and renews every lease every 5 s, as a router does).
//
//   npm run bench:controller                   # defaults (build first, then run)
//   BENCH_QUICK=1 node bench/controller.mjs    # smoke test, ~1 min (needs a prior `npx tsc -b`)
//
// Env: see bench/README.md ("Policy controller"). Timings never decide the exit code.

import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join, resolve } from 'node:path';
import {
  ROOT,
  cpuLine,
  dist,
  envInt as envIntBase,
  errMsg,
  finishRun,
  fmt1,
  fmt2,
  fmtInt,
  freePort,
  fsTypeOf,
  log,
  mb,
  mdRow,
  percentile,
  pinoStderr,
  procCpu,
  procStatus as procStatusBase,
  removeTempDir,
  runMain,
  runPool,
  selfCpuSec,
  sleep,
  splitArgs,
  startKarsApiserver,
} from './lib.mjs';
const { Reflector, watchConfigFromEnv } = await import(dist('kube-runtime'));
const { KubeClient, Resources } = await import(dist('kube-client'));
const { canonicalDigest, INFERENCE_POLICY_KIND, MANAGED_BY_LABEL, MANAGED_BY_VALUE, INFERENCE_POLICY_LABEL } = await import(
  dist('policy-compiler')
);
const { echoLease, ROUTER_LEASE_SECONDS, ROUTER_RENEW_SECONDS } = await import(dist('policy-api', 'echo.js'));
const { allCrds } = await import(dist('policy-api', 'crds.js'));
const { INFERENCE_POLICY, KARS_SANDBOX } = await import(dist('policy-api', 'types.js'));

const fmtS = (ms) => (ms === null || ms === undefined ? 'n/a' : fmt1(ms / 1000));
const remove = (arr, f) => {
  const i = arr.indexOf(f);
  if (i >= 0) arr.splice(i, 1);
};

// ---------------------------------------------------------------------------------------------
// Helpers (same conventions as bench/apiserver.mjs)
// ---------------------------------------------------------------------------------------------

/** Non-negative integer from the environment (0 is allowed here, unlike bench/apiserver.mjs). */
const envInt = (name, def) => envIntBase(name, def, { min: 0 });

function stats(values) {
  const s = Float64Array.from(values.filter((v) => Number.isFinite(v))).sort();
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p99: percentile(s, 0.99),
    max: s.length ? s[s.length - 1] : NaN,
    min: s.length ? s[0] : NaN,
  };
}

/** VmRSS / VmHWM in kB; NaN once the process is gone. */
const procStatus = (pid) => procStatusBase(pid, { safe: true });

/** CPU time (user+system) in seconds of a process; NaN once it is gone. */
const procCpuSec = (pid) => procCpu(pid, { safe: true }).total;

function httpGet(url, timeoutMs = 5000) {
  return new Promise((res, rej) => {
    const req = http.get(url, { timeout: timeoutMs }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => res({ status: r.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      r.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', rej);
  });
}

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

/** Start `kars apiserver` as a child process; resolves once it prints its listening URL. */
function startServer(dataDir, historyWindow) {
  return startKarsApiserver(dataDir, ['--history-window', String(historyWindow)], { collectStderr: pinoStderr });
}

/**
 * Start `kars controller` as a child process with leader election off and /metrics on a free
 * port. RSS is sampled every 100 ms from the moment it is spawned.
 */
async function startController(kubeconfig, label) {
  const extra = splitArgs(process.env.BENCH_CONTROLLER_NODE_ARGS);
  const port = await freePort();
  const bin = process.env.BENCH_CONTROLLER_BIN ? resolve(process.env.BENCH_CONTROLLER_BIN) : join(ROOT, 'apps/cli/bin/kars.js');
  const args = [...extra, bin, 'controller', '--kubeconfig', kubeconfig, '--metrics-addr', `127.0.0.1:${port}`];
  const tSpawn = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LEADER_ELECTION_ENABLED: 'false' },
  });
  const err = pinoStderr(child);
  // BENCH_CONTROLLER_LOG=<file>: also append the controller's log lines (stderr) to that file.
  if (process.env.BENCH_CONTROLLER_LOG) child.stderr.pipe(createWriteStream(resolve(process.env.BENCH_CONTROLLER_LOG), { flags: 'a' }));
  const exited = new Promise((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let stopping = false;
  const rss = { maxRssKb: 0, samples: [] };
  const sample = () => {
    const s = procStatus(child.pid);
    if (Number.isFinite(s.rssKb)) {
      rss.maxRssKb = Math.max(rss.maxRssKb, s.rssKb);
      rss.samples.push([Math.round(performance.now() - tSpawn), s.rssKb]);
    }
  };
  const sampler = setInterval(sample, 100);
  const ctl = {
    label,
    child,
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    tSpawn,
    rss,
    stderr: err,
    died: undefined,
    exit: undefined,
    /** Resolves when /metrics answers (ms since spawn), then when /readyz answers 200 (ms since spawn). */
    async waitUp(timeoutMs = 60_000) {
      const deadline = performance.now() + timeoutMs;
      let metricsUpMs;
      for (;;) {
        if (ctl.died) throw new Error(`${ctl.died}\n${err.tail.slice(-15).join('\n')}`);
        if (performance.now() > deadline)
          throw new Error(`controller ${label} not ready within ${timeoutMs} ms\n${err.tail.slice(-15).join('\n')}`);
        try {
          const r = await httpGet(`${ctl.url}/readyz`, 2000);
          metricsUpMs ??= performance.now() - tSpawn;
          if (r.status === 200) return { metricsUpMs, readyMs: performance.now() - tSpawn };
        } catch {
          // not listening yet
        }
        await sleep(20);
      }
    },
    async metrics() {
      const r = await httpGet(`${ctl.url}/metrics`, 10_000);
      if (r.status !== 200) throw new Error(`controller ${label} /metrics: HTTP ${r.status}`);
      return r.text;
    },
    /** SIGTERM, then SIGKILL after 15 s; returns how it ended. */
    async stop() {
      stopping = true;
      clearInterval(sampler);
      if (child.exitCode !== null || child.signalCode !== null) return ctl.exit;
      const t = performance.now();
      child.kill('SIGTERM');
      let timer;
      const r = await Promise.race([exited, new Promise((res) => (timer = setTimeout(res, 15_000)))]);
      clearTimeout(timer);
      if (!r) {
        child.kill('SIGKILL');
        await exited;
        ctl.exit = { graceful: false, ms: performance.now() - t, note: 'did not exit within 15 s of SIGTERM; SIGKILLed' };
      } else {
        ctl.exit = { graceful: r.code === 0, ms: performance.now() - t, code: r.code, signal: r.signal };
      }
      return ctl.exit;
    },
  };
  void exited.then(({ code, signal }) => {
    clearInterval(sampler);
    if (!stopping) ctl.died = `kars controller (${label}) exited unexpectedly (code ${code}, signal ${signal})`;
  });
  sample();
  return ctl;
}

// ---------------------------------------------------------------------------------------------
// Prometheus text parsing
// ---------------------------------------------------------------------------------------------

function parseProm(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const lm of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/**
 * Prometheus' histogram_quantile: linear interpolation inside the bucket holding the q-th
 * observation. When that is the +Inf bucket, the answer is only "above the top bound": returned
 * as -(top bound), which the table prints as "> …".
 */
function histQuantile(buckets, count, q) {
  if (!(count > 0)) return NaN;
  const rank = q * count;
  let prevLe = 0;
  let prevCum = 0;
  for (const [le, cum] of buckets) {
    if (cum >= rank) {
      if (le === Infinity) return -prevLe;
      return prevLe + ((le - prevLe) * (rank - prevCum)) / Math.max(1e-12, cum - prevCum);
    }
    prevLe = le;
    prevCum = cum;
  }
  return prevLe;
}

/** One histogram family, per label set (without `le`): count, sum, buckets, p50/p99 estimates. */
function histogram(samples, name, filter = () => true) {
  const byKind = new Map();
  for (const s of samples) {
    if (!s.name.startsWith(name) || !filter(s.labels)) continue;
    const kind = Object.entries(s.labels)
      .filter(([k]) => k !== 'le')
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const h = byKind.get(kind) ?? { kind, count: 0, sum: 0, buckets: [] };
    byKind.set(kind, h);
    if (s.name === `${name}_bucket`) h.buckets.push([s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
    else if (s.name === `${name}_count`) h.count = s.value;
    else if (s.name === `${name}_sum`) h.sum = s.value;
  }
  return [...byKind.values()].map((h) => {
    h.buckets.sort((a, b) => a[0] - b[0]);
    return {
      ...h,
      mean: h.count ? h.sum / h.count : NaN,
      p50: histQuantile(h.buckets, h.count, 0.5),
      p99: histQuantile(h.buckets, h.count, 0.99),
    };
  });
}

function counterValues(samples, name, filter = () => true) {
  return samples.filter((s) => s.name === name && filter(s.labels));
}

/**
 * Sample the controller's work-queue depth (`kars_controller_queue_depth`, keys waiting, not
 * counting the ones being reconciled) and its V8 heap (prom-client default metrics) from its
 * /metrics every `intervalMs`.
 */
function queueSampler(ctl, intervalMs = 500) {
  const samples = [];
  let stopped = false;
  let max = 0;
  const loop = (async () => {
    while (!stopped && !ctl.died) {
      const t = performance.now();
      try {
        const prom = parseProm(await ctl.metrics());
        const depth = {};
        for (const s of counterValues(prom, 'kars_controller_queue_depth')) depth[s.labels.controller] = s.value;
        const one = (name) => counterValues(prom, name)[0]?.value;
        const heap = {
          usedMb: one('nodejs_heap_size_used_bytes') / 2 ** 20,
          totalMb: one('nodejs_heap_size_total_bytes') / 2 ** 20,
          externalMb: one('nodejs_external_memory_bytes') / 2 ** 20,
        };
        samples.push([Math.round(t - ctl.tSpawn), depth, heap]);
        max = Math.max(max, depth.inferencepolicy ?? 0);
      } catch {
        // not up yet
      }
      await sleep(Math.max(0, intervalMs - (performance.now() - t)));
    }
  })();
  return {
    samples,
    get max() {
      return max;
    },
    last: () => samples[samples.length - 1]?.[1]?.inferencepolicy,
    lastHeap: () => samples[samples.length - 1]?.[2],
    maxHeapUsedMb: () => Math.max(0, ...samples.map((x) => x[2]?.usedMb ?? 0)),
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The auto-echo router simulator
// ---------------------------------------------------------------------------------------------

/**
 * One router instance per registered sandbox. Its view is the shared ConfigMap Reflector (label
 * managed-by=kars-controller). On every ConfigMap change it recomputes the InferencePolicy digest
 * for the sandboxes that load that ConfigMap, and when it differs from what it last published it
 * applies the sandbox's echo Lease at once (one apply in flight per sandbox; a change during an
 * apply causes exactly one more). It renews every lease every ROUTER_RENEW_SECONDS, as routers do.
 */
class RouterSim {
  constructor(client, cmStore) {
    this.client = client;
    this.cmStore = cmStore;
    this.sandboxes = new Map();
    this.byConfigMap = new Map();
    this.applies = 0;
    this.errors = [];
    this.timer = setInterval(() => this.renew(), 250);
  }

  /** A router for sandbox ns/name, which loads the InferencePolicy `policy`. Publishes at once. */
  add(ns, name, policy) {
    const cmKey = `${ns}/${INFERENCE_POLICY_KIND.configMap.name(policy)}`;
    const s = { ns, name, instance: 'r0', cmKey, busy: false, dirty: false, target: undefined, published: undefined, lastPublishAt: 0 };
    this.sandboxes.set(`${ns}/${name}`, s);
    let set = this.byConfigMap.get(cmKey);
    if (!set) this.byConfigMap.set(cmKey, (set = new Set()));
    set.add(s);
    return this.publish(s);
  }

  digestFor(s) {
    const body = this.cmStore.get(s.cmKey)?.data?.['inference-policy.json'];
    return body === undefined ? null : canonicalDigest('inference-policy.json', body);
  }

  /** Subscriber for the ConfigMap Reflector. */
  onChange(c) {
    const md = c.object.metadata;
    const set = this.byConfigMap.get(`${md.namespace ?? ''}/${md.name ?? ''}`);
    if (!set) return;
    for (const s of set) {
      if (this.digestFor(s) !== (s.busy ? s.target : s.published)) void this.publish(s);
    }
  }

  renew() {
    const now = Date.now();
    for (const s of this.sandboxes.values()) if (!s.busy && now - s.lastPublishAt >= ROUTER_RENEW_SECONDS * 1000) void this.publish(s);
  }

  async publish(s) {
    if (s.busy) {
      s.dirty = true;
      return;
    }
    s.busy = true;
    try {
      do {
        s.dirty = false;
        const digest = this.digestFor(s);
        s.target = digest;
        const now = Date.now();
        const lease = echoLease(s.ns, {
          sandbox: s.name,
          instance: s.instance,
          digests: { InferencePolicy: digest },
          errors: {},
          renewedAtMs: now,
          leaseDurationSeconds: ROUTER_LEASE_SECONDS,
        });
        try {
          await this.client.apply(Resources.leases, lease, `kars-router/${s.instance}`, { force: true });
          s.published = digest;
          s.lastPublishAt = now;
          this.applies++;
        } catch (err) {
          this.errors.push(`lease ${s.ns}/${lease.metadata.name}: ${errMsg(err)}`);
          s.lastPublishAt = now; // retried at the next renewal
        }
      } while (s.dirty);
    } finally {
      s.busy = false;
    }
  }

  close() {
    clearInterval(this.timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

const API_VERSION = `${INFERENCE_POLICY.group}/${INFERENCE_POLICY.version}`;
/** Room for every dailyTokens value the edits write (the CRD's CEL rule wants monthly ≥ daily). */
const MONTHLY = 1_000_000_000_000;

function inferencePolicy(ns, name, sandbox, daily) {
  return {
    apiVersion: API_VERSION,
    kind: 'InferencePolicy',
    metadata: { name, namespace: ns },
    spec: {
      appliesTo: { sandboxName: sandbox },
      tokenBudget: { perRequestTokens: 32_000, dailyTokens: daily, monthlyTokens: MONTHLY },
      contentSafety: { hate: 'Low', selfHarm: 'Low', sexual: 'Low', violence: 'Medium', requirePromptShields: true },
      modelPreference: {
        primary: { provider: 'azure-openai', deployment: 'gpt-4o' },
        fallback: [{ provider: 'azure-openai', deployment: 'gpt-4o-mini' }],
      },
      displayName: `bench policy ${name}`,
    },
  };
}

function sandbox(ns, name, policy) {
  return {
    apiVersion: API_VERSION,
    kind: 'KarsSandbox',
    metadata: { name, namespace: ns },
    spec: { inferenceRef: { name: policy }, networkPolicy: { allowedEndpoints: [{ host: 'api.example.com' }] } },
  };
}

function dailyOf(cm) {
  const body = cm?.data?.['inference-policy.json'];
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body)?.tokenBudget?.dailyTokens;
  } catch {
    return undefined;
  }
}

const isReadyFor = (o) => {
  const st = o?.status;
  return (
    !!st &&
    st.phase === 'Ready' &&
    st.observedGeneration === o.metadata.generation &&
    typeof st.loadedDigest === 'string' &&
    st.loadedDigest === st.compiledDigest
  );
};

// ---------------------------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------------------------

async function main() {
  const tStart = performance.now();
  const quick = process.env.BENCH_QUICK === '1';
  // BENCH_ONLY=coldstart: no measured, warm-up or loaded edits (controller #1 still starts once).
  const coldOnly = process.env.BENCH_ONLY === 'coldstart';
  if (process.env.BENCH_ONLY !== undefined && !coldOnly) throw new Error(`BENCH_ONLY must be "coldstart", got "${process.env.BENCH_ONLY}"`);
  const cfg = {
    quick,
    edits: envInt('BENCH_EDITS', coldOnly ? 0 : quick ? 30 : 200),
    warmupEdits: envInt('BENCH_WARMUP_EDITS', coldOnly ? 0 : quick ? 5 : 20),
    editSandboxes: envInt('BENCH_EDIT_SANDBOXES', 3),
    editGapMs: envInt('BENCH_EDIT_GAP_MS', 100),
    editTimeoutMs: envInt('BENCH_EDIT_TIMEOUT_SECS', 30) * 1000,
    coldPolicies: envInt('BENCH_COLD_POLICIES', quick ? 1000 : 10_000),
    coldSandboxes: envInt('BENCH_COLD_SANDBOXES', 100),
    coldNamespaces: envInt('BENCH_COLD_NAMESPACES', 10),
    coldTimeoutMs: envInt('BENCH_COLD_TIMEOUT_SECS', quick ? 180 : 600) * 1000,
    loadedEdits: envInt('BENCH_LOADED_EDITS', coldOnly ? 0 : quick ? 10 : 30),
    createConcurrency: 16,
    goals: { editToConfigMapP99Ms: 100, editToReadyP99Ms: 250, coldStartS: 30, coldRssMb: 400 },
  };
  cfg.coldSandboxes = Math.min(cfg.coldSandboxes, cfg.coldPolicies);
  cfg.coldNamespaces = Math.max(1, Math.min(cfg.coldNamespaces, Math.max(1, cfg.coldPolicies)));
  if (cfg.editSandboxes < 1) throw new Error('BENCH_EDIT_SANDBOXES must be >= 1');
  cfg.historyWindow = Math.max(20_000, 5 * cfg.coldPolicies + 10 * (cfg.edits + cfg.loadedEdits + cfg.warmupEdits) + 10_000);

  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-bench-ctl-'));
  const dataDir = join(dataRoot, 'apiserver');
  const fsType = fsTypeOf(dataRoot);
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir} (${fsType})`);

  const rows = [];
  const raw = {};
  const failures = [];
  const notes = [];
  const add = (metric, value, unit, display, goal, notesText = '') => rows.push({ metric, value, unit, display, goal, notes: notesText });
  const goalCell = (v, limit, unit) =>
    Number.isFinite(v) ? `≤ ${limit} ${unit}: ${v <= limit ? 'met' : '**missed**'}` : `≤ ${limit} ${unit}: n/a`;
  const histTables = [];

  let srv;
  let api;
  let obsClient;
  let routerClient;
  let router;
  const ac = new AbortController();
  const reflectorRuns = [];
  const ctls = [];

  try {
    // ---- apiserver, CRDs, observers, router simulator ----------------------------------------
    const tBoot = performance.now();
    srv = await startServer(dataDir, cfg.historyWindow);
    log(`apiserver pid ${srv.pid} at ${srv.url} (started in ${(performance.now() - tBoot).toFixed(0)} ms)`);
    const watchCfg = watchConfigFromEnv(process.env);
    const mkClient = () =>
      KubeClient.fromKubeconfig({
        kubeconfig: srv.kubeconfig,
        pingIntervalMs: watchCfg.pingIntervalMs,
        pingTimeoutMs: watchCfg.pingTimeoutMs,
      });
    api = mkClient();
    obsClient = mkClient();
    routerClient = mkClient();

    for (const crd of allCrds()) await api.create(Resources.customresourcedefinitions, crd);
    for (let t0 = performance.now(); ;) {
      try {
        await api.list(INFERENCE_POLICY, { limit: 1 });
        await api.list(KARS_SANDBOX, { limit: 1 });
        break;
      } catch (err) {
        if (performance.now() - t0 > 10_000) throw new Error(`CRDs not served within 10 s: ${errMsg(err)}`);
        await sleep(50);
      }
    }
    const currentRv = async () => Number((await api.list(Resources.configmaps, { limit: 1 })).metadata.resourceVersion);

    const reflectorWarnings = [];
    const rlog = {
      debug: () => undefined,
      info: () => undefined,
      warn: (o, msg) => reflectorWarnings.push(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
      error: (o, msg) => reflectorWarnings.push(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
      child: () => rlog,
      isLevelEnabled: (level) => level !== 'debug' && level !== 'info',
    };
    const cms = new Reflector({
      name: 'bench-configmaps',
      client: routerClient,
      resource: Resources.configmaps,
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
      config: watchCfg,
      log: rlog,
    });
    const ips = new Reflector({
      name: 'bench-inferencepolicies',
      client: obsClient,
      resource: INFERENCE_POLICY,
      config: watchCfg,
      log: rlog,
    });
    // Measurement subscribers are registered first, so their timestamps precede the router's work.
    const cmSubs = [];
    const ipSubs = [];
    cms.subscribe((c) => {
      for (const f of [...cmSubs]) f(c);
    });
    ips.subscribe((c) => {
      for (const f of [...ipSubs]) f(c);
    });
    router = new RouterSim(routerClient, cms.store);
    cms.subscribe((c) => router.onChange(c));
    reflectorRuns.push(cms.run(ac.signal), ips.run(ac.signal));
    await Promise.all([cms.store.ready(), ips.store.ready()]);

    // ---- phase 1+2: edits against a small world ---------------------------------------------
    const EDIT_NS = 'edit';
    const EDIT_POLICY = 'edited';
    const editKey = `${EDIT_NS}/${EDIT_POLICY}`;
    const editCmKey = `${EDIT_NS}/${INFERENCE_POLICY_KIND.configMap.name(EDIT_POLICY)}`;
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: EDIT_NS } });
    let editValue = 1_000_000;
    await api.create(INFERENCE_POLICY, inferencePolicy(EDIT_NS, EDIT_POLICY, '', editValue));
    for (let k = 0; k < cfg.editSandboxes; k++) {
      await api.create(KARS_SANDBOX, sandbox(EDIT_NS, `sb-${k}`, EDIT_POLICY));
      await router.add(EDIT_NS, `sb-${k}`, EDIT_POLICY);
    }

    /**
     * Wait until `pred()` holds, re-checked on every observer change (and every 250 ms as a
     * backstop, e.g. for a child that died). Timestamps are taken by the change subscribers.
     */
    const waitFor = (pred, timeoutMs, what) =>
      new Promise((res, rej) => {
        if (pred()) return res(performance.now());
        let settled = false;
        const check = () => {
          if (!settled && pred()) {
            cleanup();
            res(performance.now());
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          rej(new Error(`${what}: not within ${timeoutMs} ms`));
        }, timeoutMs);
        const poll = setInterval(check, 250);
        const cleanup = () => {
          settled = true;
          clearTimeout(timer);
          clearInterval(poll);
          remove(cmSubs, check);
          remove(ipSubs, check);
        };
        cmSubs.push(check);
        ipSubs.push(check);
      });

    /**
     * `n` sequential edits of edit/edited: merge-patch spec.tokenBudget.dailyTokens to a new value,
     * time until the ConfigMap holds it and until the policy is Ready for that generation.
     */
    const runEdits = async (n, label, ctl) => {
      const res = { toCm: [], toReady: [], lastCompileMs: [], lastMs: [], patchMs: [], timeouts: 0, errors: [] };
      for (let i = 0; i < n; i++) {
        if (ctl.died) throw new Error(ctl.died);
        const value = ++editValue;
        const w = { value, t0: 0, cmAt: undefined, readyAt: undefined, status: undefined };
        const onCm = (c) => {
          if (
            w.cmAt === undefined &&
            c.type === 'apply' &&
            `${c.object.metadata.namespace}/${c.object.metadata.name}` === editCmKey &&
            dailyOf(c.object) === value
          )
            w.cmAt = performance.now();
        };
        const onIp = (c) => {
          if (w.readyAt !== undefined || c.type !== 'apply' || `${c.object.metadata.namespace}/${c.object.metadata.name}` !== editKey)
            return;
          if (c.object.spec?.tokenBudget?.dailyTokens === value && isReadyFor(c.object)) {
            w.readyAt = performance.now();
            w.status = c.object.status;
          }
        };
        cmSubs.unshift(onCm);
        ipSubs.unshift(onIp);
        try {
          w.t0 = performance.now();
          await api.patch(INFERENCE_POLICY, EDIT_NS, EDIT_POLICY, { spec: { tokenBudget: { dailyTokens: value } } }, 'merge');
          res.patchMs.push(performance.now() - w.t0);
          await waitFor(
            () => w.cmAt !== undefined && w.readyAt !== undefined,
            cfg.editTimeoutMs,
            `${label} edit ${i} (dailyTokens=${value})`,
          );
          res.toCm.push(w.cmAt - w.t0);
          res.toReady.push(w.readyAt - w.t0);
          if (typeof w.status?.propagation?.lastCompileMs === 'number') res.lastCompileMs.push(w.status.propagation.lastCompileMs);
          if (typeof w.status?.propagation?.lastMs === 'number') res.lastMs.push(w.status.propagation.lastMs);
        } catch (err) {
          res.timeouts++;
          res.errors.push(errMsg(err));
          if (w.cmAt !== undefined) res.toCm.push(w.cmAt - w.t0);
        } finally {
          remove(cmSubs, onCm);
          remove(ipSubs, onIp);
        }
        if (cfg.editGapMs > 0) await sleep(cfg.editGapMs);
      }
      return res;
    };

    log(`controller #1 (edit phase): ${cfg.editSandboxes} sandbox router(s) reference ${editKey}`);
    const ctl1 = await startController(srv.kubeconfig, 'edit');
    ctls.push(ctl1);
    const up1 = await ctl1.waitUp();
    await waitFor(
      () => isReadyFor(ips.store.get(editKey)) && dailyOf(cms.store.get(editCmKey)) === editValue,
      30_000,
      'initial Ready of edit/edited',
    );
    log(
      `  controller pid ${ctl1.pid}: /metrics after ${up1.metricsUpMs.toFixed(0)} ms, /readyz 200 after ${up1.readyMs.toFixed(0)} ms; ${editKey} Ready`,
    );
    await sleep(1000);
    const rss1 = procStatus(ctl1.pid);
    add(
      'Controller RSS at start (idle)',
      mb(rss1.rssKb),
      'MB',
      `${fmt1(mb(rss1.rssKb))} MB`,
      '',
      `child VmRSS 1 s after ${editKey} became Ready; /readyz 200 ${fmtInt(up1.readyMs)} ms after spawn`,
    );

    log(`  warm-up: ${cfg.warmupEdits} edits (not measured)`);
    const wu = await runEdits(cfg.warmupEdits, 'warm-up', ctl1);
    if (wu.timeouts) failures.push(`warm-up: ${wu.timeouts} edits not Ready in time (first: ${wu.errors[0]})`);
    log(`1-2/3 edits: ${cfg.edits} sequential edits of ${editKey}`);
    const rvEdits0 = await currentRv();
    const cpu1 = { ctl: procCpuSec(ctl1.pid), srv: procCpuSec(srv.pid), self: selfCpuSec(), t: performance.now() };
    const ed = await runEdits(cfg.edits, 'edit', ctl1);
    const editWrites = (await currentRv()) - rvEdits0;
    const wall1 = (performance.now() - cpu1.t) / 1000;
    const ctlCpu1 = procCpuSec(ctl1.pid) - cpu1.ctl;
    const srvCpu1 = procCpuSec(srv.pid) - cpu1.srv;
    const selfCpu1 = selfCpuSec() - cpu1.self;
    const cmSt = stats(ed.toCm);
    const rdSt = stats(ed.toReady);
    const lcSt = stats(ed.lastCompileMs);
    const lmSt = stats(ed.lastMs);
    const paSt = stats(ed.patchMs);
    const cpuNote1 = `${fmt1(editWrites / Math.max(1, cfg.edits))} API writes per edit (incl. lease renewals); CPU per edit: controller ${fmt1((ctlCpu1 * 1000) / cfg.edits)} ms, apiserver ${fmt1((srvCpu1 * 1000) / cfg.edits)} ms, bench ${fmt1((selfCpu1 * 1000) / cfg.edits)} ms`;
    raw.edits = {
      ...ed,
      apiWrites: editWrites,
      toCmStats: cmSt,
      toReadyStats: rdSt,
      lastCompileMsStats: lcSt,
      lastMsStats: lmSt,
      patchStats: paSt,
      controllerCpuSec: ctlCpu1,
      apiserverCpuSec: srvCpu1,
      benchCpuSec: selfCpu1,
      wallSec: wall1,
    };
    add(
      'edit → new ConfigMap p50 / p99',
      [cmSt.p50, cmSt.p99],
      'ms',
      `${fmt1(cmSt.p50)} / ${fmt1(cmSt.p99)} ms`,
      goalCell(cmSt.p99, cfg.goals.editToConfigMapP99Ms, 'ms (p99)'),
      `${cmSt.n} sequential edits (merge PATCH of spec.tokenBudget.dailyTokens, ${cfg.editGapMs} ms apart), until the bench's ConfigMap watch holds the value; max ${fmt1(cmSt.max)} ms; PATCH itself p50 ${fmt1(paSt.p50)} ms; controller's status.propagation.lastCompileMs median ${fmt1(lcSt.p50)} ms (p99 ${fmt1(lcSt.p99)})`,
    );
    add(
      'edit → Ready by router echo p50 / p99',
      [rdSt.p50, rdSt.p99],
      'ms',
      `${fmt1(rdSt.p50)} / ${fmt1(rdSt.p99)} ms`,
      goalCell(rdSt.p99, cfg.goals.editToReadyP99Ms, 'ms (p99)'),
      `until phase Ready, observedGeneration = generation, loadedDigest = compiledDigest, with ${cfg.editSandboxes} sandbox router(s) echoing; max ${fmt1(rdSt.max)} ms; controller's status.propagation.lastMs median ${fmt1(lmSt.p50)} ms; ${cpuNote1}`,
    );
    if (ed.timeouts)
      failures.push(`edits: ${ed.timeouts} of ${cfg.edits} not Ready within ${cfg.editTimeoutMs} ms (first: ${ed.errors[0]})`);

    const prom1 = parseProm(await ctl1.metrics());
    histTables.push({
      title: `controller #1 (edit phase: ${cfg.warmupEdits} warm-up + ${cfg.edits} measured edits, initial compile)`,
      prom: prom1,
    });
    const end1 = procStatus(ctl1.pid);
    const exit1 = await ctl1.stop();
    raw.controller1 = {
      pid: ctl1.pid,
      up: up1,
      rssStartKb: rss1.rssKb,
      rssEndKb: end1.rssKb,
      hwmKb: end1.hwmKb,
      exit: exit1,
      stderr: { lines: ctl1.stderr.lines, warn: ctl1.stderr.warn, error: ctl1.stderr.error, firstErrors: ctl1.stderr.firstErrors },
    };
    if (!exit1?.graceful) notes.push(`controller #1 did not exit cleanly on SIGTERM: ${JSON.stringify(exit1)}`);

    // ---- phase 3: cold start ----------------------------------------------------------------
    const P = cfg.coldPolicies;
    const NSN = cfg.coldNamespaces;
    const nsOf = (i) => `cold-${i % NSN}`;
    log(
      `3/3 cold start: creating ${fmtInt(cfg.coldSandboxes)} sandboxes and ${fmtInt(P)} InferencePolicies in ${NSN} namespaces (setup, controller stopped)`,
    );
    for (let n = 0; n < NSN; n++)
      await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `cold-${n}` } });
    const tSetup = performance.now();
    const sbc = await runPool(cfg.coldSandboxes, cfg.createConcurrency, async (j) => {
      await api.create(KARS_SANDBOX, sandbox(nsOf(j), `sb-${j}`, `p-${j}`));
      await router.add(nsOf(j), `sb-${j}`, `p-${j}`);
    });
    if (sbc.errors.length) failures.push(`cold sandboxes: ${sbc.errors.length} creates failed (first: ${sbc.errors[0]})`);
    let nextPct = 10;
    const tCreate = performance.now();
    const pc = await runPool(
      P,
      cfg.createConcurrency,
      async (i) => {
        await api.create(INFERENCE_POLICY, inferencePolicy(nsOf(i), `p-${i}`, i < cfg.coldSandboxes ? `sb-${i}` : '', 1000 + i));
      },
      (d) => {
        if ((d * 100) / P >= nextPct) {
          const s = (performance.now() - tCreate) / 1000;
          log(`  ${nextPct}% (${fmtInt(d)}) in ${s.toFixed(1)} s, ${fmtInt(d / s)}/s`);
          nextPct += 10;
        }
      },
    );
    if (pc.errors.length) failures.push(`cold policies: ${pc.errors.length} creates failed (first: ${pc.errors[0]})`);
    const coldKeys = Array.from({ length: P }, (_, i) => `${nsOf(i)}/p-${i}`);
    await waitFor(() => coldKeys.every((k) => ips.store.get(k)), 60_000, 'bench watch sees every created policy');
    const setupMs = performance.now() - tSetup;
    raw.coldSetup = {
      sandboxes: cfg.coldSandboxes,
      policies: P,
      namespaces: NSN,
      sandboxWallMs: sbc.wallMs,
      policyWallMs: pc.wallMs,
      totalMs: setupMs,
      errors: pc.errors.length + sbc.errors.length,
    };
    add(
      `cold setup: create ${fmtInt(P)} policies (not timed against the goal)`,
      P / (pc.wallMs / 1000),
      'ops/s',
      `${fmtInt(P / (pc.wallMs / 1000))} creates/s`,
      '',
      `${fmt1(pc.wallMs / 1000)} s for the policies (concurrency ${cfg.createConcurrency}, HTTP/2), plus ${fmtInt(cfg.coldSandboxes)} sandboxes with router leases; ${fmt1(setupMs / 1000)} s setup in total`,
    );

    // Convergence trackers, driven by the observers' change events.
    const pending = new Set(coldKeys);
    const pendingReady = new Set(coldKeys.slice(0, cfg.coldSandboxes));
    const degraded = new Set();
    let firstCmAt;
    let firstStatusAt;
    const compiledOk = (k) => {
      const o = ips.store.get(k);
      const st = o?.status;
      if (!st || st.observedGeneration !== o.metadata.generation) return false;
      if (st.phase === 'Degraded') degraded.add(k);
      if (st.phase !== 'Compiled' && st.phase !== 'Ready') return false;
      const { namespace, name } = o.metadata;
      return cms.store.get(`${namespace}/${INFERENCE_POLICY_KIND.configMap.name(name)}`) !== undefined;
    };
    const recheck = (k) => {
      if (pending.has(k) && compiledOk(k)) pending.delete(k);
      if (pendingReady.has(k) && isReadyFor(ips.store.get(k))) pendingReady.delete(k);
    };
    let allCompiledAt;
    let allReadyAt;
    const onDone = () => {
      if (allCompiledAt === undefined && pending.size === 0) allCompiledAt = performance.now();
      if (allReadyAt === undefined && pendingReady.size === 0) allReadyAt = performance.now();
    };
    const coldCm = (c) => {
      if (c.type !== 'apply' || !c.object.metadata.namespace?.startsWith('cold-')) return;
      const p = c.object.metadata.labels?.[INFERENCE_POLICY_LABEL];
      if (!p) return;
      firstCmAt ??= performance.now();
      recheck(`${c.object.metadata.namespace}/${p}`);
      onDone();
    };
    const coldIp = (c) => {
      if (c.type !== 'apply' || !c.object.metadata.namespace?.startsWith('cold-')) return;
      if (c.object.status?.observedGeneration !== undefined) firstStatusAt ??= performance.now();
      recheck(`${c.object.metadata.namespace}/${c.object.metadata.name}`);
      onDone();
    };
    cmSubs.unshift(coldCm);
    ipSubs.unshift(coldIp);

    const rvBefore = await currentRv();
    await sleep(500);
    const srvCpu0 = procCpuSec(srv.pid);
    const self0 = selfCpuSec();
    const ctl2 = await startController(srv.kubeconfig, 'cold');
    ctls.push(ctl2);
    const t0 = ctl2.tSpawn;
    const qs = queueSampler(ctl2, 1000);
    const up2 = await ctl2.waitUp(cfg.coldTimeoutMs);
    log(
      `  controller #2 pid ${ctl2.pid}: /metrics after ${up2.metricsUpMs.toFixed(0)} ms, /readyz 200 (every watch listed) after ${up2.readyMs.toFixed(0)} ms`,
    );
    let lastLog = performance.now();
    const progress = setInterval(() => {
      if (performance.now() - lastLog < 5000) return;
      lastLog = performance.now();
      log(
        `  ${fmt1((performance.now() - t0) / 1000)} s: ${fmtInt(P - pending.size)} / ${fmtInt(P)} compiled, ${fmtInt(cfg.coldSandboxes - pendingReady.size)} / ${fmtInt(cfg.coldSandboxes)} referenced Ready; controller RSS ${fmt1(mb(procStatus(ctl2.pid).rssKb))} MB, queue depth ${qs.last() ?? '?'}`,
      );
    }, 500);
    let coldErr;
    try {
      await waitFor(
        () => (onDone(), pending.size === 0 && pendingReady.size === 0) || !!ctl2.died,
        cfg.coldTimeoutMs,
        'cold start convergence',
      );
      if (ctl2.died) throw new Error(ctl2.died);
    } catch (err) {
      coldErr = err;
    } finally {
      clearInterval(progress);
    }
    const convergedAt = performance.now();
    const atConv = procStatus(ctl2.pid);
    const ctlCpu2 = procCpuSec(ctl2.pid);
    const srvCpu2 = procCpuSec(srv.pid) - srvCpu0;
    const selfCpu2 = selfCpuSec() - self0;
    const rvAfter = await currentRv();
    remove(cmSubs, coldCm);
    remove(ipSubs, coldIp);
    if (coldErr) {
      failures.push(
        `cold start: ${errMsg(coldErr)}; ${fmtInt(pending.size)} policies never compiled, ${fmtInt(pendingReady.size)} referenced policies never Ready (e.g. ${[...pending, ...pendingReady].slice(0, 3).join(', ')})`,
      );
    }
    if (degraded.size) failures.push(`cold start: ${degraded.size} policies went Degraded (e.g. ${[...degraded].slice(0, 3).join(', ')})`);
    // After convergence the controller still works off re-reconciles its own writes caused; wait
    // until its inferencepolicy queue has been empty for two samples in a row (cap 120 s).
    const depthAtConv = qs.last();
    const heapAtConv = qs.lastHeap();
    let drainedAt;
    for (const tWait = performance.now(); performance.now() - tWait < 120_000 && !ctl2.died; await sleep(100)) {
      const n = qs.samples.length;
      if (
        n >= 2 &&
        qs.samples[n - 2][0] > convergedAt - t0 &&
        qs.samples[n - 1][1].inferencepolicy === 0 &&
        qs.samples[n - 2][1].inferencepolicy === 0
      ) {
        drainedAt = t0 + qs.samples[n - 2][0];
        break;
      }
    }
    await sleep(2000);
    const idle2 = procStatus(ctl2.pid);
    const convS = allCompiledAt !== undefined ? (allCompiledAt - t0) / 1000 : NaN;
    const readyS = allReadyAt !== undefined ? (allReadyAt - t0) / 1000 : NaN;
    const writes = rvAfter - rvBefore;
    raw.cold = {
      policies: P,
      sandboxes: cfg.coldSandboxes,
      metricsUpMs: up2.metricsUpMs,
      readyzMs: up2.readyMs,
      firstStatusMs: firstStatusAt !== undefined ? firstStatusAt - t0 : null,
      firstConfigMapMs: firstCmAt !== undefined ? firstCmAt - t0 : null,
      allCompiledMs: allCompiledAt !== undefined ? allCompiledAt - t0 : null,
      allReferencedReadyMs: allReadyAt !== undefined ? allReadyAt - t0 : null,
      waitEndedMs: convergedAt - t0,
      rssAtConvergenceKb: atConv.rssKb,
      hwmAtConvergenceKb: atConv.hwmKb,
      maxSampledRssKb: ctl2.rss.maxRssKb,
      rssAfterDrainKb: idle2.rssKb,
      hwmAfterDrainKb: idle2.hwmKb,
      heapAfterDrain: qs.lastHeap() ?? null,
      maxHeapUsedMb: qs.maxHeapUsedMb(),
      controllerCpuSec: ctlCpu2,
      apiserverCpuSec: srvCpu2,
      benchCpuSec: selfCpu2,
      apiWrites: writes,
      rssTimeline: ctl2.rss.samples.filter((_, i) => i % 5 === 0),
      queueDepthMax: qs.max,
      heapAtConvergence: heapAtConv ?? null,
      queueDepthAtConvergence: depthAtConv ?? null,
      queueDrainedMs: drainedAt !== undefined ? drainedAt - t0 : null,
      queueTimeline: qs.samples,
      notConverged: [...pending].slice(0, 20),
      notReady: [...pendingReady].slice(0, 20),
    };
    const tl = `spawn → /metrics ${fmtS(up2.metricsUpMs)} s → /readyz (all watches listed) ${fmtS(up2.readyMs)} s → first ConfigMap ${fmtS(raw.cold.firstConfigMapMs)} s → first status ${fmtS(raw.cold.firstStatusMs)} s → all compiled ${fmt1(convS)} s`;
    add(
      `cold start: ${fmtInt(P)} policies compiled`,
      convS,
      's',
      `${fmt2(convS)} s`,
      goalCell(convS, cfg.goals.coldStartS, 's'),
      `from spawning a fresh controller until every policy has status.observedGeneration = generation, phase Compiled/Ready and its ConfigMap exists; ${tl}; ${fmtInt(P / convS)} policies/s`,
    );
    add(
      `cold start: ${fmtInt(cfg.coldSandboxes)} referenced policies Ready`,
      readyS,
      's',
      `${fmt2(readyS)} s`,
      '',
      `the policies the ${fmtInt(cfg.coldSandboxes)} sandboxes reference, confirmed by their routers' echo`,
    );
    add(
      'cold start: controller queue drained',
      raw.cold.queueDrainedMs === null ? NaN : raw.cold.queueDrainedMs / 1000,
      's',
      `${fmtS(raw.cold.queueDrainedMs)} s`,
      '',
      `inferencepolicy work queue (kars_controller_queue_depth, sampled every 1 s) empty twice in a row; max depth ${fmtInt(qs.max)}, ${fmtInt(depthAtConv ?? NaN)} keys still waiting at convergence (re-reconciles caused by the controller's own writes)`,
    );
    add(
      'cold start: controller RSS at convergence',
      mb(atConv.rssKb),
      'MB',
      `${fmt1(mb(atConv.rssKb))} MB`,
      '',
      `VmHWM (peak) until then ${fmt1(mb(atConv.hwmKb))} MB; V8 heap used ${fmt1(heapAtConv?.usedMb)} of ${fmt1(heapAtConv?.totalMb)} MB, external ${fmt1(heapAtConv?.externalMb)} MB (its /metrics, ≤ 0.5 s old); ${fmt2(atConv.rssKb / rss1.rssKb)}× the idle controller #1`,
    );
    add(
      'cold start: controller peak RSS (VmHWM)',
      mb(idle2.hwmKb),
      'MB',
      `${fmt1(mb(idle2.hwmKb))} MB`,
      goalCell(mb(idle2.hwmKb), cfg.goals.coldRssMb, 'MB'),
      `peak over the whole cold start: spawn until 2 s after its queue drained; RSS then ${fmt1(mb(idle2.rssKb))} MB; the largest V8 heap used seen was ${fmt1(qs.maxHeapUsedMb())} MB`,
    );
    add(
      'cold start: work done',
      writes,
      'writes',
      `${fmtInt(writes)} API writes`,
      '',
      `${fmt2(writes / P)} writes per policy (apiserver resourceVersion delta, incl. router leases); CPU until convergence: controller ${fmt1(ctlCpu2)} s (${Math.round((100 * ctlCpu2) / ((convergedAt - t0) / 1000))}% of a core), apiserver ${fmt1(srvCpu2)} s, bench (observers + routers) ${fmt1(selfCpu2)} s`,
    );

    // ---- extra: edits against the loaded controller ------------------------------------------
    if (cfg.loadedEdits > 0 && !ctl2.died) {
      log(`  ${cfg.loadedEdits} edits of ${editKey} against the controller holding ${fmtInt(P)} policies`);
      await waitFor(() => isReadyFor(ips.store.get(editKey)), 30_000, `${editKey} Ready under controller #2`).catch((err) =>
        failures.push(errMsg(err)),
      );
      const le = await runEdits(cfg.loadedEdits, 'loaded edit', ctl2);
      const lc = stats(le.toCm);
      const lr = stats(le.toReady);
      raw.loadedEdits = { ...le, toCmStats: lc, toReadyStats: lr };
      add(
        `edit → ConfigMap / → Ready with ${fmtInt(P)} policies loaded (p50 / p99)`,
        [lc.p50, lc.p99, lr.p50, lr.p99],
        'ms',
        `${fmt1(lc.p50)} / ${fmt1(lc.p99)} ms; ${fmt1(lr.p50)} / ${fmt1(lr.p99)} ms`,
        '',
        `${lr.n} edits of ${editKey} after the cold start converged (same method as above; few samples, p99 ≈ max)`,
      );
      if (le.timeouts) failures.push(`loaded edits: ${le.timeouts} of ${cfg.loadedEdits} not Ready in time (first: ${le.errors[0]})`);
    }

    await qs.stop();
    const end2 = procStatus(ctl2.pid);
    raw.cold.hwmAtEndKb = end2.hwmKb;
    raw.cold.rssAtEndKb = end2.rssKb;
    const prom2 = parseProm(await ctl2.metrics());
    histTables.push({
      title: `controller #2 (cold start of ${fmtInt(P)} policies${cfg.loadedEdits ? ` + ${cfg.loadedEdits} edits` : ''})`,
      prom: prom2,
    });
    const exit2 = await ctl2.stop();
    if (!exit2?.graceful) notes.push(`controller #2 did not exit cleanly on SIGTERM: ${JSON.stringify(exit2)}`);
    raw.controller2 = {
      pid: ctl2.pid,
      exit: exit2,
      stderr: { lines: ctl2.stderr.lines, warn: ctl2.stderr.warn, error: ctl2.stderr.error, firstErrors: ctl2.stderr.firstErrors },
    };

    for (const c of ctls) {
      if (c.stderr.error || c.stderr.fatal)
        notes.push(
          `controller ${c.label} logged ${c.stderr.error} error and ${c.stderr.fatal} fatal lines (first: ${c.stderr.firstErrors[0]?.slice(0, 300)})`,
        );
    }
    if (router.errors.length) failures.push(`router simulator: ${router.errors.length} lease applies failed (first: ${router.errors[0]})`);
    raw.router = { leaseApplies: router.applies, errors: router.errors.slice(0, 10) };
    if (reflectorWarnings.length)
      notes.push(`bench observers: ${reflectorWarnings.length} watch warnings (first: ${reflectorWarnings[0]})`);
    if (srv.died) failures.push(srv.died);
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.died)
      failures.push(`${srv.died} (a signal other than the benchmark's own stop means something else on the machine killed it)`);
    for (const c of ctls) if (c.died) failures.push(c.died);
    if (srv?.stderr.tail.length) failures.push(`apiserver stderr tail:\n${srv.stderr.tail.slice(-10).join('\n')}`);
    for (const c of ctls)
      if (c.stderr.tail.length) failures.push(`controller ${c.label} stderr tail:\n${c.stderr.tail.slice(-10).join('\n')}`);
  } finally {
    for (const c of ctls) await c.stop().catch(() => undefined);
    router?.close();
    ac.abort();
    await Promise.all(reflectorRuns);
    api?.close();
    obsClient?.close();
    routerClient?.close();
    if (srv) await srv.stop();
    removeTempDir(dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  const runtimeSec = (performance.now() - tStart) / 1000;
  const lines = [
    `## kars policy controller benchmark`,
    ``,
    `${new Date().toISOString()} · ${quick ? 'QUICK · ' : ''}${cfg.edits} edits · ${fmtInt(cfg.coldPolicies)} cold policies · node ${process.version} · ${cpuLine()} · data dir on ${fsType} · runtime ${fmt1(runtimeSec)} s`,
    ``,
    `| metric | value | goal | notes |`,
    `|---|---|---|---|`,
    ...rows.map((m) => mdRow([m.metric, m.display, m.goal || '–', m.notes])),
  ];
  const histJson = [];
  for (const t of histTables) {
    lines.push(
      '',
      `### Controller /metrics: ${t.title}`,
      '',
      '| histogram | labels | count | mean | p50 ≈ | p99 ≈ | non-empty buckets (le: count) |',
      '|---|---|---|---|---|---|---|',
    );
    const families = [
      ['kars_policy_compile_seconds', () => true],
      ['kars_policy_propagation_seconds', () => true],
      ['kars_controller_reconcile_duration_seconds', (l) => l.controller === 'inferencepolicy'],
    ];
    for (const [name, filter] of families) {
      for (const h of histogram(t.prom, name, filter)) {
        histJson.push({ controller: t.title, name, ...h, buckets: h.buckets.map(([le, c]) => [le === Infinity ? '+Inf' : le, c]) });
        if (h.count === 0) continue;
        let prev = 0;
        const nonEmpty = [];
        for (const [le, cum] of h.buckets) {
          if (cum > prev) nonEmpty.push(`${le === Infinity ? '+Inf' : `${+(le * 1000).toFixed(3)} ms`}: ${fmtInt(cum - prev)}`);
          prev = cum;
        }
        const q = (v) => (v < 0 ? `> ${fmtInt(-v * 1000)} ms` : `${fmt1(v * 1000)} ms`);
        lines.push(
          `| ${name} | ${h.kind} | ${fmtInt(h.count)} | ${fmt1(h.mean * 1000)} ms | ${q(h.p50)} | ${q(h.p99)} | ${nonEmpty.join(', ')} |`,
        );
      }
    }
    const rec = counterValues(t.prom, 'kars_controller_reconcile_total', (l) => l.controller === 'inferencepolicy');
    const restartSamples = counterValues(t.prom, 'kars_watch_restarts_total');
    const byReason = {};
    for (const r of restartSamples) if (r.value > 0) byReason[r.labels.reason] = (byReason[r.labels.reason] ?? 0) + r.value;
    const restarts = `${restartSamples.reduce((a, s) => a + s.value, 0)}${
      Object.keys(byReason).length
        ? ` (${Object.entries(byReason)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }`;
    const relists = counterValues(t.prom, 'kars_watch_relists_total').reduce((a, s) => a + s.value, 0);
    lines.push(
      '',
      `inferencepolicy reconciles: ${rec.map((s) => `${s.labels.result} ${fmtInt(s.value)}`).join(', ') || 'none'}; watch restarts ${restarts}, relists ${fmtInt(relists)} (the initial list counts as one per watch). p50/p99 are Prometheus histogram_quantile estimates (linear within a bucket).`,
    );
  }
  if (notes.length) lines.push('', '**Notes**', '', ...notes.map((n) => `- ${n}`));
  return finishRun('controller', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: apiserver, controller and the benchmark (observers + router simulator) compete for the cores. Goals are reported, never asserted.',
    config: cfg,
    runtimeSec,
    machine: { dataDirFs: fsType },
    json: { notes, metrics: rows, histograms: histJson, raw },
  });
}

runMain(main);
