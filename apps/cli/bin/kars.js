#!/usr/bin/env node
// Entry point: all work happens in main(); importing the module does nothing.
// `kars router` runs dist/router.bundle.js when the build made it (ADR 0056): the same main() and
// router command as one ES module, so a router sidecar loads and compiles one module, not the
// CLI's module graph. Every way of starting a router (users, tests, the image, the manifests) comes
// through here. Without the bundle (a plain `tsc -b`), the router runs from dist/main.js.
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/router.bundle.js', import.meta.url);
const command = process.argv.slice(2).find((a) => !a.startsWith('-'));
const { main } = await import(command === 'router' && existsSync(bundle) ? bundle.href : '../dist/main.js');

main(process.argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
