#!/usr/bin/env node
// Rewrite the generated flag reference in docs/operating.md from the commander definitions
// (after `npm run build`). `--check` exits 1 when the doc is stale instead of writing.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DOC = join(ROOT, 'docs/operating.md');
const BEGIN = '<!-- BEGIN GENERATED FLAG REFERENCE (node scripts/gen-operating-flags.mjs) -->';
const END = '<!-- END GENERATED FLAG REFERENCE -->';
// Defaults that come from the environment must not leak the caller's environment into the doc.
for (const k of Object.keys(process.env)) if (/^(KARS_|CONTROLLER_|LEADER_|POD_|TOKEN_|EGRESS_)/.test(k)) delete process.env[k];
const { buildProgram } = await import(join(ROOT, 'apps/cli/dist/main.js'));
const { flagReference } = await import(join(ROOT, 'apps/cli/dist/lib/flag-reference.js'));
const doc = readFileSync(DOC, 'utf8');
const a = doc.indexOf(BEGIN);
const b = doc.indexOf(END);
if (a < 0 || b < a) throw new Error(`docs/operating.md lacks the markers ${BEGIN} … ${END}`);
const next = `${doc.slice(0, a + BEGIN.length)}\n\n${flagReference(await buildProgram())}\n${doc.slice(b)}`;
if (process.argv.includes('--check')) {
  if (next !== doc) {
    process.stderr.write('docs/operating.md flag reference is stale: run node scripts/gen-operating-flags.mjs\n');
    process.exit(1);
  }
} else writeFileSync(DOC, next);
