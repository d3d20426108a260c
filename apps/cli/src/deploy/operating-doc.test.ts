// docs/operating.md against the code: the flag reference is exactly what commander defines, the
// environment table names exactly the variables the code reads, and the README links the guide.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { flagReference } from '../lib/flag-reference.js';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');
const DOC = readFileSync(join(ROOT, 'docs/operating.md'), 'utf8');
const BEGIN = '<!-- BEGIN GENERATED FLAG REFERENCE (node scripts/gen-operating-flags.mjs) -->';
const END = '<!-- END GENERATED FLAG REFERENCE -->';

/** Non-test TypeScript sources of every workspace. */
function sources(): Array<{ path: string; text: string }> {
  const out: Array<{ path: string; text: string }> = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts'))
        out.push({ path: p, text: readFileSync(p, 'utf8') });
    }
  };
  for (const base of ['packages', 'apps'])
    for (const w of readdirSync(join(ROOT, base))) {
      try {
        walk(join(ROOT, base, w, 'src'));
      } catch {
        // a workspace without src/
      }
    }
  return out;
}

/**
 * Environment variables the code reads: `env['X']` / `process.env['X']`, a name passed to an env
 * helper (`envSeconds('X')`, `ms('X')`), or a `…_ENV = 'X'` constant.
 */
function envReads(): Map<string, string> {
  const found = new Map<string, string>();
  const patterns = [
    /\b(?:process\.env|env)\[['"]([A-Z][A-Z0-9_]+)['"]\]/g,
    /\b(?:env[A-Za-z]*|ms|seconds|secs)\(\s*['"]([A-Z][A-Z0-9_]+)['"]\s*[,)]/g,
    /\b[A-Z_]+_ENV\s*=\s*['"]([A-Z][A-Z0-9_]+)['"]/g,
  ];
  for (const { path, text } of sources())
    for (const re of patterns)
      for (const m of text.matchAll(re)) if (m[1] && !found.has(m[1])) found.set(m[1], path.slice(ROOT.length + 1));
  for (const generic of ['PATH', 'HOME']) found.delete(generic);
  return found;
}

void describe('docs/operating.md', () => {
  it('has the flag reference of every command exactly as commander defines it (node scripts/gen-operating-flags.mjs)', async () => {
    const saved = { ...process.env };
    for (const k of Object.keys(process.env)) if (/^(KARS_|CONTROLLER_|LEADER_|POD_|TOKEN_|EGRESS_)/.test(k)) delete process.env[k];
    try {
      const { buildProgram } = await import('../main.js');
      const a = DOC.indexOf(BEGIN);
      const b = DOC.indexOf(END);
      assert.ok(a >= 0 && b > a, 'the generated-section markers are present');
      assert.equal(
        DOC.slice(a + BEGIN.length, b),
        `\n\n${flagReference(await buildProgram())}\n`,
        'stale: run `npm run build && node scripts/gen-operating-flags.mjs`',
      );
      for (const cmd of ['controller', 'router', 'apiserver', 'freshness probe']) assert.match(DOC, new RegExp(`#### \`kars ${cmd}\``));
      assert.match(DOC, /\| `--authorization-mode <mode>` \| `AlwaysAllow` \|/);
      assert.match(DOC, /\| `--metrics-addr <host:port\\\|disabled>` \| `0\.0\.0\.0:8080` \|/);
    } finally {
      Object.assign(process.env, saved);
    }
  });

  it('documents every environment variable the code reads, and no other', () => {
    const section = DOC.slice(DOC.indexOf('## Environment variables'), DOC.indexOf('## The freshness knobs'));
    const documented = new Set([...section.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1] ?? ''));
    const read = envReads();
    assert.ok(read.size >= 15, `found only ${read.size} env reads: the scan is broken`);
    const missing = [...read.entries()].filter(([k]) => !documented.has(k)).map(([k, where]) => `${k} (read in ${where})`);
    assert.deepEqual(missing, [], 'read by the code but not in the doc');
    const libraryOnly = new Set(['KUBECONFIG']); // read by @kubernetes/client-node, not by our code
    assert.deepEqual(
      [...documented].filter((k) => !read.has(k) && !libraryOnly.has(k)),
      [],
      'in the doc but read nowhere',
    );
  });

  it('is linked from the README as the install path', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    assert.match(readme, /\[[^\]]*[Ii]nstall[^\]]*\]\(docs\/operating\.md(#install)?\)/);
  });
});
