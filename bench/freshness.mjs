#!/usr/bin/env node
// Watch freshness benchmark: how long after a silently dropped watch (no FIN, no RST) does each
// cache see a change? Side by side: the kars Reflector (default shared config, and with pings
// off so only the idle deadline acts), the @kubernetes/client-node informer, and the
// kubernetes-fluent-client (KFC) Watcher. Also events/s one watcher sustains and heap per
// 10,000 cached objects. See bench/README.md ("Watch freshness") for what each number means.
//
//   npm run bench:freshness                       # build, then defaults (8–10 min on the 2-core VM)
//   BENCH_QUICK=1 node bench/freshness.mjs        # smoke test, ~1 min (needs a prior `npx tsc -b`)
//   BENCH_FAULT=blackhole node bench/freshness.mjs   # also drop the frozen flows' packets (root + iptables)
//
// Env: BENCH_QUICK, BENCH_TRIALS, BENCH_FRESHNESS_CAP_SECS, BENCH_OBJECTS, BENCH_UPDATES,
// BENCH_MEM_OBJECTS, BENCH_PEERS, BENCH_PHASES, BENCH_FAULT, BENCH_RERUN_STUCK,
// BENCH_BOOKMARK_SECS, BENCH_KEEP (see the README table).

import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cpuLine,
  errMsg,
  expectStatus,
  finishRun,
  fmt1,
  fmt2,
  fmtInt,
  httpsJsonClient,
  log,
  mdEscape,
  mdRow,
  nowUs,
  removeTempDir,
  runMain,
  runPool,
  sleep,
  startKarsApiserver,
} from './lib.mjs';
import { ALL_PEERS, CN_VERSION, KFC_VERSION, PEERS, createPeer } from './watch-peers.mjs';

const SELF = fileURLToPath(import.meta.url);

const nowMs = () => nowUs() / 1000;

// ---------------------------------------------------------------------------------------------
// Child process: one peer alone, for events/s and heap per cached object (fork + IPC).
// ---------------------------------------------------------------------------------------------

async function childMain(spec) {
  const send = (m) => process.send?.(m);
  const inbox = [];
  let wake;
  process.on('message', (m) => {
    inbox.push(m);
    wake?.();
  });
  process.on('disconnect', () => process.exit(0)); // the benchmark process went away
  const next = async (cmd) => {
    for (;;) {
      const i = inbox.findIndex((m) => m.cmd === cmd || m.cmd === 'exit');
      if (i >= 0) {
        const m = inbox.splice(i, 1)[0];
        if (m.cmd === 'exit') process.exit(0);
        return m;
      }
      await new Promise((r) => (wake = r));
    }
  };
  const waitUntil = async (pred, timeoutMs, what) => {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`${spec.peer}: timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(20);
    }
  };
  const gcSettle = async () => {
    for (let i = 0; i < 6; i++) {
      global.gc?.();
      await sleep(30);
    }
  };
  const plog = () => undefined;
  try {
    if (spec.role === 'memory' && typeof global.gc !== 'function') throw new Error('memory child needs --expose-gc');
    if (spec.role === 'memory' && spec.warmNamespace) {
      // Warm-up peer on a small namespace: loads and compiles the library's list/watch/parse paths
      // and TLS, so the measured delta is the cache, not one-time code.
      const warm = await createPeer(spec.peer, { kubeconfig: spec.kubeconfig, namespace: spec.warmNamespace, log: plog, track: [] });
      warm.start();
      await waitUntil(() => warm.size() >= spec.warmCount, 60_000, `warm-up list of ${spec.warmCount}`);
      await sleep(300);
      await warm.stop();
      await sleep(300);
    }
    const peer = await createPeer(spec.peer, {
      kubeconfig: spec.kubeconfig,
      namespace: spec.namespace,
      log: plog,
      track: [spec.probeName],
    });
    let probeValue;
    let probeSeen = false;
    let counting = false;
    let count = 0;
    let firstUs = 0;
    let lastUs = 0;
    peer.onChange((name, data) => {
      if (name === spec.probeName && probeValue !== undefined && data?.probe === probeValue) probeSeen = true;
      if (counting && data?.seq !== undefined) {
        const t = nowUs();
        if (count === 0) firstUs = t;
        lastUs = t;
        count++;
      }
    });
    await gcSettle();
    const base = process.memoryUsage();
    send({ ev: 'ready' });
    await next('start');
    const t0 = nowMs();
    peer.start();
    await waitUntil(() => peer.size() >= spec.expect, 300_000, `list of ${spec.expect} objects`);
    const listedMs = nowMs() - t0;
    send({ ev: 'listed', ms: listedMs });
    const pm = await next('probe');
    probeValue = pm.value;
    send({ ev: 'probe-armed' });
    await waitUntil(() => probeSeen || peer.get(spec.probeName)?.probe === probeValue, 60_000, 'the probe edit (watch open)');
    send({ ev: 'synced', ms: nowMs() - t0 });

    if (spec.role === 'memory') {
      await next('measure');
      await sleep(1000);
      await gcSettle();
      const after = process.memoryUsage();
      send({ ev: 'memory', base, after, size: peer.size(), listedMs });
    } else {
      await next('go');
      counting = true;
      const cpu0 = process.cpuUsage();
      send({ ev: 'armed' });
      const progress = setInterval(() => send({ ev: 'progress', count, lastUs }), 200);
      await next('report');
      clearInterval(progress);
      const cpu = process.cpuUsage(cpu0);
      send({
        ev: 'report',
        count,
        firstUs,
        lastUs,
        cpuUserUs: cpu.user,
        cpuSystemUs: cpu.system,
        heapUsed: process.memoryUsage().heapUsed,
      });
    }
    await next('exit');
  } catch (err) {
    send({ ev: 'error', error: err instanceof Error ? err.stack : String(err) });
    process.exit(1);
  }
}

/** Fork one peer child; returns helpers to talk to it. */
function startChild(spec, env) {
  const extra = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = fork(SELF, ['--child', JSON.stringify(spec)], {
    execArgv: ['--expose-gc', ...extra],
    env,
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const msgs = [];
  let wake;
  const stderrTail = [];
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c) => {
    for (const l of c.split('\n')) {
      if (!l.trim()) continue;
      stderrTail.push(l);
      if (stderrTail.length > 30) stderrTail.shift();
    }
  });
  let exited;
  child.on('message', (m) => {
    msgs.push(m);
    wake?.();
  });
  child.on('exit', (code, signal) => {
    exited = { code, signal };
    wake?.();
  });
  const wait = async (ev, timeoutMs) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const err = msgs.find((m) => m.ev === 'error');
      if (err) throw new Error(`${spec.peer} child: ${err.error}`);
      const i = msgs.findIndex((m) => m.ev === ev);
      if (i >= 0) return msgs.splice(i, 1)[0];
      if (exited)
        throw new Error(`${spec.peer} child exited (${JSON.stringify(exited)}) while waiting for "${ev}"\n${stderrTail.join('\n')}`);
      if (Date.now() > deadline)
        throw new Error(`${spec.peer} child: timed out after ${timeoutMs} ms waiting for "${ev}"\n${stderrTail.join('\n')}`);
      await Promise.race([new Promise((r) => (wake = r)), sleep(100)]);
    }
  };
  return {
    child,
    msgs,
    wait,
    send: (m) => child.connected && child.send(m),
    latest: (ev) => [...msgs].reverse().find((m) => m.ev === ev),
    async close() {
      if (exited) return;
      if (child.connected) child.send({ cmd: 'exit' });
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      while (!exited) await new Promise((r) => child.once('exit', r));
      clearTimeout(t);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Server, HTTP and fault helpers
// ---------------------------------------------------------------------------------------------

/** Start `kars apiserver` with fault injection as a child process. `died` is set (and logged) if it exits unasked. */
async function startServer(dataDir, bookmarkSecs) {
  const srv = await startKarsApiserver(dataDir, ['--enable-fault-injection', '--bookmark-interval', String(bookmarkSecs)], {
    onDied: (h) => log(`${h.died}; stderr tail:\n${h.stderr.tail.slice(-10).join('\n')}`),
  });
  srv.stderrTail = srv.stderr.tail;
  return srv;
}

function configMap(name, i, extra = {}) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      labels: { app: 'kars-bench', 'bench.kars.dev/shard': String(i % 16) },
      annotations: { 'bench.kars.dev/purpose': 'watch freshness benchmark' },
    },
    data: { v: 'initial', index: String(i), payload: 'x'.repeat(200), ...extra },
  };
}

/** Client-side ports of ESTABLISHED TCP connections to 127.0.0.1:`port` (from /proc/net/tcp). */
function clientPortsTo(port) {
  const ports = [];
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== '01') continue;
    const lp = parseInt(f[1].split(':')[1], 16);
    const rp = parseInt(f[2].split(':')[1], 16);
    if (rp === port) ports.push(lp);
  }
  return ports;
}

/** Packet-level black hole for chosen flows (iptables DROP in both directions, own chain). */
const Blackhole = {
  chain: 'KARS_BENCH_BLACKHOLE',
  active: false,
  ipt(...args) {
    return execFileSync('iptables', ['-w', ...args], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  },
  setup() {
    try {
      this.ipt('-N', this.chain);
    } catch {
      this.ipt('-F', this.chain);
    }
    try {
      this.ipt('-C', 'INPUT', '-j', this.chain);
    } catch {
      this.ipt('-I', 'INPUT', '-j', this.chain);
    }
    this.active = true;
  },
  drop(clientPort, serverPort) {
    const base = ['-A', this.chain, '-p', 'tcp', '-s', '127.0.0.1', '-d', '127.0.0.1'];
    this.ipt(...base, '--sport', String(clientPort), '--dport', String(serverPort), '-j', 'DROP');
    this.ipt(...base, '--sport', String(serverPort), '--dport', String(clientPort), '-j', 'DROP');
  },
  flush() {
    if (this.active) this.ipt('-F', this.chain);
  },
  teardown() {
    if (!this.active) return;
    this.active = false;
    for (const args of [
      ['-D', 'INPUT', '-j', this.chain],
      ['-F', this.chain],
      ['-X', this.chain],
    ]) {
      try {
        this.ipt(...args);
      } catch {
        // already gone
      }
    }
  },
};

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// ---------------------------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------------------------

function readConfig() {
  const quick = process.env.BENCH_QUICK === '1';
  const num = (name, def, min) => {
    const v = process.env[name];
    if (v === undefined || v === '') return def;
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${v}"`);
    return n;
  };
  const int = (name, def, min) => {
    const n = num(name, def, min);
    if (!Number.isInteger(n)) throw new Error(`${name} must be an integer, got "${process.env[name]}"`);
    return n;
  };
  const peers = (process.env.BENCH_PEERS ?? ALL_PEERS.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of peers) if (!PEERS[p]) throw new Error(`BENCH_PEERS: unknown peer "${p}" (use ${ALL_PEERS.join(', ')})`);
  const phases = (process.env.BENCH_PHASES ?? 'freshness,throughput,memory')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of phases) if (!['freshness', 'throughput', 'memory'].includes(p)) throw new Error(`BENCH_PHASES: unknown phase "${p}"`);
  const fault = process.env.BENCH_FAULT ?? 'freeze';
  if (!['freeze', 'blackhole'].includes(fault)) throw new Error(`BENCH_FAULT must be freeze or blackhole, got "${fault}"`);
  return {
    quick,
    trials: int('BENCH_TRIALS', quick ? 1 : 3, 1),
    capSecs: num('BENCH_FRESHNESS_CAP_SECS', quick ? 20 : 180, 1),
    objects: int('BENCH_OBJECTS', quick ? 50 : 300, 1),
    updates: int('BENCH_UPDATES', quick ? 2000 : 20_000, 16),
    memObjects: int('BENCH_MEM_OBJECTS', quick ? 1000 : 10_000, 10),
    warmObjects: quick ? 20 : 100,
    tputObjects: 64,
    concurrency: 16,
    createConcurrency: 32,
    bookmarkSecs: int('BENCH_BOOKMARK_SECS', 60, 1),
    faultDelayMaxSecs: num('BENCH_FAULT_DELAY_MAX_SECS', 10, 0),
    rerunStuck: process.env.BENCH_RERUN_STUCK === '1',
    peers,
    phases,
    fault,
  };
}

async function main() {
  const tStart = nowMs();
  const cfg = readConfig();
  const failures = [];
  const raw = { trials: [], throughput: {}, memory: {} };
  const loadStart = os.loadavg();
  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-freshness-'));
  const dataDir = join(dataRoot, 'apiserver');
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir}`);

  let srv;
  let http;
  const onSignal = (sig) => {
    Blackhole.teardown();
    srv?.child.kill('SIGKILL');
    log(`${sig}: stopped`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // A third-party peer's stray rejection must not kill the whole benchmark; it is reported.
  const strays = [];
  process.on('unhandledRejection', (r) => strays.push(`unhandledRejection: ${errMsg(r)}`));
  process.on('uncaughtException', (e) => strays.push(`uncaughtException: ${e instanceof Error ? e.stack : String(e)}`));

  try {
    if (cfg.fault === 'blackhole') {
      if (process.getuid?.() !== 0) throw new Error('BENCH_FAULT=blackhole needs root (iptables)');
      try {
        execFileSync('iptables', ['-V'], { stdio: 'ignore' });
      } catch {
        throw new Error('BENCH_FAULT=blackhole needs the iptables command (apt-get install iptables)');
      }
      Blackhole.setup();
    }

    srv = await startServer(dataDir, cfg.bookmarkSecs);
    const relayPort = Number(new URL(srv.url).port);
    log(`server pid ${srv.pid} at ${srv.url}, kubeconfig ${srv.kubeconfig}`);
    http = httpsJsonClient(srv.url, srv.ca, srv.token, { maxSockets: cfg.createConcurrency, timeoutMs: 30_000 });
    const { request } = http;
    expectStatus(await request('GET', '/version'), [200], 'GET /version');
    const createNs = async (ns) =>
      expectStatus(
        await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }),
        [201, 409],
        `create namespace ${ns}`,
      );
    const createMany = async (ns, prefix, n) => {
      await createNs(ns);
      const { errors: errs } = await runPool(n, cfg.createConcurrency, async (i) => {
        expectStatus(
          await request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
            ...configMap(`${prefix}${i}`, i),
            metadata: { ...configMap(`${prefix}${i}`, i).metadata, namespace: ns },
          }),
          [201],
          `create ${ns}/${prefix}${i}`,
        );
      });
      if (errs.length) throw new Error(`creating ${n} ConfigMaps in ${ns}: ${errs.length} failed (first: ${errs[0]})`);
    };
    const patchData = async (ns, name, data, fresh) => {
      const t0 = nowMs();
      expectStatus(
        await request(
          'PATCH',
          `/api/v1/namespaces/${ns}/configmaps/${name}`,
          { data },
          { fresh, contentType: 'application/merge-patch+json' },
        ),
        [200],
        `patch ${ns}/${name}`,
      );
      return nowMs() - t0;
    };
    const childEnv = { ...process.env, KUBECONFIG: srv.kubeconfig };
    /**
     * Start child `c`'s peer, wait until it has listed, then write a probe value into `ns/name` and
     * wait until the peer has seen it; resolves with the child's `synced` message.
     */
    const startAndSync = async (c, ns, name, { readyMs, listedMs }) => {
      await c.wait('ready', readyMs);
      c.send({ cmd: 'start' });
      await c.wait('listed', listedMs);
      const probe = `p-${Math.random().toString(36).slice(2, 8)}`;
      c.send({ cmd: 'probe', value: probe });
      await c.wait('probe-armed', 10_000);
      await patchData(ns, name, { probe }, false);
      return c.wait('synced', 60_000);
    };

    // ---- 1. freshness after a silent drop ---------------------------------------------------
    const freshPeers = cfg.peers;
    const results = Object.fromEntries(freshPeers.map((p) => [p, []]));
    if (cfg.phases.includes('freshness')) {
      const NS = 'fresh';
      const total = cfg.objects + 2;
      log(
        `1/3 freshness: ${total} ConfigMaps in "${NS}", peers ${freshPeers.join(', ')}, ${cfg.trials} trial(s), cap ${cfg.capSecs} s, fault ${cfg.fault}`,
      );
      await createMany(NS, 'cm-', cfg.objects);
      for (const name of ['sync-probe', 'target']) {
        expectStatus(
          await request('POST', `/api/v1/namespaces/${NS}/configmaps`, {
            ...configMap(name, 0),
            metadata: { ...configMap(name, 0).metadata, namespace: NS },
          }),
          [201],
          `create ${name}`,
        );
      }
      process.env.KUBECONFIG = srv.kubeconfig; // for KFC (set before it is imported)

      for (let trial = 1; trial <= cfg.trials; trial++) {
        const kinds = trial === 1 || cfg.rerunStuck ? freshPeers : freshPeers.filter((p) => results[p][0]?.seenMs !== null);
        if (kinds.length === 0) break;
        log(`  trial ${trial}/${cfg.trials}: ${kinds.join(', ')}`);
        const tCreate = nowMs();
        const lifelog = Object.fromEntries(kinds.map((k) => [k, []]));
        const peers = {};
        for (const k of kinds) {
          peers[k] = await createPeer(k, {
            kubeconfig: srv.kubeconfig,
            namespace: NS,
            log: (m) => lifelog[k].push({ t: nowMs(), m }),
            track: ['sync-probe', 'target'],
          });
        }
        const seenAt = {};
        let edit;
        for (const k of kinds) {
          peers[k].onChange((name, data) => {
            if (edit && name === 'target' && data?.v === edit.value && seenAt[k] === undefined) seenAt[k] = nowMs();
          });
        }
        for (const k of kinds) peers[k].start();
        const waitAll = async (pred, ms, what) => {
          const deadline = nowMs() + ms;
          for (;;) {
            const missing = kinds.filter((k) => !pred(k));
            if (missing.length === 0) return;
            if (nowMs() > deadline)
              throw new Error(
                `trial ${trial}: ${missing.join(', ')} did not ${what} within ${ms / 1000} s (sizes ${missing.map((k) => `${k}=${peers[k].size()}`).join(', ')})`,
              );
            await sleep(25);
          }
        };
        const trialRec = { trial, peers: kinds, fault: cfg.fault };
        try {
          await waitAll((k) => peers[k].size() >= total, 60_000, `list all ${total} objects`);
          const syncValue = `sync-${trial}-${Math.random().toString(36).slice(2, 8)}`;
          await patchData(NS, 'sync-probe', { v: syncValue }, true);
          await waitAll((k) => peers[k].get('sync-probe')?.v === syncValue, 60_000, 'see the sync edit through its watch');
          trialRec.syncMs = nowMs() - tCreate;
          // The fault lands at a random point of kars' 10 s ping period (and that long after the
          // last byte every watch received), not at a fixed offset from the connection's start.
          trialRec.faultDelayMs = Math.random() * cfg.faultDelayMaxSecs * 1000;
          http.resetPool(); // the benchmark's own pooled connections are not part of the fault
          await sleep(trialRec.faultDelayMs);
          trialRec.connectionsBefore = clientPortsTo(relayPort).length;

          // Inject the silent drop, then edit through a fresh connection.
          const tFreeze = nowMs();
          const fr = expectStatus(
            await request('POST', '/debug/faults/freeze', undefined, { fresh: true }),
            [200],
            'POST /debug/faults/freeze',
          );
          trialRec.frozenStreams = fr.frozen;
          if (cfg.fault === 'blackhole') {
            const ports = clientPortsTo(relayPort);
            for (const p of ports) Blackhole.drop(p, relayPort);
            trialRec.blackholedConnections = ports.length;
          }
          const value = `edit-${trial}-${Math.random().toString(36).slice(2, 8)}`;
          const tEdit = nowMs();
          edit = { value, tEdit };
          trialRec.freezeToEditMs = tEdit - tFreeze;
          trialRec.editLatencyMs = await patchData(NS, 'target', { v: value }, true);
          log(
            `    froze ${fr.frozen} watch stream(s)${cfg.fault === 'blackhole' ? ` and black-holed ${trialRec.blackholedConnections} connection(s)` : ''}; edit sent; waiting up to ${cfg.capSecs} s`,
          );
          const capMs = cfg.capSecs * 1000;
          let lastNote = 0;
          for (;;) {
            for (const k of kinds) if (seenAt[k] === undefined && peers[k].get('target')?.v === value) seenAt[k] = nowMs();
            const waited = nowMs() - tEdit;
            if (kinds.every((k) => seenAt[k] !== undefined) || waited >= capMs) break;
            if (waited - lastNote >= 30_000) {
              lastNote = waited;
              const pending = kinds.filter((k) => seenAt[k] === undefined);
              log(`    +${fmt1(waited / 1000)} s: waiting for ${pending.join(', ')}`);
            }
            await sleep(25);
          }
          const waitedMs = nowMs() - tEdit;
          trialRec.waitedMs = waitedMs;
          trialRec.connectionsAtEnd = clientPortsTo(relayPort).length;
          trialRec.results = {};
          for (const k of kinds) {
            const seenMs = seenAt[k] === undefined ? null : seenAt[k] - tEdit;
            const events = lifelog[k]
              .filter((e) => e.t >= tFreeze)
              .map((e) => ({ atSec: Number(((e.t - tEdit) / 1000).toFixed(2)), msg: e.m }));
            const r = {
              seenMs,
              waitedMs: seenMs ?? waitedMs,
              events,
              ...(peers[k].counts ? { kfcEventCounts: { ...peers[k].counts } } : {}),
            };
            trialRec.results[k] = r;
            results[k].push(r);
            log(
              `    ${k}: ${seenMs === null ? `not seen within ${fmt1(waitedMs / 1000)} s` : `saw the edit after ${fmt2(seenMs / 1000)} s`}; ${events.length} lifecycle event(s) after the freeze`,
            );
          }
        } finally {
          for (const k of kinds) await peers[k].stop().catch((e) => failures.push(`stopping ${k}: ${errMsg(e)}`));
          if (cfg.fault === 'blackhole') Blackhole.flush();
          raw.trials.push(trialRec);
        }
        await sleep(500);
      }
    }

    // ---- 2. events/s one watcher sustains -----------------------------------------------------
    const benchPeers = cfg.peers.filter((p) => p !== 'kars-idle'); // same code path as kars, except pings
    if (cfg.phases.includes('throughput')) {
      const NS = 'tput';
      log(
        `2/3 events/s: ${cfg.updates} updates (concurrency ${cfg.concurrency}) from this process; each peer alone in a child process: ${benchPeers.join(', ')}`,
      );
      await createMany(NS, 't-', cfg.tputObjects);
      for (const p of benchPeers) {
        const c = startChild(
          { role: 'throughput', peer: p, kubeconfig: srv.kubeconfig, namespace: NS, expect: cfg.tputObjects, probeName: 't-0' },
          childEnv,
        );
        try {
          await startAndSync(c, NS, 't-0', { readyMs: 60_000, listedMs: 120_000 });
          // Current objects and resourceVersions; worker w owns objects j ≡ w (mod concurrency).
          const list = expectStatus(await request('GET', `/api/v1/namespaces/${NS}/configmaps`), [200], 'list tput');
          const objs = new Map(list.items.map((o) => [o.metadata.name, o]));
          c.send({ cmd: 'go' });
          await c.wait('armed', 10_000);
          const tw0 = nowUs();
          const errors = [];
          await Promise.all(
            Array.from({ length: cfg.concurrency }, async (_, w) => {
              const owned = [];
              for (let j = w; j < cfg.tputObjects; j += cfg.concurrency) owned.push(`t-${j}`);
              let k = 0;
              for (let i = w; i < cfg.updates; i += cfg.concurrency) {
                const name = owned[k++ % owned.length];
                const o = objs.get(name);
                try {
                  const r = expectStatus(
                    await request('PUT', `/api/v1/namespaces/${NS}/configmaps/${name}`, { ...o, data: { ...o.data, seq: String(i) } }),
                    [200],
                    `update ${name}`,
                  );
                  objs.set(name, r);
                } catch (err) {
                  errors.push(errMsg(err));
                }
              }
            }),
          );
          const tw1 = nowUs();
          const sent = cfg.updates - errors.length;
          if (errors.length) failures.push(`events/s ${p}: ${errors.length} updates failed (first: ${errors[0]})`);
          // Wait until the peer has them all, or nothing new arrived for 10 s.
          let lastCount = -1;
          let lastChange = nowMs();
          for (;;) {
            const pr = c.latest('progress');
            const n = pr?.count ?? 0;
            if (n !== lastCount) {
              lastCount = n;
              lastChange = nowMs();
            }
            if (n >= sent || nowMs() - lastChange > 10_000) break;
            await sleep(100);
          }
          c.send({ cmd: 'report' });
          const rep = await c.wait('report', 10_000);
          const spanSec = (rep.lastUs - tw0) / 1e6;
          const writeSec = (tw1 - tw0) / 1e6;
          const cpuUs = rep.cpuUserUs + rep.cpuSystemUs;
          raw.throughput[p] = {
            updatesSent: sent,
            received: rep.count,
            writerSec: writeSec,
            writerOpsPerSec: sent / writeSec,
            spanSec,
            eventsPerSec: rep.count / spanSec,
            lagAfterWriterMs: (rep.lastUs - tw1) / 1000,
            cpuSec: cpuUs / 1e6,
            cpuUsPerEvent: rep.count ? cpuUs / rep.count : NaN,
          };
          const t = raw.throughput[p];
          log(
            `  ${p}: ${fmtInt(t.received)}/${fmtInt(sent)} events, ${fmtInt(t.eventsPerSec)} events/s (writer ${fmtInt(t.writerOpsPerSec)} ops/s), lag ${fmt2(t.lagAfterWriterMs / 1000)} s, ${fmt1(t.cpuUsPerEvent)} µs CPU/event`,
          );
          if (rep.count < sent) failures.push(`events/s ${p}: received ${rep.count} of ${sent} events (stalled)`);
        } catch (err) {
          failures.push(`events/s ${p}: ${errMsg(err)}`);
        } finally {
          await c.close();
        }
      }
    }

    // ---- 3. heap per cached object ------------------------------------------------------------
    if (cfg.phases.includes('memory')) {
      const NS = 'mem';
      log(`3/3 memory: ${cfg.memObjects} ConfigMaps in "${NS}"; each peer alone in a fresh child (--expose-gc): ${benchPeers.join(', ')}`);
      const tc = nowMs();
      await createMany(NS, 'm-', cfg.memObjects);
      await createMany(`${NS}-warm`, 'w-', cfg.warmObjects);
      const listText = (await request('GET', `/api/v1/namespaces/${NS}/configmaps`)).text;
      raw.memoryDataset = {
        objects: cfg.memObjects,
        createSec: (nowMs() - tc) / 1000,
        listJsonBytesPerObject: Buffer.byteLength(listText) / cfg.memObjects,
      };
      log(
        `  created in ${fmt1(raw.memoryDataset.createSec)} s; ${fmtInt(raw.memoryDataset.listJsonBytesPerObject)} bytes of JSON per object in a list`,
      );
      for (const p of benchPeers) {
        const c = startChild(
          {
            role: 'memory',
            peer: p,
            kubeconfig: srv.kubeconfig,
            namespace: NS,
            warmNamespace: `${NS}-warm`,
            warmCount: cfg.warmObjects,
            expect: cfg.memObjects,
            probeName: 'm-0',
          },
          childEnv,
        );
        try {
          const synced = await startAndSync(c, NS, 'm-0', { readyMs: 120_000, listedMs: 300_000 });
          c.send({ cmd: 'measure' });
          const m = await c.wait('memory', 60_000);
          const heapMb = (m.after.heapUsed - m.base.heapUsed) / 2 ** 20;
          raw.memory[p] = {
            objects: m.size,
            heapUsedDeltaMb: heapMb,
            heapMbPer10k: (heapMb * 10_000) / m.size,
            rssDeltaMb: (m.after.rss - m.base.rss) / 2 ** 20,
            externalDeltaMb: (m.after.external - m.base.external) / 2 ** 20,
            listedMs: m.listedMs,
            syncedMs: synced.ms,
            base: m.base,
            after: m.after,
          };
          const r = raw.memory[p];
          log(
            `  ${p}: heap +${fmt1(r.heapUsedDeltaMb)} MB for ${fmtInt(r.objects)} objects (${fmt1(r.heapMbPer10k)} MB per 10k), RSS +${fmt1(r.rssDeltaMb)} MB; listed in ${fmt1(r.listedMs / 1000)} s`,
          );
        } catch (err) {
          failures.push(`memory ${p}: ${errMsg(err)}`);
        } finally {
          await c.close();
        }
      }
    }
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.stderrTail.length) failures.push(`server stderr tail:\n${srv.stderrTail.slice(-15).join('\n')}`);
  } finally {
    Blackhole.teardown();
    http?.close();
    // Let the connections just closed finish closing before SIGTERM: the fault relay's
    // resetAll() on a socket that is mid-shutdown leaks its handle and the server then spins
    // at 100% CPU at exit instead of exiting (see README, "Known issues").
    await sleep(1000);
    const tStop = nowMs();
    if (srv?.died) failures.push(`${srv.died}\nserver stderr tail:\n${srv.stderrTail.slice(-15).join('\n')}`);
    if (srv) await srv.stop();
    if (srv) log(`server stopped in ${fmtInt(nowMs() - tStop)} ms`);
    removeTempDir(dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  const runtimeSec = (nowMs() - tStart) / 1000;
  const esc = mdEscape;
  const capS = `${fmt1(cfg.capSecs)} s`;
  const summary = {};
  const rows = [];
  for (const p of cfg.peers) {
    const rs = raw.trials.flatMap((t) => (t.results?.[p] ? [t.results[p]] : []));
    let fresh = '–';
    if (rs.length) {
      const seen = rs.filter((r) => r.seenMs !== null).map((r) => r.seenMs / 1000);
      const med = median(rs.map((r) => (r.seenMs === null ? Infinity : r.seenMs / 1000)));
      const tr = `${rs.length} trial${rs.length > 1 ? 's' : ''}`;
      if (Number.isFinite(med)) {
        const range = seen.length > 1 ? `, range ${fmt1(Math.min(...seen))}–${fmt1(Math.max(...seen))} s` : '';
        const miss = seen.length < rs.length ? `; not seen in ${rs.length - seen.length} of them` : '';
        fresh = `**${fmt1(med)} s** (median of ${tr}${range}${miss})`;
      } else {
        const waited = Math.min(...rs.map((r) => r.waitedMs / 1000));
        const notRerun = !cfg.rerunStuck && cfg.trials > rs.length ? '; not re-run after trial 1' : '';
        fresh = `**not seen within ${capS}** (waited ${fmt1(waited)} s; ${tr}${notRerun}${seen.length ? `; seen in ${seen.length}: ${seen.map(fmt1).join(', ')} s` : ''})`;
      }
      summary[p] = {
        trials: rs.length,
        seenSecs: rs.map((r) => (r.seenMs === null ? null : r.seenMs / 1000)),
        medianSecs: Number.isFinite(med) ? med : null,
        capSecs: cfg.capSecs,
      };
    }
    const t = raw.throughput[p];
    const tp =
      p === 'kars-idle'
        ? 'same as kars'
        : t
          ? `${fmtInt(t.eventsPerSec)} (${fmtInt(t.received)}/${fmtInt(t.updatesSent)}; writer ${fmtInt(t.writerOpsPerSec)}/s; ${fmt1(t.cpuUsPerEvent)} µs CPU/event)`
          : '–';
    const m = raw.memory[p];
    const mem = p === 'kars-idle' ? 'same as kars' : m ? `${fmt1(m.heapMbPer10k)}` : '–';
    rows.push(mdRow([PEERS[p].label, fresh, PEERS[p].mechanism, tp, mem]));
  }
  const faultDesc =
    cfg.fault === 'blackhole'
      ? 'freezeWatches() plus iptables DROP of every connection open to the server at that moment (keepalive probes are lost too, as behind a load balancer that forgot the flow)'
      : "freezeWatches(): the server's fault relay stops forwarding every open watch connection in both directions, no FIN, no RST; the relay's kernel still ACKs, so TCP keepalive probes are answered";
  const lines = [
    `## Watch freshness after a silent drop`,
    ``,
    `${new Date().toISOString()} · node ${process.version} · ${cpuLine()} · ${cfg.quick ? 'QUICK · ' : ''}fault: ${cfg.fault} · cap ${capS} · ${cfg.trials} trial(s) · ${cfg.objects + 2} ConfigMaps watched · runtime ${fmt1(runtimeSec)} s · load avg ${fmt2(loadStart[0])} at start, ${fmt2(os.loadavg()[0])} at end`,
    ``,
    `| peer | edit seen after the silent drop | detection mechanism (anchors doc; verified in the installed code) | events/s one watcher received | heap MB per 10k cached objects |`,
    `|---|---|---|---|---|`,
    ...rows,
    ``,
    `Fault: ${faultDesc}. The edit is a merge PATCH over a new connection, sent right after the fault; the time is from sending it to the cache holding the new value. Server bookmarks every ${cfg.bookmarkSecs} s (only kars asks for them).`,
  ];
  if (raw.throughput && Object.keys(raw.throughput).length) {
    lines.push(
      `events/s: ${fmtInt(cfg.updates)} PUTs at concurrency ${cfg.concurrency} from the benchmark process, the peer alone in a child process; received events ÷ (last receive − first send). It cannot exceed the writer's rate (server-bound, shown), so compare the µs of peer CPU per event too.`,
    );
  }
  if (raw.memoryDataset) {
    lines.push(
      `heap: heapUsed after − before starting the peer, after global.gc(), fresh child per peer (warm-up on ${cfg.warmObjects} objects first); ${fmtInt(cfg.memObjects)} ConfigMaps of ~${fmtInt(raw.memoryDataset.listJsonBytesPerObject)} bytes of JSON each, scaled to 10k. RSS deltas are in the JSON.`,
    );
  }
  if (raw.trials.length) {
    lines.push(
      '',
      '### Per trial: what each peer did after the drop',
      '',
      '| trial | peer | result | lifecycle after the fault (seconds from the edit) |',
      '|---|---|---|---|',
    );
    for (const t of raw.trials) {
      for (const k of t.peers) {
        const r = t.results?.[k];
        if (!r) continue;
        const res = r.seenMs === null ? `not seen within ${fmt1(r.waitedMs / 1000)} s` : `${fmt2(r.seenMs / 1000)} s`;
        const ev = r.events.length
          ? r.events
              .slice(0, 6)
              .map((e) => `${e.atSec >= 0 ? '+' : ''}${fmt1(e.atSec)} s ${e.msg.slice(0, 110)}`)
              .join('; ') + (r.events.length > 6 ? `; … (${r.events.length} in all)` : '')
          : 'none: no error, no reconnect';
        lines.push(`| ${t.trial} | ${k} | ${res} | ${esc(ev)} |`);
      }
      lines.push(
        `| ${t.trial} | (server) | fault ${fmt1((t.faultDelayMs ?? NaN) / 1000)} s after the sync edit (the last byte on every watch); froze ${t.frozenStreams ?? '?'} watch streams${t.blackholedConnections !== undefined ? `, black-holed ${t.blackholedConnections} connections` : ''} | client connections to the server: ${t.connectionsBefore ?? '?'} before the fault, ${t.connectionsAtEnd ?? '?'} at the end of the wait |`,
      );
    }
  }
  if (strays.length)
    lines.push(
      '',
      '**Errors thrown inside peers (not counted as benchmark failures)**',
      '',
      ...strays.slice(0, 10).map((s) => `- ${s.split('\n')[0]}`),
    );
  return finishRun('freshness', {
    lines,
    failures,
    footer:
      'Shared 2-core machine: times are dominated by the detection mechanisms (seconds to minutes), not by CPU noise; events/s and heap vary by ~10–20% between runs.',
    config: cfg,
    runtimeSec,
    machine: { loadAvgStart: loadStart, loadAvgEnd: os.loadavg() },
    json: {
      versions: { node: process.version, clientNode: CN_VERSION, kfc: KFC_VERSION },
      strays,
      peers: Object.fromEntries(
        cfg.peers.map((p) => [
          p,
          { ...PEERS[p], freshness: summary[p] ?? null, throughput: raw.throughput[p] ?? null, memory: raw.memory[p] ?? null },
        ]),
      ),
      raw,
    },
    markdown: true,
  });
}

if (process.argv[2] === '--child') {
  void childMain(JSON.parse(process.argv[3]));
} else {
  // Third-party clients leave keep-alive sockets and timers behind (KFC keeps idle undici
  // connections for 10 min), so exit explicitly.
  runMain(main, { exit: true, onError: () => Blackhole.teardown() });
}
