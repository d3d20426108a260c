/**
 * Each kind's ConfigMap names, labels, field managers, finalizer and echo kinds are written in its
 * descriptor only (ADR 0051, issue 22): this test reads every non-test source of packages/ and apps/
 * (comments stripped) and fails on a literal of them anywhere else. Tests may spell wire strings out,
 * to pin them; code must ask the descriptor.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');

/** Where the knowledge lives: the descriptors. */
const HOME = 'packages/policy-compiler/src/kinds/';

/** Literals that say what a kind is, by what they restate. */
const RESTATEMENTS: Array<{ what: string; pattern: RegExp; allowed?: Record<string, string> }> = [
  { what: 'a profile ConfigMap name', pattern: /['"`](?:inferencepolicy|toolpolicy)-(?:\$\{|[a-z0-9'"`])/ },
  { what: 'the approvals ConfigMap name', pattern: /-egress-approvals['"`]/ },
  { what: 'a finalizer', pattern: /['"`]kars\.azure\.com\/[a-z-]*-cleanup['"`]/ },
  { what: 'a compiled-ConfigMap field manager', pattern: /['"`]kars-controller\/(?:inferencepolicy|toolpolicy|egressapproval)/ },
  { what: 'a policy label', pattern: /['"`]kars\.azure\.com\/(?:inferencepolicy|toolpolicy)['"`]/ },
  {
    what: "a ToolPolicy's echo kind",
    pattern: /['"]AgtProfile['"]/,
    allowed: {
      'packages/policy-api/src/echo.ts': 'declares the EchoKind vocabulary of the echo Lease itself',
      'packages/policy-api/src/dry-run.ts': 'names the echo kinds that have dry-run slots',
    },
  },
];

function sources(): Array<{ file: string; code: string }> {
  const out: Array<{ file: string; code: string }> = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'dist') walk(p);
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) {
        const file = relative(ROOT, p).split('\\').join('/');
        out.push({ file, code: readFileSync(p, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '') });
      }
    }
  };
  for (const top of ['packages', 'apps'])
    for (const pkg of readdirSync(join(ROOT, top), { withFileTypes: true }))
      if (pkg.isDirectory()) {
        try {
          walk(join(ROOT, top, pkg.name, 'src'));
        } catch {
          // a package without src/
        }
      }
  return out;
}

describe("each kind's identity is in its descriptor only", () => {
  const files = sources();

  it('finds the sources it checks, and the descriptors hold every restatement it looks for', () => {
    assert.ok(files.length > 200, `only ${files.length} source files found under ${ROOT}`);
    const home = files.filter((f) => f.file.startsWith(HOME));
    for (const r of RESTATEMENTS)
      assert.ok(
        home.some((f) => r.pattern.test(f.code)),
        `no descriptor holds ${r.what}: the pattern ${String(r.pattern)} would catch nothing`,
      );
  });

  for (const r of RESTATEMENTS)
    it(`no code outside the descriptors writes ${r.what}`, () => {
      const bad = files
        .filter((f) => !f.file.startsWith(HOME) && r.allowed?.[f.file] === undefined)
        .filter((f) => r.pattern.test(f.code))
        .map(
          (f) =>
            `${f.file}: ${
              f.code
                .split('\n')
                .find((l) => r.pattern.test(l))
                ?.trim() ?? ''
            }`,
        );
      assert.deepEqual(bad, [], `${r.what} restated outside ${HOME}; take it from the descriptor`);
    });
});
