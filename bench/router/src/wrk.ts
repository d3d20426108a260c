/** The closed-loop load generator from outside the repo: `wrk` (4.x), when it is on PATH. */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ClosedResult, Mark } from './jobs.js';
import type { Summary } from './stats.js';
import { procCpuSec } from './procs.js';

/** wrk 4.x on PATH (`wrk --version` exits 1 but prints its banner). */
export function findWrk(): { version: string } | undefined {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (r.error) return undefined;
  const v = `${r.stdout}${r.stderr}`.match(/wrk\s+(\S+)/)?.[1];
  return v ? { version: v } : undefined;
}

/** The summary the Lua `done` hook prints (`WRKJSON {...}`); latencies in µs. */
interface WrkJson extends Omit<Summary, 'n'> {
  requests: number;
  duration_us: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
}

/**
 * One closed-loop wrk run (`-t1`): POST the chat body on `concurrency` keep-alive connections.
 * A Lua `done` hook prints the summary as JSON. wrk's CPU is read from /proc while it runs.
 */
export async function runWrk(
  tmp: string,
  url: string,
  body: string,
  concurrency: number,
  durationS: number,
  onMark?: (m: Mark) => void,
  extraHeaders: Record<string, string> = {},
): Promise<ClosedResult> {
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
  const pid = child.pid ?? 0;
  onMark?.('start');
  let wrkCpu = 0;
  const poll = setInterval(() => {
    const c = procCpuSec(pid);
    if (Number.isFinite(c)) wrkCpu = c;
  }, 100);
  let out = '';
  let errOut = '';
  let json: WrkJson | undefined;
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c: string) => (errOut += c));
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c: string) => {
    out += c;
    const m = out.match(/WRKJSON (\{.*\})/);
    if (m?.[1] !== undefined && !json) {
      json = JSON.parse(m[1]) as WrkJson;
      const c2 = procCpuSec(pid);
      if (Number.isFinite(c2)) wrkCpu = c2;
      onMark?.('end');
    }
  });
  const code = await new Promise<number | null>((res) => child.once('exit', (c) => res(c)));
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
