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
const SCANNED = ['kube-core', 'kube-client', 'kube-runtime', 'policy-controller'];

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

/** The string literals a source assigns or types as an error `code`. */
function declaredCodes(text: string): string[] {
  const codes: string[] = [];
  const unions = /(?:\breadonly code\s*[:=]|ErrorCode\s*=)\s*((?:'[^'\n]*'\s*\|?\s*)+)/g;
  for (const m of text.matchAll(unions)) for (const lit of (m[1] ?? '').matchAll(/'([^'\n]*)'/g)) codes.push(lit[1] ?? '');
  return codes;
}

describe('ADR 0016 conventions', () => {
  const files = SCANNED.flatMap(sources);

  it('finds the sources it checks', () => {
    assert.ok(files.length > 30, `only ${files.length} source files found under ${PACKAGES}`);
    assert.deepEqual(declaredCodes(`readonly code = 'KARS_A_B';\nexport type XErrorCode = 'KARS_C' | 'bad_one';`), [
      'KARS_A_B',
      'KARS_C',
      'bad_one',
    ]);
  });

  it('every error-class code is KARS_<AREA>_<WHAT>', () => {
    const bad: string[] = [];
    let seen = 0;
    for (const f of files)
      for (const c of declaredCodes(f.text)) {
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
      const hits = code.match(/(?<![.\w])(?:setTimeout|setInterval)\(|\bDate\.now\(\)|\bperformance\.now\(\)|\bnew Date\(\)/g);
      if (hits) bad.push(`${f.file}: ${[...new Set(hits)].join(', ')}`);
    }
    assert.deepEqual(bad, []);
  });

  it('the libraries take the kube-core Logger, not a pino type', () => {
    const bad = files
      .filter((f) => /^(kube-core|kube-client|kube-runtime)\//.test(f.file) && /from 'pino'/.test(f.text))
      .map((f) => f.file);
    assert.deepEqual(bad, []);
  });
});
