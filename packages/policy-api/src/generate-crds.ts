/**
 * Regenerate (or check) `deploy/crds/`:
 *
 *   npx tsc -b packages/policy-api && node packages/policy-api/dist/generate-crds.js           # write
 *   node packages/policy-api/dist/generate-crds.js --check                                    # exit 1 on drift
 *   node packages/policy-api/dist/generate-crds.js --out <dir>                                # elsewhere
 *
 * Only runs when executed directly; importing this module does nothing.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { crdFiles } from './crd-yaml.js';

/** `deploy/crds` of the repository this package lives in (`packages/policy-api/dist/../../../deploy/crds`). */
export function defaultCrdDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'deploy', 'crds');
}

/** Names of generated files under `dir` whose content differs from the generated output (or that are missing). */
export function staleCrdFiles(dir: string): string[] {
  const stale: string[] = [];
  for (const [name, text] of crdFiles()) {
    let current: string | undefined;
    try {
      current = readFileSync(join(dir, name), 'utf8');
    } catch {
      current = undefined;
    }
    if (current !== text) stale.push(name);
  }
  return stale;
}

/** Write every generated file under `dir`; returns the names written. */
export function writeCrdFiles(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const names: string[] = [];
  for (const [name, text] of crdFiles()) {
    writeFileSync(join(dir, name), text);
    names.push(name);
  }
  return names;
}

function run(argv: string[]): number {
  const outAt = argv.indexOf('--out');
  const dir = outAt >= 0 && argv[outAt + 1] !== undefined ? resolve(argv[outAt + 1] as string) : defaultCrdDir();
  if (argv.includes('--check')) {
    const stale = staleCrdFiles(dir);
    if (stale.length > 0) {
      process.stderr.write(`CRD YAML in ${dir} is out of date: ${stale.join(', ')}. Run: node packages/policy-api/dist/generate-crds.js\n`);
      return 1;
    }
    process.stdout.write(`CRD YAML in ${dir} is up to date\n`);
    return 0;
  }
  for (const name of writeCrdFiles(dir)) process.stdout.write(`wrote ${join(dir, name)}\n`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = run(process.argv.slice(2));
}
