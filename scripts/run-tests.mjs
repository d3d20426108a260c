// Runs every compiled test file (dist/**/*.test.js) of every workspace with node's test runner.
// Pass paths to run a subset: node scripts/run-tests.mjs packages/kube-core packages/router/dist/router.test.js
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
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
const reporter = process.env.KARS_TEST_REPORTER ?? new URL('./test-reporter.mjs', import.meta.url).pathname;
const args = ['--test', `--test-concurrency=${concurrency}`, `--test-reporter=${reporter}`, '--test-reporter-destination=stdout'];
// A last guard for CI: the whole run is stopped after KARS_TEST_TIMEOUT_SECS (default 20 min).
const timeoutMs = Number(process.env.KARS_TEST_TIMEOUT_SECS ?? 1200) * 1000;
const r = spawnSync(process.execPath, [...args, ...files.sort()], { stdio: 'inherit', timeout: timeoutMs, killSignal: 'SIGKILL' });
if (r.error) console.error(`test run stopped: ${r.error.message} (after ${timeoutMs / 1000} s at most)`);
process.exit(r.status ?? 1);
