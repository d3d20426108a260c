/**
 * Helpers shared by the benchmarks under bench/ (apiserver, freshness, controller, router, …): timing
 * and formatting, /proc readings, child processes that report `listening:`, a JSON-over-HTTPS client
 * for kars apiserver, a bounded worker pool, and the tables and result files every run ends with.
 * No dependencies beyond node: built-ins.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (bench/lib/dist → three levels up). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The `kars` CLI entry point. */
export const KARS_BIN = join(ROOT, 'apps/cli/bin/kars.js');

/** Monotonic microseconds (CLOCK_MONOTONIC: comparable across threads and processes on one Linux host). */
export const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** Resolve after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A progress line on stderr, prefixed `[bench HH:MM:SS]`. */
export const log = (msg: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
};

/** Rounded integer with thousands separators; non-finite values as `String(n)`. */
export const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : String(n));
/** One decimal; non-finite values as `String(n)`. */
export const fmt1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : String(n));
/** Two decimals; non-finite values as `String(n)`. */
export const fmt2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : String(n));
/** kB → MB. */
export const mb = (kb: number): number => kb / 1024;

/** The message of an Error; a plain object as JSON (first 300 characters); anything else as `String(e)`. */
export const errMsg = (e: unknown): string =>
  e instanceof Error ? e.message : typeof e === 'object' && e !== null ? JSON.stringify(e).slice(0, 300) : String(e);

/** Split a space-separated list of extra node flags (e.g. an env var); undefined → []. */
export const splitArgs = (v: string | undefined): string[] => (v ?? '').split(/\s+/).filter(Boolean);

/**
 * Integer from env var `name`, `def` when unset or empty. `min` is 1 (positive, the default) or
 * 0 (non-negative); anything else throws.
 */
export function envInt(name: string, def: number, { min = 1 }: { min?: 0 | 1 } = {}): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a ${min > 0 ? 'positive' : 'non-negative'} integer, got "${v}"`);
  return n;
}

/** Nearest-rank percentile `q` (0..1) of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[idx] ?? NaN;
}

/**
 * VmRSS and VmHWM of a process in kB, from /proc/<pid>/status. Throws when the process is gone,
 * unless `safe`, which returns NaNs instead.
 */
export function procStatus(pid: number, { safe = false }: { safe?: boolean } = {}): { rssKb: number; hwmKb: number } {
  try {
    const txt = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string): number => Number(txt.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN);
    return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') };
  } catch (err) {
    if (!safe) throw err;
    return { rssKb: NaN, hwmKb: NaN };
  }
}

/**
 * CPU time of a process in seconds, from /proc/<pid>/stat (10 ms resolution): `{ total, sys }`
 * (total = user + system). Throws when the process is gone, unless `safe` (then NaNs).
 */
export function procCpu(pid: number, { safe = false }: { safe?: boolean } = {}): { total: number; sys: number } {
  try {
    const txt = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = txt.slice(txt.lastIndexOf(')') + 2).split(' ');
    // utime, stime in clock ticks (CLK_TCK = 100 on Linux)
    return { total: (Number(f[11]) + Number(f[12])) / 100, sys: Number(f[12]) / 100 };
  } catch (err) {
    if (!safe) throw err;
    return { total: NaN, sys: NaN };
  }
}

/** CPU time (user + system) of this process in seconds, all threads. */
export function selfCpuSec(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** A free TCP port on 127.0.0.1 (bound, read, released). */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => res(port));
    });
  });
}

/** File system type of the mount holding `path` (longest matching mount point), '?' if unknown. */
export function fsTypeOf(path: string): string {
  try {
    let best = { mp: '', type: '?' };
    for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
      const [, mp, type] = line.split(' ');
      if (mp && type && (path === mp || path.startsWith(mp.endsWith('/') ? mp : `${mp}/`)) && mp.length >= best.mp.length)
        best = { mp, type };
    }
    return best.type;
  } catch {
    return '?';
  }
}

/** Something that keeps the last lines of a child's stderr. */
export interface StderrTail {
  tail: string[];
}

/** Keep the last `max` non-blank stderr lines of a child: `{ tail }` (the array fills as data arrives). */
export function collectStderrTail(child: ChildProcess, max = 50): StderrTail {
  const tail: string[] = [];
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => {
    for (const line of c.split('\n')) {
      if (line.trim() === '') continue;
      tail.push(line);
      if (tail.length > max) tail.shift();
    }
  });
  return { tail };
}

/** What {@link pinoStderr} counts of a child's pino log. */
export interface PinoStderr extends StderrTail {
  warn: number;
  error: number;
  fatal: number;
  firstErrors: string[];
  lines: number;
}

/**
 * Collect a child's pino stderr: the last `tailMax` non-blank lines (`tail`), the number of lines
 * (`lines`), counts of warn (40), error (50) and fatal (60) lines, and the first 5 error or fatal
 * lines cut to `lineChars` (`firstErrors`).
 */
export function pinoStderr(
  child: ChildProcess,
  { tailMax = 50, lineChars = 500 }: { tailMax?: number; lineChars?: number } = {},
): PinoStderr {
  const st: PinoStderr = { tail: [], warn: 0, error: 0, fatal: 0, firstErrors: [], lines: 0 };
  let buf = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => {
    buf += c;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() === '') continue;
      st.lines++;
      st.tail.push(line);
      if (st.tail.length > tailMax) st.tail.shift();
      const lv = line.match(/"level":(\d+)/)?.[1];
      if (lv === '40') st.warn++;
      else if (lv === '50' || lv === '60') {
        if (lv === '50') st.error++;
        else st.fatal++;
        if (st.firstErrors.length < 5) st.firstErrors.push(line.slice(0, lineChars));
      }
    }
  });
  return st;
}

/** How a child ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** SIGTERM `child`, then SIGKILL after `graceMs`; resolves once it has exited (`exited` is its exit promise). */
export async function stopChild(child: ChildProcess, exited: Promise<Exit>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([exited, new Promise<undefined>((res) => (timer = setTimeout(() => res(undefined), graceMs)))]);
  clearTimeout(timer);
  if (!r) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A child process that reported `listening: <url>`. */
export interface Listening<S extends StderrTail = StderrTail> {
  child: ChildProcess;
  pid: number;
  url: string;
  /** From a `kubeconfig: <path>` line before `listening:`, when the child printed one. */
  kubeconfig?: string;
  exited: Promise<Exit>;
  stderr: S;
  /** Set when the child exited before {@link Listening.stop} was called. */
  died: string | undefined;
  /** SIGTERM, then SIGKILL after 15 s; resolves once the child has exited. */
  stop(): Promise<void>;
}

/** Options of {@link spawnListening}. */
export interface SpawnListeningOptions<S extends StderrTail> {
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  urlPattern?: RegExp;
  collectStderr?: (child: ChildProcess) => S;
  diedMessage?: (code: number | null, signal: NodeJS.Signals | null, handle: Listening<S>) => string;
  onDied?: (handle: Listening<S>) => void;
}

/**
 * Spawn `node ...args` (cwd ROOT) and resolve once it prints `listening: <url>` on stdout; a
 * `kubeconfig: <path>` line before it is kept too. `collectStderr(child)` keeps the stderr tail
 * (used in error messages). `died` is set to `diedMessage(code, signal, handle)` when the child exits
 * before `stop()` was called, and `onDied(handle)` runs then.
 */
export async function spawnListening<S extends StderrTail = StderrTail>(
  label: string,
  args: string[],
  opts: SpawnListeningOptions<S> = {},
): Promise<Listening<S>> {
  const { env = process.env, timeoutMs = 30_000, urlPattern = /^listening:\s*(\S+)$/, diedMessage, onDied } = opts;
  const collect = opts.collectStderr ?? (collectStderrTail as unknown as (child: ChildProcess) => S);
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env });
  const err = collect(child);
  const exited = new Promise<Exit>((res) => child.once('exit', (code, signal) => res({ code, signal })));
  const info = await new Promise<{ url: string; kubeconfig?: string }>((res, rej) => {
    let buf = '';
    let kubeconfig: string | undefined;
    const timer = setTimeout(
      () => rej(new Error(`${label} did not report "listening:" within ${timeoutMs / 1000} s\n${err.tail.join('\n')}`)),
      timeoutMs,
    );
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (c: string) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        const k = line.match(/^kubeconfig:\s*(.+)$/);
        if (k?.[1] !== undefined) kubeconfig = k[1];
        const l = line.match(urlPattern);
        if (l?.[1] !== undefined) {
          clearTimeout(timer);
          res({ ...(kubeconfig === undefined ? {} : { kubeconfig }), url: l[1] });
        }
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      rej(new Error(`${label} exited before listening (code ${code}, signal ${signal})\n${err.tail.join('\n')}`));
    });
  });
  let stopping = false;
  const h: Listening<S> = {
    child,
    pid: child.pid ?? 0,
    ...info,
    exited,
    stderr: err,
    died: undefined,
    async stop() {
      stopping = true;
      await stopChild(child, exited, 15_000);
    },
  };
  void exited.then(({ code, signal }) => {
    if (stopping) return;
    h.died = (diedMessage ?? ((c, s) => `${label} exited unexpectedly (code ${c}, signal ${s})`))(code, signal, h);
    onDied?.(h);
  });
  return h;
}

/** A running `kars apiserver`: the handle of {@link spawnListening}, with its credentials. */
export interface KarsApiserver<S extends StderrTail = StderrTail> extends Listening<S> {
  kubeconfig: string;
  token: string;
  ca: string;
}

/**
 * Start `kars apiserver --listen 127.0.0.1:0 --data-dir <dataDir> ...extraArgs` as a child
 * process (with BENCH_SERVER_NODE_ARGS as node flags); resolves once it listens on https.
 * `opts.bin` runs another checkout's `apps/cli/bin/kars.js` instead of this one's.
 * The handle of `spawnListening`, plus `kubeconfig` (default `<dataDir>/kubeconfig`), `token`
 * and `ca` read from the data dir.
 */
export async function startKarsApiserver<S extends StderrTail = StderrTail>(
  dataDir: string,
  extraArgs: string[],
  { bin = KARS_BIN, ...opts }: SpawnListeningOptions<S> & { bin?: string } = {},
): Promise<KarsApiserver<S>> {
  const args = [
    ...splitArgs(process.env['BENCH_SERVER_NODE_ARGS']),
    bin,
    'apiserver',
    '--listen',
    '127.0.0.1:0',
    '--data-dir',
    dataDir,
    ...extraArgs,
  ];
  const srv = await spawnListening<S>('server', args, {
    urlPattern: /^listening:\s*(https:\/\/\S+)$/,
    diedMessage: (code, signal) => `kars apiserver exited unexpectedly (code ${code}, signal ${signal})`,
    ...opts,
  });
  return Object.assign(srv, {
    kubeconfig: srv.kubeconfig ?? join(dataDir, 'kubeconfig'),
    token: readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    ca: readFileSync(join(dataDir, 'pki', 'ca.crt'), 'utf8'),
  });
}

/** One answer of {@link httpsJsonClient}. */
export interface HttpAnswer {
  status: number;
  text: string;
}

/** A JSON-over-HTTPS client (see {@link httpsJsonClient}). */
export interface HttpsJsonClient {
  request(method: string, path: string, body?: unknown, opts?: { fresh?: boolean; contentType?: string }): Promise<HttpAnswer>;
  resetPool(): void;
  close(): void;
}

/**
 * A JSON-over-HTTPS client for `kars apiserver` (bearer `token`, CA `ca`, keep-alive pool of
 * `maxSockets`). `request(method, path, body?, { fresh, contentType })` resolves with
 * `{ status, text }`; a string body is sent as is, anything else as JSON. `fresh` sends the request
 * on a new connection closed afterwards; `timeoutMs` (when set) destroys a request idle that long.
 * `resetPool()` closes the pooled connections and starts a new pool; `close()` closes them.
 */
export function httpsJsonClient(
  url: string,
  ca: string,
  token: string,
  { maxSockets = Infinity, timeoutMs }: { maxSockets?: number; timeoutMs?: number } = {},
): HttpsJsonClient {
  const u = new URL(url);
  const newAgent = (): https.Agent => new https.Agent({ ca, keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256) });
  let agent = newAgent();
  function request(
    method: string,
    path: string,
    body?: unknown,
    { fresh = false, contentType = 'application/json' }: { fresh?: boolean; contentType?: string } = {},
  ): Promise<HttpAnswer> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${token}` };
    if (payload !== undefined) {
      headers['content-type'] = contentType;
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (fresh) headers['connection'] = 'close';
    return new Promise((res, rej) => {
      const req = https.request(
        { host: u.hostname, port: u.port, method, path, headers, ...(fresh ? { agent: false, ca } : { agent }) },
        (r) => {
          const chunks: Buffer[] = [];
          r.on('data', (c: Buffer) => chunks.push(c));
          r.on('end', () => res({ status: r.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          r.on('error', rej);
        },
      );
      if (timeoutMs !== undefined)
        req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no response within ${timeoutMs / 1000} s`)));
      req.on('error', rej);
      req.end(payload);
    });
  }
  return {
    request,
    resetPool() {
      agent.destroy();
      agent = newAgent();
    },
    close: () => agent.destroy(),
  };
}

/** The JSON body of a response whose status is one of `ok` (undefined when empty); throws otherwise. */
export function expectStatus<T = unknown>(r: HttpAnswer, ok: readonly number[], what: string): T {
  if (!ok.includes(r.status)) throw new Error(`${what}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  return (r.text === '' ? undefined : JSON.parse(r.text)) as T;
}

/** What {@link runPool} measured. */
export interface PoolRun {
  /** Milliseconds per operation, by index. */
  lat: Float64Array;
  wallMs: number;
  errors: string[];
}

/**
 * Run `op(i)` for i in 0..count-1 with `concurrency` in flight, pulling indexes from a shared
 * queue; `progress(done)` after each. The run continues past failures. Resolves with `lat` (ms per
 * operation, by index), `wallMs` and `errors` (messages).
 */
export async function runPool(
  count: number,
  concurrency: number,
  op: (i: number) => Promise<unknown>,
  progress?: (done: number) => void,
): Promise<PoolRun> {
  const lat = new Float64Array(count);
  let next = 0;
  let done = 0;
  const errors: string[] = [];
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const s = performance.now();
      try {
        await op(i);
      } catch (err) {
        errors.push(errMsg(err));
      }
      lat[i] = performance.now() - s;
      done++;
      progress?.(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return { lat, wallMs: performance.now() - t0, errors };
}

/** Remove a temporary directory, or keep it (and say so) when BENCH_KEEP=1. */
export function removeTempDir(dir: string, what = 'data dir'): void {
  if (process.env['BENCH_KEEP'] === '1') log(`kept ${what ? `${what} ` : ''}${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}

/** Escape `|` for a Markdown table cell. */
export const mdEscape = (s: unknown): string => String(s).replace(/\|/g, '\\|');

/** One Markdown table row; every cell is escaped. */
export const mdRow = (cells: readonly unknown[]): string => `| ${cells.map(mdEscape).join(' | ')} |`;

/** The `**FAILURES**` block of a report (no lines when there are none); continuation lines indented. */
export const failureLines = (failures: readonly string[]): string[] =>
  failures.length ? ['', '**FAILURES**', '', ...failures.map((f) => `- ${f.replace(/\n/g, '\n  ')}`)] : [];

/** Path `bench/results/<name>-<ISO timestamp>.json` (the directory is created). */
export function resultsFile(name: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const outDir = join(ROOT, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  return join(outDir, `${name}-${stamp}.json`);
}

/** `<cores>× <CPU model>`, for a report's header line. */
export const cpuLine = (): string => `${os.cpus().length}× ${os.cpus()[0]?.model ?? '?'}`;

/** The machine block of a results file: node version, cores, CPU model, total memory (MB). */
export const machineInfo = (): { node: string; cpus: number; cpuModel: string | undefined; totalMemMb: number } => ({
  node: process.version,
  cpus: os.cpus().length,
  cpuModel: os.cpus()[0]?.model,
  totalMemMb: Math.round(os.totalmem() / 2 ** 20),
});

/**
 * Write `json` to `bench/results/<name>-<timestamp>.json` and, when `markdown` is given, the same
 * path ending `.md`; logs and returns the JSON path.
 */
export function writeResults(name: string, json: unknown, markdown?: string): string {
  const outFile = resultsFile(name);
  writeFileSync(outFile, JSON.stringify(json, null, 2) + '\n');
  if (markdown !== undefined) writeFileSync(outFile.replace(/\.json$/, '.md'), markdown);
  log(`wrote ${outFile}${markdown !== undefined ? ' (+ .md)' : ''}`);
  return outFile;
}

/** What {@link finishRun} reports and writes. */
export interface RunEnd {
  lines: string[];
  failures: string[];
  footer: string;
  config: unknown;
  runtimeSec: number;
  machine?: Record<string, unknown>;
  json?: Record<string, unknown>;
  markdown?: boolean;
}

/**
 * The end of every benchmark run: append the FAILURES block and the `footer` line to the report
 * `lines`, print them, write the results (`timestamp`, `config`, `machine` (`machineInfo()` plus
 * `machine`), `runtimeSec`, `ok`, `failures`, then the fields of `json`; with `markdown`, the
 * report as `.md` too) and return the exit code: 0 without failures, 1 with.
 */
export function finishRun(
  name: string,
  { lines, failures, footer, config, runtimeSec, machine = {}, json = {}, markdown = false }: RunEnd,
): number {
  lines.push(...failureLines(failures), '', footer);
  const text = lines.join('\n') + '\n';
  process.stdout.write(text);
  writeResults(
    name,
    {
      timestamp: new Date().toISOString(),
      config,
      machine: { ...machineInfo(), ...machine },
      runtimeSec,
      ok: failures.length === 0,
      failures,
      ...json,
    },
    markdown ? text : undefined,
  );
  return failures.length === 0 ? 0 : 1;
}

/**
 * Run `main()`; its resolved number is the exit code, a rejection prints the stack and exits 1.
 * `exit: true` calls `process.exit` (for runs whose third-party clients leave sockets and timers
 * behind); `onError(err)` runs first on a rejection.
 */
export function runMain(
  main: () => Promise<number>,
  { exit = false, onError }: { exit?: boolean; onError?: (err: unknown) => void } = {},
): void {
  const done = (code: number): void => {
    if (exit) process.exit(code);
    else process.exitCode = code;
  };
  main().then(done, (err: unknown) => {
    onError?.(err);
    console.error(err instanceof Error ? err.stack : String(err));
    done(1);
  });
}
