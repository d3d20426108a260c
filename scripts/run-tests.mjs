// Runs every compiled test file (dist/**/*.test.js) of every workspace with node's test runner.
// Pass paths to run a subset: node scripts/run-tests.mjs packages/kube-core packages/router/dist/router.test.js
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync, readdirSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMsWithChildren } from './test-timing.mjs';

const roots = process.argv.slice(2);
const bases = roots.length > 0 ? roots : ['packages', 'apps'].flatMap((d) => (existsSync(d) ? readdirSync(d).map((p) => join(d, p)) : []));
const files = [];
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith('.test.js')) files.push(p);
  }
}
for (const b of bases) {
  if (b.endsWith('.test.js') && existsSync(b)) {
    files.push(b);
    continue;
  }
  const dist = b.endsWith('dist') || b.includes('/dist/') ? b : join(b, 'dist');
  if (existsSync(dist)) walk(dist);
}
if (files.length === 0) {
  console.error('no test files found; did the build run?');
  process.exit(1);
}
// Three at a time on two cores: many files mostly wait for the processes they start (kube-apiserver,
// etcd, routers); with two slots the run used 1.53 cores (568 s), with three 1.77 (507 s).
const concurrency = process.env.KARS_TEST_CONCURRENCY ?? '3';
// The concise reporter prints one line per file, failures in full, and ends with the counts;
// KARS_TEST_REPORTER=spec (or tap, dot) selects one of node's own.
const ownReporter = new URL('./test-reporter.mjs', import.meta.url).pathname;
const reporter = process.env.KARS_TEST_REPORTER ?? ownReporter;
// Every test file's process writes its wall and CPU time (scripts/test-timing.mjs); the run ends with
// the files that cost the most, so a slow file shows in every CI log.
const timingPreload = new URL('./test-timing.mjs', import.meta.url).href;
const args = [
  `--import=${timingPreload}`,
  '--test',
  `--test-concurrency=${concurrency}`,
  `--test-reporter=${reporter}`,
  '--test-reporter-destination=stdout',
];
// A last guard for CI: the whole run is stopped after KARS_TEST_TIMEOUT_SECS (default 20 min).
const timeoutMs = Number(process.env.KARS_TEST_TIMEOUT_SECS ?? 1200) * 1000;

// Files that spend minutes mostly waiting (the two-minute fault storm sleeps between faults and
// edits) run in a second runner beside the others instead of holding one of the `concurrency`
// slots for their whole length. Only with the concise reporter, which merges the two summaries.
const ALONGSIDE = ['packages/freshness/dist/conformance/storm.test.js'];
const alongside = reporter === ownReporter && files.length > 1 ? files.filter((f) => ALONGSIDE.some((a) => f.endsWith(a))) : [];
const rest = files.filter((f) => !alongside.includes(f)).sort();

/** Runs one `node --test` over `list`; resolves with its exit code (and its output when captured). */
function runner(list, env, capture) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...args, ...list], { stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'], env });
    const out = [];
    if (capture) child.stdout.on('data', (d) => out.push(d));
    const timer = setTimeout(() => {
      console.error(`test run stopped: over ${timeoutMs / 1000} s`);
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 1 : 0), output: Buffer.concat(out).toString() });
    });
  });
}

// The build's bundles, rebuilt if an input changed since (each skips when up to date): a `tsc -b`
// after an edit would otherwise leave every test that spawns `kars router` running a stale router
// bundle (apps/cli/scripts/bundle-router.mjs, ADR 0056).
for (const script of ['packages/kube-client/scripts/bundle-kubeconfig.mjs', 'apps/cli/scripts/bundle-router.mjs']) {
  const r = spawnSync(process.execPath, [new URL(`../${script}`, import.meta.url).pathname], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
const started = Date.now();
const dir = mkdtempSync(join(tmpdir(), 'kars-tests-'));
const timingDir = join(dir, 'timing');
mkdirSync(timingDir);
// The Go programs the tests start (kubectl, helm, etcd, kube-apiserver, kube-controller-manager)
// collect garbage at 4x live heap instead of 2x (GOGC=400): a fifth less CPU for the kubectl matrix
// (61-67 -> 50-53 s), for some more memory. A GOGC already set wins (GOGC=100 is Go's default).
const env = { GOGC: '400', ...process.env, KARS_TEST_TIMING_DIR: timingDir };

if (alongside.length === 0) {
  const { code } = await runner(rest, env, false);
  reportTiming();
  rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}
const summaries = [join(dir, 'main.json'), join(dir, 'alongside.json')];
const [main, side] = await Promise.all([
  runner(rest, { ...env, KARS_TEST_SUMMARY_FILE: summaries[0] }, false),
  runner(alongside, { ...env, KARS_TEST_SUMMARY_FILE: summaries[1] }, true),
]);
process.stdout.write(`\nran beside the others (${alongside.join(', ')}):${side.output.replace(/^[.\n]+/, '\n')}`);
const total = { files: 0, passed: 0, failed: 0, skipped: 0 };
let missing = 0;
for (const f of summaries) {
  if (!existsSync(f)) {
    missing++;
    continue;
  }
  const s = JSON.parse(readFileSync(f, 'utf8'));
  for (const k of Object.keys(total)) total[k] += s[k];
}
reportTiming();
rmSync(dir, { recursive: true, force: true });
// A runner stopped before its summary (the timeout above, or a crash) counts as one failure, so the
// closing line never reads "0 failed" over a run that did not finish.
if (missing > 0) console.error(`${missing} test runner(s) ended without a summary: counted as failed`);
total.failed += missing;
process.stdout.write(`\n${total.files} test files in ${((Date.now() - started) / 1000).toFixed(0)}s\n`);
process.stdout.write(`${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
process.exit(main.code !== 0 || side.code !== 0 || missing > 0 || total.failed > 0 ? 1 : 0);

/**
 * Prints the KARS_TEST_TIMING_TOP (default 15) test files that took the most CPU, with their wall
 * time, and the CPU of the whole run (every test process and what it started, plus the runners);
 * KARS_TEST_TIMING_FILE=path also writes every file's figures there as JSON.
 */
function reportTiming() {
  const rows = readdirSync(timingDir)
    .map((f) => {
      try {
        return JSON.parse(readFileSync(join(timingDir, f), 'utf8'));
      } catch {
        return null;
      }
    })
    .filter(Boolean)
    .sort((a, b) => b.cpuMs - a.cpuMs);
  const wallSecs = (Date.now() - started) / 1000;
  const cpuSecs = cpuMsWithChildren() / 1000;
  if (process.env.KARS_TEST_TIMING_FILE) {
    writeFileSync(process.env.KARS_TEST_TIMING_FILE, JSON.stringify({ wallSecs, cpuSecs, files: rows }, null, 1));
  }
  if (rows.length === 0) return;
  const top = rows.slice(0, Number(process.env.KARS_TEST_TIMING_TOP ?? 15));
  const fileCpu = rows.reduce((s, r) => s + r.cpuMs, 0) / 1000;
  const w = Math.max(...top.map((r) => r.file.length));
  process.stdout.write(`\nmost CPU (s, the file's process and what it waited for), of ${rows.length} files:\n`);
  process.stdout.write(`  ${'file'.padEnd(w)}  ${'cpu'.padStart(6)}  ${'wall'.padStart(6)}\n`);
  for (const r of top)
    process.stdout.write(
      `  ${r.file.padEnd(w)}  ${(r.cpuMs / 1000).toFixed(1).padStart(6)}  ${(r.wallMs / 1000).toFixed(1).padStart(6)}\n`,
    );
  process.stdout.write(
    `test files ${fileCpu.toFixed(0)} s CPU; whole run ${cpuSecs.toFixed(0)} s CPU in ${wallSecs.toFixed(0)} s (${(cpuSecs / wallSecs).toFixed(2)} cores)\n`,
  );
}
