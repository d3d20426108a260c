/**
 * The benchmark process: start the server, run the phases in order, stop everything, and report.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { errMsg, expectStatus, fmtInt, httpsJsonClient, log, nowUs, removeTempDir, sleep } from '../../lib/dist/index.js';
import type { HttpsJsonClient, KarsApiserver } from '../../lib/dist/index.js';
import { benchApi, startKubeServer, startServer } from './cluster.js';
import type { BenchServer } from './cluster.js';
import { readConfig } from './config.js';
import { Blackhole } from './network.js';
import { freshnessPhase } from './phase-freshness.js';
import { memoryPhase } from './phase-memory.js';
import { throughputPhase } from './phase-throughput.js';
import { report } from './report.js';
import type { Bench, Raw } from './results.js';

const nowMs = (): number => nowUs() / 1000;

/** Run the whole benchmark; resolves with the exit code. */
export async function main(): Promise<number> {
  const tStart = nowMs();
  const cfg = readConfig();
  const failures: string[] = [];
  const raw: Raw = { trials: [], throughput: {}, memory: {} };
  const loadStart = os.loadavg();
  const dataRoot = mkdtempSync(join(os.tmpdir(), 'kars-freshness-'));
  const dataDir = join(dataRoot, 'apiserver');
  log(`config ${JSON.stringify(cfg)}; data dir ${dataDir}`);

  let srv: KarsApiserver | undefined; // kars apiserver only (its stderr and `died` go into the report)
  let server: BenchServer | undefined;
  let http: HttpsJsonClient | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    Blackhole.teardown();
    // (kube-envtest's processes are killed by its own exit hook.)
    srv?.child.kill('SIGKILL');
    log(`${sig}: stopped`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // A third-party peer's stray rejection must not kill the whole benchmark; it is reported.
  const strays: string[] = [];
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

    if (cfg.server === 'kube') {
      const k = await startKubeServer(join(dataRoot, 'control-plane'));
      if ('skipped' in k) throw new Error(`BENCH_SERVER=kube: ${k.skipped}`);
      server = k;
    } else {
      const s = (srv = await startServer(dataDir, cfg.bookmarkSecs));
      server = { ...s, label: 'kars apiserver', stop: () => s.stop() };
    }
    const relayPort = Number(new URL(server.url).port);
    log(`${server.label}: pid ${server.pid} at ${server.url}, kubeconfig ${server.kubeconfig}`);
    http = httpsJsonClient(server.url, server.ca, server.token, { maxSockets: cfg.createConcurrency, timeoutMs: 30_000 });
    expectStatus(await http.request('GET', '/version'), [200], 'GET /version');
    const b: Bench = {
      cfg,
      srv: server,
      http,
      api: benchApi(http, cfg.createConcurrency),
      relayPort,
      childEnv: { ...process.env, KUBECONFIG: server.kubeconfig },
      failures,
      raw,
    };

    // ---- 1. freshness after a silent drop ---------------------------------------------------
    if (cfg.phases.includes('freshness')) await freshnessPhase(b);

    // ---- 2. events/s one watcher sustains -----------------------------------------------------
    const benchPeers = cfg.peers.filter((p) => p !== 'kars-idle'); // same code path as kars, except pings
    if (cfg.phases.includes('throughput')) await throughputPhase(b, benchPeers);

    // ---- 3. heap per cached object ------------------------------------------------------------
    if (cfg.phases.includes('memory')) await memoryPhase(b, benchPeers);
  } catch (err) {
    failures.push(`fatal: ${err instanceof Error ? err.stack : String(err)}`);
    if (srv?.stderr.tail.length) failures.push(`server stderr tail:\n${srv.stderr.tail.slice(-15).join('\n')}`);
  } finally {
    Blackhole.teardown();
    http?.close();
    // Let the connections just closed finish closing before SIGTERM: the fault relay's
    // resetAll() on a socket that is mid-shutdown leaks its handle and the server then spins
    // at 100% CPU at exit instead of exiting (see README, "Known issues").
    await sleep(1000);
    const tStop = nowMs();
    if (srv?.died) failures.push(`${srv.died}\nserver stderr tail:\n${srv.stderr.tail.slice(-15).join('\n')}`);
    if (server) {
      await server.stop();
      log(`server stopped in ${fmtInt(nowMs() - tStop)} ms`);
    }
    removeTempDir(dataRoot);
  }

  // ---- report -------------------------------------------------------------------------------
  return report({ cfg, raw, failures, strays, runtimeSec: (nowMs() - tStart) / 1000, loadStart });
}
