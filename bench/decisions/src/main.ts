/**
 * What decision logging costs the router (issue 21): the same open-loop load at a fixed rate
 * (default 1,000 chat completions/s) through `kars router --policy-dir` with and without
 * `--decision-log`, alternating (off, on, off, on, …) so drift on the shared machine hits both
 * alike. Reports per mode: p50/p99 latency (from each request's scheduled send time, so a stall
 * is not hidden by coordinated omission), router CPU per request (/proc/<pid>/stat over the
 * measured window), the records written, and the added cost (on − off).
 *
 *   npx tsc -b bench/decisions && node bench/decisions/dist/main.js
 *
 * Then, in this process, the log's own cost: BENCH_MICRO_RECORDS records (default 200,000) through
 * `DecisionRecorder.record()` into a `DecisionLog`, CPU per record including the drain (serialise,
 * hash, write), which is what the router pays per decision whatever the machine's load.
 *
 * Env: BENCH_RATE (req/s, default 1000), BENCH_SECONDS (measured seconds per run, default 5),
 * BENCH_WARMUP_SECONDS (default 2), BENCH_ROUNDS (off+on pairs, default 2), BENCH_CONNECTIONS
 * (keep-alive sockets, default 32).
 *
 * Every peer is its own process: the OpenAI stub (`kars stub openai`), the router (`kars router`),
 * and this load generator. Goals are not asserted; the exit code is 1 only on real errors.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DecisionLog, DecisionRecorder } from '@kars/router/decisions';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const KARS = join(ROOT, 'apps/cli/bin/kars.js');

function envInt(name: string, def: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got "${v}"`);
  return n;
}

const RATE = envInt('BENCH_RATE', 1000);
const SECONDS = envInt('BENCH_SECONDS', 5);
const WARMUP = envInt('BENCH_WARMUP_SECONDS', 2);
const ROUNDS = envInt('BENCH_ROUNDS', 2);
const CONNECTIONS = envInt('BENCH_CONNECTIONS', 32);

const log = (m: string): void => void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address() as net.AddressInfo;
      s.close(() => res(a.port));
    });
  });
}

/** Start `kars <args>` and resolve once it prints `listening:`. */
function startKars(args: string[]): Promise<ChildProcess> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [KARS, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (out.includes('listening:')) res(child);
    });
    child.stderr?.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-4000)));
    child.once('exit', (code) => rej(new Error(`kars ${args[0] ?? ''} exited ${String(code)} before listening: ${err}`)));
  });
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((res) => {
    if (child.exitCode !== null || child.signalCode !== null) return res();
    child.once('exit', () => res());
    child.kill('SIGTERM');
  });
}

/** CPU seconds (user + system) of a process, from /proc (10 ms resolution). */
function procCpu(pid: number): number {
  const txt = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = txt.slice(txt.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

const BODY = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });

/**
 * The load generator, in its own process (`--loadgen PORT SECONDS` prints one JSON result line):
 * open-loop at RATE over CONNECTIONS raw HTTP/1.1 keep-alive sockets, one request in flight per
 * socket; a request waits for a free socket when all are busy, and its latency counts from its
 * scheduled time. Raw sockets keep the generator's own cost per request small (no http.Agent).
 */
async function loadgen(port: number, seconds: number): Promise<{ latencies: number[]; errors: number; sent: number; cpuSec: number }> {
  const cpu0 = process.cpuUsage();
  const req = Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`,
  );
  const total = Math.round(RATE * seconds);
  const latencies: number[] = [];
  let errors = 0;
  let done = 0;
  const waiting: number[] = [];
  const idle: Conn[] = [];
  let resolveAll: () => void = () => undefined;
  const all = new Promise<void>((r) => (resolveAll = r));
  class Conn {
    readonly s: net.Socket;
    buf: Buffer = Buffer.alloc(0);
    scheduled = 0;
    busy = false;
    constructor() {
      this.s = net.connect(port, '127.0.0.1');
      this.s.setNoDelay(true);
      this.s.on('data', (d: Buffer) => this.onData(d));
      this.s.on('error', () => undefined);
    }
    send(scheduled: number): void {
      this.busy = true;
      this.scheduled = scheduled;
      this.s.write(req);
    }
    onData(d: Buffer): void {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      for (;;) {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = this.buf.subarray(0, end).toString('latin1');
        const status = Number(head.slice(9, 12));
        const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
        let size: number;
        if (cl !== null) size = end + 4 + Number(cl[1]);
        else {
          const z = this.buf.indexOf('\r\n0\r\n\r\n', end);
          if (z < 0) return;
          size = z + 7;
        }
        if (this.buf.length < size) return;
        this.buf = this.buf.subarray(size);
        if (status !== 200) errors++;
        latencies.push(performance.now() - this.scheduled);
        this.busy = false;
        if (++done === total) return resolveAll();
        const next = waiting.shift();
        if (next !== undefined) this.send(next);
        else idle.push(this);
      }
    }
  }
  const conns: Conn[] = [];
  for (let c = 0; c < CONNECTIONS; c++) conns.push(new Conn());
  idle.push(...conns);
  const start = performance.now();
  let i = 0;
  const tick = (): void => {
    const now = performance.now();
    while (i < total && start + (i * 1000) / RATE <= now) {
      const at = start + (i++ * 1000) / RATE;
      const c = idle.pop();
      if (c !== undefined) c.send(at);
      else waiting.push(at);
    }
    if (i < total) setTimeout(tick, 1);
  };
  tick();
  await all;
  for (const c of conns) c.s.destroy();
  const u = process.cpuUsage(cpu0);
  return { latencies, errors, sent: total, cpuSec: (u.user + u.system) / 1e6 };
}

/** Run the load generator child for `seconds` against `port`. */
function load(port: number, seconds: number): Promise<{ latencies: number[]; errors: number; sent: number; cpuSec: number }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--loadgen', String(port), String(seconds)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.once('exit', (code) => {
      if (code !== 0) return rej(new Error(`load generator exited ${String(code)}`));
      try {
        res(JSON.parse(out) as { latencies: number[]; errors: number; sent: number; cpuSec: number });
      } catch (e) {
        rej(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}

interface RunResult {
  mode: 'off' | 'on';
  p50: number;
  p99: number;
  cpuUsPerReq: number;
  achieved: number;
  errors: number;
  records: number;
  logBytes: number;
}

function dirStats(dir: string): { lines: number; bytes: number } {
  let lines = 0;
  let bytes = 0;
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    bytes += statSync(p).size;
    const t = readFileSync(p, 'utf8');
    for (let k = t.indexOf('\n'); k >= 0; k = t.indexOf('\n', k + 1)) lines++;
  }
  return { lines, bytes };
}

async function run(mode: 'off' | 'on', upstream: string, policyDir: string, work: string): Promise<RunResult> {
  const port = await freePort();
  const logDir = join(work, `log-${mode}-${Date.now()}`);
  const router = await startKars([
    'router',
    '--sandbox',
    'sb',
    '--policy-dir',
    policyDir,
    '--upstream',
    upstream,
    '--listen',
    `127.0.0.1:${port}`,
    ...(mode === 'on' ? ['--decision-log', logDir] : []),
  ]);
  try {
    await load(port, WARMUP);
    const cpu0 = procCpu(router.pid as number);
    const t0 = performance.now();
    const r = await load(port, SECONDS);
    const wall = (performance.now() - t0) / 1000;
    const cpu = procCpu(router.pid as number) - cpu0;
    const sorted = r.latencies.sort((a, b) => a - b);
    await stop(router);
    const st = mode === 'on' ? dirStats(logDir) : { lines: 0, bytes: 0 };
    return {
      mode,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      cpuUsPerReq: (cpu * 1e6) / r.sent,
      achieved: r.sent / wall,
      errors: r.errors,
      records: st.lines,
      logBytes: st.bytes,
    };
  } finally {
    await stop(router);
  }
}

/** CPU µs per record of the recorder and the log, in this process (drain included). */
async function micro(n: number, work: string): Promise<{ usPerRecord: number; wallUsPerRecord: number }> {
  const dir = join(work, 'micro');
  const wallNow = (): number => Date.now();
  const log = new DecisionLog({ dir, sandbox: 'sb', instance: 'bench', wallNow, queue: n + 10 });
  const rec = new DecisionRecorder({ sandbox: 'sb', instance: 'bench', clock: { wallNow }, sink: log });
  const snapshot = {
    inference: undefined,
    tools: [],
    egress: [],
    loadedAtMs: 0,
    refused: {},
    policies: {
      inference: [{ kind: 'InferencePolicy' as const, name: 'budget', generation: null, digest: `sha256:${'a'.repeat(64)}` }],
      tools: [],
      egress: [],
      header: { inference: '', tools: '', egress: '' },
    },
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    rec.record({
      kind: 'inference',
      requestId: rec.nextRequestId(),
      snapshot,
      target: { api: 'OpenAI chat completions', model: 'gpt-4o', provider: 'azure-openai', deployment: null },
      decision: 'allow',
      reason: 'allowed',
      tokens: { reserved: 1016, charged: 30 },
    });
    // Yield now and then, as a server does between requests, so the drain runs alongside.
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r));
  }
  await log.close();
  const u = process.cpuUsage(c0);
  return { usPerRecord: (u.user + u.system) / n, wallUsPerRecord: ((performance.now() - t0) * 1000) / n };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'kars-bench-decisions-'));
  const policyDir = join(work, 'policy');
  for (const sub of ['inference', 'policies', 'egress', 'egress-approvals']) mkdirSync(join(policyDir, sub), { recursive: true });
  writeFileSync(
    join(policyDir, 'inference', 'inference-policy.json'),
    JSON.stringify({
      appliesTo: { sandboxName: 'sb', sandboxMatchLabels: {}, action: null },
      tokenBudget: { perRequestTokens: 1000, dailyTokens: 1_000_000_000, monthlyTokens: null },
      contentSafety: null,
      modelPreference: null,
      provider: null,
      guardrails: null,
      displayName: null,
    }),
  );
  const stubPort = await freePort();
  const stub = await startKars(['stub', 'openai', '--listen', `127.0.0.1:${stubPort}`]);
  const results: RunResult[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++)
      for (const mode of ['off', 'on'] as const) {
        log(`round ${round + 1}/${ROUNDS}: decision log ${mode}, ${RATE} req/s for ${WARMUP} + ${SECONDS} s`);
        const r = await run(mode, `http://127.0.0.1:${stubPort}`, policyDir, work);
        if (r.errors > 0) throw new Error(`${r.errors} requests failed with the log ${mode}`);
        results.push(r);
      }
  } finally {
    await stop(stub);
  }
  const n = envInt('BENCH_MICRO_RECORDS', 200_000);
  log(`in-process: ${n} records through DecisionRecorder into DecisionLog`);
  const m = await micro(n, work);
  rmSync(work, { recursive: true, force: true });
  const f2 = (n: number): string => n.toFixed(2);
  const f1 = (n: number): string => n.toFixed(1);
  const rows = results.map((r) => [r.mode, f1(r.achieved), f2(r.p50), f2(r.p99), f1(r.cpuUsPerReq), String(r.records), String(r.logBytes)]);
  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 === 1 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
  };
  const of = (mode: 'off' | 'on', k: 'p50' | 'p99' | 'cpuUsPerReq'): number =>
    median(results.filter((r) => r.mode === mode).map((r) => r[k]));
  const out: string[] = [];
  out.push(
    `decision logging at ${RATE} req/s (chat completions through kars router --policy-dir, ${SECONDS} s measured per run, ${ROUNDS} round(s))`,
  );
  out.push('');
  out.push('| log | achieved req/s | p50 ms | p99 ms | router CPU µs/req | records written | log bytes |');
  out.push('|---|---|---|---|---|---|---|');
  for (const r of rows) out.push(`| ${r.join(' | ')} |`);
  out.push('');
  out.push('| median | p50 ms | p99 ms | router CPU µs/req |');
  out.push('|---|---|---|---|');
  out.push(`| off | ${f2(of('off', 'p50'))} | ${f2(of('off', 'p99'))} | ${f1(of('off', 'cpuUsPerReq'))} |`);
  out.push(`| on | ${f2(of('on', 'p50'))} | ${f2(of('on', 'p99'))} | ${f1(of('on', 'cpuUsPerReq'))} |`);
  out.push(
    `| added | ${f2(of('on', 'p50') - of('off', 'p50'))} | ${f2(of('on', 'p99') - of('off', 'p99'))} | ${f1(of('on', 'cpuUsPerReq') - of('off', 'cpuUsPerReq'))} |`,
  );
  out.push('');
  out.push(
    `decision log in-process, ${n} records: ${f1(m.usPerRecord)} µs CPU per record (record(), serialise, sha256, write), ${f1(m.wallUsPerRecord)} µs wall per record`,
  );
  process.stdout.write(`${out.join('\n')}\n`);
}

if (process.argv[2] === '--loadgen')
  void loadgen(Number(process.argv[3]), Number(process.argv[4])).then((r) => process.stdout.write(JSON.stringify(r)));
else
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
