// Child processes: `kars apiserver` and `kars controller`, each its own process, so their RSS and
// CPU are read from /proc apart from the benchmark's.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { ROOT, freePort, pinoStderr, sleep, splitArgs, startKarsApiserver } from '../../lib/dist/index.js';
import type { Exit, KarsApiserver, PinoStderr } from '../../lib/dist/index.js';
import { httpGet, procStatus } from './util.js';

/** Start `kars apiserver` as a child process; resolves once it prints its listening URL. */
export function startServer(dataDir: string, historyWindow: number): Promise<KarsApiserver<PinoStderr>> {
  return startKarsApiserver(dataDir, ['--history-window', String(historyWindow)], { collectStderr: pinoStderr });
}

/** How a controller ended after {@link ControllerProcess.stop}. */
export type ControllerExit =
  { graceful: false; ms: number; note: string } | { graceful: boolean; ms: number; code: number | null; signal: NodeJS.Signals | null };

/** A running `kars controller` (see {@link startController}). */
export interface ControllerProcess {
  label: string;
  child: ChildProcess;
  pid: number;
  url: string;
  /** `performance.now()` at spawn. */
  tSpawn: number;
  /** The highest VmRSS sampled, and every sample as [ms since spawn, kB]. */
  rss: { maxRssKb: number; samples: Array<[number, number]> };
  stderr: PinoStderr;
  /** Set when it exited before {@link ControllerProcess.stop} was called. */
  died: string | undefined;
  exit: ControllerExit | undefined;
  /** Resolves when /metrics answers (ms since spawn), then when /readyz answers 200 (ms since spawn). */
  waitUp(timeoutMs?: number): Promise<{ metricsUpMs: number; readyMs: number }>;
  /** The text of its /metrics. */
  metrics(): Promise<string>;
  /** SIGTERM, then SIGKILL after 15 s; returns how it ended. */
  stop(): Promise<ControllerExit | undefined>;
}

/**
 * Start `kars controller` as a child process with leader election off and /metrics on a free
 * port. RSS is sampled every 100 ms from the moment it is spawned.
 */
export async function startController(kubeconfig: string, label: string): Promise<ControllerProcess> {
  const extra = splitArgs(process.env['BENCH_CONTROLLER_NODE_ARGS']);
  const port = await freePort();
  const binEnv = process.env['BENCH_CONTROLLER_BIN'];
  const bin = binEnv ? resolve(binEnv) : join(ROOT, 'apps/cli/bin/kars.js');
  const args = [...extra, bin, 'controller', '--kubeconfig', kubeconfig, '--metrics-addr', `127.0.0.1:${port}`];
  const tSpawn = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LEADER_ELECTION_ENABLED: 'false' },
  });
  const err = pinoStderr(child);
  // BENCH_CONTROLLER_LOG=<file>: also append the controller's log lines (stderr) to that file.
  const logFile = process.env['BENCH_CONTROLLER_LOG'];
  if (logFile) child.stderr?.pipe(createWriteStream(resolve(logFile), { flags: 'a' }));
  const exited = new Promise<Exit>((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let stopping = false;
  const pid = child.pid ?? 0;
  const rss: ControllerProcess['rss'] = { maxRssKb: 0, samples: [] };
  const sample = (): void => {
    const s = procStatus(pid);
    if (Number.isFinite(s.rssKb)) {
      rss.maxRssKb = Math.max(rss.maxRssKb, s.rssKb);
      rss.samples.push([Math.round(performance.now() - tSpawn), s.rssKb]);
    }
  };
  const sampler = setInterval(sample, 100);
  const ctl: ControllerProcess = {
    label,
    child,
    pid,
    url: `http://127.0.0.1:${port}`,
    tSpawn,
    rss,
    stderr: err,
    died: undefined,
    exit: undefined,
    async waitUp(timeoutMs = 60_000) {
      const deadline = performance.now() + timeoutMs;
      let metricsUpMs: number | undefined;
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
    async stop() {
      stopping = true;
      clearInterval(sampler);
      if (child.exitCode !== null || child.signalCode !== null) return ctl.exit;
      const t = performance.now();
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const r = await Promise.race([exited, new Promise<undefined>((res) => (timer = setTimeout(() => res(undefined), 15_000)))]);
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
