/**
 * Regenerate (or check) `deploy/crds/` and the Helm chart's copy in `deploy/helm/kars/crds/` (one file per
 * CRD, no all.yaml: Helm installs every file there, and cannot read files outside its chart; ADR 0030):
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

/** `deploy/helm/kars/crds` of the repository this package lives in: the Helm chart's CRDs (ADR 0030). */
export function defaultChartCrdDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'deploy', 'helm', 'kars', 'crds');
}

/** The generated files the Helm chart ships in its `crds/` directory: one per CRD (not `all.yaml`). */
export function chartCrdFiles(): Map<string, string> {
  return new Map([...crdFiles()].filter(([name]) => name !== 'all.yaml'));
}

/** Names of generated files under `dir` whose content differs from the generated output (or that are missing). */
export function staleCrdFiles(dir: string, files: Map<string, string> = crdFiles()): string[] {
  const stale: string[] = [];
  for (const [name, text] of files) {
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
export function writeCrdFiles(dir: string, files: Map<string, string> = crdFiles()): string[] {
  mkdirSync(dir, { recursive: true });
  const names: string[] = [];
  for (const [name, text] of files) {
    writeFileSync(join(dir, name), text);
    names.push(name);
  }
  return names;
}

function run(argv: string[]): number {
  const outAt = argv.indexOf('--out');
  const targets: [string, Map<string, string>][] =
    outAt >= 0 && argv[outAt + 1] !== undefined
      ? [[resolve(argv[outAt + 1] as string), crdFiles()]]
      : [
          [defaultCrdDir(), crdFiles()],
          [defaultChartCrdDir(), chartCrdFiles()],
        ];
  if (argv.includes('--check')) {
    let code = 0;
    for (const [dir, files] of targets) {
      const stale = staleCrdFiles(dir, files);
      if (stale.length > 0) {
        process.stderr.write(
          `CRD YAML in ${dir} is out of date: ${stale.join(', ')}. Run: node packages/policy-api/dist/generate-crds.js\n`,
        );
        code = 1;
      } else process.stdout.write(`CRD YAML in ${dir} is up to date\n`);
    }
    return code;
  }
  for (const [dir, files] of targets) for (const name of writeCrdFiles(dir, files)) process.stdout.write(`wrote ${join(dir, name)}\n`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = run(process.argv.slice(2));
}
