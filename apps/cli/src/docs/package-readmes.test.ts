// Every package has a README that says what it is for, what it exports and how to use it, and the
// runnable examples in those READMEs are run here, so a README cannot drift from its package's API.
// A block fenced as ```js is run with node from the package's folder (so `@kars/*` imports resolve)
// with KUBECONFIG pointing at a fresh `kars apiserver`; it must exit 0. Examples check themselves
// with node:assert. Blocks fenced any other way (```ts, ```sh) are read, not run.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const PACKAGES = [...readdirSync(join(ROOT, 'packages')).map((d) => join('packages', d)), join('apps', 'cli')].filter((d) =>
  existsSync(join(ROOT, d, 'package.json')),
);

/**
 * READMEs whose ```js example is a long-running program, run to a checked effect by a test of
 * their own instead of here (which needs it to exit).
 */
const RUN_ELSEWHERE: Record<string, string> = {
  [join('packages', 'kube-runtime')]: join('packages', 'kube-runtime', 'src', 'pack.test.ts'),
};

/** The ```js blocks of a README, in order. */
export function runnableBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
}

function runModule(cwd: string, code: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '--eval', code], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('package READMEs', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('finds the blocks fenced as js, and only those', () => {
    const md = 'text\n```js\nconsole.log(1);\n```\n```ts\nconst x: number = 1;\n```\n```js\nconsole.log(2);\n```\n';
    assert.deepEqual(runnableBlocks(md), ['console.log(1);\n', 'console.log(2);\n']);
  });

  for (const dir of PACKAGES) {
    it(`${dir} has a README naming the package, its public API and an example`, () => {
      const file = join(ROOT, dir, 'README.md');
      assert.ok(existsSync(file), `${dir}/README.md is missing`);
      const md = readFileSync(file, 'utf8');
      const name = (JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as { name: string }).name;
      assert.ok(md.startsWith(`# ${name}`), `${dir}/README.md should start with "# ${name}"`);
      assert.match(md, /^## .*(API|[Cc]ommands)/m, `${dir}/README.md has no "## … API" (or commands) section`);
      assert.match(md, /^```(js|ts|sh)$/m, `${dir}/README.md has no example`);
    });

    const elsewhere = RUN_ELSEWHERE[dir];
    if (elsewhere !== undefined) {
      it(`${dir} README example is run by ${elsewhere}`, () => {
        assert.ok(existsSync(join(ROOT, elsewhere)), `${elsewhere} is gone: run the example here or there`);
        assert.match(readFileSync(join(ROOT, elsewhere), 'utf8'), /README/, `${elsewhere} does not read the README`);
      });
      continue;
    }
    const blocks = existsSync(join(ROOT, dir, 'README.md')) ? runnableBlocks(readFileSync(join(ROOT, dir, 'README.md'), 'utf8')) : [];
    blocks.forEach((code, i) => {
      it(`${dir} README example ${i + 1} runs as written`, async () => {
        const r = await runModule(join(ROOT, dir), code, { KUBECONFIG: ts.server.kubeconfigPath });
        assert.equal(r.code, 0, `the example exited ${r.code}:\n${r.out}`);
      });
    });
  }
});
