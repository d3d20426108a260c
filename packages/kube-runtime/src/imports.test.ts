/**
 * kube-runtime is published with kube-client and kube-core and must stay a general library: none
 * of the three may import a kars policy package (or the apiserver, the router, the CLI), in its
 * code or its dependencies. Tests may (they run against `kars apiserver`); they are not shipped.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGES = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The packages that ship together, and what each may import besides relative paths and node: built-ins. */
const SHIPPED: Record<string, string[]> = {
  'kube-core': [],
  'kube-client': ['@kars/kube-core', '@kubernetes/client-node'],
  'kube-runtime': ['@kars/kube-core', '@kars/kube-client', 'prom-client'],
};

/** The bare package name of an import specifier (`@scope/name/sub` → `@scope/name`). */
function packageOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? spec);
}

/** Every module specifier a TypeScript source imports or re-exports, static or dynamic. */
function specifiers(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm)) out.push(m[1] ?? '');
  return out;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

describe('what ships with kube-runtime', () => {
  it('reads import specifiers of every form', () => {
    assert.deepEqual(
      specifiers(`import a from 'x';\nimport type { B } from "@s/y/z";\nexport * from './r.js';\nawait import('w');\nimport 'side';`),
      ['x', '@s/y/z', './r.js', 'w', 'side'],
    );
    assert.equal(packageOf('@kars/policy-api/sub'), '@kars/policy-api');
  });

  for (const [pkg, allowed] of Object.entries(SHIPPED)) {
    it(`${pkg} imports only ${allowed.length > 0 ? allowed.join(', ') : 'node built-ins'} (no kars policy package)`, () => {
      const files = sources(join(PACKAGES, pkg, 'src'));
      assert.ok(files.length > 0);
      const bad: string[] = [];
      for (const f of files)
        for (const s of specifiers(readFileSync(f, 'utf8')))
          if (!s.startsWith('.') && !s.startsWith('node:') && !allowed.includes(packageOf(s)))
            bad.push(`${f.slice(PACKAGES.length + 1)}: ${s}`);
      assert.deepEqual(bad, []);
      const manifest = JSON.parse(readFileSync(join(PACKAGES, pkg, 'package.json'), 'utf8')) as {
        dependencies?: Record<string, string>;
        peerDependencies?: Record<string, string>;
        private?: boolean;
      };
      const deps = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
      assert.deepEqual(
        deps.filter((d) => !allowed.includes(d)),
        [],
        'run-time dependencies beyond the allowed ones',
      );
      assert.notEqual(manifest.private, true, `${pkg} must be publishable`);
    });
  }
});
