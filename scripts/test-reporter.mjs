// A concise reporter for node's test runner: a dot per finished file, then one line per test file
// (its counts and time), every failure in full (name, file, error, stack, and the output the file
// printed), and a closing summary line "N passed, N failed, N skipped" that ends the output.
//
// Used by scripts/run-tests.mjs; set KARS_TEST_REPORTER=spec to get node's own verbose reporter.
// With KARS_TEST_SUMMARY_FILE set, the counts go to that file as JSON instead of the closing lines.
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { inspect } from 'node:util';

/** @param {AsyncIterable<{type: string, data: any}>} source */
export default async function* conciseReporter(source) {
  const files = new Map(); // file → { passed, failed, skipped, durationMs, output: string[] }
  const failures = [];
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  let done = 0;
  const started = Date.now();

  const fileOf = (data) => (data.file ? relative(process.cwd(), data.file) : '(unknown file)');
  const entry = (file) => {
    let e = files.get(file);
    if (!e) {
      e = { passed: 0, failed: 0, skipped: 0, output: [] };
      files.set(file, e);
    }
    return e;
  };

  for await (const event of source) {
    const { type, data } = event;
    if (type === 'test:stdout' || type === 'test:stderr') {
      // Kept per file and printed only if that file has a failure.
      const e = entry(fileOf(data));
      if (e.output.length < 400) e.output.push(data.message);
      continue;
    }
    const isFileWrapper = data.nesting === 0 && Boolean(data.file) && data.name === data.file;
    if (isFileWrapper) {
      // node 20 reports each file as a wrapper test; its test:complete carries passed/duration.
      if (type !== 'test:complete') continue;
      const file = fileOf(data);
      const e = entry(file);
      if (data.details?.passed === false && e.failed === 0) {
        // The file failed outside any test: a crash, an unhandled rejection, a timeout.
        failed++;
        e.failed++;
        failures.push({ file, name: '(whole file)', error: data.details?.error });
      }
      e.durationMs = data.details?.duration_ms ?? 0;
      // Leaf results of a file can arrive after its completion, so per-file lines are printed at
      // the end; meanwhile one dot per finished file shows progress.
      done++;
      yield done % 60 === 0 ? '.\n' : '.';
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    // Suites (describe) report too; count only leaf tests, but keep the error of a suite that failed
    // for its own reason (a before/after hook threw), or its cancelled tests would show no cause.
    if (data.details?.type === 'suite') {
      const own = type === 'test:fail' && data.details?.error?.failureType !== 'subtestsFailed';
      if (own) {
        failed++;
        entry(fileOf(data)).failed++;
        failures.push({ file: fileOf(data), name: `${data.name} (suite)`, error: data.details?.error });
      }
      continue;
    }
    const file = fileOf(data);
    const e = entry(file);
    if (data.skip || data.todo) {
      skipped++;
      e.skipped++;
    } else if (type === 'test:pass') {
      passed++;
      e.passed++;
    } else {
      failed++;
      e.failed++;
      failures.push({ file, name: data.name, error: data.details?.error });
    }
  }

  yield '\n';
  for (const [file, e] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const counts = [`${e.passed} passed`, e.failed ? `${e.failed} failed` : '', e.skipped ? `${e.skipped} skipped` : ''];
    yield `${e.failed > 0 ? 'FAIL' : 'ok  '} ${file}  ${counts.filter(Boolean).join(', ')}  ${((e.durationMs ?? 0) / 1000).toFixed(1)}s\n`;
  }
  if (failures.length > 0) {
    yield `\n${'='.repeat(30)} FAILURES ${'='.repeat(30)}\n`;
    for (const f of failures) {
      yield `\n✖ ${f.file} › ${f.name}\n`;
      yield `${indent(formatError(f.error))}\n`;
      const out = files.get(f.file)?.output ?? [];
      if (out.length > 0 && !f.printedOutput) {
        yield `  --- output of ${f.file} ---\n${indent(out.join('').trimEnd())}\n`;
        for (const g of failures) if (g.file === f.file) g.printedOutput = true;
      }
    }
  }
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  const summaryFile = process.env.KARS_TEST_SUMMARY_FILE;
  if (summaryFile) {
    // run-tests.mjs merges several runs into one closing summary (see there).
    writeFileSync(summaryFile, JSON.stringify({ files: files.size, passed, failed, skipped }));
    return;
  }
  yield `\n${files.size} test files in ${secs}s\n`;
  yield `${passed} passed, ${failed} failed, ${skipped} skipped\n`;
}

function formatError(error) {
  if (!error) return '(no error detail)';
  // node wraps the thrown error in an ERR_TEST_FAILURE whose cause is the real one.
  const cause = error.code === 'ERR_TEST_FAILURE' && error.cause ? error.cause : error;
  if (error.exitCode !== undefined || error.signal) {
    // A whole file failed: say how its process ended (its output follows).
    return `the test process exited with ${error.signal ? `signal ${error.signal}` : `code ${error.exitCode}`} (${error.failureType ?? String(cause)})`;
  }
  if (cause instanceof Error) return cause.stack ?? String(cause);
  return inspect(cause, { depth: 6 });
}

function indent(text) {
  return text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
}
