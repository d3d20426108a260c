import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCommand, type CompileIo } from './compile.js';
import { buildProgram } from '../main.js';

const NOW = '2026-05-14T19:00:00Z';
const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

const goodYaml = `apiVersion: kars.azure.com/v1alpha1
kind: InferencePolicy
metadata: { name: chat, namespace: team-a }
spec:
  appliesTo: { sandboxName: demo }
  tokenBudget: { dailyTokens: 1000 }
---
apiVersion: kars.azure.com/v1alpha1
kind: ToolPolicy
metadata: { name: tools, namespace: team-a }
spec:
  appliesTo: { tool: "*" }
  agtProfile:
    inline: |
      rules: []
`;

const badYaml = `apiVersion: kars.azure.com/v1alpha1
kind: InferencePolicy
metadata: { name: ok, namespace: team-a }
spec:
  appliesTo: {}
---
apiVersion: kars.azure.com/v1alpha1
kind: InferencePolicy
metadata: { name: broken, namespace: team-a }
spec:
  appliesTo: {}
  contentSafety: { hate: Extreme }
`;

interface Run {
  stdout: string;
  stderr: string;
  exitCode: number | undefined;
}

async function run(args: string[], stdin = ''): Promise<Run> {
  const out: Run = { stdout: '', stderr: '', exitCode: undefined };
  const io: CompileIo = {
    readFile: async (p) => {
      const { readFile } = await import('node:fs/promises');
      return readFile(p, 'utf8');
    },
    readStdin: () => Promise.resolve(stdin),
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    now: () => NOW,
    env: () => ({}),
    setExitCode: (c) => {
      out.exitCode = c;
    },
  };
  const cmd = compileCommand(io).exitOverride();
  cmd.configureOutput({ writeOut: (t) => io.stdout(t), writeErr: (t) => io.stderr(t) });
  await cmd.parseAsync(['node', 'compile', ...args]);
  return out;
}

describe('kars compile', () => {
  let dir = '';
  let good = '';
  let bad = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kars-compile-'));
    good = join(dir, 'good.yaml');
    bad = join(dir, 'bad.yaml');
    writeFileSync(good, goodYaml);
    writeFileSync(bad, badYaml);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('prints {configMaps, digests} as JSON on stdout and nothing on stderr for valid input', async () => {
    const r = await run(['-f', good]);
    assert.equal(r.stderr, '');
    assert.equal(r.exitCode, undefined);
    const out = JSON.parse(r.stdout) as {
      configMaps: Array<{ metadata: { name: string } }>;
      digests: Array<{ kind: string; compiledDigest: string | null }>;
    };
    assert.deepEqual(Object.keys(out), ['configMaps', 'digests']);
    assert.deepEqual(
      out.configMaps.map((c) => c.metadata.name),
      ['inferencepolicy-chat-profile', 'toolpolicy-tools-profile'],
    );
    assert.match(out.digests[0]?.compiledDigest ?? '', /^sha256:[0-9a-f]{64}$/);
    assert.match(out.digests[1]?.compiledDigest ?? '', /^sha256:[0-9a-f]{64}$/);
  });

  it('reads "-" from stdin and gives the same output as the file', async () => {
    const fromFile = await run(['-f', good]);
    const fromStdin = await run(['-f', '-'], goodYaml);
    assert.equal(fromStdin.stdout, fromFile.stdout);
  });

  it('accepts -f more than once and compiles the documents of every file', async () => {
    const other = join(dir, 'other.yaml');
    writeFileSync(other, goodYaml.replaceAll('team-a', 'team-b'));
    const r = await run(['-f', good, '-f', other]);
    const out = JSON.parse(r.stdout) as { digests: unknown[] };
    assert.equal(out.digests.length, 4);
  });

  it('fails with exit code 1, nothing on stdout, and an error naming file, document, kind, name and field', async () => {
    const r = await run(['-f', bad]);
    assert.equal(r.exitCode, 1);
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} doc 2: InferencePolicy team-a/broken: spec\\.contentSafety\\.hate:`),
    );
    assert.doesNotMatch(r.stderr, /doc 1/);
  });

  it('reports YAML syntax errors with file, document and line', async () => {
    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, 'apiVersion: v1\n---\nkind: [unclosed\n');
    const r = await run(['-f', broken]);
    assert.equal(r.exitCode, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /broken\.yaml doc 2: invalid YAML/);
  });

  it('reports a file it cannot read, and still exits 1 with nothing on stdout', async () => {
    const r = await run(['-f', join(dir, 'missing.yaml')]);
    assert.equal(r.exitCode, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /missing\.yaml: cannot read/);
  });

  it('is registered in main.ts and runs end to end through bin/kars.js', async () => {
    // A missing registration is a failure, not a skip: `kars compile` is a documented command.
    assert.ok(
      (await buildProgram()).commands.some((c) => c.name() === 'compile'),
      'main.ts registers the compile command',
    );
    const ok = spawnSync(process.execPath, ['apps/cli/bin/kars.js', 'compile', '-f', good, '--now', NOW], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stderr, '');
    assert.deepEqual(Object.keys(JSON.parse(ok.stdout) as object), ['configMaps', 'digests']);
    const fail = spawnSync(process.execPath, ['apps/cli/bin/kars.js', 'compile', '-f', bad, '--now', NOW], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    assert.equal(fail.status, 1);
    assert.equal(fail.stdout, '');
    assert.match(fail.stderr, /InferencePolicy team-a\/broken: spec\.contentSafety\.hate/);
  });
});
