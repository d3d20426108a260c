/**
 * ADR 0016 as a test: the packages that share the Clock, the Logger and the error-code
 * convention keep to them. It reads their TypeScript sources (not tests).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KARS_ERROR_CODE } from './codes.js';

const PACKAGES = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCANNED = ['kube-core', 'kube-client', 'kube-runtime', 'policy-controller', 'router'];

/**
 * Types whose lower-case codes are the router's answers to agents: wire contract in OpenAI's and
 * JSON-RPC's style (kars-wire-contract.md §5.3, ADR 0015, ADR 0016), not error-class codes.
 */
const WIRE_CODE_TYPES: Record<string, string> = {
  'router/src/inference/errors.ts InferenceErrorCode': "the inference route's OpenAI `error.code` values (budget_exceeded, …)",
  'router/src/json/strict.ts StrictJsonErrorCode': 'the `code` a strict-JSON refusal answers with (invalid_json, duplicate_key, too_deep)',
};

/** Files allowed to use real timers or clocks directly, and why. */
const REAL_TIME_ALLOWED: Record<string, string> = {
  'kube-core/src/clock.ts': 'it is the clock',
  'kube-client/src/trace.ts': 'debug hop tracing stamps epoch time so lines from several processes merge into one timeline',
  'kube-runtime/src/watchdog.ts': 'the event-loop watchdog measures real event-loop lag, which virtual time cannot show',
  'policy-controller/src/testing/test-router.ts': 'test support standing in for a router process, on real time like one',
};

function sources(pkg: string): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts'))
        out.push({ file: relative(PACKAGES, p).split('\\').join('/'), text: readFileSync(p, 'utf8') });
    }
  };
  walk(join(PACKAGES, pkg, 'src'));
  return out;
}

/** The string literals a source assigns or types as an error `code`, skipping the wire-code types named in `wire`. */
function declaredCodes(text: string, wire: ReadonlySet<string> = new Set()): string[] {
  const codes: string[] = [];
  const unions = /(?:\breadonly code\s*[:=]|(\w*ErrorCode)\s*=)\s*((?:\|?\s*'[^'\n]*'\s*)+)/g;
  for (const m of text.matchAll(unions)) {
    if (m[1] !== undefined && wire.has(m[1])) continue;
    for (const lit of (m[2] ?? '').matchAll(/'([^'\n]*)'/g)) codes.push(lit[1] ?? '');
  }
  return codes;
}

/** The wire-code type names allowed in `file`. */
function wireTypesOf(file: string): Set<string> {
  return new Set(
    Object.keys(WIRE_CODE_TYPES)
      .filter((k) => k.startsWith(`${file} `))
      .map((k) => k.slice(file.length + 1)),
  );
}

describe('ADR 0016 conventions', () => {
  const files = SCANNED.flatMap(sources);

  it('finds the sources it checks', () => {
    assert.ok(files.length > 30, `only ${files.length} source files found under ${PACKAGES}`);
    for (const pkg of SCANNED)
      assert.ok(
        files.some((f) => f.file.startsWith(`${pkg}/`)),
        `no sources of ${pkg}`,
      );
    assert.deepEqual(declaredCodes(`readonly code = 'KARS_A_B';\nexport type XErrorCode = 'KARS_C' | 'bad_one';`), [
      'KARS_A_B',
      'KARS_C',
      'bad_one',
    ]);
    assert.deepEqual(declaredCodes(`export type XErrorCode =\n  | 'a_b'\n  | 'c';\nreadonly code = 'd';`, new Set(['XErrorCode'])), ['d']);
  });

  it('every wire-code exception names a type that exists and declares only lower-case codes', () => {
    for (const key of Object.keys(WIRE_CODE_TYPES)) {
      const [file = '', type = ''] = key.split(' ');
      const f = files.find((x) => x.file === file);
      assert.ok(f, `${file} is gone: drop it from WIRE_CODE_TYPES`);
      const union = new RegExp(`\\b${type}\\s*=\\s*((?:\\|?\\s*'[^'\\n]*'\\s*)+)`).exec(f.text);
      assert.ok(union, `${key} is gone: drop it from WIRE_CODE_TYPES`);
      const lits = [...(union[1] ?? '').matchAll(/'([^'\n]*)'/g)].map((m) => m[1] ?? '');
      assert.ok(lits.length > 0);
      for (const c of lits) assert.match(c, /^[a-z][a-z0-9_]*$/, `${key}: ${c} is not a lower-case wire code`);
    }
  });

  it('every error-class code is KARS_<AREA>_<WHAT>', () => {
    const bad: string[] = [];
    let seen = 0;
    for (const f of files)
      for (const c of declaredCodes(f.text, wireTypesOf(f.file))) {
        seen++;
        if (!KARS_ERROR_CODE.test(c)) bad.push(`${f.file}: ${c}`);
      }
    assert.ok(seen >= 5, `only ${seen} error codes found`);
    assert.deepEqual(bad, []);
  });

  it('time comes from a Clock: no direct timers, Date.now() or performance.now() outside the allow-list', () => {
    const bad: string[] = [];
    for (const f of files) {
      if (f.file in REAL_TIME_ALLOWED) continue;
      const code = f.text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''); // comments may name them
      // `Date.now` and `performance.now` as values too (a default parameter `now = Date.now` is a clock bypass).
      const hits = code.match(/(?<![.\w])(?:setTimeout|setInterval)\(|\bDate\.now\b|\bperformance\.now\b|\bnew Date\(\)/g);
      if (hits) bad.push(`${f.file}: ${[...new Set(hits)].join(', ')}`);
    }
    assert.deepEqual(bad, []);
  });

  it('the libraries and the router take the kube-core Logger, not a pino type', () => {
    const bad = files
      .filter((f) => /^(kube-core|kube-client|kube-runtime|router)\//.test(f.file) && /from 'pino'/.test(f.text))
      .map((f) => f.file);
    assert.deepEqual(bad, []);
  });

  it('no environment variable is read when a module is imported: a top-level const or let never reads process.env', () => {
    // An import-time read freezes the value before a caller (a test, a CLI flag) can set it, and hides the knob.
    const bad = files.filter((f) => /^(?:export )?(?:const|let|var)\b[^\n]*process\.env/m.test(f.text)).map((f) => f.file);
    assert.deepEqual(bad, []);
  });
});
