// Runs every compiled test file (dist/**/*.test.js) of every workspace with node's test runner.
// Pass paths to run a subset: node scripts/run-tests.mjs packages/kube-core packages/router/dist/router.test.js
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
const concurrency = process.env.KARS_TEST_CONCURRENCY ?? '2';
// The concise reporter prints one line per file, failures in full, and ends with the counts;
// KARS_TEST_REPORTER=spec (or tap, dot) selects one of node's own.
const ownReporter = new URL('./test-reporter.mjs', import.meta.url).pathname;
const reporter = process.env.KARS_TEST_REPORTER ?? ownReporter;
const args = ['--test', `--test-concurrency=${concurrency}`, `--test-reporter=${reporter}`, '--test-reporter-destination=stdout'];
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

if (alongside.length === 0) {
  const { code } = await runner(rest, process.env, false);
  process.exit(code);
}
const started = Date.now();
const dir = mkdtempSync(join(tmpdir(), 'kars-tests-'));
const summaries = [join(dir, 'main.json'), join(dir, 'alongside.json')];
const [main, side] = await Promise.all([
  runner(rest, { ...process.env, KARS_TEST_SUMMARY_FILE: summaries[0] }, false),
  runner(alongside, { ...process.env, KARS_TEST_SUMMARY_FILE: summaries[1] }, true),
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
rmSync(dir, { recursive: true, force: true });
// A runner stopped before its summary (the timeout above, or a crash) counts as one failure, so the
// closing line never reads "0 failed" over a run that did not finish.
if (missing > 0) console.error(`${missing} test runner(s) ended without a summary: counted as failed`);
total.failed += missing;
process.stdout.write(`\n${total.files} test files in ${((Date.now() - started) / 1000).toFixed(0)}s\n`);
process.stdout.write(`${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
process.exit(main.code !== 0 || side.code !== 0 || missing > 0 || total.failed > 0 ? 1 : 0);
