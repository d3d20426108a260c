#!/usr/bin/env node
// kars apiserver and kube-apiserver side by side, in one run (issue 18 item 3): for each target
// server, the real `kars controller` and `kars router` (and `kars stub openai`) as child processes
// time edit → ConfigMap, edit → router echo and edit → Ready; then the three watch clients (the
// kars Reflector, @kubernetes/client-node's informer, kubernetes-fluent-client's Watcher) watch
// through a FaultRelay of ours in front of the server, which silently freezes every connection
// (no FIN, no RST), and the bench times how long each takes to see an edit made after the drop.
// Same fault, same clients, same settings against both servers. See bench/README.md ("kars
// apiserver and kube-apiserver side by side").
//
//   npm run bench:targets                                  # build, then kars apiserver + the newest pinned kube-apiserver
//   BENCH_TARGETS=kars,kube-1.34,kube-1.37 node bench/targets.mjs
//   node bench/targets.mjs --targets kars,kube-all         # every pinned kube-apiserver
//
// Env: BENCH_TARGETS (or --targets), BENCH_EDITS, BENCH_WARMUP_EDITS, BENCH_EDIT_GAP_MS,
// BENCH_TRIALS, BENCH_FRESHNESS_CAP_SECS, BENCH_OBJECTS, BENCH_PEERS, BENCH_RERUN_STUCK,
// BENCH_FAULT_DELAY_MAX_SECS, BENCH_KEEP (see the README table). Timings never decide the exit code.

import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import {
  cpuLine,
  dist,
  envInt,
  errMsg,
  finishRun,
  fmt1,
  fmt2,
  log,
  mdRow,
  nowUs,
  percentile,
  removeTempDir,
  runMain,
  sleep,
  startKarsApiserver,
} from './lib.mjs';
import { ALL_PEERS, PEERS, createPeer } from './watch-peers.mjs';

const { findKubeBinaries, readPins, pinFor, startControlPlane, startKars, stopKars, processesMentioning } = await import(
  dist('kube-envtest')
);
const { FaultRelay } = await import(dist('kube-core'));
const { KubeClient, Resources } = await import(dist('kube-client'));
const { Reflector, watchConfigFromEnv } = await import(dist('kube-runtime'));
const { allCrds } = await import(dist('policy-api', 'crds.js'));
const { INFERENCE_POLICY, KARS_SANDBOX } = await import(dist('policy-api', 'types.js'));
const { readEcho, ROUTER_LABEL } = await import(dist('policy-api', 'echo.js'));
const { INFERENCE_POLICY_KIND, MANAGED_BY_LABEL, MANAGED_BY_VALUE, INFERENCE_POLICY_DIGEST_ANNOTATION } = await import(
  dist('policy-compiler')
);

const nowMs = () => nowUs() / 1000;
const remove = (arr, x) => {
  const i = arr.indexOf(x);
  if (i >= 0) arr.splice(i, 1);
};

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/**
 * The targets to run, from `--targets` or BENCH_TARGETS (default `kars,kube`): `kars` is kars
 * apiserver; `kube` the newest pinned kube-apiserver, `kube-1.34` (any pinned minor or version) that
 * one, `kube-all` every pinned one. Returns `[{ id, kind: 'kars' } | { id, kind: 'kube', pin }]`.
 */
function parseTargets(spec) {
  const pins = readPins().kubernetes;
  const out = [];
  const add = (t) => {
    if (!out.some((o) => o.id === t.id)) out.push(t);
  };
  for (const raw of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (raw === 'kars') add({ id: 'kars', kind: 'kars' });
    else if (raw === 'kube-all') for (const pin of pins) add({ id: `kube-${pin.minor}`, kind: 'kube', pin });
    else if (raw === 'kube' || raw.startsWith('kube-')) {
      const pin = pinFor(raw === 'kube' ? undefined : raw.slice(5));
      if (!pin) throw new Error(`target "${raw}": not a pinned Kubernetes version (pinned: ${pins.map((p) => p.minor).join(', ')})`);
      add({ id: `kube-${pin.minor}`, kind: 'kube', pin });
    } else throw new Error(`unknown target "${raw}" (use kars, kube, kube-<minor> such as kube-${pins[0]?.minor}, or kube-all)`);
  }
  if (out.length === 0) throw new Error('no target given');
  return out;
}

function readConfig() {
  const argTargets = (() => {
    const i = process.argv.indexOf('--targets');
    if (i >= 0) return process.argv[i + 1] ?? '';
    return process.argv.find((a) => a.startsWith('--targets='))?.slice('--targets='.length);
  })();
  const peers = (process.env.BENCH_PEERS ?? 'kars,client-node,kfc')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of peers) if (!PEERS[p]) throw new Error(`BENCH_PEERS: unknown peer "${p}" (use ${ALL_PEERS.join(', ')})`);
  const cap = Number(process.env.BENCH_FRESHNESS_CAP_SECS ?? 60);
  if (!Number.isFinite(cap) || cap < 1) throw new Error(`BENCH_FRESHNESS_CAP_SECS must be a number >= 1`);
  const delay = Number(process.env.BENCH_FAULT_DELAY_MAX_SECS ?? 10);
  if (!Number.isFinite(delay) || delay < 0) throw new Error(`BENCH_FAULT_DELAY_MAX_SECS must be a number >= 0`);
  return {
    targetSpec: argTargets ?? process.env.BENCH_TARGETS ?? 'kars,kube',
    edits: envInt('BENCH_EDITS', 40, { min: 0 }),
    warmupEdits: envInt('BENCH_WARMUP_EDITS', 5, { min: 0 }),
    editGapMs: envInt('BENCH_EDIT_GAP_MS', 100, { min: 0 }),
    editTimeoutMs: envInt('BENCH_EDIT_TIMEOUT_SECS', 30) * 1000,
    trials: envInt('BENCH_TRIALS', 3),
    capSecs: cap,
    objects: envInt('BENCH_OBJECTS', 50),
    faultDelayMaxSecs: delay,
    rerunStuck: process.env.BENCH_RERUN_STUCK === '1',
    etcdFsync: process.env.BENCH_ETCD_FSYNC !== '0',
    peers,
  };
}

// ---------------------------------------------------------------------------------------------
// Processes: everything this run starts is registered here and stopped in reverse order, at the
// end, on a failure, and on SIGINT / SIGTERM.
// ---------------------------------------------------------------------------------------------

const cleanups = [];
let signalled = false;
const late = [];
/** Every `kars` child's pid (the stub's command line does not name the run's directory). */
const childPids = new Set();
/**
 * Register `fn` (async) to run at shutdown; returns a function that runs it now and unregisters it,
 * whose `cancel()` only unregisters it.
 */
function onShutdown(what, fn) {
  if (signalled) {
    // Registered after a SIGINT / SIGTERM (a start that was under way): stop it at once.
    late.push(fn().catch(() => undefined));
    throw new Error(`interrupted (${what} stopped)`);
  }
  const entry = { what, fn };
  cleanups.push(entry);
  const run = async () => {
    if (!cleanups.includes(entry)) return;
    remove(cleanups, entry);
    await fn();
  };
  run.cancel = () => remove(cleanups, entry);
  return run;
}
let shuttingDown;
function shutdown() {
  shuttingDown ??= (async () => {
    while (cleanups.length) {
      const { what, fn } = cleanups.pop();
      try {
        await Promise.race([fn(), sleep(30_000).then(() => Promise.reject(new Error('still running after 30 s')))]);
      } catch (err) {
        log(`stopping ${what}: ${errMsg(err)}`);
      }
    }
  })();
  return shuttingDown;
}

/** SIGKILL every process whose command line names `dir`, and every `kars` child still running (the last resort). */
function killMentioning(dir, { children = false } = {}) {
  for (const pid of [...processesMentioning(dir), ...(children ? childPids : [])]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/** A `kars` child (startKars from kube-envtest), stopped at shutdown. */
function karsChild(name, args, env) {
  const c = startKars(name, args, env);
  childPids.add(c.proc.pid);
  void c.exited.then(() => childPids.delete(c.proc.pid));
  c.stop = onShutdown(`kars ${name}`, () => stopKars(c));
  return c;
}

/**
 * Start the server of `target` under `dir`. Resolves with `{ label, version, kubeconfig, port,
 * storage, died(), stop() }`, or `{ skipped: reason }` when the kube binaries are absent (the reason
 * names `npm run kube:build`). The kubeconfig is an admin one (kars: the bearer token; kube: the
 * client certificate in system:masters).
 */
async function startTarget(target, dir, cfg) {
  mkdirSync(dir, { recursive: true });
  if (target.kind === 'kars') {
    const srv = await startKarsApiserver(join(dir, 'apiserver'), ['--bookmark-interval', '60'], {
      onDied: (h) => log(`${h.died}; stderr tail:\n${h.stderr.tail.slice(-10).join('\n')}`),
    });
    const stop = onShutdown('kars apiserver', async () => {
      await srv.stop();
      killMentioning(dir);
    });
    return {
      label: 'kars apiserver',
      version: 'this checkout',
      kubeconfig: srv.kubeconfig,
      port: Number(new URL(srv.url).port),
      storage: 'SQLite, group commit with fsync',
      died: () => srv.died,
      stop,
    };
  }
  const found = findKubeBinaries(target.pin.minor);
  if (!found.binaries) return { skipped: found.reason };
  // The control plane's dir is ours (under the run's temp dir), so an interrupted start can still be
  // found by the processes that name it.
  const cpDir = join(dir, 'control-plane');
  const halfStarted = onShutdown(`kube control plane ${target.pin.version} (starting)`, async () => killMentioning(cpDir));
  // kars apiserver fsyncs every commit (group commit); kube-envtest's etcd does not, unless told to.
  // The same durability on both sides is the default here (BENCH_ETCD_FSYNC=0: envtest's setting).
  const etcdArgs = cfg.etcdFsync ? ['--unsafe-no-fsync=false'] : [];
  const cp = await startControlPlane({ binaries: found.binaries, dir: cpDir, etcdArgs, log: (l) => log(`  ${l}`) });
  halfStarted.cancel();
  const stop = onShutdown(`kube control plane ${target.pin.version}`, async () => {
    await cp.stop();
    killMentioning(cpDir);
  });
  return {
    label: `kube-apiserver ${target.pin.version}`,
    version: target.pin.version,
    kubeconfig: cp.kubeconfig,
    port: Number(new URL(cp.url).port),
    storage: cfg.etcdFsync ? 'etcd with fsync' : 'etcd without fsync (--unsafe-no-fsync)',
    died: () => undefined,
    stop,
  };
}

/** A copy of `kubeconfig` whose server is `https://127.0.0.1:<port>` (the relay); TLS and credentials unchanged. */
function relayKubeconfig(kubeconfig, port, file) {
  const text = readFileSync(kubeconfig, 'utf8');
  // YAML (`server: https://…`) or JSON (`"server": "https://…"`, kube-envtest's).
  const out = text.replace(/(["']?server["']?\s*:\s*)["']?https:\/\/[^\s"',]+["']?/g, `$1"https://127.0.0.1:${port}"`);
  if (out === text) throw new Error(`no "server: https://…" line in ${kubeconfig}`);
  writeFileSync(file, out, { mode: 0o600 });
  return file;
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

const API_VERSION = `${INFERENCE_POLICY.group}/${INFERENCE_POLICY.version}`;
const MONTHLY = 1_000_000_000_000; // room for every dailyTokens the edits write (CEL: monthly ≥ daily)
const EDIT_NS = 'bench-edit';
const POLICY = 'edited';
const SANDBOX = 'sb';
const INSTANCE = 'sb-0';

const inferencePolicy = (daily) => ({
  apiVersion: API_VERSION,
  kind: 'InferencePolicy',
  metadata: { name: POLICY, namespace: EDIT_NS },
  spec: {
    appliesTo: { sandboxName: SANDBOX },
    tokenBudget: { perRequestTokens: 32_000, dailyTokens: daily, monthlyTokens: MONTHLY },
    contentSafety: { hate: 'Low', selfHarm: 'Low', sexual: 'Low', violence: 'Medium', requirePromptShields: true },
    displayName: 'bench policy',
  },
});

function dailyOf(cm) {
  try {
    return JSON.parse(cm?.data?.['inference-policy.json'] ?? 'null')?.tokenBudget?.dailyTokens;
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

const configMap = (ns, name, i) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: ns, labels: { app: 'kars-bench' } },
  data: { v: 'initial', index: String(i), payload: 'x'.repeat(200) },
});

const quietLog = (sink) => {
  const l = {
    debug: () => undefined,
    info: () => undefined,
    warn: (o, msg) => sink(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    error: (o, msg) => sink(`${msg} ${JSON.stringify(o).slice(0, 300)}`),
    child: () => l,
    isLevelEnabled: (level) => level !== 'debug' && level !== 'info',
  };
  return l;
};

/** Retry `fn` until it resolves, for up to `ms` (a just-Established CRD's schema can lag on kube-apiserver). */
async function retry(what, ms, fn) {
  const deadline = nowMs() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (nowMs() > deadline) throw new Error(`${what}: ${errMsg(err)}`);
      await sleep(200);
    }
  }
}

const isConflict = (err) => /\b409\b|AlreadyExists|already exists/i.test(errMsg(err)) || err?.status === 409;

// ---------------------------------------------------------------------------------------------
// Phase 1: edit → ConfigMap / router echo / Ready, with the real controller and router
// ---------------------------------------------------------------------------------------------

async function editPhase(srv, cfg, dir, failures) {
  const watchCfg = watchConfigFromEnv(process.env);
  const api = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const obs = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const ac = new AbortController();
  const runs = [];
  const warnings = [];
  const closeClients = onShutdown('edit-phase clients', async () => {
    ac.abort();
    await Promise.allSettled(runs);
    api.close();
    obs.close();
  });
  const res = { toCm: [], toEcho: [], toReady: [], patchMs: [], timeouts: 0, errors: [] };
  try {
    for (const crd of allCrds()) {
      await api.create(Resources.customresourcedefinitions, crd).catch((err) => {
        if (!isConflict(err)) throw err;
      });
    }
    await retry('the kars CRDs served', 60_000, async () => {
      await api.list(INFERENCE_POLICY, { limit: 1 });
      await api.list(KARS_SANDBOX, { limit: 1 });
    });
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: EDIT_NS } });
    let value = 1_000_000;
    await retry('creating the KarsSandbox', 60_000, () =>
      api.create(KARS_SANDBOX, {
        apiVersion: API_VERSION,
        kind: 'KarsSandbox',
        metadata: { name: SANDBOX, namespace: EDIT_NS },
        spec: { inferenceRef: { name: POLICY } },
      }),
    );
    await retry('creating the InferencePolicy', 60_000, () => api.create(INFERENCE_POLICY, inferencePolicy(value)));

    // Observers (watches; every time below is taken in their change subscribers).
    const subs = [];
    const mk = (name, resource, extra = {}) => {
      const r = new Reflector({
        name,
        client: obs,
        resource,
        namespace: EDIT_NS,
        config: watchCfg,
        log: quietLog((w) => warnings.push(w)),
        ...extra,
      });
      r.subscribe((c) => {
        for (const f of [...subs]) f(name, c);
      });
      runs.push(r.run(ac.signal));
      return r;
    };
    const ips = mk('ip', INFERENCE_POLICY);
    const cms = mk('cm', Resources.configmaps, { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}` });
    const leases = mk('lease', Resources.leases, { labelSelector: `${ROUTER_LABEL}=true` });
    await Promise.all([ips.store.ready(), cms.store.ready(), leases.store.ready()]);

    // The real processes.
    const stub = karsChild('stub', ['stub', 'openai', '--listen', '127.0.0.1:0']);
    const upstream = await stub.url;
    const ctl = karsChild('controller', ['controller', '--kubeconfig', srv.kubeconfig, '--metrics-addr', 'disabled'], {
      LEADER_ELECTION_ENABLED: 'false',
    });
    const router = karsChild('router', [
      'router',
      '--sandbox',
      SANDBOX,
      '--namespace',
      EDIT_NS,
      '--instance',
      INSTANCE,
      '--listen',
      '127.0.0.1:0',
      '--upstream',
      upstream,
      '--kubeconfig',
      srv.kubeconfig,
    ]);
    await router.url;
    const children = [stub, ctl, router];
    const childTail = () => children.map((c) => `--- kars ${c.name}:\n${c.output.join('').slice(-1500)}`).join('\n');
    const dead = () => children.find((c) => c.proc.exitCode !== null || c.proc.signalCode !== null);

    const cmKey = `${EDIT_NS}/${INFERENCE_POLICY_KIND.configMap.name(POLICY)}`;
    const ipKey = `${EDIT_NS}/${POLICY}`;
    // When each InferencePolicy digest first showed up in the router's echo Lease. The Lease and the
    // ConfigMap come on separate watches, so the echo may be seen before the ConfigMap that names
    // the digest; every edit's digest is new (a new dailyTokens), so the first sighting is its echo.
    const echoSeenAt = new Map();
    subs.unshift((name, c) => {
      const d = name === 'lease' && c.type === 'apply' ? readEcho(c.object)?.digests?.InferencePolicy : undefined;
      if (d && !echoSeenAt.has(d)) echoSeenAt.set(d, nowMs());
    });
    const waitFor = (pred, timeoutMs, what) =>
      new Promise((resolve, reject) => {
        let done = false;
        const check = () => {
          if (done) return;
          const d = dead();
          if (d) finish(new Error(`${what}: kars ${d.name} exited\n${childTail()}`));
          else if (pred()) finish();
        };
        const finish = (err) => {
          done = true;
          clearTimeout(timer);
          clearInterval(poll);
          remove(subs, check);
          if (err) reject(err);
          else resolve();
        };
        const timer = setTimeout(() => finish(new Error(`${what}: not within ${timeoutMs / 1000} s\n${childTail()}`)), timeoutMs);
        const poll = setInterval(check, 250);
        subs.push(check);
        check();
      });
    await waitFor(() => isReadyFor(ips.store.get(ipKey)), 120_000, 'the initial Ready (controller compiled, router echoed)');
    log(`  ${POLICY} Ready: controller, router and stub running`);

    const runEdits = async (n, measured) => {
      for (let i = 0; i < n; i++) {
        const v = ++value;
        const w = { t0: 0, cmAt: undefined, digest: undefined, echoAt: undefined, readyAt: undefined };
        const on = (name, c) => {
          if (c.type !== 'apply') return;
          const t = nowMs();
          const key = `${c.object.metadata.namespace}/${c.object.metadata.name}`;
          if (name === 'cm' && w.cmAt === undefined && key === cmKey && dailyOf(c.object) === v) {
            w.cmAt = t;
            w.digest = c.object.metadata.annotations?.[INFERENCE_POLICY_DIGEST_ANNOTATION];
          }
          if (w.echoAt === undefined && w.digest !== undefined) w.echoAt = echoSeenAt.get(w.digest);
          if (
            name === 'ip' &&
            w.readyAt === undefined &&
            key === ipKey &&
            c.object.spec?.tokenBudget?.dailyTokens === v &&
            isReadyFor(c.object)
          )
            w.readyAt = t;
        };
        subs.splice(1, 0, on); // after the echo recorder (subs[0]), before the waiters
        try {
          w.t0 = nowMs();
          await api.patch(INFERENCE_POLICY, EDIT_NS, POLICY, { spec: { tokenBudget: { dailyTokens: v } } }, 'merge');
          const tPatch = nowMs() - w.t0;
          await waitFor(() => w.readyAt !== undefined && w.echoAt !== undefined, cfg.editTimeoutMs, `edit ${i} (dailyTokens=${v})`);
          if (measured) {
            res.patchMs.push(tPatch);
            res.toCm.push(w.cmAt - w.t0);
            res.toEcho.push(w.echoAt - w.t0);
            res.toReady.push(w.readyAt - w.t0);
          }
        } catch (err) {
          if (!measured) throw err;
          res.timeouts++;
          res.errors.push(errMsg(err));
          if (dead()) throw err;
        } finally {
          remove(subs, on);
        }
        if (cfg.editGapMs) await sleep(cfg.editGapMs);
      }
    };
    await runEdits(cfg.warmupEdits, false);
    log(`  ${cfg.edits} measured edits`);
    await runEdits(cfg.edits, true);
    if (res.timeouts) failures.push(`${srv.label}: ${res.timeouts} of ${cfg.edits} edits not Ready in time (first: ${res.errors[0]})`);
    for (const c of children.reverse()) await c.stop();
  } finally {
    await closeClients();
  }
  res.warnings = warnings;
  return res;
}

// ---------------------------------------------------------------------------------------------
// Phase 2: the three watch clients after a silent drop (our FaultRelay in front of the server)
// ---------------------------------------------------------------------------------------------

async function dropPhase(srv, cfg, dir, failures) {
  const NS = 'bench-fresh';
  const api = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const relay = new FaultRelay(srv.port);
  const closeAll = onShutdown('fault relay and drop-phase client', async () => {
    await relay.close();
    api.close();
  });
  const trials = [];
  try {
    const relayPort = await relay.listen('127.0.0.1:0');
    const kubeconfig = relayKubeconfig(srv.kubeconfig, relayPort, join(dir, 'relay.kubeconfig'));
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const names = [...Array.from({ length: cfg.objects }, (_, i) => `cm-${i}`), 'sync-probe', 'target'];
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(names.slice(i, i + 16).map((n, j) => api.create(Resources.configmaps, configMap(NS, n, i + j))));
    const patch = (name, v) => api.patch(Resources.configmaps, NS, name, { data: { v } }, 'merge');
    // KFC reads KUBECONFIG (client-node's loadFromDefault) on every request.
    process.env.KUBECONFIG = kubeconfig;
    const seenInFirst = {};
    for (let trial = 1; trial <= cfg.trials; trial++) {
      const kinds = trial === 1 || cfg.rerunStuck ? cfg.peers : cfg.peers.filter((p) => seenInFirst[p]);
      if (kinds.length === 0) break;
      log(`  trial ${trial}/${cfg.trials}: ${kinds.join(', ')}`);
      const lifelog = Object.fromEntries(kinds.map((k) => [k, []]));
      const peers = {};
      const rec = { trial, results: {} };
      try {
        for (const k of kinds)
          peers[k] = await createPeer(k, {
            kubeconfig,
            namespace: NS,
            log: (m) => lifelog[k].push({ t: nowMs(), m }),
            track: ['sync-probe', 'target'],
          });
        const seenAt = {};
        let editValue;
        for (const k of kinds)
          peers[k].onChange((name, data) => {
            if (editValue !== undefined && name === 'target' && data?.v === editValue && seenAt[k] === undefined) seenAt[k] = nowMs();
          });
        for (const k of kinds) peers[k].start();
        const waitAll = async (pred, ms, what) => {
          const deadline = nowMs() + ms;
          for (;;) {
            const missing = kinds.filter((k) => !pred(k));
            if (missing.length === 0) return;
            if (nowMs() > deadline) throw new Error(`trial ${trial}: ${missing.join(', ')} did not ${what} within ${ms / 1000} s`);
            await sleep(25);
          }
        };
        await waitAll((k) => peers[k].size() >= names.length, 60_000, `list all ${names.length} objects`);
        const syncValue = `sync-${trial}-${Math.random().toString(36).slice(2, 8)}`;
        await patch('sync-probe', syncValue);
        await waitAll((k) => peers[k].get('sync-probe')?.v === syncValue, 60_000, 'see the sync edit through its watch');
        rec.faultDelayMs = Math.random() * cfg.faultDelayMaxSecs * 1000;
        await sleep(rec.faultDelayMs);
        rec.connections = relay.size;
        const tFreeze = nowMs();
        rec.frozen = relay.freeze();
        editValue = `edit-${trial}-${Math.random().toString(36).slice(2, 8)}`;
        const tEdit = nowMs();
        await patch('target', editValue); // straight to the server, not through the relay
        log(`    froze ${rec.frozen} of ${rec.connections} relayed connection(s); edit sent; waiting up to ${cfg.capSecs} s`);
        for (;;) {
          for (const k of kinds) if (seenAt[k] === undefined && peers[k].get('target')?.v === editValue) seenAt[k] = nowMs();
          if (kinds.every((k) => seenAt[k] !== undefined) || nowMs() - tEdit >= cfg.capSecs * 1000) break;
          await sleep(25);
        }
        rec.waitedMs = nowMs() - tEdit;
        for (const k of kinds) {
          const seenMs = seenAt[k] === undefined ? null : seenAt[k] - tEdit;
          if (trial === 1) seenInFirst[k] = seenMs !== null;
          rec.results[k] = {
            seenMs,
            events: lifelog[k].filter((e) => e.t >= tFreeze).map((e) => `${fmt1((e.t - tEdit) / 1000)} s ${e.m}`.slice(0, 160)),
          };
          log(
            `    ${k}: ${seenMs === null ? `not seen within ${fmt1(rec.waitedMs / 1000)} s` : `saw the edit after ${fmt2(seenMs / 1000)} s`}`,
          );
        }
      } catch (err) {
        failures.push(`${srv.label}, drop trial ${trial}: ${errMsg(err)}`);
      } finally {
        for (const k of Object.keys(peers)) await peers[k].stop().catch((e) => failures.push(`${srv.label}: stopping ${k}: ${errMsg(e)}`));
        relay.resetAll(); // the frozen connections go; the next trial starts clean
        trials.push(rec);
      }
      await sleep(500);
    }
  } finally {
    await closeAll();
  }
  return trials;
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

function stats(values) {
  const s = Float64Array.from(values.filter((v) => Number.isFinite(v))).sort();
  return { n: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99) };
}

/** `a ÷ b` as `1.23×`, with `>`/`<` when one side is a lower bound (not seen within the cap). */
function ratio(a, b) {
  if (!a || !b || !Number.isFinite(a.value) || !Number.isFinite(b.value) || b.value <= 0) return '–';
  if (a.bound && b.bound) return '–';
  const r = a.value / b.value;
  const txt = `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`;
  return a.bound ? `> ${txt}` : b.bound ? `< ${txt}` : txt;
}

/** Median and p99 (nearest rank) of drop trials; an unseen edit counts as the time waited, a lower bound. */
function dropStats(trials, peer) {
  const rs = trials.flatMap((t) => (t.results[peer] ? [{ ...t.results[peer], waitedMs: t.waitedMs }] : []));
  if (!rs.length) return undefined;
  const vals = rs.map((r) => ({ v: r.seenMs === null ? Infinity : r.seenMs / 1000, waited: r.waitedMs / 1000 })).sort((a, b) => a.v - b.v);
  const pick = (q) => vals[Math.min(vals.length - 1, Math.max(0, Math.ceil(q * vals.length) - 1))];
  const cell = (x) => (Number.isFinite(x.v) ? { value: x.v, bound: false } : { value: x.waited, bound: true });
  return { n: rs.length, seen: rs.filter((r) => r.seenMs !== null).length, p50: cell(pick(0.5)), p99: cell(pick(0.99)) };
}

const fmtCell = (c) => (c === undefined ? '–' : c.bound ? `not seen (> ${fmt1(c.value)} s)` : `${fmt1(c.value)} s`);

function report(cfg, results, skipped, meta) {
  const ran = results.filter((r) => r.srv);
  const base = ran.find((r) => r.target.kind === 'kars');
  const others = ran.filter((r) => r !== base);
  const lines = [
    '## kars apiserver and kube-apiserver side by side',
    '',
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · load avg ${fmt2(meta.loadStart[0])} at start, ${fmt2(os.loadavg()[0])} at end · runtime ${fmt1(meta.runtimeSec)} s`,
    '',
    `Targets, one after the other: ${ran.length ? ran.map((r) => `**${r.srv.label}** (${r.srv.storage}; load avg ${fmt1(r.loadStart)} → ${fmt1(r.loadEnd)})`).join(', ') : 'none ran'}.`,
    ...skipped.map((s) => `\n**${s.id} skipped**: ${s.reason}. Only the other targets' columns are shown.`),
    '',
    '### Edit latency (real `kars controller`, `kars router` and `kars stub openai` as processes)',
    '',
  ];
  const head = [
    'metric',
    ...ran.map((r) => `${r.srv.label} p50 / p99`),
    ...(base ? others.map((r) => `${r.target.id} ÷ kars p50 / p99`) : []),
  ];
  lines.push(mdRow(head), `|${head.map(() => '---').join('|')}|`);
  const metrics = [
    ['edit → ConfigMap', 'toCm'],
    ['edit → router echo', 'toEcho'],
    ['edit → Ready', 'toReady'],
    ['(the PATCH itself)', 'patchMs'],
  ];
  for (const [label, key] of metrics) {
    const st = ran.map((r) => (r.edits ? stats(r.edits[key]) : undefined));
    const cells = st.map((s) => (s && s.n ? `${fmt1(s.p50)} / ${fmt1(s.p99)} ms (n=${s.n})` : '–'));
    const bs = base ? st[ran.indexOf(base)] : undefined;
    const ratios = base
      ? others.map((r) => {
          const s = st[ran.indexOf(r)];
          if (!s?.n || !bs?.n) return '–';
          return `${ratio({ value: s.p50 }, { value: bs.p50 })} / ${ratio({ value: s.p99 }, { value: bs.p99 })}`;
        })
      : [];
    lines.push(mdRow([label, ...cells, ...ratios]));
  }
  lines.push(
    '',
    `Each edit is a merge PATCH of spec.tokenBudget.dailyTokens (${cfg.warmupEdits} unmeasured first, then ${cfg.edits} measured, sequential, ${cfg.editGapMs} ms apart); the times run from just before the PATCH until the bench's own watches see: the compiled ConfigMap holding the new value; the router's echo Lease carrying that ConfigMap's digest; the policy Ready at its generation with loadedDigest = compiledDigest. One sandbox, one router. p99 is the nearest rank: with n ≤ 100 it is the largest sample.`,
    '',
    `### A silent drop: ${cfg.peers.length} watch clients, each with its default / recommended settings`,
    '',
  );
  const dhead = [
    'watch client',
    ...ran.map((r) => `${r.srv.label} median / p99`),
    ...(base ? others.map((r) => `${r.target.id} ÷ kars (median)`) : []),
    ...ran.map((r) => `÷ kars Reflector on ${r.target.id} (median)`),
  ];
  lines.push(mdRow(dhead), `|${dhead.map(() => '---').join('|')}|`);
  for (const p of cfg.peers) {
    const ds = ran.map((r) => dropStats(r.drops ?? [], p));
    const cells = ds.map((d) => (d ? `${fmtCell(d.p50)} / ${fmtCell(d.p99)} (n=${d.n}${d.seen < d.n ? `, seen in ${d.seen}` : ''})` : '–'));
    const bd = base ? ds[ran.indexOf(base)] : undefined;
    const tRatios = base ? others.map((r) => ratio(ds[ran.indexOf(r)]?.p50, bd?.p50)) : [];
    const pRatios = ran.map((r, i) => (p === 'kars' ? '1×' : ratio(ds[i]?.p50, dropStats(r.drops ?? [], 'kars')?.p50)));
    lines.push(mdRow([PEERS[p].label, ...cells, ...tRatios, ...pRatios]));
  }
  lines.push(
    '',
    `The drop: every client watches ${cfg.objects + 2} ConfigMaps through a FaultRelay (@kars/kube-core) in front of the server, its kubeconfig pointed at the relay (TLS passes through; the server's CA still verifies 127.0.0.1). Once all have listed and seen a sync edit, a random 0–${cfg.faultDelayMaxSecs} s later the relay freezes every connection in both directions (no FIN, no RST; its kernel still ACKs, so TCP keepalive never fires), and a merge PATCH of \`target\` goes straight to the server. The time runs from that PATCH to the client's cache holding the new value; cap ${fmt1(cfg.capSecs)} s ("not seen" counts as more than the time waited). ${cfg.trials} trial(s)${cfg.rerunStuck ? '' : '; a client that missed the edit in trial 1 is not re-run (each such trial costs the cap)'}.`,
    '',
    '### Per trial',
    '',
    '| target | trial | client | result | what it did after the freeze (seconds from the edit) |',
    '|---|---|---|---|---|',
  );
  for (const r of ran)
    for (const t of r.drops ?? [])
      for (const [k, x] of Object.entries(t.results))
        lines.push(
          mdRow([
            r.target.id,
            String(t.trial),
            k,
            x.seenMs === null ? `not seen within ${fmt1(t.waitedMs / 1000)} s` : `${fmt2(x.seenMs / 1000)} s`,
            x.events.length
              ? x.events.slice(0, 4).join('; ') + (x.events.length > 4 ? `; … (${x.events.length})` : '')
              : 'nothing: no error, no reconnect',
          ]),
        );
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async function main() {
  const tStart = nowMs();
  const loadStart = os.loadavg();
  const cfg = readConfig();
  const targets = parseTargets(cfg.targetSpec);
  const failures = [];
  const skipped = [];
  const results = [];
  const root = mkdtempSync(join(os.tmpdir(), 'kars-bench-targets-'));
  log(`config ${JSON.stringify(cfg)}; targets ${targets.map((t) => t.id).join(', ')}; temp dir ${root}`);
  const onSignal = (sig) => {
    if (signalled) {
      killMentioning(root, { children: true });
      process.exit(130);
    }
    signalled = true;
    log(`${sig}: stopping everything this run started (again to kill at once)`);
    void shutdown()
      .then(() => Promise.allSettled(late))
      .finally(() => {
        killMentioning(root, { children: true });
        removeTempDir(root);
        process.exit(130);
      });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const strays = [];
  process.on('unhandledRejection', (r) => strays.push(`unhandledRejection: ${errMsg(r)}`));
  process.on('uncaughtException', (e) => strays.push(`uncaughtException: ${e instanceof Error ? e.stack : String(e)}`));

  try {
    for (const target of targets) {
      if (signalled) break;
      const tdir = join(root, target.id);
      log(`target ${target.id}: starting`);
      const t0 = nowMs();
      let srv;
      const r = { target };
      try {
        srv = await startTarget(target, tdir, cfg);
        if (srv.skipped) {
          log(`target ${target.id}: skipped: ${srv.skipped}`);
          skipped.push({ id: target.id, reason: srv.skipped });
          continue;
        }
        r.srv = srv;
        r.startSec = (nowMs() - t0) / 1000;
        r.loadStart = os.loadavg()[0];
        log(`target ${target.id}: ${srv.label} up in ${fmt1(r.startSec)} s`);
        // A phase that fails is reported; the other still runs.
        if (cfg.edits > 0) {
          log(`target ${target.id}: 1/2 edits`);
          r.edits = await editPhase(srv, cfg, tdir, failures).catch((err) => {
            failures.push(`${target.id}, edits: ${err instanceof Error ? err.stack : String(err)}`);
            return undefined;
          });
        }
        log(`target ${target.id}: 2/2 silent drop (${cfg.peers.join(', ')})`);
        r.drops = await dropPhase(srv, cfg, tdir, failures).catch((err) => {
          failures.push(`${target.id}, silent drop: ${err instanceof Error ? err.stack : String(err)}`);
          return undefined;
        });
        if (srv.died()) failures.push(srv.died());
      } catch (err) {
        failures.push(`${target.id}: ${err instanceof Error ? err.stack : String(err)}`);
      } finally {
        r.loadEnd = os.loadavg()[0];
        results.push(r);
        await shutdown(); // this target's processes go before the next target starts
        shuttingDown = undefined;
        const left = processesMentioning(tdir);
        if (left.length) failures.push(`${target.id}: processes still running after stop: ${left.join(', ')}`);
      }
    }
  } finally {
    await shutdown();
    removeTempDir(root);
  }
  const runtimeSec = (nowMs() - tStart) / 1000;
  const lines = report(cfg, results, skipped, { loadStart, runtimeSec });
  if (strays.length)
    lines.push(
      '',
      '**Errors thrown inside clients (not benchmark failures)**',
      '',
      ...strays.slice(0, 10).map((s) => `- ${s.split('\n')[0]}`),
    );
  return finishRun('targets', {
    lines,
    failures,
    footer:
      "Shared 2-core machine: quote medians and ratios, not absolute figures; the targets run one after the other (each alone on the machine, as far as this run goes), and the drop times are dominated by the clients' timers.",
    config: cfg,
    runtimeSec,
    machine: { loadAvgStart: loadStart, loadAvgEnd: os.loadavg() },
    json: {
      skipped,
      strays,
      targets: results.map((r) => ({
        id: r.target.id,
        label: r.srv?.label,
        storage: r.srv?.storage,
        startSec: r.startSec,
        edits: r.edits,
        drops: r.drops,
      })),
    },
    markdown: true,
  });
}

// Third-party clients leave keep-alive sockets and timers behind (KFC keeps idle undici
// connections for 10 min), so exit explicitly.
runMain(main, { exit: true, onError: () => void shutdown() });
